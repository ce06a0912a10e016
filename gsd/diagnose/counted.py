"""A run read as counts into a :class:`gsd.diagnose.assemble.RolloutLog` that
:func:`gsd.diagnose.diagnose_log` diagnoses: the same report, predictions and advice as from the
whole log, from memory that grows with the groups, not the rollouts.

:func:`read_counted` reads the log piece by piece (:mod:`gsd.diagnose.counts`; in Ray tasks with
``shards``), then fills the log's description as :func:`gsd.diagnose.read_rollouts` does — its
files, reward, how groups and silence were found, the steps left out or missing, its warnings
in the same order — and its group table in ``counted``; its per-rollout arrays are empty.  What
needs every rollout's reward is refused: ``scale="batch"`` (the step's std of rewards).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..integrations.contract import RunContext
from .assemble import (
    RolloutLog,
    count_warnings,
    group_names,
    group_warnings,
    missing_steps,
    silent_observable,
)
from .counts import count_rollouts, streams
from .discover import TRAINER_HOOKS, discover_files, hooks_of
from .parse import MAX_LISTED, reward_text

__all__ = ["read_counted"]

GROUP_COLUMNS = ("step", "prompt", "G", "generated", "n", "k", "silent", "binary_silent")


def read_counted(
    paths,
    *,
    fmt: str = "auto",
    reward: str | None = None,
    prompt_col: str | None = None,
    step_col: str | None = None,
    group_col: str | None = None,
    threshold: float | None = None,
    progress: bool | None = None,
    shards: int | None = None,
    address: str | None = None,
) -> RolloutLog:
    """The log of a run read as counts (verl and tables; others: :func:`read_rollouts`), for
    :func:`gsd.diagnose.diagnose_log`; ``threshold`` is fixed here (the diagnosis takes the same
    or none).  ``shards``: count the files in that many Ray tasks (``address``: a cluster).

    >>> import json, tempfile, pathlib
    >>> from gsd.diagnose import diagnose_log
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> rows = [{"input": "q1", "output": "...", "score": s, "step": 1} for s in (0, 1, 1, 0)]
    >>> _ = (d / "1.jsonl").write_text("\\n".join(json.dumps(r) for r in rows) + "\\n")
    >>> log = read_counted(d)
    >>> log.rows, diagnose_log(log).steps["silent_frac"].tolist()
    (4, [0.0])
    """
    options = {"fmt": fmt, "reward": reward, "prompt_col": prompt_col, "step_col": step_col, "group_col": group_col}
    files, found_fmt, notes, _, _ = discover_files(paths, fmt)
    if not streams(found_fmt):
        from .assemble import read_rollouts

        return read_rollouts(paths, progress=progress, **options)
    if shards:
        from .shards import count_sharded

        counts = count_sharded(paths, shards=shards, address=address, threshold=threshold, **options)
    else:
        counts = count_rollouts(paths, threshold=threshold, progress=progress, **options)
    return _log_of(counts, files, found_fmt, group_col, prompt_col, threshold)


def _log_of(counts, files, fmt: str, group_col, prompt_col, threshold) -> RolloutLog:
    """The RolloutLog of ``counts``: its description and warnings as :func:`read_rollouts` makes them."""
    module = TRAINER_HOOKS.get(fmt)
    hooks = hooks_of(module)
    meta, warnings = counts.meta, list(counts.warnings)
    groups = counts.groups
    excluded = sorted(set(meta.get("excluded", ())))
    context = RunContext(group_size=None, group_size_given=False, warnings=warnings, state_path=None)
    context.keyed = meta["keyed"]
    prompt = prompt_col or (module.PROMPT_COL if module is not None else "prompt")
    names = group_names(hooks, context, reward_text(meta["terms"] or []), group_col, prompt)
    by_key = np.lexsort((groups["gkey"], groups["step"]))  # the groups in (step, key) order
    group_warnings(groups["G"][by_key], groups["step"][by_key], counts.mixed, module, group_col, warnings)
    missing = missing_steps(module, meta["file_steps"] | set(excluded), files, warnings)
    observable = silent_observable(hooks, groups["silent"] if hooks.zero_std else None, groups["G"], warnings)
    got = {
        "incomplete_groups": counts.incomplete_groups,
        "incomplete_rollouts": counts.incomplete_rollouts,
        "padding": None,
        "unscorable": 0,
    }
    reader = SimpleNamespace(repeated_rows=meta["repeated_rows"], extra_outputs=meta["extra_outputs"])
    count_warnings(got, reader, context, warnings)
    listed = (meta["listed"] + [b for found in meta["reasons"] for b in found])[:MAX_LISTED]
    empty = np.zeros(0, np.int64)
    return RolloutLog(
        prompt=empty,
        step=empty,
        reward=np.zeros(0),
        labels=counts.labels,
        hashes=counts.hashes,
        files=[str(f) for f in files],
        fmt=fmt,
        reward_name=names["reward_name"],
        group=empty,
        group_by=names["group_by"],
        silence=names["silence"],
        group_size=names["group_size"],
        missing_steps=missing,
        incomplete_groups=got["incomplete_groups"],
        incomplete_rollouts=got["incomplete_rollouts"],
        extra_outputs=meta["extra_outputs"],
        excluded_steps=excluded,
        silent_observable=observable,
        threshold=threshold,
        warnings=warnings,
        bad_rows=listed,
        bad_count=counts.bad_count,
        counted={
            "groups": {c: groups[c] for c in GROUP_COLUMNS},
            "rewards_as": counts.right_rule,
            "threshold": threshold,
        },
    )
