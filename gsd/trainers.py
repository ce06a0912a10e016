"""What common trainers actually compute for group advantages (DESIGN §1.6).

Read from the trainers' released source (descriptions in our words; no code copied):

* TRL ``GRPOTrainer`` (trl/trainer/grpo_trainer.py, 1.x): A_i = (r_i − mean_group) /
  (std + 1e-4), std = ``torch.std`` (ddof 1).  ``scale_rewards="group"`` (default) uses each
  group's std, ``"batch"`` one std over every reward of the generation batch (the mean stays
  per group), ``"none"`` no division (legacy ``True``/``False`` = group/none).  A silent group
  gets A = 0, is logged (``frac_reward_zero_std``) and is not dropped.
* verl (verl/trainer/ppo/core_algos.py, ``compute_grpo_outcome_advantage``): the same with
  eps = 1e-6; ``norm_adv_by_std_in_grpo=False`` drops the division (its Dr.GRPO).  A group of
  one response is given mean 0 and std 1 (A = r/(1 + eps)), not zero.  The DAPO recipe
  drops groups whose std is 0 and regenerates.
* OpenRLHF (openrlhf/trainer/ppo_utils/experience_maker.py): ``group_norm`` divides by
  std (ddof 1) + 1e-9; ``dr_grpo`` only centres; ``rloo`` uses the leave-one-out baseline.

So in practice GRPO divides by σ_1 = σ·sqrt(G/(G−1)) and, eps aside, its update is
σ·sqrt((G−1)/G)·(s̄₊ − s̄₋) instead of the paper's σ·(s̄₊ − s̄₋): 6.5 % smaller at G = 8.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ._validate import InputError, as_group_size, is_torch
from .groups import _check_rewards, advantages

__all__ = ["Convention", "CONVENTIONS", "trainer_advantages", "convention_gap"]


@dataclass(frozen=True)
class Convention:
    """How a trainer standardises a group: which std, which eps, over what."""

    name: str
    ddof: int
    eps: float
    scales: tuple  # accepted values of ``scale``; the first is the default
    source: str


CONVENTIONS = {
    "paper": Convention("paper", 0, 0.0, ("group", "none"), "arXiv 2607.00152: population std, no eps"),
    "trl": Convention("trl", 1, 1e-4, ("group", "batch", "none"), "TRL GRPOTrainer, scale_rewards"),
    "verl": Convention("verl", 1, 1e-6, ("group", "none"), "verl compute_grpo_outcome_advantage, norm_adv_by_std_in_grpo"),
    "openrlhf": Convention("openrlhf", 1, 1e-9, ("group", "none", "rloo"), "OpenRLHF group_norm / dr_grpo / rloo"),
}


def _convention(trainer: str) -> Convention:
    if trainer not in CONVENTIONS:
        raise InputError(f"trainer must be one of {tuple(CONVENTIONS)}, got {trainer!r}")
    return CONVENTIONS[trainer]


def trainer_advantages(rewards, trainer: str = "trl", *, scale: str | None = None):
    """Group advantages exactly as ``trainer`` computes them (DESIGN §1.6).

    rewards : (..., G) for one batch of groups (numpy or torch).  ``scale``:

    * ``"group"`` (every trainer's default): (r − mean_group)/(std_group,ddof + eps);
    * ``"batch"`` (TRL only): (r − mean_group)/(std over all rewards, ddof 1 + 1e-4);
    * ``"none"``: r − mean_group (TRL ``scale_rewards="none"``, verl
      ``norm_adv_by_std_in_grpo=False``, OpenRLHF ``dr_grpo``);
    * ``"rloo"`` (OpenRLHF): r_i − mean_{j≠i} r_j.

    verl's groups of one response (mean 0, std 1) are reproduced: A = r / (1 + eps).
    """
    conv = _convention(trainer)
    scale = conv.scales[0] if scale is None else scale
    if scale not in conv.scales:
        raise InputError(f"scale for trainer {trainer!r} must be one of {conv.scales}, got {scale!r}")
    r = _check_rewards(rewards)
    G = r.shape[-1]
    if trainer == "verl" and G == 1:
        return r / (1.0 + conv.eps) if scale == "group" else r
    if scale == "none":
        return advantages(r, "dr_grpo")
    if scale == "rloo":
        return advantages(r, "rloo")
    if scale == "group":
        return advantages(r, "grpo", ddof=conv.ddof, eps=conv.eps)
    # TRL "batch": one std over the whole batch; the group mean stays.
    centred = advantages(r, "dr_grpo")
    n = r.numel() if is_torch(r) else r.size
    if n < 2:
        raise InputError("scale='batch' needs at least 2 rewards in the batch")
    std = r.std(correction=1) if is_torch(r) else r.std(ddof=1)
    return centred / (std + conv.eps)


def convention_gap(G, trainer: str = "trl") -> pd.DataFrame:
    """How far a trainer's GRPO update lies from the paper's, per group size (DESIGN §1.6).

    For a binary group with k right the trainer's update is σ²/(σ_c + eps)·(s̄₊ − s̄₋) against
    the paper's σ·(s̄₊ − s̄₋), a ratio σ/(σ_c + eps) that depends on k only through eps.
    Columns: ``G``, ``ddof``, ``eps``, ``ratio_no_eps`` = sqrt((G − ddof)/G), ``ratio_min`` and
    ``ratio_max`` over k = 1 … G−1 (eps bites hardest at k = 1), and ``gap_percent`` =
    100·(1 − ratio_no_eps).
    """
    conv = _convention(trainer)
    G = np.atleast_1d(as_group_size(G, minimum=2)).ravel()
    rows = []
    for g in G:  # one row per requested G: a table, not a hot path
        k = np.arange(1, g)
        sigma = np.sqrt(k * (g - k)) / g
        ratio = sigma / (sigma * np.sqrt(g / (g - conv.ddof)) + conv.eps)
        no_eps = np.sqrt((g - conv.ddof) / g)
        rows.append(
            dict(trainer=trainer, G=int(g), ddof=conv.ddof, eps=conv.eps, ratio_no_eps=no_eps,
                 ratio_min=ratio.min(), ratio_max=ratio.max(), gap_percent=100 * (1 - no_eps))
        )
    return pd.DataFrame(rows)
