"""A run's groups as counts, read piece by piece: memory that grows with the groups, not the rollouts.

:func:`read_rollouts` keeps every rollout (about 95 B each at its peak); what the silence of a step
and a prompt's posterior need is far less: per *cell* — the rows of one step, one group key and
one prompt — its usable rows, the smallest and largest reward, how many rows hold the largest
(and, with a threshold, how many reach it), whether a value lies strictly between the two, the
row order of its first row, and whether the group lost a row.  Each piece of a file (a parquet
row batch, a CSV block, a JSONL file) is parsed by the same :class:`gsd.diagnose.parse.Reader` as
the whole-file reader, reduced to its cells at once and dropped.

The counts are additive: two parts of a log (pieces, files, the shards of several processes or
machines) merge exactly — rows and counts add, the smallest and largest take the min and max,
the first row the min, "lost a row" the or (:meth:`Cells.merge`).  :func:`finish` turns the
merged cells into the diagnosis's group table columns (``step``, ``prompt``, ``G``, ``n``,
``k``, ``silent``, ``binary_silent``), its step table's measured columns and per-prompt totals,
equal field by field to those :func:`gsd.diagnose.diagnose_log` computes from the whole log.

Streaming covers verl (V1 and legacy dumps) and plain tables: formats whose groups and silence are
functions of the rows' keys and the group's reward range.  TRL (blocks of rows, its whole-run
arrangement, unscorable rows) and AReaL (its arrangement) are read by :func:`read_rollouts` and
reduced afterwards: the same answer, with the whole-log memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..integrations.columns import pair_codes
from ..io.frames import group_sums
from ..validation import InputError
from .assemble import checked_options, columns_to_read, report_unusable, run_history, silent_groups
from .discover import TRAINER_HOOKS, discover_files, hooks_of
from .parse import Reader, read_file

__all__ = ["Cells", "RunCounts", "count_rollouts", "count_files", "finish", "streams"]

_NONE = np.iinfo(np.int64).max  # "no usable row" as a first-row index
SHARD_BITS = 40  # a row's order is (shard << 40) + its row within the shard: 2^40 rows per shard


@dataclass
class Cells:
    """Partial counts of a log, one entry per cell (step, group key, prompt hash); additive.

    ``rows``: usable rows; ``lo``/``hi``: their smallest and largest reward (±inf: none);
    ``top``: rows equal to ``hi``; ``above``: rows with reward ≥ the threshold (0 without one);
    ``mid``: a reward strictly between ``lo`` and ``hi``; ``first``: the order of the first
    usable row (int64 max: none); ``lost``: a row of the group was unusable.  ``orphans``: the
    (step, prompt hash) pairs of rows with a prompt and a step but no group key (every group of
    that prompt at that step lost one of them).  ``unplaced``: per file with lines that are not
    rows (malformed JSON), its step and how many.
    """

    step: np.ndarray
    gkey: np.ndarray
    hash: np.ndarray
    rows: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    top: np.ndarray
    above: np.ndarray
    mid: np.ndarray
    first: np.ndarray
    lost: np.ndarray
    orphans: np.ndarray = field(default_factory=lambda: np.zeros((2, 0), np.int64))
    unplaced: list = field(default_factory=list)
    labels: dict = field(default_factory=dict)
    bad_count: int = 0
    keyed: set = field(default_factory=set)  # {True, False}: chunks with and without group keys

    ARRAYS = ("step", "gkey", "hash", "rows", "lo", "hi", "top", "above", "mid", "first", "lost")

    @classmethod
    def empty(cls) -> Cells:
        z = np.zeros(0, np.int64)
        f = np.zeros(0)
        return cls(z, z, z, z, f, f, z, z, z.astype(bool), z, z.astype(bool))

    @property
    def size(self) -> int:
        return int(self.step.size)

    @staticmethod
    def merge(parts) -> Cells:
        """The exact union of partial counts: per cell, rows and counts summed, ``lo``/``hi`` the
        min/max, ``top`` the sum over the parts whose ``hi`` is the merged one, ``mid`` set where a
        part had one or a part's ``lo``/``hi`` lies strictly inside the merged range."""
        parts = [p for p in parts if p is not None]
        out = Cells.empty() if not parts else parts[0]
        if len(parts) > 1:
            cat = {name: np.concatenate([getattr(p, name) for p in parts]) for name in Cells.ARRAYS}
            out = _reduce(cat)
            out.orphans = np.unique(np.concatenate([p.orphans for p in parts], axis=1), axis=1)
            out.unplaced = [u for p in parts for u in p.unplaced]
            out.labels = {}
            for p in parts:
                for h, text in p.labels.items():
                    out.labels.setdefault(h, text)
            out.bad_count = sum(p.bad_count for p in parts)
            out.keyed = set().union(*(p.keyed for p in parts))
        return out


def _reduce(cat: dict) -> Cells:
    """Rows of cells (possibly repeated) → one entry per cell, merged as :meth:`Cells.merge` says."""
    n = cat["step"].size
    if n == 0:
        return Cells.empty()
    order = np.lexsort((cat["hash"], cat["gkey"], cat["step"]))
    s = {k: v[order] for k, v in cat.items()}
    new = np.r_[True, (np.diff(s["step"]) != 0) | (np.diff(s["gkey"]) != 0) | (np.diff(s["hash"]) != 0)]
    starts = np.flatnonzero(new)
    idx = np.cumsum(new) - 1
    lo = np.minimum.reduceat(s["lo"], starts)
    hi = np.maximum.reduceat(s["hi"], starts)
    inside = ((s["lo"] > lo[idx]) & (s["lo"] < hi[idx])) | ((s["hi"] > lo[idx]) & (s["hi"] < hi[idx]))
    return Cells(
        s["step"][starts],
        s["gkey"][starts],
        s["hash"][starts],
        np.add.reduceat(s["rows"], starts),
        lo,
        hi,
        np.add.reduceat(np.where(s["hi"] == hi[idx], s["top"], 0), starts),
        np.add.reduceat(s["above"], starts),
        np.logical_or.reduceat(s["mid"] | inside, starts),
        np.minimum.reduceat(s["first"], starts),
        np.logical_or.reduceat(s["lost"], starts),
    )


def chunk_cells(chunk, threshold, row0: int) -> Cells:
    """The cells of one parsed piece (a :class:`gsd.diagnose.parse.Chunk`); ``row0``: the order of
    its first row.  A row is usable with a prompt, a step, a finite reward, a group key and no
    contradiction; an unusable row with a step and a key marks its cell lost."""
    steps, hashes, reward = chunk.steps, chunk.hashes, chunk.reward
    keyed = chunk.gkey is not None
    if not keyed and chunk.prompt_codes is not None and chunk.conflict is None:
        return _prompt_cells(chunk, threshold, row0)
    gkey, gkey_ok = (chunk.gkey, chunk.gkey_ok) if keyed else (hashes, chunk.prompt_ok)
    finite = np.isfinite(reward)
    conflict = chunk.conflict if chunk.conflict is not None else np.zeros(hashes.size, bool)
    usable = chunk.prompt_ok & chunk.step_ok & finite & gkey_ok & ~conflict
    placed = chunk.step_ok & gkey_ok  # rows whose group is known
    orphan = chunk.step_ok & chunk.prompt_ok & ~gkey_ok
    r = np.where(usable, reward, np.nan)
    rows = {
        "step": steps[placed],
        "gkey": gkey[placed],
        "hash": np.where(usable, hashes, 0)[placed],
        "rows": usable[placed].astype(np.int64),
        "lo": np.where(usable, r, np.inf)[placed],
        "hi": np.where(usable, r, -np.inf)[placed],
        "top": usable[placed].astype(np.int64),
        "above": (usable & (r >= threshold)).astype(np.int64)[placed]
        if threshold is not None
        else np.zeros(int(placed.sum()), np.int64),
        "mid": np.zeros(int(placed.sum()), bool),
        "first": np.where(usable, row0 + np.arange(hashes.size, dtype=np.int64), _NONE)[placed],
        "lost": ~usable[placed],
    }
    cells = _reduce(rows)
    cells.orphans = np.unique(np.stack([steps[orphan], hashes[orphan]]), axis=1)
    cells.keyed = {keyed} if hashes.size else set()
    if chunk.unattributed_bad:
        cells.unplaced = [(chunk.file.name, int(steps[0]) if steps.size else None, int(chunk.unattributed_bad))]
    return cells


def _prompt_cells(chunk, threshold, row0: int) -> Cells:
    """:func:`chunk_cells` where a group is a prompt within its step: cells numbered by (step,
    prompt index among the piece's distinct prompts) — dense small codes counted with
    ``bincount``, no sort of the rows; the rows that cannot be used go through the general way."""
    usable = chunk.prompt_ok & chunk.step_ok & np.isfinite(chunk.reward)
    idx = np.flatnonzero(usable)
    steps, r = chunk.steps[idx], chunk.reward[idx]
    parts = []
    if idx.size:
        nd = max(chunk.prompt_hashes.size, 1)
        low = int(steps.min())
        span = int(steps.max()) - low + 1
        code = (steps - low) * nd + chunk.prompt_codes[idx] if span <= (1 << 62) // nd else None
        if code is not None and span * nd <= 4 * idx.size + 4096:
            present = np.bincount(code, minlength=span * nd) > 0
            cell, n = (np.cumsum(present) - 1)[code], int(present.sum())
        else:  # a wide span of steps: number the pairs by sorting
            cell, n = pair_codes(steps, chunk.prompt_codes[idx])
        parts.append(
            _dense_cells(cell, n, steps, chunk.prompt_hashes[chunk.prompt_codes[idx]], r, idx, row0, threshold)
        )
    rest = ~usable & chunk.step_ok & chunk.prompt_ok  # unusable rows whose group is known: lost
    orphans = np.zeros((2, 0), np.int64)
    if rest.any() or chunk.unattributed_bad:
        rows = {
            "step": chunk.steps[rest], "gkey": chunk.hashes[rest], "hash": np.zeros(int(rest.sum()), np.int64),
            "rows": np.zeros(int(rest.sum()), np.int64), "lo": np.full(int(rest.sum()), np.inf),
            "hi": np.full(int(rest.sum()), -np.inf), "top": np.zeros(int(rest.sum()), np.int64),
            "above": np.zeros(int(rest.sum()), np.int64), "mid": np.zeros(int(rest.sum()), bool),
            "first": np.full(int(rest.sum()), _NONE), "lost": np.ones(int(rest.sum()), bool),
        }  # fmt: skip
        parts.append(_reduce(rows))
    cells = Cells.merge(parts) if len(parts) > 1 else (parts[0] if parts else Cells.empty())
    cells.orphans = orphans
    cells.keyed = {False} if chunk.hashes.size else set()
    if chunk.unattributed_bad:
        steps_all = chunk.steps
        cells.unplaced = [(chunk.file.name, int(steps_all[0]) if steps_all.size else None, int(chunk.unattributed_bad))]
    return cells


def _dense_cells(cell, n: int, steps, hashes, r, idx, row0: int, threshold) -> Cells:
    """Cells of usable rows already numbered 0 … n − 1 (``cell`` per row): counts by ``bincount``,
    ranges by ``minimum.at`` / ``maximum.at``."""
    first_row = np.full(n, cell.size, np.int64)
    np.minimum.at(first_row, cell, np.arange(cell.size))  # the earliest row of each cell
    lo = np.full(n, np.inf)
    hi = np.full(n, -np.inf)
    np.minimum.at(lo, cell, r)
    np.maximum.at(hi, cell, r)
    inside = (r > lo[cell]) & (r < hi[cell])
    return Cells(
        steps[first_row],
        hashes[first_row],
        hashes[first_row],
        np.bincount(cell, minlength=n).astype(np.int64),
        lo,
        hi,
        np.bincount(cell, weights=r == hi[cell], minlength=n).round().astype(np.int64),
        np.bincount(cell, weights=r >= threshold, minlength=n).round().astype(np.int64)
        if threshold is not None
        else np.zeros(n, np.int64),
        np.bincount(cell, weights=inside, minlength=n) > 0,
        row0 + idx[first_row],
        np.zeros(n, bool),
    )


@dataclass
class RunCounts:
    """A run's counts: the diagnosis's group table (measured columns), its step table (measured
    columns), per-prompt totals, and what was left out."""

    groups: dict
    steps: dict
    prompts: dict
    labels: np.ndarray
    hashes: np.ndarray
    incomplete_groups: int
    incomplete_rollouts: int
    bad_count: int
    right_rule: str | None
    warnings: list


def count_files(files, fmt: str, cols: dict, reward, threshold=None, *, shard: int = 0, progress=None) -> Cells:
    """The cells of ``files`` (one run's, or one shard of it), read piece by piece: each piece
    parsed into a chunk, reduced to its cells and dropped; the cells merged when they outgrow
    twice their last merged size (amortised: each row is sorted O(log) times)."""
    from ..io.progress import progress_bar

    reader = Reader(fmt, cols, reward)
    state = {"parts": [], "held": 0, "merged": 1 << 16, "row": shard << SHARD_BITS}

    def take(rd):
        for chunk in rd.chunks:
            cells = chunk_cells(chunk, threshold, state["row"])
            report_unusable(rd, [chunk], _rows(chunk), np.isfinite(chunk.reward), cols.get("group"))
            state["row"] += chunk.hashes.size
            state["parts"].append(cells)
            state["held"] += cells.size
        rd.chunks.clear()
        rd.verdicts.clear()
        if state["held"] > 2 * state["merged"]:
            merged = Cells.merge(state["parts"])
            state["parts"], state["held"], state["merged"] = [merged], merged.size, max(merged.size, 1 << 16)

    disable = None if progress is None else not progress
    for path in progress_bar(files, desc="counting logs", unit="file", disable=disable, leave=False):
        read_file(path, reader, on_piece=take)
    out = Cells.merge(state["parts"])
    out.labels, out.bad_count = reader.labels, reader.bad_count
    return out


def _rows(chunk) -> dict:
    """One chunk's validity masks as :func:`gsd.diagnose.assemble.report_unusable` reads them."""
    keyed = chunk.gkey is not None
    return {
        "prompt_ok": chunk.prompt_ok,
        "step_ok": chunk.step_ok,
        "gkey_ok": chunk.gkey_ok if keyed else chunk.prompt_ok,
        "conflict": chunk.conflict if chunk.conflict is not None else np.zeros(chunk.hashes.size, bool),
    }


def streams(fmt: str) -> bool:
    """Whether the format is read piece by piece (verl and tables) rather than whole."""
    hooks = hooks_of(TRAINER_HOOKS.get(fmt))
    return hooks.arrange is None and not hooks.GROUP_SIZE and not hooks.UNSCORABLE_IN_GROUP


def plan(paths, fmt="auto", *, reward=None, prompt_col=None, step_col=None, group_col=None):
    """(files to read, format, columns, reward, warnings) of a run, its left-overs of other
    attempts left out, as :func:`read_rollouts` decides them; an InputError for a format that is
    not read piece by piece or a table saved by gsd's GroupTracker (its own verdict column)."""
    checked_options(fmt, None)
    files, fmt, warnings, _, folders = discover_files(paths, fmt)
    module = TRAINER_HOOKS.get(fmt)
    reward, group_col, declared, cols = columns_to_read(
        module, fmt, files, reward=reward, group_col=group_col, group_size=None, prompt=prompt_col, step=step_col
    )
    if declared or not streams(fmt):
        raise InputError(f"LOG: {fmt} logs are read whole (read_rollouts), not piece by piece")
    if module is not None and folders and hooks_of(module).RUN_HISTORY:
        import os
        from types import SimpleNamespace

        from .discover import file_step

        stubs = [SimpleNamespace(file=f, mtime=os.stat(f).st_mtime, file_step=file_step(module, f)) for f in files]
        kept, _ = run_history(stubs, warnings)
        files = [s.file for s in kept]
    return files, fmt, cols, reward, warnings


def count_rollouts(
    paths,
    *,
    fmt: str = "auto",
    reward: str | None = None,
    prompt_col: str | None = None,
    step_col: str | None = None,
    group_col: str | None = None,
    threshold: float | None = None,
    progress: bool | None = None,
) -> RunCounts:
    """The counts of a run's groups (:class:`RunCounts`), read piece by piece for verl and tables
    (peak memory grows with the groups and prompts, not the rollouts), whole for the others.

    The arguments are :func:`read_rollouts`'s; ``threshold`` makes a reward ≥ it right (default:
    0/1 rewards, or two values, the higher one right; graded rewards without one leave ``k``
    NaN), as :func:`gsd.diagnose.diagnose_log` decides.
    """
    if threshold is not None and not np.isfinite(float(threshold)):
        raise InputError(f"threshold must be a finite number, got {threshold!r}")
    try:
        files, fmt, cols, reward, warnings = plan(
            paths, fmt, reward=reward, prompt_col=prompt_col, step_col=step_col, group_col=group_col
        )
    except InputError as exc:
        if "read whole" not in str(exc):
            raise
        return _counts_whole(paths, fmt, reward, prompt_col, step_col, group_col, threshold, progress)
    cells = count_files(files, fmt, cols, reward, threshold, progress=progress)
    return finish(cells, fmt, threshold, warnings, n_files=len(files))


def _counts_whole(paths, fmt, reward, prompt_col, step_col, group_col, threshold, progress) -> RunCounts:
    """TRL, AReaL and GroupTracker tables: the whole log read, then its group table."""
    from .assemble import read_rollouts
    from .posteriors import group_columns
    from .tables import right_answers

    log = read_rollouts(
        paths, fmt=fmt, reward=reward, prompt_col=prompt_col, step_col=step_col, group_col=group_col, progress=progress
    )
    right, note = right_answers(log, threshold if threshold is not None else log.threshold)
    g = group_columns(log, right)
    groups = {c: g[c] for c in ("step", "prompt", "G", "generated", "n", "k", "silent", "binary_silent")}
    return _tables(
        groups,
        log.labels,
        log.hashes,
        log.incomplete_groups,
        log.incomplete_rollouts,
        log.bad_count,
        note,
        log.warnings,
    )


def finish(cells: Cells, fmt: str, threshold=None, warnings=None, *, n_files: int = 0) -> RunCounts:
    """The run's counts from its merged cells, as the whole-log reader and
    :func:`gsd.diagnose.diagnose_log` decide them: groups that lost a row (or a row of their
    prompt without a group key, or a malformed line placed in them) left out whole; the group's
    prompt is that of its first row; right/wrong by :func:`gsd.diagnose.tables.binarise`'s rule;
    silence by the trainer's rule on the group's reward range."""
    warnings = list(warnings or [])
    if cells.keyed == {True, False}:
        raise InputError(
            "LOG: some files carry a group key and others do not (files of two trainers or versions "
            "in one folder?): name the files of one run"
        )
    gcode, n_groups = pair_codes(cells.step, cells.gkey)
    dropped = np.zeros(n_groups, bool)
    np.logical_or.at(dropped, gcode, cells.lost)
    orphaned = _in_orphans(cells) & (cells.rows > 0)
    _place_unreadable(cells, gcode, n_groups, dropped[gcode] | orphaned, dropped, warnings)
    lost = dropped[gcode] | orphaned
    incomplete_groups = int((dropped | _any_of(gcode, n_groups, orphaned)).sum())
    incomplete_rollouts = int(cells.rows[lost].sum())
    keep = ~lost & (cells.rows > 0)
    if not keep.any():
        raise InputError(f"LOG: no usable rollout in {n_files} file(s)")
    c = {name: getattr(cells, name)[keep] for name in Cells.ARRAYS}
    group, _ = pair_codes(c["step"], c["gkey"])
    g = _reduce({**c, "gkey": group, "hash": np.zeros(group.size, np.int64)})  # one entry per group
    # The group's prompt: that of its first row (the cell with the smallest first row).
    by_first = np.lexsort((c["first"], group))
    prompt_hash = c["hash"][by_first][np.r_[True, np.diff(group[by_first]) != 0]]
    uniq = np.unique(c["hash"])
    prompt = np.searchsorted(uniq, prompt_hash)
    k, note = _right_counts(g, threshold)
    silent = (g.rows >= 2) & _silent(fmt, g)
    binary = not np.isnan(k).any() if k.size else True
    groups = {
        "step": g.step,
        "prompt": prompt,
        "G": g.rows,
        "generated": g.rows,
        "n": g.rows,
        "k": k.astype(np.int64) if binary else k,
        "silent": silent,
        "binary_silent": (g.rows >= 2) & ((k == 0) | (k == g.rows)) if binary else silent,
    }
    order = np.lexsort((groups["prompt"], groups["step"]))  # by step, then prompt; stable
    groups = {name: v[order] for name, v in groups.items()}
    labels = np.array([cells.labels[int(h)] for h in uniq.tolist()], dtype=object)
    return _tables(groups, labels, uniq, incomplete_groups, incomplete_rollouts, cells.bad_count, note, warnings)


def _any_of(gcode, n_groups: int, mask) -> np.ndarray:
    out = np.zeros(n_groups, bool)
    np.logical_or.at(out, gcode, mask)
    return out


def _in_orphans(cells: Cells) -> np.ndarray:
    """Which cells' (step, prompt) pairs are among the orphans' (rows without a group key)."""
    if not cells.orphans.shape[1]:
        return np.zeros(cells.size, bool)
    k = cells.orphans.shape[1]
    codes, n = pair_codes(np.r_[cells.orphans[0], cells.step], np.r_[cells.orphans[1], cells.hash])
    bad = np.zeros(n, bool)
    bad[codes[:k]] = True
    return bad[codes[k:]]


def _place_unreadable(cells: Cells, gcode, n_groups: int, gone, dropped, warnings) -> None:
    # gone: per cell, left out already (its group lost a row, or its prompt a keyless row)
    """Lines that are not rows belong to an unknown group of their file's step: where the step's
    kept groups otherwise share one size, the groups short of it lost them (marked in
    ``dropped``, in place); elsewhere the loss is said (as the whole-log reader does)."""
    from collections import Counter

    sizes = np.bincount(gcode, weights=np.where(gone, 0, cells.rows), minlength=n_groups).round().astype(np.int64)
    gstep = np.zeros(n_groups, np.int64)
    gstep[gcode] = cells.step
    for name, step, count in cells.unplaced:
        in_step = (gstep == step) & (sizes > 0) if step is not None else np.zeros(n_groups, bool)
        if not in_step.any():
            continue
        s = sizes[in_step]
        usual = Counter(s.tolist()).most_common(1)[0][0]
        short = s < usual
        if short.any() and short.sum() <= count and np.all((s <= usual) | (s % usual == 0)):
            dropped[np.flatnonzero(in_step)[short]] = True
        else:
            warnings.append(
                f"{name}: {count} unreadable line(s) could not be placed in a group; "
                "the group(s) they belonged to may be counted short"
            )


def _right_counts(g: Cells, threshold):
    """(right answers per group, how they were decided), by :func:`binarise`'s rule applied to the
    groups' reward ranges: with a threshold, the rows reaching it; 0/1 rewards, the 1s; two
    values, the higher; graded rewards, NaN."""
    from .tables import binarise

    if threshold is not None:
        return g.above.astype(np.float64), binarise(np.zeros(0), threshold)[1]
    values = np.unique(np.r_[g.lo, g.hi])
    if g.mid.any() or values.size > 2:
        shown = ", ".join(f"{v:g}" for v in values[:5])
        return np.full(g.size, np.nan), (
            f"rewards are graded (more than two distinct values: {shown}, ...): the measured figures are "
            "given; predictions and posteriors need --threshold T (reward >= T counts as right)"
        )
    _, note = binarise(values)
    top = 1.0 if np.all(np.isin(values, (0.0, 1.0))) else values.max()
    return np.where(g.hi == top, g.top, 0).astype(np.float64), note


def _silent(fmt: str, g: Cells) -> np.ndarray:
    """Every reward of the group equal, by the trainer's rule (verl: equal in float32) on the
    group's smallest and largest reward, else :func:`silent_groups`'s."""
    zero_std = hooks_of(TRAINER_HOOKS.get(fmt)).zero_std
    if zero_std is None:
        return silent_groups(g.hi, g.lo)
    ids = np.arange(g.size)
    return zero_std(np.r_[g.lo, g.hi], np.r_[ids, ids], g.size)


def _tables(groups, labels, hashes, incomplete_groups, incomplete_rollouts, bad_count, note, warnings) -> RunCounts:
    """The step table's measured columns and the per-prompt totals from the group table."""
    multi = groups["G"] >= 2
    silent = groups["silent"].astype(bool)
    made = groups["generated"]
    step, s = group_sums(
        groups["step"],
        {
            "groups": multi,
            "singletons": ~multi,
            "rollouts": made,
            "silent_groups": silent,
            "all_wrong": silent & (groups["k"] == 0),
            "all_right": silent & (groups["k"] == groups["n"]),
            "wasted_rollouts": np.where(silent, made, 0),
        },
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        s["silent_frac"] = s["silent_groups"] / np.where(s["groups"] > 0, s["groups"], np.nan)
    if np.issubdtype(groups["k"].dtype, np.floating) and np.isnan(groups["k"]).any():  # no right/wrong
        s["all_wrong"] = s["all_right"] = np.full(step.size, np.nan)
    prompt, p = group_sums(groups["prompt"], {"groups": np.ones(multi.size, bool), "n": groups["n"], "k": groups["k"]})
    return RunCounts(
        groups=groups,
        steps={"step": step, **s},
        prompts={"prompt": prompt, **p},
        labels=labels,
        hashes=hashes,
        incomplete_groups=incomplete_groups,
        incomplete_rollouts=incomplete_rollouts,
        bad_count=bad_count,
        right_rule=note,
        warnings=warnings,
    )
