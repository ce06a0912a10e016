"""The simulator's rollouts as a trainer would log them: verl's or TRL's format.

With the config key ``rollout_log = "verl"`` (or ``"trl"``) every step's kept groups are
written into the run folder's ``rollouts/`` by the trainer's own writer in
:mod:`gsd.integrations`: verl's ``{step}.jsonl`` (keys ``input``, ``output``, ``gts``,
``score``, ``step``, plus ``true_p``) or TRL's ``completions/completions_{step:05d}.parquet``
(columns ``step``, ``prompt``, ``completion``, ``correctness``, ``true_p``, ``advantage`` — the
advantages the run trained on), one file per step, written atomically.  Steps are numbered from
1, like both trainers' global step; a TRL group is a block of G consecutive rows.

A prompt's text is ``"prompt {i}"`` (its index in the population); the reward is what the
verifier marked (0/1); ``true_p`` is the prompt's true solve rate when the step sampled it — an
extra key (verl) or logged column (TRL), which real logs do not have and which lets
``gsd diagnose`` be checked against the truth (see :ref:`theory-logs`; the reader never takes it
for a reward).  With DAPO's redraws only the kept group is logged.  A resumed run rewrites the
steps after its checkpoint with the same rollouts.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..integrations import TRUTH_COLUMN
from ..integrations import trl as _trl
from ..integrations import verl as _verl

__all__ = ["RolloutLogWriter", "REWARD_NAME", "TRUTH_KEY", "ROLLOUT_LOGS", "LARGE_LOG_BYTES"]

#: Formats the simulator can log in.
ROLLOUT_LOGS = ("verl", "trl")
#: Column of the TRL log holding the reward (a reward function's name in TRL).
REWARD_NAME = "correctness"
#: Extra key / column with the prompt's true solve rate.
TRUTH_KEY = TRUTH_COLUMN
#: A log expected beyond this size is announced before the run starts.
LARGE_LOG_BYTES = 100 * 2**20
# Bytes per logged rollout, measured on the writers' output (2,000 prompts × G = 8 × 5 steps: 90 and 2.8).
_BYTES_PER_ROW = {"verl": 90, "trl": 3}


class RolloutLogWriter:
    """``writer(step, batch, groups, adv)`` writes one step (``step`` counted from 0) into ``folder``."""

    def __init__(self, fmt: str, folder, *, rows: int | None = None):
        if fmt not in ROLLOUT_LOGS:
            raise InputError(f"rollout_log must be one of {ROLLOUT_LOGS}, got {fmt!r}")
        self.fmt = fmt
        self.folder = Path(folder)
        size = (rows or 0) * _BYTES_PER_ROW[fmt]
        if size > LARGE_LOG_BYTES:
            warnings.warn(
                f"rollout_log={fmt} will write about {size / 2**20:,.0f} MB into {self.folder} "
                f"({rows:,} rollouts); rollout_log=trl writes parquet, about 1/15 of verl's JSON lines",
                stacklevel=2,
            )

    def __call__(self, step: int, batch, groups, adv=None) -> Path:
        rewards = groups.rewards(batch.g_max).cpu().numpy()  # (B, g_max), −1 beyond G
        B = rewards.shape[0]
        idx = np.arange(B) if batch.idx is None else batch.idx.cpu().numpy()
        p = batch.p.detach().cpu().double().numpy()
        keep = rewards >= 0
        rows = keep.sum(axis=1)
        pid = np.repeat(idx, rows)
        reward = rewards[keep].astype(np.float64)
        prompts = np.char.add("prompt ", pid.astype(str))
        truth = np.repeat(p, rows)
        if self.fmt == "verl":
            return _verl.write_step(self.folder, step + 1, prompts, reward, extra={TRUTH_KEY: truth})
        advantages = None
        if adv is not None:  # (B, 2): the advantage of a right and of a wrong answer in each group
            a = adv.detach().cpu().double().numpy()
            per_answer = np.where(rewards == 1, a[:, :1], a[:, 1:2])
            advantages = per_answer[keep]
        return _trl.write_step(
            self.folder, step + 1, prompts, {REWARD_NAME: reward}, advantages=advantages, extra={TRUTH_KEY: truth}
        )
