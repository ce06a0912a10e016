"""The simulator's rollouts as a trainer would log them: verl's or TRL's format.

With the config key ``rollout_log = "verl"`` (or ``"trl"``) every step's kept groups are
written into the run folder's ``rollouts/``: verl's ``{step}.jsonl`` (keys ``input``,
``output``, ``gts``, ``score``, ``step``, plus ``p``) or TRL's
``completions/completions_{step:05d}.parquet`` (columns ``step``, ``prompt``, ``completion``,
``correctness``, ``p``, ``advantage``), one file per step, written atomically.  Steps are
numbered from 1, like both trainers' global step.

A prompt's text is ``"prompt {i}"`` (its index in the population); the reward is what the
verifier marked (0/1); ``p`` is the prompt's true solve rate when the step sampled it — an extra
key (verl) or logged column (TRL), which real logs do not have and which lets ``gsd diagnose``
be checked against the truth (see :ref:`theory-logs`).  With DAPO's redraws only the kept group
is logged.  A resumed run rewrites the steps after its checkpoint with the same rollouts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .._errors import InputError
from ..diagnose.writers import ROLLOUT_LOGS, write_trl_step, write_verl_step

__all__ = ["RolloutLogWriter", "REWARD_NAME", "TRUTH_KEY"]

#: Column of the TRL log holding the reward (a reward function's name in TRL).
REWARD_NAME = "correctness"
#: Extra key / column with the prompt's true solve rate.
TRUTH_KEY = "p"


class RolloutLogWriter:
    """``writer(step, batch, groups)`` writes one step (``step`` counted from 0) into ``folder``."""

    def __init__(self, fmt: str, folder):
        if fmt not in ROLLOUT_LOGS:
            raise InputError(f"rollout_log must be one of {ROLLOUT_LOGS}, got {fmt!r}")
        self.fmt = fmt
        self.folder = Path(folder)

    def __call__(self, step: int, batch, groups) -> Path:
        rewards = groups.rewards(batch.g_max).cpu().numpy()  # (B, g_max), −1 beyond G
        B = rewards.shape[0]
        idx = np.arange(B) if batch.idx is None else batch.idx.cpu().numpy()
        p = batch.p.detach().to(dtype=batch.p.dtype).cpu().double().numpy()
        keep = rewards >= 0
        rows = keep.sum(axis=1)
        pid = np.repeat(idx, rows)
        reward = rewards[keep].astype(np.float64)
        prompts = np.char.add("prompt ", pid.astype(str))
        truth = np.repeat(p, rows)
        if self.fmt == "verl":
            return write_verl_step(self.folder, step + 1, prompts, reward, extra={TRUTH_KEY: truth})
        return write_trl_step(self.folder, step + 1, prompts, {REWARD_NAME: reward, TRUTH_KEY: truth})
