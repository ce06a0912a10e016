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

Every format streams.  verl (V1 and legacy dumps) and plain tables: their groups and silence are
functions of the rows' keys and the group's reward range.  A table saved by gsd's GroupTracker:
its saved verdict column too (a cell's ``verdict``).  A trainer whose rules need the whole run
(its ``arrange``) gives them one file at a time (``stream_arrange``, in file order), after a
first pass where a rule needs one: TRL (:mod:`gsd.diagnose.blocks`: a first pass over the prompt
column for ``num_generations``; each file then reduced to its blocks with TRL's own zero-std
verdict, its rows kept without a reward, a padding trainer's rows, its advantages' fit and its
reward std for ``scale_rewards="batch"``) and AReaL (a first pass over the parsed rows' task keys
for the usual task size; each piece then cut of the short tasks' rows).  What is still read
whole (:class:`ReadWhole`): a padding trainer's file without its completion column, a TRL run
whose advantages show ``scale_rewards="batch"`` with a step in two files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ..integrations.columns import pair_codes
from ..integrations.contract import RunContext
from ..io.frames import group_sums
from ..validation import InputError
from .assemble import columns_to_read, run_context, run_history, silent_groups, unusable_rows
from .blocks import NO_ROW, Arranged, ReadWhole
from .discover import TRAINER_HOOKS, discover_files, hooks_of
from .options import LogOptions
from .parse import MAX_LISTED, Reader, read_file

__all__ = [
    "Cells",
    "Partial",
    "compact",
    "RunCounts",
    "count_rollouts",
    "count_files",
    "finish",
    "group_tables",
    "streams",
    "ReadWhole",
]

_NONE = NO_ROW  # "no usable row" as a first-row index
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
    keyed: set = field(default_factory=set)  # {True, False}: chunks with and without group keys
    # Blocks of rows (TRL, :mod:`gsd.diagnose.blocks`): per cell its rows kept in the group without
    # a finite reward, its padding rows, and the trainer's zero-std verdict on its group (1 silent,
    # 0 not, -1 none); None for the other formats (0, 0, -1 each).
    unscored: np.ndarray | None = None
    pad: np.ndarray | None = None
    verdict: np.ndarray | None = None

    ARRAYS = ("step", "gkey", "hash", "rows", "lo", "hi", "top", "above", "mid", "first", "lost")
    # (fill, merge, dtype): the narrowest type that holds a file's counts (a row count of one cell
    # is at most its file's rows; a merge that would pass int32 widens, see _narrow), 1 B a verdict.
    EXTRA = {"unscored": (0, np.add, np.int32), "pad": (0, np.add, np.int32), "verdict": (-1, np.maximum, np.int8)}

    def arrays(self) -> dict:
        """The per-cell arrays by name, the extra ones where the cells carry them."""
        out = {name: getattr(self, name) for name in Cells.ARRAYS}
        if self.unscored is not None:
            out.update({name: getattr(self, name) for name in Cells.EXTRA})
        return out

    def sizes(self) -> np.ndarray:
        """Per cell, the rows its group holds: the usable ones and those kept without a reward."""
        return self.rows if self.unscored is None else self.rows + self.unscored

    @classmethod
    def empty(cls) -> Cells:
        z = np.zeros(0, np.int64)
        f = np.zeros(0)
        return cls(z, z, z, z, f, f, z, z, z.astype(bool), z, z.astype(bool))

    @property
    def size(self) -> int:
        return int(self.step.size)

    def steps(self) -> tuple[int, int] | None:
        """The smallest and largest step the part holds (cells, orphans, unplaced lines), or None."""
        found = [x for x in (self.step, self.orphans[0], [u[1] for u in self.unplaced if u[1] is not None]) if len(x)]
        if not found:
            return None
        return min(int(np.min(x)) for x in found), max(int(np.max(x)) for x in found)

    @staticmethod
    def merge(parts) -> Cells:
        """The exact union of partial counts: per cell, rows and counts summed, ``lo``/``hi`` the
        min/max, ``top`` the sum over the parts whose ``hi`` is the merged one, ``mid`` set where a
        part had one or a part's ``lo``/``hi`` lies strictly inside the merged range."""
        parts = [p for p in parts if p is not None]
        out = Cells.empty() if not parts else parts[0]
        if len(parts) > 1:
            cat = {name: np.concatenate([getattr(p, name) for p in parts]) for name in Cells.ARRAYS}
            if any(p.unscored is not None for p in parts):
                for name, (fill, _, dtype) in Cells.EXTRA.items():
                    cat[name] = np.concatenate(
                        [getattr(p, name) if p.unscored is not None else np.full(p.size, fill, dtype) for p in parts]
                    )
            out = _reduce(cat)
            out.orphans = np.unique(np.concatenate([p.orphans for p in parts], axis=1), axis=1)
            out.unplaced = [u for p in parts for u in p.unplaced]
            out.keyed = set().union(*(p.keyed for p in parts))
        return out


@dataclass
class Partial:
    """Partial counts of a log: runs of cells (:class:`Cells`) over disjoint ranges of steps, in
    step order; the prompts' labels; the unusable rows counted.  Additive (:meth:`merge`)."""

    runs: list
    labels: dict = field(default_factory=dict)
    bad_count: int = 0
    meta: dict = field(default_factory=dict)  # what the reader saw (see count_files), for the report

    @staticmethod
    def merge(parts) -> Partial:
        """The exact union: runs whose steps overlap merged (:meth:`Cells.merge`), labels joined,
        unusable rows added, the readers' observations joined in the parts' order."""
        labels: dict = {}
        for p in parts:
            for h, text in p.labels.items():
                labels.setdefault(h, text)
        metas = [p.meta for p in parts if p.meta]
        meta = {}
        if metas:
            meta = {
                "terms": next((m["terms"] for m in metas if m["terms"]), None),
                "keyed": any(m["keyed"] for m in metas),
                "extra_outputs": sum(m["extra_outputs"] for m in metas),
                "repeated_rows": sum(m["repeated_rows"] for m in metas),
                "file_steps": set().union(*(m["file_steps"] for m in metas)),
                "listed": [b for m in metas for b in m["listed"]][:MAX_LISTED],
                "reasons": [[b for m in metas for b in m["reasons"][i]][:MAX_LISTED] for i in range(5)],
                "said": set().union(*(m.get("said", set()) for m in metas)),
            }
        runs = compact([r for p in parts for r in p.runs])
        return Partial(runs, labels, sum(p.bad_count for p in parts), meta)

    @property
    def size(self) -> int:
        return sum(r.size for r in self.runs)


def compact(parts) -> list:
    """Parts of cells as runs over disjoint step ranges, in step order: the parts whose ranges
    overlap (a step written in two files, a table's rows in any order) merged, the others kept as
    they are (no copy): a log written step by step is never sorted as a whole."""
    spans = [(p.steps(), i) for i, p in enumerate(parts)]
    spans = sorted((span, i) for span, i in spans if span is not None)
    runs: list = []
    cluster: list = []
    top = None
    for (low, high), i in spans:
        if cluster and low > top:
            runs.append(Cells.merge(cluster))
            cluster = []
        cluster.append(parts[i])
        top = high if len(cluster) == 1 else max(top, high)
    if cluster:
        runs.append(Cells.merge(cluster))
    return runs


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
    out = Cells(
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
    for name, (_, merge, dtype) in Cells.EXTRA.items():
        if name in s:
            setattr(out, name, _narrow(merge.reduceat(s[name], starts, dtype=np.int64), dtype))
    return out


def _narrow(x: np.ndarray, dtype) -> np.ndarray:
    """``x`` as ``dtype`` where every value fits it (a block field's usual case), else as it is."""
    info = np.iinfo(dtype)
    return x.astype(dtype) if not x.size or (x.min() >= info.min and x.max() <= info.max) else x


def chunk_cells(chunk, threshold, row0: int, verdict=None) -> Cells:
    """The cells of one parsed piece (a :class:`gsd.diagnose.parse.Chunk`); ``row0``: the order of
    its first row.  A row is usable with a prompt, a step, a finite reward, a group key and no
    contradiction; an unusable row with a step and a key marks its cell lost.  ``verdict``: per
    row, the trainer's zero-std verdict a table saved (GroupTracker's; a group is silent when one
    of its rows says so), or None."""
    steps, hashes, reward = chunk.steps, chunk.hashes, chunk.reward
    keyed = chunk.gkey is not None
    if not keyed and chunk.prompt_codes is not None and chunk.conflict is None and verdict is None:
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
    if verdict is not None:  # NaN is not a verdict of silence, as the whole-log reader reads it
        with np.errstate(invalid="ignore"):
            said = np.where(usable, verdict > 0, -1).astype(np.int8)[placed]
        rows.update(unscored=np.zeros(said.size, np.int32), pad=np.zeros(said.size, np.int32), verdict=said)
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
    every = bool(usable.all())
    idx = None if every else np.flatnonzero(usable)  # every row usable (the usual case): no copies
    steps, r, codes = (chunk.steps, chunk.reward, chunk.prompt_codes) if every else (
        chunk.steps[idx], chunk.reward[idx], chunk.prompt_codes[idx]
    )  # fmt: skip
    parts = []
    if steps.size:
        nd = max(chunk.prompt_hashes.size, 1)
        low = int(steps.min())
        span = int(steps.max()) - low + 1
        code = (steps - low) * nd + codes if span <= (1 << 62) // nd else None
        if code is not None and span * nd <= 4 * steps.size + 4096:
            present = np.bincount(code, minlength=span * nd) > 0
            cell, n = (np.cumsum(present) - 1)[code], int(present.sum())
        else:  # a wide span of steps: number the pairs by sorting
            cell, n = pair_codes(steps, codes)
        parts.append(_dense_cells(cell, n, steps, codes, chunk.prompt_hashes, r, idx, row0, threshold))
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


def _dense_cells(cell, n: int, steps, codes, distinct, r, idx, row0: int, threshold) -> Cells:
    """Cells of usable rows already numbered 0 … n − 1 (``cell`` per row; ``codes``: each row's
    prompt index into ``distinct``, the prompts' hashes; ``idx``: the rows' places in the piece,
    None for every row): counts by ``bincount``, ranges by ``minimum.at`` / ``maximum.at``."""
    first_row = np.full(n, cell.size, np.int64)
    np.minimum.at(first_row, cell, np.arange(cell.size))  # the earliest row of each cell
    lo = np.full(n, np.inf)
    hi = np.full(n, -np.inf)
    np.minimum.at(lo, cell, r)
    np.maximum.at(hi, cell, r)
    inside = (r > lo[cell]) & (r < hi[cell])
    hashes = distinct[codes[first_row]]
    return Cells(
        steps[first_row],
        hashes,
        hashes,
        np.bincount(cell, minlength=n).astype(np.int64),
        lo,
        hi,
        np.bincount(cell, weights=r == hi[cell], minlength=n).round().astype(np.int64),
        np.bincount(cell, weights=r >= threshold, minlength=n).round().astype(np.int64)
        if threshold is not None
        else np.zeros(n, np.int64),
        np.bincount(cell, weights=inside, minlength=n) > 0,
        row0 + (first_row if idx is None else idx[first_row]),
        np.zeros(n, bool),
    )


@dataclass
class RunCounts:
    """A run's counts: the diagnosis's group table (measured columns), its step table (measured
    columns), per-prompt totals, and what was left out."""

    groups: dict | None
    steps: dict
    prompts: dict
    labels: np.ndarray
    hashes: np.ndarray
    incomplete_groups: int
    incomplete_rollouts: int
    bad_count: int
    right_rule: str | None
    warnings: list
    mixed: int = 0  # extra (group, prompt) pairs: groups that hold several prompts
    meta: dict = field(default_factory=dict)  # what the reader saw (Partial.meta)
    graded: bool = False  # rewards graded without a threshold: no right/wrong (k NaN)
    unscored: int = 0  # rows kept in their group without a finite reward (TRL), padding included
    padded: int = 0  # of those, a padding trainer's rows (trl-cgrpo)


def count_files(
    files, fmt: str, cols: dict, reward, threshold=None, *, shard: int = 0, progress=None, context=None
) -> Partial:
    """The counts of ``files`` (one run's, or one shard of it), read piece by piece: each piece
    parsed into a chunk, reduced to its cells and dropped; the parts compacted (:func:`compact`)
    when they outgrow twice their last compacted size (amortised: a cell is merged O(log) times).
    A format with whole-run rules (TRL) has them applied file by file by its ``stream_arrange``
    (``context``: the run's :class:`~gsd.integrations.contract.RunContext`; :mod:`gsd.diagnose.blocks`)."""
    from ..io.progress import progress_bar

    reader = Reader(fmt, cols, reward)
    hooks = hooks_of(reader.module)
    disable = None if progress is None else not progress
    ruled = (
        None if hooks.stream_arrange is None else Arranged(hooks, context, files, Reader(fmt, cols, reward), disable)
    )
    state: dict[str, Any] = {"parts": [], "held": 0, "merged": 1 << 16, "row": shard << SHARD_BITS, "bad": 0}
    state["said"] = set()  # whether each piece with rows had a saved verdict
    reasons: list = [[] for _ in range(5)]  # the first unusable rows listed, per reason
    file_steps: set = set()

    def cells_of(chunk, verdict):
        """The chunk's cells, or None for a chunk the run's rules leave out."""
        rows = True if ruled is None else ruled.rows(chunk, threshold, state["row"])
        if rows is True:
            return chunk_cells(chunk, threshold, state["row"], verdict)
        if rows is None:
            return None
        cells = _reduce(rows)
        cells.keyed = {True}
        return cells

    def take(rd):
        if rd.verdicts and len(rd.verdicts) != len(rd.chunks):  # some pieces without the verdict column
            raise ReadWhole("LOG: a GroupTracker table whose verdict column is in some files only: read whole")
        for chunk, verdict in zip(rd.chunks, rd.verdicts or [None] * len(rd.chunks)):
            cells = cells_of(chunk, verdict)
            if cells is None:
                continue
            if chunk.hashes.size:
                state["said"].add(verdict is not None)
            room = [MAX_LISTED - len(found) for found in reasons]
            scored = np.isfinite(chunk.reward) | (chunk.prompt_ok & hooks.UNSCORABLE_IN_GROUP)
            for i, (count, listed) in enumerate(
                unusable_rows(rd, [chunk], _rows(chunk), scored, cols.get("group"), room)
            ):
                state["bad"] += count
                reasons[i].extend(listed)
            if chunk.file_step is not None and (chunk.hashes.size or chunk.unattributed_bad):
                file_steps.add(chunk.file_step)
            state["row"] += chunk.hashes.size
            state["parts"].append(cells)
            state["held"] += cells.size
        rd.chunks.clear()
        rd.verdicts.clear()
        bar.set_postfix_str(f"{state['row'] - (shard << SHARD_BITS):,} rows", refresh=False)  # a long file moves too
        if state["held"] > 2 * state["merged"]:
            runs = compact(state["parts"])
            held = sum(r.size for r in runs)
            state["parts"], state["held"], state["merged"] = runs, held, max(held, 1 << 16)

    with progress_bar(total=len(files), desc="counting logs", unit="file", disable=disable, leave=False) as bar:
        for path in files:
            read_file(path, reader, on_piece=take)
            bar.update(1)
    arranged = ruled.close() if ruled is not None else None
    runs = compact(state["parts"])
    meta = {
        "terms": reader.terms,
        "keyed": reader.keyed,
        "extra_outputs": reader.extra_outputs,
        "repeated_rows": reader.repeated_rows,
        "file_steps": file_steps,
        "listed": reader.bad_rows,  # lines that are not rows, found while reading
        "reasons": reasons,
        "said": state["said"],
    }
    if arranged is not None:
        meta["arranged"] = arranged
    return Partial(runs, reader.labels, reader.bad_count + state["bad"], meta)


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
    """Whether the format is read piece by piece rather than whole: it has no whole-run rules, or
    gives them file by file (``stream_arrange``).  Every format of gsd does."""
    hooks = hooks_of(TRAINER_HOOKS.get(fmt))
    return hooks.arrange is None or hooks.stream_arrange is not None


class Plan(NamedTuple):
    """What :func:`plan_run` decides of a run before its files are counted."""

    files: list  # the files to read, left-overs of other attempts left out
    fmt: str
    cols: dict  # the columns to read (Reader's)
    reward: Any
    warnings: list
    excluded: list  # steps left out as left-overs
    context: Any = None  # the RunContext of a format with stream_arrange (TRL), its state read
    declared: dict | None = None  # the description a table saved by gsd's GroupTracker carries


def plan(paths, options: LogOptions):
    """(files to read, format, columns, reward, warnings, steps left out): :func:`plan_run`'s first six."""
    return tuple(plan_run(paths, options))[:6]


def plan_run(paths, options: LogOptions) -> Plan:
    """The :class:`Plan` of a run: its files (left-overs of other attempts left out), format,
    columns, reward and warnings, as :func:`read_rollouts` decides them; :class:`ReadWhole` for a
    format that is not read piece by piece.  The context (a format with ``stream_arrange``: TRL)
    holds the run-state file read, its notes said first, as the whole-log reader says them; a
    table saved by gsd's GroupTracker brings its description (reward, group column, verdict
    column, threshold, how it was grouped)."""
    files, fmt, warnings, state_path, folders = discover_files(paths, options.fmt)
    module = TRAINER_HOOKS.get(fmt)
    reward, _, declared, cols = columns_to_read(
        module, fmt, files, reward=options.reward, group_col=options.group_col, group_size=None,
        prompt=options.prompt_col, step=options.step_col,
    )  # fmt: skip
    if not streams(fmt):
        raise ReadWhole(f"LOG: {fmt} logs are read whole (read_rollouts), not piece by piece")
    context = run_context(module, None, warnings, state_path) if hooks_of(module).stream_arrange else None
    if module is not None and folders and hooks_of(module).RUN_HISTORY:
        import os
        from types import SimpleNamespace

        from .discover import file_step

        stubs = [SimpleNamespace(file=f, mtime=os.stat(f).st_mtime, file_step=file_step(module, f)) for f in files]
        kept, excluded = run_history(stubs, warnings)
        return Plan([s.file for s in kept], fmt, cols, reward, warnings, excluded, context, declared)
    return Plan(files, fmt, cols, reward, warnings, [], context, declared)


def effective_threshold(threshold, declared):
    """The threshold counted with: the one given, else the one a GroupTracker table declares."""
    threshold = checked_threshold(threshold)
    return declared["threshold"] if threshold is None and declared else threshold


def count_rollouts(
    paths, *, threshold: float | None = None, progress: bool | None = None, groups=True, **options
) -> RunCounts:
    """The counts of a run's groups (:class:`RunCounts`), read piece by piece (peak memory grows
    with the groups and prompts, not the rollouts; the few logs of :class:`ReadWhole`: whole).

    ``options`` are :func:`read_rollouts`'s (:class:`gsd.diagnose.options.LogOptions`); ``threshold`` makes a reward ≥ it right (default:
    0/1 rewards, or two values, the higher one right; graded rewards without one leave ``k``
    NaN), as :func:`gsd.diagnose.diagnose_log` decides.  ``groups``: keep the group table (True),
    hand it to a callable one run of steps at a time, or drop it (False; the memory of a long run
    is then its cells'; see :func:`finish`).
    """
    try:
        partial, fmt, warnings, n_files = count_partial(paths, threshold=threshold, progress=progress, **options)
    except ReadWhole:
        return _counts_whole(paths, options, threshold, progress)
    return finish(partial, fmt, threshold, warnings, n_files=n_files, groups=groups)


def count_partial(paths, *, threshold=None, progress=None, **options) -> tuple[Partial, str, list, int]:
    """(the partial counts of a run read piece by piece in this process, its format, the reader's
    warnings, the files read): what :func:`finish` takes; ``options``: :func:`plan`'s."""
    run = plan_run(paths, LogOptions.take(options, "count_partial"))
    threshold = effective_threshold(threshold, run.declared)
    partial = count_files(run.files, run.fmt, run.cols, run.reward, threshold, progress=progress, context=run.context)
    partial.meta.update(excluded=run.excluded, declared=run.declared, threshold=threshold)
    return partial, run.fmt, run.warnings, len(run.files)


def checked_threshold(threshold):
    """``threshold`` as a float (None: none); inf or NaN is an InputError."""
    if threshold is None:
        return None
    try:
        value = float(threshold)
    except (TypeError, ValueError):
        value = float("nan")
    if not np.isfinite(value) or isinstance(threshold, bool):
        raise InputError(f"threshold must be a finite number, got {threshold!r}")
    return threshold


def _counts_whole(paths, options: dict, threshold, progress) -> RunCounts:
    """A log of :class:`ReadWhole`: the whole log read, then its group table."""
    from .assemble import read_rollouts
    from .posteriors import group_columns
    from .tables import right_answers

    log = read_rollouts(paths, progress=progress, **options)
    right, note = right_answers(log, threshold if threshold is not None else log.threshold)
    g = group_columns(log, right)
    groups = {c: g[c] for c in ("step", "prompt", "G", "generated", "n", "k", "silent", "binary_silent")}
    graded = right is None
    weights = (groups["G"] >= 0, groups["n"], np.nan_to_num(groups["k"], nan=0.0) if graded else groups["k"])
    totals = np.stack([np.bincount(groups["prompt"], weights=w, minlength=log.hashes.size) for w in weights])
    if graded:
        totals[2] = np.nan
    return RunCounts(
        groups=groups,
        steps=_step_table(_step_sums(groups), graded),
        prompts=_prompt_table(totals, graded),
        labels=log.labels,
        hashes=log.hashes,
        incomplete_groups=log.incomplete_groups,
        incomplete_rollouts=log.incomplete_rollouts,
        bad_count=log.bad_count,
        right_rule=note,
        warnings=list(log.warnings),
    )


def finish(partial: Partial, fmt: str, threshold=None, warnings=None, *, n_files: int = 0, groups=True) -> RunCounts:
    """The run's counts from its partial counts, as the whole-log reader and
    :func:`gsd.diagnose.diagnose_log` decide them: groups that lost a row (or a row of their
    prompt without a group key, or a malformed line placed in them) left out whole; the group's
    prompt is that of its first row; right/wrong by :func:`gsd.diagnose.tables.binarise`'s rule;
    silence by the trainer's rule on the group's reward range.

    One run of steps at a time: the group table of a run is made, summed into its steps and its
    prompts' totals, and handed to ``groups`` (True: kept in :attr:`RunCounts.groups`; a
    callable: called with each run's table, in step order, e.g. a file writer; False: dropped),
    so that the memory beyond the cells is one run's."""
    warnings = list(warnings or [])
    threshold = threshold if threshold is not None else partial.meta.get("threshold")
    _drop_partial_verdicts(partial)
    runs = partial.runs
    if set().union(*(r.keyed for r in runs)) == {True, False}:
        raise InputError(
            "LOG: some files carry a group key and others do not (files of two trainers or versions "
            "in one folder?): name the files of one run"
        )
    kept, uniq, rule, note = _rule(partial, threshold, warnings, n_files)
    # The groups a whole-run rule left out as short (AReaL's tasks below the usual size) are incomplete too.
    short = partial.meta.get("arranged", {}).get("context") or RunContext(None, False, [])
    sums, totals, kept_groups, mixed = [], np.zeros((3, uniq.size)), [], 0
    for table, extra in _tables(runs, kept, uniq, rule, fmt):
        mixed += extra
        sums.append(_step_sums(table))
        for row, column in enumerate(("G", "n", "k")):
            w = table["G"] >= 0 if column == "G" else table[column]
            totals[row] += np.bincount(table["prompt"], weights=w, minlength=uniq.size)
        if groups is True:
            kept_groups.append(table)
        elif callable(groups):
            groups(table)
    steps = {c: np.concatenate([x[c] for x in sums]) for c in sums[0]}
    labels = np.array([partial.labels[int(h)] for h in uniq.tolist()], dtype=object)
    group_table = {c: np.concatenate([t[c] for t in kept_groups]) for c in kept_groups[0]} if kept_groups else None
    return RunCounts(
        groups=group_table,
        steps=_step_table(steps, rule[0] == "graded"),
        prompts=_prompt_table(totals, rule[0] == "graded"),
        labels=labels,
        hashes=uniq,
        incomplete_groups=sum(g for _, g, _ in kept) + short.short_groups,
        incomplete_rollouts=sum(r for _, _, r in kept) + short.short_rollouts,
        bad_count=partial.bad_count,
        right_rule=note,
        warnings=warnings,
        mixed=mixed,
        meta=partial.meta,
        graded=rule[0] == "graded",
        unscored=_kept_sum(runs, kept, "unscored"),
        padded=_kept_sum(runs, kept, "pad"),
    )


def _drop_partial_verdicts(partial: Partial) -> None:
    """A verdict saved in some pieces only (``meta["said"]`` holds both): none is used, as the
    whole-log reader uses none; the cells' block fields dropped in place (a table's are 0, 0)."""
    if len(partial.meta.get("said", ())) > 1:
        for run in partial.runs:
            run.unscored = run.pad = run.verdict = None


def _kept_sum(runs, kept, name: str) -> int:
    """The sum of a block field (``unscored``, ``pad``) over the kept cells (0 without blocks)."""
    return sum(int(getattr(r, name)[k].sum()) for r, (k, _, _) in zip(runs, kept) if getattr(r, name) is not None)


def _rule(partial: Partial, threshold, warnings, n_files: int):
    """(per run: its kept cells, groups and rollouts left out; the prompts' hashes, sorted; the
    right/wrong rule and its note) of a run's partial counts."""
    kept = [_kept(run, warnings) for run in partial.runs]
    if not any(k.any() for k, _, _ in kept):
        listed = listed_bad_rows(partial.meta)
        detail = f"; first unusable row: {listed[0]}" if listed else ""
        raise InputError(f"LOG: no usable rollout in {n_files} file(s){detail}")
    runs = partial.runs
    uniq = np.unique(np.concatenate([np.unique(r.hash[k]) for r, (k, _, _) in zip(runs, kept)]))
    scored = [k & (r.rows > 0) for r, (k, _, _) in zip(runs, kept)]  # a block may hold no finite reward
    # Each run's distinct values first: the transient is one run's, not 32 B per cell of the whole log.
    values = np.unique(np.concatenate([np.unique(np.r_[r.lo[k], r.hi[k]]) for r, k in zip(runs, scored)]))
    unscored = _kept_sum(runs, kept, "unscored") - _kept_sum(runs, kept, "pad")
    mid = any(r.mid[k].any() for r, k in zip(runs, scored))
    rule, note = _right_rule(values, mid, threshold, unscored)
    return kept, uniq, rule, note


def listed_bad_rows(meta: dict) -> list:
    """The first :data:`MAX_LISTED` unusable rows a reader saw (``Partial.meta``), in the whole-log
    reader's order: the lines that are not rows, then the rows by reason."""
    return (list(meta.get("listed", ())) + [b for found in meta.get("reasons", ()) for b in found])[:MAX_LISTED]


#: Groups a table handed on holds at least (but its last): runs of steps are joined up to it, so that
#: a log of many small step files (one run each) is predicted in batches, not one file at a time.
TABLE_GROUPS = 1 << 16


def _tables(runs, kept, uniq, rule, fmt: str):
    """The runs' group tables (:func:`_run_groups`), consecutive runs joined up to
    :data:`TABLE_GROUPS` groups (their steps are disjoint and in order, so the joined table is in
    step order too), and their extra prompt-groups, in step order."""
    held: list = []
    extra = 0
    for run, (keep, _, _) in zip(runs, kept):
        if keep.any():
            table, mixed = _run_groups(run, keep, uniq, rule, fmt)
            held.append(table)
            extra += mixed
            if sum(t["step"].size for t in held) >= TABLE_GROUPS:
                yield _joined(held), extra
                held, extra = [], 0
    if held:
        yield _joined(held), extra


def _joined(tables: list) -> dict:
    return tables[0] if len(tables) == 1 else {c: np.concatenate([t[c] for t in tables]) for c in tables[0]}


def group_tables(partial: Partial, fmt: str, threshold=None):
    """The group table of a run's partial counts, one run of steps at a time in step order (what
    :func:`finish` makes and sums): the memory beyond the cells is one run's table."""
    threshold = threshold if threshold is not None else partial.meta.get("threshold")
    _drop_partial_verdicts(partial)
    kept, uniq, rule, _ = _rule(partial, threshold, [], 0)
    for table, _ in _tables(partial.runs, kept, uniq, rule, fmt):
        yield table


def _kept(run: Cells, warnings) -> tuple[np.ndarray, int, int]:
    """(which cells of a run are kept, the groups left out as incomplete, their usable rows)."""
    gcode, n_groups = pair_codes(run.step, run.gkey)
    dropped = np.zeros(n_groups, bool)
    np.logical_or.at(dropped, gcode, run.lost)
    orphaned = _in_orphans(run) & (run.rows > 0)
    _place_unreadable(run, gcode, n_groups, dropped[gcode] | orphaned, dropped, warnings)
    lost = dropped[gcode] | orphaned
    incomplete = int((dropped | _any_of(gcode, n_groups, orphaned)).sum())
    size = run.sizes()
    return ~lost & (size > 0), incomplete, int(size[lost].sum())


def _run_groups(run: Cells, keep, uniq, rule, fmt: str) -> tuple[dict, Any]:
    """The group table of one run's kept cells, sorted by step then prompt (its first row's), with
    each group's key (``gkey``); the extra prompt-groups (groups that hold several prompts)."""
    c = {name: v[keep] for name, v in run.arrays().items()}
    group, _ = pair_codes(c["step"], c["gkey"])
    g = _reduce({**c, "gkey": group, "hash": np.zeros(group.size, np.int64)})  # one entry per group
    size = g.sizes()
    by_first = np.lexsort((c["first"], group))
    prompt = np.searchsorted(uniq, c["hash"][by_first][np.r_[True, np.diff(group[by_first]) != 0]])
    kind, top = rule
    if kind == "threshold":
        k = g.above
    elif kind == "top":
        k = np.where(g.hi == top, g.top, 0)
    else:
        k = np.full(g.size, np.nan)
    silent = (size >= 2) & (_silent(fmt, g) if g.verdict is None else g.verdict > 0)
    binary = kind != "graded"
    table = {
        "step": g.step,
        "gkey": g.gkey,
        "prompt": prompt,
        "G": size,
        "generated": size if g.pad is None else size - g.pad,
        "n": g.rows,
        "k": k.astype(np.int64) if binary else k,
        "silent": silent,
        "binary_silent": (g.rows >= 2) & ((k == 0) | (k == g.rows)) if binary else silent,
    }
    order = np.lexsort((prompt, g.step))  # by step, then prompt; stable
    table["gkey"] = c["gkey"][by_first][np.r_[True, np.diff(group[by_first]) != 0]]  # the trainer's key
    mixed = pair_codes(group, c["hash"])[1] - g.size
    return {name: v[order] for name, v in table.items()}, mixed


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


def _right_rule(values, mid: bool, threshold, unscored: int = 0):
    """((kind, top value), note): how right answers are counted, by :func:`binarise`'s rule on the
    kept rewards' distinct values (``values``, their ranges' ends; ``mid``: a value inside a
    range; ``unscored``: the rows kept without a finite reward that are not padding):
    ``threshold``; ``top`` (0/1 rewards: the 1s; two values: the higher); ``graded``."""
    from .tables import binarise

    if threshold is not None:
        return ("threshold", None), binarise(np.zeros(0), threshold, unscored=unscored)[1]
    if mid or values.size > 2:
        shown = ", ".join(f"{v:g}" for v in values[:5])
        return ("graded", None), (
            f"rewards are graded (more than two distinct values: {shown}, ...): the measured figures are "
            "given; predictions and posteriors need --threshold T (reward >= T counts as right)"
        )
    _, note = binarise(values, unscored=unscored)
    return ("top", 1.0 if np.all(np.isin(values, (0.0, 1.0))) else values.max()), note


def _silent(fmt: str, g: Cells) -> np.ndarray:
    """Every reward of the group equal, by the trainer's rule (verl: equal in float32) on the
    group's smallest and largest reward, else :func:`silent_groups`'s."""
    zero_std = hooks_of(TRAINER_HOOKS.get(fmt)).zero_std
    if zero_std is None:
        return silent_groups(g.hi, g.lo)
    ids = np.arange(g.size)
    return zero_std(np.r_[g.lo, g.hi], np.r_[ids, ids], g.size)


def _step_sums(groups: dict) -> dict:
    """Per step of a group table: its groups (two rows or more), singletons, rollouts, silent
    groups, all-wrong and all-right silent groups, wasted rollouts."""
    multi = groups["G"] >= 2
    silent = groups["silent"].astype(bool)
    made = groups["generated"]
    k = np.nan_to_num(groups["k"], nan=-1) if groups["k"].dtype.kind == "f" else groups["k"]
    step, s = group_sums(
        groups["step"],
        {
            "groups": multi,
            "singletons": ~multi,
            "rollouts": made,
            "silent_groups": silent,
            "all_wrong": silent & (k == 0),
            "all_right": silent & (k == groups["n"]),
            "wasted_rollouts": np.where(silent, made, 0),
        },
    )
    return {"step": step, **s}


def _step_table(steps: dict, graded: bool) -> dict:
    """The step sums with the silent fraction (NaN for a step without a group of two); graded
    rewards without a threshold have no all-wrong / all-right counts (NaN)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        steps["silent_frac"] = steps["silent_groups"] / np.where(steps["groups"] > 0, steps["groups"], np.nan)
    if graded:
        steps["all_wrong"] = steps["all_right"] = np.full(steps["step"].size, np.nan)
    return steps


def _prompt_table(totals, graded: bool) -> dict:
    """Per prompt that is the first row's of some group: its groups, rollouts and right answers."""
    has = totals[0] > 0
    out = {"prompt": np.flatnonzero(has), "groups": totals[0][has].round().astype(np.int64)}
    out["n"] = totals[1][has].round().astype(np.int64)
    out["k"] = totals[2][has] if graded else totals[2][has].round().astype(np.int64)
    return out
