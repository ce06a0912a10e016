"""A run read as counts into a :class:`gsd.diagnose.assemble.RolloutLog` that
:func:`gsd.diagnose.diagnose_log` diagnoses: the same report, predictions and advice as from the
whole log, from memory that grows with the groups, not the rollouts.

:func:`read_counted` reads the log piece by piece (:mod:`gsd.diagnose.counts`; in Ray tasks with
``shards``), then fills the log's description as :func:`gsd.diagnose.read_rollouts` does — its
files, reward, how groups and silence were found, the steps left out or missing, its warnings
in the same order — and its group table in ``counted``; its per-rollout arrays are empty.  What
needs every rollout's reward is refused: ``scale="batch"`` given (the step's std of rewards); the
scaling a TRL log's advantages show is followed (a step is one file's generation: each step's std
is counted with its file).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from ..integrations.contract import RunContext
from ..validation import InputError
from .assemble import (
    RolloutLog,
    advantage_misfit,
    count_warnings,
    group_names,
    group_warnings,
    missing_steps,
    silent_observable,
    unlogged_weights,
)
from .counts import ReadWhole, count_partial, finish, group_tables, listed_bad_rows, streams
from .discover import TRAINER_HOOKS, discover_files, hooks_of
from .options import LogOptions
from .parse import reward_text

__all__ = ["read_counted"]

GROUP_COLUMNS = ("step", "prompt", "G", "generated", "n", "k", "silent", "binary_silent")


def read_counted(paths, *, threshold=None, progress=None, shards=None, address=None, **options) -> RolloutLog:
    """The log of a run read as counts (the few logs of :class:`~gsd.diagnose.counts.ReadWhole`:
    :func:`read_rollouts`), for
    :func:`gsd.diagnose.diagnose_log`; ``threshold`` is fixed here (the diagnosis takes the same
    or none).  ``shards``: count the files in that many Ray tasks (``address``: a cluster);
    ``options``: how to read the logs (:class:`gsd.diagnose.options.LogOptions`).

    >>> import json, tempfile, pathlib
    >>> from gsd.diagnose import diagnose_log
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> rows = [{"input": "q1", "output": "...", "score": s, "step": 1} for s in (0, 1, 1, 0)]
    >>> _ = (d / "1.jsonl").write_text("\\n".join(json.dumps(r) for r in rows) + "\\n")
    >>> log = read_counted(d)
    >>> log.rows, diagnose_log(log).steps["silent_frac"].tolist()
    (4, [0.0])
    """
    opts = LogOptions.take(options, "read_counted")
    files, found_fmt, _, _, _ = discover_files(paths, opts.fmt)
    got = counted_partial(paths, opts, threshold, progress, shards, address) if streams(found_fmt) else None
    if got is None:
        from .assemble import read_rollouts

        return read_rollouts(paths, progress=progress, **opts.kwargs())
    partial, found_fmt, warnings, n_files = got
    tally = SizeTally()
    counts = finish(partial, found_fmt, threshold, warnings, n_files=n_files, groups=True)
    tally.add(counts.groups or {})
    return _log_of(counts, tally, files, found_fmt, opts, threshold)


def counted_partial(paths, opts: LogOptions, threshold, progress, shards, address):
    """The partial counts of a run (:func:`gsd.diagnose.counts.count_partial`; in ``shards`` Ray
    tasks: :func:`gsd.diagnose.shards.partial_sharded`), with its format, warnings and files read;
    None for a log read whole."""
    try:
        if shards:
            from .shards import partial_sharded

            return partial_sharded(paths, shards=shards, address=address, threshold=threshold, **opts.kwargs())
        return count_partial(paths, threshold=threshold, progress=progress, **opts.kwargs())
    except ReadWhole:
        return None


class SizeTally:
    """The group sizes of a run's group tables fed in step order (:meth:`add`), as the reader's
    warnings need them (:func:`gsd.diagnose.assemble.group_warnings`): the distinct (step, size)
    pairs in the order of their first group by (step, key), each with its number of groups; the
    smallest size; whether a group is silent.  O(steps × sizes) memory."""

    def __init__(self):
        self.steps: list = []
        self.sizes: list = []
        self.counts: list = []
        self.smallest = np.iinfo(np.int64).max
        self.silent = False

    def add(self, table: dict) -> None:
        by_key = np.lexsort((table["gkey"], table["step"]))  # the groups in (step, key) order
        step, size = table["step"][by_key], table["G"][by_key]
        pairs, first, inverse = np.unique(np.stack([step, size]), axis=1, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        self.steps.append(pairs[0][order])
        self.sizes.append(pairs[1][order])
        self.counts.append(np.bincount(inverse.ravel(), minlength=first.size)[order])
        self.smallest = min(self.smallest, int(size.min())) if size.size else self.smallest
        self.silent |= bool(np.any(table["silent"]))

    def arrays(self):
        """(sizes, steps, counts) of the distinct (step, size) pairs, in order."""
        return tuple(np.concatenate(x) if x else np.zeros(0, np.int64) for x in (self.sizes, self.steps, self.counts))


def _log_of(counts, tally: SizeTally, files, fmt: str, opts: LogOptions, threshold) -> RolloutLog:
    """The RolloutLog of ``counts``: its description and warnings as :func:`read_rollouts` makes them."""
    module = TRAINER_HOOKS.get(fmt)
    hooks = hooks_of(module)
    meta, warnings = counts.meta, list(counts.warnings)
    arranged = meta.get("arranged") or {}  # the whole-run rules applied file by file (TRL)
    context = arranged.get("context") or RunContext(
        group_size=None, group_size_given=False, warnings=warnings, state_path=None
    )
    excluded = sorted(set(meta.get("excluded", ())) | set(context.excluded_steps))
    context.keyed = meta["keyed"]
    declared = meta.get("declared")  # a table saved by gsd's GroupTracker describes itself
    threshold = meta.get("threshold") if threshold is None else threshold
    group_col = declared["group_col"] if declared else opts.group_col
    prompt = opts.prompt_col or (module.PROMPT_COL if module is not None else "prompt")
    terms = meta["terms"] or []
    names = group_names(hooks, context, reward_text(terms), group_col, prompt)
    if hooks.REWARD_WEIGHTS_UNLOGGED and not opts.reward and len(terms) > 1:
        warnings.append(unlogged_weights(names["reward_name"]))
    sizes, steps, weights = tally.arrays()
    group_warnings(sizes, steps, counts.mixed, module, group_col, warnings, weights)
    check, disagree = arranged.get("advantage_check", (None, 0))
    if check is not None and check["scale"] is None:
        warnings.append(advantage_misfit(disagree))
    note = hooks.trainer_silent_note(check)
    if note and context.trainer_silent:
        warnings.append(note)
    have = meta["file_steps"] | set(excluded) | set(context.repeated_steps) | set(context.eval_steps)
    missing = missing_steps(module, have, files, warnings)
    silent = np.array([tally.silent]) if hooks.zero_std else None
    observable = silent_observable(hooks, silent, np.array([tally.smallest]), warnings)
    got = {
        # count_warnings adds the groups the trainer's rule found short: counted in counts already
        "incomplete_groups": counts.incomplete_groups - context.short_groups,
        "incomplete_rollouts": counts.incomplete_rollouts - context.short_rollouts,
        "padding": None,
        "padded": counts.padded,
        "unscorable": counts.unscored,
    }
    reader = SimpleNamespace(repeated_rows=meta["repeated_rows"], extra_outputs=meta["extra_outputs"])
    if declared:
        names = {key: declared[key] for key in ("reward_name", "group_by", "silence", "group_size")}
    count_warnings(got, reader, context, warnings)  # type: ignore[arg-type]  # the two fields it reads
    listed = listed_bad_rows(meta)
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
        repeated_steps=context.repeated_steps,
        missing_steps=missing,
        eval_steps=context.eval_steps,
        trainer_silent=context.trainer_silent,
        unscorable_rollouts=got["unscorable"],
        advantage_check=check,
        incomplete_groups=got["incomplete_groups"],
        incomplete_rollouts=got["incomplete_rollouts"],
        extra_outputs=meta["extra_outputs"],
        excluded_steps=excluded,
        silent_observable=observable,
        threshold=threshold,
        trainer=declared.get("trainer") if declared else None,
        warnings=warnings,
        bad_rows=listed,
        bad_count=counts.bad_count,
        counted=_counted(counts, threshold, arranged.get("step_std")),
    )


def _counted(counts, threshold, step_std) -> dict:
    """The ``counted`` entry of a log read as counts (see :class:`RolloutLog`)."""
    return {
        "groups": None if counts.groups is None else {c: counts.groups[c] for c in GROUP_COLUMNS},
        "rewards_as": counts.right_rule,
        "threshold": threshold,
        "rows": int(counts.steps["rollouts"].sum()) + counts.padded,  # every row kept, padding too
        "graded": counts.graded,
        "padding_rows": counts.padded,
        "step_std": step_std,  # per step the std of its rewards, counted file by file (TRL), or None
    }


def diagnose_counted(paths, *, threshold=None, progress=None, shards=None, address=None, groups=None, **options):
    """:func:`gsd.diagnose.diagnose` of a log read as counts, its group table never whole: the
    log is counted once (:func:`gsd.diagnose.counts.count_partial`; memory that grows with the
    groups' cells), the prompts' totals fix the empirical-Bayes prior, then the cells' group
    tables are made again one run of steps at a time, given each prompt's history so far
    (:class:`gsd.diagnose.posteriors.History`), predicted, summed into the step and prompt
    tables (:class:`gsd.diagnose.aggregate.GroupSums`) and dropped — once more per candidate
    half-life with ``half_life="auto"``.  The same diagnosis, bit for bit, as
    :func:`gsd.diagnose.diagnose_log` of the whole log.  ``groups``: None (not kept; the
    Diagnosis has no group table), True (kept) or a callable given each run's predicted table
    (a file writer).  A log read whole (:class:`gsd.diagnose.counts.ReadWhole`) goes through
    :func:`gsd.diagnose.diagnose_log`.  ``options``: how to read the logs
    (:class:`gsd.diagnose.options.LogOptions`) and :func:`gsd.diagnose.diagnose_log`'s options."""
    from .tables import diagnose_log

    read: dict[str, Any] = {k: options.pop(k) for k in LogOptions.__dataclass_fields__ if k in options}
    opts = LogOptions.take(read, "diagnose_counted")
    unknown = set(options) - set(DIAGNOSE_DEFAULTS)
    if unknown:
        raise TypeError(f"diagnose_counted() got unexpected keyword argument(s) {sorted(unknown)}")
    files, found_fmt, _, _, _ = discover_files(paths, opts.fmt)
    if streams(found_fmt) and options.get("scale") == "batch":  # before the counting
        raise InputError("scale 'batch' needs every rollout's reward: read the log whole (gsd diagnose --whole-log)")
    got = counted_partial(paths, opts, threshold, progress, shards, address) if streams(found_fmt) else None
    if got is None:
        from .assemble import read_rollouts

        dx = diagnose_log(read_rollouts(paths, progress=progress, **read), threshold=threshold, **options)
        if callable(groups):
            groups(dx.columns("groups"))
        return dx
    partial, found_fmt, warnings, n_files = got
    tally = SizeTally()
    counts = finish(partial, found_fmt, threshold, warnings, n_files=n_files, groups=tally.add)
    log = _log_of(counts, tally, files, found_fmt, opts, threshold)
    return _diagnose_counts(log, counts, partial, threshold, groups, {**DIAGNOSE_DEFAULTS, **options})


#: :func:`gsd.diagnose.diagnose_log`'s options and their defaults.
DIAGNOSE_DEFAULTS = {
    "prior": "empirical-bayes",
    "epsilon": 0.05,
    "level": 0.9,
    "budget": None,
    "half_life": None,
    "ddof": None,
    "eps": None,
    "scale": None,
    "optimizer": None,
    "cost": None,
    "noise": None,
    "run_lr": None,
}


def _diagnose_counts(log: RolloutLog, counts, partial, threshold, groups, o: dict):
    """:func:`diagnose_counted` once the log is counted: the prior from the prompts' totals, the
    half-life, then the group tables run by run, predicted and summed (see there)."""
    from ..core.forgetting import as_half_life
    from .aggregate import GroupSums
    from .posteriors import History, batch_std, with_history
    from .tables import auto_half_life, check_groups, conclude, log_convention, predict_groups, run_prior

    given = as_half_life(o["half_life"], auto=True)
    h = None if isinstance(given, str) else given
    conv = log_convention(log, o["ddof"], o["eps"], o["scale"])
    binary = not counts.graded
    check_groups(int(counts.steps["groups"].sum()))
    warnings = list(log.warnings)
    if not binary:
        warnings.append(counts.right_rule)
    totals = {"k": counts.prompts["k"], "n": counts.prompts["n"]}
    a0, b0, info = run_prior(totals, binary, o["prior"], warnings)

    def tables(half_life):
        history = History(log.labels.size)
        for t in group_tables(partial, log.fmt, threshold):
            out = {c: t[c] for c in GROUP_COLUMNS}
            if binary:
                out["k"] = out["k"].astype(np.int64)
            yield with_history(out, binary, half_life, history)

    chosen = None
    if isinstance(given, str):
        h, chosen = auto_half_life(a0, b0, tables)
    prior_ab = None if a0 is None else (a0, b0)
    sums = GroupSums(log.labels.size, h, int(counts.steps["step"].max()))
    kept = []
    for g in tables(h):
        stds = batch_std(log, g) if conv["scale"] == "batch" else None
        g = predict_groups(g, prior_ab, conv["ddof"], conv["eps"], conv["scale"], stds)
        sums.add(g)
        if groups is True:
            kept.append(g)
        elif callable(groups):
            groups(g)
    table = {c: np.concatenate([g[c] for g in kept]) for c in kept[0]} if kept else None
    setup = {"note": counts.right_rule, "conv": conv, "prior": prior_ab, "info": info, "half_life": h, "chosen": chosen}
    options = {"epsilon": o["epsilon"], "level": o["level"], "budget": o["budget"]}
    return conclude(log, sums, table, setup, warnings, options, (o["optimizer"], o["cost"], o["noise"], o["run_lr"]))
