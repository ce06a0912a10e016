"""The table gsd's live TRL tracker saves: a parquet file that says in its metadata what it holds.

:meth:`gsd.live.tracker.GroupTracker.save` writes it and :mod:`gsd.diagnose.readers`
reads it back with no flags; the description both use is built and read here, so that neither
imports the other.

Columns ``prompt``, ``step``, ``group`` (one number per group of the run), ``reward`` (the
weighted total the trainer normalised) and one ``reward:<function>`` column per reward function
(unweighted), and :data:`SILENT_COL`, TRL's zero-std verdict on the row's group (the same for
every row of a group; it is TRL's, computed before the non-finite rows were left out).  The JSON description under :data:`KEY` names them and says how the rows were
grouped and what silence means.

No rule of such a table needs the whole run: a group is the rows of one ``group`` value within
a step, and its verdict any of its rows' verdict, so a streaming reader (:mod:`gsd.diagnose.counts`)
counts it piece by piece, the verdict per cell, merged by "any"; the description (threshold,
names, the trainer whose convention applies) is read once, from the files' metadata.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["KEY", "NAME", "SILENT_COL", "describe", "read_description"]

#: Key of the parquet metadata that holds the description.
KEY = "gsd.table"

#: The ``table`` entry of the description.
NAME = "GroupTracker"

#: The column that holds, per row, TRL's verdict on its group (counted in ``frac_reward_zero_std``).
SILENT_COL = "zero_std"


def describe(*, group_size: int, threshold, reward_name: str, weights, functions) -> dict:
    """The description a saved table carries (JSON-serialisable).

    Parameters
    ----------
    group_size : int
        TRL's ``num_generations``: the rows of one group.
    threshold : float or None
        Total reward ≥ threshold counts as right (None: 0/1 totals).
    reward_name : str
        The weighted total as text, e.g. ``"correct + 0.5*fmt"``.
    weights : list of float or None
        TRL's ``reward_weights``.
    functions : list of str
        The reward functions' names, one ``reward:<name>`` column each.
    """
    return {
        "table": NAME,
        "version": 1,
        "trainer": "trl",
        "prompt_col": "prompt",
        "step_col": "step",
        "group_col": "group",
        "reward_col": "reward",
        "silent_col": SILENT_COL,
        "group_size": int(group_size),
        "threshold": threshold,
        "reward_name": reward_name,
        "weights": weights,
        "functions": list(functions),
        "group_by": f"blocks of {group_size} rows of one generation, as the reward functions saw them "
        "(gsd's GroupTracker inside TRL)",
        "silence": f"zero std of {reward_name!r} within each group, as TRL counts frac_reward_zero_std "
        "(float32 total, torch.isclose(std, 0))",
    }


def read_description(files):
    """The description every one of ``files`` carries (parquet metadata under :data:`KEY`), when
    they all carry one with the same group size; else None."""
    import pyarrow.parquet as pq

    found = None
    for f in files:
        if Path(f).suffix != ".parquet":
            return None
        try:
            meta = pq.read_schema(f).metadata or {}
            desc = json.loads(meta[KEY.encode()])
        except (OSError, KeyError, ValueError, TypeError):
            return None
        if not isinstance(desc, dict) or desc.get("table") != NAME:
            return None
        if found is not None and found.get("group_size") != desc.get("group_size"):
            return None
        found = desc
    return found
