"""What common trainers compute for group advantages (see :ref:`theory-trainers`).

Checked against the installed releases TRL 1.16.0, verl 0.9.1, OpenRLHF 0.11.2 and AReaL 1.0.4
(their rules in our words; no code copied):

* TRL ``GRPOTrainer`` (``trl/trainer/grpo_trainer.py``, ``_generate_and_score_completions``):
  A_i = (r_i − mean_group) / (std + 1e-4), std with Bessel's correction (ddof 1, TRL's
  ``nanstd``).  ``scale_rewards="group"`` (default) uses each group's std, ``"batch"`` one std
  over every reward of the generation batch (the mean stays per group), ``"none"`` no division
  (``True``/``False`` = group/none).  A silent group gets A = 0 (up to rounding, below), is
  counted in ``frac_reward_zero_std`` and is not dropped.  ``GRPOConfig`` refuses
  ``num_generations < 2``; with one generation per group (possible in evaluation through
  ``num_generations_eval=1``) every advantage is 0.
* TRL's experimental asynchronous GRPO (``trl/experimental/async_grpo/async_rollout_worker.py``,
  ``_AsyncRolloutLoop._score_group``), convention ``"trl_async"``: the reward functions' values
  are summed without weights (``np.nansum``; a row every function left None is unscorable, gets
  A = 0 and is left out of its group's statistics), then A_i = (r_i − mean) / (std + 1e-8) over
  the scorable rows in float64 numpy, the std ``np.std``'s population one (ddof 0).  There is
  no scale option; a group of one gets A = 0.  Every training row a conversation produced
  carries that conversation's one advantage.
* verl (``verl/trainer/ppo/core_algos.py``): ``compute_grpo_outcome_advantage`` (``torch.std``,
  ddof 1) and ``compute_grpo_vectorized_outcome_advantage`` (the same sample std, always in
  float32) use eps = 1e-6; ``norm_adv_by_std_in_grpo=False`` drops the division (its Dr.GRPO).  A group of one response gets mean 0 and std 1, so
  A = r/(1 + eps), not 0.  Its two RLOO estimators agree for G >= 2 (A_i = r_i − mean_{j≠i} r_j)
  and disagree at G = 1: ``rloo`` returns the reward itself, ``rloo_vectorized`` returns 0.
  DAPO's dynamic sampling (``algorithm.filter_groups.enable``, off by default) drops groups of
  two or more responses whose metric has a standard deviation of exactly 0 and refills the batch.
* OpenRLHF (``openrlhf/trainer/ppo_utils/experience_maker.py``): ``group_norm`` divides by
  the std (ddof 1) + 1e-9, ``dr_grpo`` only centres, ``rloo`` uses the leave-one-out baseline;
  its command line refuses ``n_samples_per_prompt = 1`` for all three.
* AReaL (``areal/utils/data.py``, ``Normalization``, applied to the reward by
  ``PPOActor._compute_advantages``): with ``reward_norm`` at ``mean_level: group`` and
  ``std_level: group`` (a GRPO recipe's setting), A_i = (r_i − mean_group) / (std_group + 1e-5),
  ddof 1 (``std_unbiased``), in float64; ``std_level: null`` only centres.  A group of one gets
  std 1 and mean r, so A = 0.

So in practice GRPO divides by σ_1 = σ·sqrt(G/(G−1)) and, eps aside, its update is
σ·sqrt((G−1)/G)·(s̄₊ − s̄₋) instead of the paper's σ·(s̄₊ − s̄₋): 6.5 % smaller at G = 8.

Rounding.  :func:`trainer_advantages` follows each trainer's formula in float64 and gives a
silent group (all rewards equal) exactly 0.  The trainers compute in float32 (TRL always;
verl's vectorised estimator casts to float32 whatever the input), where the mean of equal
graded rewards such as 0.1 differs from them by a rounding error that the division by
std + eps magnifies.  On groups of 8 to 64 copies of 0.1, 0.2, 0.3, 1/3, 0.45, 0.6, 0.7 or 0.9,
TRL 1.16 returned advantages up to 6.0e-4, verl 0.9.1 up to 0.056 and its vectorised estimator
up to 0.35 (at G = 64), for groups that carry no signal; TRL's asynchronous scorer, in float64
with eps 1e-8, up to 1.1e-8 (on groups of 6 and 64).  ``dtype="float32"``
evaluates the formula literally in float32 and reproduces this.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from ..integrations import trainer_modules
from ..validation import InputError, as_group_size, is_torch, shown
from .groups import advantages, check_rewards

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Convention",
    "CONVENTIONS",
    "MULTI_REWARD_AGGREGATIONS",
    "trainer_advantages",
    "multi_reward_advantages",
    "convention_gap",
]


@dataclass(frozen=True)
class Convention:
    """How a trainer standardises a group: which std, which eps, over what."""

    name: str
    ddof: int
    eps: float
    scales: tuple  # accepted values of ``scale``; the first is the default
    source: str


#: The paper's convention, every trainer whose logs gsd reads (from its module in
#: :mod:`gsd.integrations`), and trainers whose convention was read but whose logs are not.
CONVENTIONS = {
    "paper": Convention("paper", 0, 0.0, ("group", "none"), "arXiv 2607.00152: population std, no eps"),
    **{name: Convention(name, m.DDOF, m.EPS, m.SCALES, m.SOURCE) for name, m in trainer_modules().items()},
    "openrlhf": Convention(
        "openrlhf", 1, 1e-9, ("group", "none", "rloo"), "OpenRLHF 0.11.2 group_norm / dr_grpo / rloo"
    ),
    "trl_async": Convention(
        "trl_async",
        0,
        1e-8,
        ("group",),
        "TRL 1.16.0 trl/experimental/async_grpo/async_rollout_worker.py _AsyncRolloutLoop._score_group "
        "(np.std, ddof 0, + 1e-8, float64)",
    ),
}

#: TRL's ``multi_objective_aggregation`` values, the default first.
MULTI_REWARD_AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")

_DTYPES = ("float32", "float64")


def _convention(trainer: str) -> Convention:
    if trainer not in CONVENTIONS:
        raise InputError(f"trainer must be one of {tuple(CONVENTIONS)}, got {trainer!r}")
    return CONVENTIONS[trainer]


def _zeros_like(r):
    if is_torch(r):
        import torch

        return torch.zeros_like(r)
    return np.zeros_like(r)


def _single_response(r, conv: Convention, scale: str):
    """Advantages of groups of one response (G = 1), as each trainer computes them."""
    if conv.name == "openrlhf":
        raise InputError(
            "trainer 'openrlhf' needs groups of at least 2 rewards (OpenRLHF refuses n_samples_per_prompt = 1 "
            f"for group_norm, dr_grpo and rloo), got G=1 (rewards of shape {tuple(r.shape)})"
        )
    if conv.name == "verl" and scale in ("group", "none", "rloo"):
        # verl's GRPO gives a lone response mean 0 and std 1; its loop RLOO leaves the reward as it is.
        return r / (1.0 + conv.eps) if scale == "group" else r * 1.0
    return _zeros_like(r)  # paper and TRL: r − mean = 0; verl rloo_vectorized multiplies by (G > 1)


def trainer_advantages(rewards: ArrayLike, trainer: str = "trl", *, scale: str | None = None, dtype: str | None = None):
    """Group advantages by the formula ``trainer`` uses (see :ref:`theory-trainers`).

    Parameters
    ----------
    rewards : array_like or torch.Tensor, shape (..., G)
        One batch of groups (numpy or torch).  ``scale="batch"`` treats the whole array as
        one generation batch.
    trainer : {"trl", "trl_async", "verl", "openrlhf", "areal", "paper"}
        Whose convention (eps, ddof and accepted scales in :data:`CONVENTIONS`).
    scale : str, optional
        The trainer's option; the default is the first of ``CONVENTIONS[trainer].scales``:

        * ``"group"`` (every trainer's default): (r − mean_group) / (std_group,ddof + eps);
        * ``"batch"`` (TRL): (r − mean_group) / (std over all rewards, ddof 1, + 1e-4);
        * ``"none"``: r − mean_group (TRL ``scale_rewards="none"``, verl
          ``norm_adv_by_std_in_grpo=False``, OpenRLHF ``dr_grpo``, AReaL ``std_level: null``);
        * ``"rloo"`` (verl, OpenRLHF): r_i − mean_{j≠i} r_j;
        * ``"rloo_vectorized"`` (verl): the same for G >= 2.
    dtype : {None, "float32", "float64"}
        None (default): float64 (numpy) or the tensor's dtype, silent groups exactly 0.
        ``"float32"`` / ``"float64"``: the formula evaluated literally in that precision (mean,
        then the mean of squared deviations times G/(G − ddof), square root, division), silent
        groups not special-cased, so the trainers' rounding advantages appear (module notes).
        Offered for the std-based scales ("group", "batch", "none").

    Returns
    -------
    advantages : same kind and shape as ``rewards``

    Raises
    ------
    InputError
        Unknown trainer, scale or dtype; ``trainer="openrlhf"`` with G = 1.

    Notes
    -----
    One response per group (G = 1), as the trainers compute it: TRL 0 (its evaluation path;
    training refuses G < 2); verl ``group`` r/(1 + 1e-6) (verl adds eps to a float32 1, so it
    divides by 1 + 9.54e-7: 4.6e-8 relative), ``none`` and ``rloo`` r,
    ``rloo_vectorized`` 0; TRL's async trainer, AReaL and the paper 0; OpenRLHF refuses.

    Examples
    --------
    >>> import numpy as np, gsd
    >>> np.round(gsd.trainer_advantages([[0, 1, 1, 0]], "trl"), 4)
    array([[-0.8659,  0.8659,  0.8659, -0.8659]])
    >>> gsd.trainer_advantages([[1.0], [0.0]], "verl", scale="rloo").ravel().tolist()
    [1.0, 0.0]
    >>> gsd.trainer_advantages([[1.0], [0.0]], "verl", scale="rloo_vectorized").ravel().tolist()
    [0.0, 0.0]
    >>> bool((gsd.trainer_advantages(np.full((1, 8), 0.1), "trl", dtype="float32") != 0).any())
    True
    """
    conv = _convention(trainer)
    scale = conv.scales[0] if scale is None else scale
    if scale not in conv.scales:
        raise InputError(f"scale for trainer {trainer!r} must be one of {conv.scales}, got {scale!r}")
    if dtype is not None and dtype not in _DTYPES:
        raise InputError(f"dtype must be None, 'float32' or 'float64', got {dtype!r}")
    if dtype is not None and trainer == "paper":
        raise InputError(
            "dtype reproduces a trainer's rounding; the paper's convention (no eps) has none: use dtype=None"
        )
    r = check_rewards(rewards)
    G = r.shape[-1]
    if dtype is not None:
        return _literal(r, conv, scale, dtype)
    if G == 1 and trainer != "paper":
        return _single_response(r, conv, scale)
    if scale == "none":
        return advantages(r, "dr_grpo")
    if scale in ("rloo", "rloo_vectorized"):
        return advantages(r, "rloo")
    if scale == "group":
        return advantages(r, "grpo", ddof=conv.ddof, eps=conv.eps)
    # TRL "batch": one std over the whole batch; the group mean stays.
    centred = advantages(r, "dr_grpo")
    std = r.std(correction=1) if is_torch(r) else r.std(ddof=1)
    return centred / (std + conv.eps)


def _literal(r, conv: Convention, scale: str, dtype: str):
    """The trainer's formula evaluated as written, in ``dtype`` (torch arithmetic)."""
    import torch

    if scale not in ("group", "batch", "none"):
        raise InputError(f"dtype is offered for scale 'group', 'batch' or 'none', got scale={scale!r}")
    tdtype = getattr(torch, dtype)
    x = r.to(tdtype) if is_torch(r) else torch.as_tensor(r, dtype=tdtype)
    G = x.shape[-1]

    def std(v, dim):
        # The trainers' order: mean, mean of squared deviations, Bessel factor, square root.
        n = v.shape[dim] if dim is not None else v.numel()
        m = v.mean() if dim is None else v.mean(dim=dim, keepdim=True)
        var = ((v - m) ** 2).mean() if dim is None else ((v - m) ** 2).mean(dim=dim, keepdim=True)
        return (var * (n / (n - conv.ddof))).sqrt() if n > conv.ddof else torch.zeros_like(var)

    if G == 1:
        out = _single_response(x, conv, scale)
    else:
        centred = x - x.mean(dim=-1, keepdim=True)
        if scale == "none":
            out = centred
        else:
            out = centred / (std(x, -1 if scale == "group" else None) + conv.eps)
    if is_torch(r):
        return out
    return out.numpy()


def multi_reward_advantages(
    rewards: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    aggregation: str = "sum_then_normalize",
    scale: str | None = None,
):
    """TRL's advantages from several reward functions (``multi_objective_aggregation``).

    Parameters
    ----------
    rewards : array_like or torch.Tensor, shape (..., G, K)
        K reward functions' values for each of the G answers of each group; the whole array is
        one generation batch.  Must be finite (TRL also accepts None from a reward function and
        skips it with NaN-aware means; here that is refused).
    weights : array_like, shape (K,), optional
        TRL's ``reward_weights`` (default: all 1).
    aggregation : {"sum_then_normalize", "normalize_then_sum"}
        ``"sum_then_normalize"`` (TRL's default): s = Σ_k w_k r_k, then
        :func:`trainer_advantages` (s, "trl", scale=scale).
        ``"normalize_then_sum"`` (GDPO): each reward function standardised within its group,
        a_k = (r_k − mean_group) / (std_group + 1e-4) (ddof 1; 0 for a silent group or G = 1),
        summed with the weights, s = Σ_k w_k a_k, and the sum standardised over the *batch*:
        A = (s − mean_batch(s)) / (std_batch(s) + 1e-4) — the batch mean, not the group mean.
    scale : str, optional
        TRL's ``scale_rewards``, for ``"sum_then_normalize"`` only: TRL ignores it under
        ``"normalize_then_sum"``, so passing it there raises.

    Returns
    -------
    advantages : shape (..., G), same kind as ``rewards``

    Notes
    -----
    Checked against TRL 1.16's ``_generate_and_score_completions``.  verl 0.9.1's ``gdpo``
    estimator does the first two steps with its GRPO (eps 1e-6, a lone response r/(1 + eps)) but
    whitens the sum over *tokens* (``masked_whiten``), weighting each answer by its length; that
    variant is not reproduced here.

    Examples
    --------
    >>> import numpy as np, gsd
    >>> r = np.array([[[1, 0.2], [0, 0.9], [1, 0.4], [0, 0.1]]])   # one group, G = 4, K = 2
    >>> np.round(gsd.multi_reward_advantages(r, aggregation="normalize_then_sum"), 3)
    array([[ 0.262,  0.463,  0.745, -1.47 ]])
    """
    if aggregation not in MULTI_REWARD_AGGREGATIONS:
        raise InputError(f"aggregation must be one of {MULTI_REWARD_AGGREGATIONS}, got {aggregation!r}")
    r = check_rewards(rewards)
    if r.ndim < 2:
        raise InputError(f"rewards must have shape (..., G, K) (K reward functions last), got {tuple(r.shape)}")
    K = r.shape[-1]
    w = _reward_weights(weights, K, r)
    if aggregation == "sum_then_normalize":
        return trainer_advantages((r * w).sum(-1), "trl", scale=scale)
    if scale is not None:
        raise InputError(
            f"scale applies to aggregation='sum_then_normalize' only (TRL ignores scale_rewards under "
            f"'normalize_then_sum'), got scale={scale!r}"
        )
    if is_torch(r):
        per_func = trainer_advantages(r.movedim(-1, -2), "trl").movedim(-2, -1)  # (..., G, K)
        s = (per_func * w).sum(-1)
        std = s.std(correction=1) if s.numel() > 1 else s.new_zeros(())
    else:
        per_func = np.moveaxis(trainer_advantages(np.moveaxis(r, -1, -2), "trl"), -2, -1)
        s = (per_func * w).sum(-1)
        std = s.std(ddof=1) if s.size > 1 else 0.0
    return (s - s.mean()) / (std + CONVENTIONS["trl"].eps)


def _reward_weights(weights, K: int, like):
    if weights is None:
        w = np.ones(K)
    else:
        try:
            w = np.asarray(weights, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError(f"weights must be {K} numbers (one per reward function), got {weights!r}") from None
        if w.shape != (K,):
            raise InputError(f"weights must have shape ({K},) (one per reward function), got {w.shape}")
        if not np.isfinite(w).all():
            raise InputError(f"weights must be finite, got {shown(w[~np.isfinite(w)])}")
    if is_torch(like):
        import torch

        return torch.as_tensor(w, dtype=like.dtype, device=like.device)
    return w


def convention_gap(G: ArrayLike, trainer: str = "trl") -> pd.DataFrame:
    r"""How far a trainer's GRPO update lies from the paper's, per group size.

    Parameters
    ----------
    G : int or array_like of int
        Group sizes, 2 ≤ G ≤ 2^53 (a closed form in G: no loop over k).
    trainer : {"trl", "trl_async", "verl", "openrlhf", "areal", "paper"}, optional
        Whose convention (:data:`CONVENTIONS`); default ``"trl"``.

    Returns
    -------
    pandas.DataFrame
        One row per G: ``trainer``, ``G``, ``ddof``, ``eps``; ``ratio_no_eps``, the trainer's
        update over the paper's with eps = 0; ``ratio_min`` and ``ratio_max`` over
        k = 1 … G − 1 (eps bites hardest at k = 1); ``gap_percent`` = 100 (1 − ratio_no_eps).

    Notes
    -----
    For a binary group the trainer's update is :math:`\sigma^2/(\sigma_c + \epsilon)\,
    (\bar s_+ - \bar s_-)` against the paper's :math:`\sigma\,(\bar s_+ - \bar s_-)`, a ratio

    .. math::

        \frac{\sigma}{\sigma_c + \epsilon} \xrightarrow{\ \epsilon = 0\ }
        \sqrt{\frac{G - \text{ddof}}{G}}

    that depends on k only through eps (:ref:`theory-trainers`).

    Examples
    --------
    >>> gsd.convention_gap([4, 8], "trl")[["G", "ratio_no_eps", "gap_percent"]].round(4)
       G  ratio_no_eps  gap_percent
    0  4        0.8660      13.3975
    1  8        0.9354       6.4586
    """
    conv = _convention(trainer)
    G = np.atleast_1d(as_group_size(G, minimum=2)).ravel()
    g = G.astype(np.float64)
    no_eps = np.sqrt((g - conv.ddof) / g)

    # ratio(σ) = 1/(sqrt(G/(G−ddof)) + eps/σ) increases with σ = sqrt(k(G−k))/G, which is
    # smallest at k = 1 and largest at k = ⌊G/2⌋: two terms per G, whatever G.
    def ratio(k):
        sigma = np.sqrt(k * (g - k)) / g
        return sigma / (sigma / no_eps + conv.eps)

    import pandas as pd

    return pd.DataFrame(
        dict(
            trainer=trainer,
            G=G,
            ddof=conv.ddof,
            eps=conv.eps,
            ratio_no_eps=no_eps,
            ratio_min=ratio(1.0),
            ratio_max=ratio(np.floor(g / 2)),
            gap_percent=100 * (1 - no_eps),
        )
    )
