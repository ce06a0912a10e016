"""Read GRPO rollout logs into the trainer's groups: per rollout a prompt, a step, a group, a reward.

What each trainer writes, what a group and a silent group are for it, and its arithmetic live in
its own module of :mod:`gsd.integrations` (``trl``, ``verl``, ...); this reader knows no trainer by
name and asks the module of the format read (see the interface in :mod:`gsd.integrations`).
The format is the trainer's name, ``"table"`` — any CSV, parquet or JSONL file with a prompt-id,
a reward, optionally a step and a group column, named by the caller — or ``"auto"`` (from the
file names).

The reader is four modules, read in this order:

* :mod:`gsd.diagnose.discover` — the log files of one run, their format and their steps;
* :mod:`gsd.diagnose.load` — one parquet, JSONL or CSV file as pyarrow tables, piece by piece;
* :mod:`gsd.diagnose.parse` — the tables' rows as chunks (prompt hash, step, group key, reward);
* :mod:`gsd.diagnose.assemble` — the chunks as the trainer's groups: :class:`RolloutLog`,
  :func:`read_rollouts`.

This module gathers their public names (its old home: every name imports from here).  After the
reader: :mod:`gsd.diagnose.posteriors` (each group and its prompt's posterior before the step),
:mod:`gsd.diagnose.tables` (the step and prompt tables, the summary), :mod:`gsd.diagnose.report`.
"""

from __future__ import annotations

from ..integrations.columns import pair_codes
from .assemble import RolloutLog, read_rollouts, silent_groups
from .discover import FORMATS, detect_format, find_log_files
from .parse import BadRow, parse_reward, repeated_keys, reward_text

__all__ = [
    "FORMATS",
    "RolloutLog",
    "BadRow",
    "read_rollouts",
    "find_log_files",
    "detect_format",
    "parse_reward",
    "reward_text",
    "pair_codes",
    "repeated_keys",
    "silent_groups",
]

_reward_text = reward_text  # the name other branches import
