"""The counts of a log whose groups are blocks of consecutive rows (TRL's completions files), read
one file at a time: memory that grows with the groups, not the rollouts; and the first pass of a
format whose whole-run rule needs it (TRL's group size, AReaL's usual task size).

TRL writes one generation per file and a group is a block of ``num_generations`` rows of it, so
every rule on a group is one file's: whether it lost a row, its rows kept without a finite reward
(every reward function returned None: TRL keeps them in the group, out of its mean and std), a
padding trainer's rows, TRL's float32 zero-std verdict, the fit of its logged advantages.  Each
file is reduced to its groups' cells (:class:`gsd.diagnose.counts.Cells`, with the block fields)
as it is read and dropped.  The whole-run rules (:func:`gsd.integrations.trl.arrange`) are applied
file by file by the format's ``stream_arrange`` object: files beyond the final state or of an
evaluation step are known by their step, a repeated generation by the previous file's digest,
and ``num_generations``, when not given, by a first pass over the prompt column alone
(:func:`survey`), which leaves one integer per file.
"""

from __future__ import annotations

import numpy as np

from ..integrations.columns import pair_codes
from ..validation import InputError
from .assemble import in_pairs
from .discover import file_step, hooks_of
from .load import read_parquet
from .parse import read_file
from .posteriors import step_std

__all__ = ["survey", "block_cells", "Arranged", "ReadWhole"]


class ReadWhole(InputError):
    """A log that is not read piece by piece (see :mod:`gsd.diagnose.counts` for the cases left)."""


class Arranged:
    """A run's whole-run rules applied piece by piece for :func:`gsd.diagnose.counts.count_files`:
    the format's ``stream_arrange`` object (``context``: the run's
    :class:`~gsd.integrations.contract.RunContext`), its first pass run at once (:func:`survey`;
    ``disable``: its progress bar's), then each chunk handed to :meth:`rows` in file order and
    :meth:`close` at the end."""

    def __init__(self, hooks, context, files, reader, disable=None):
        self.hooks, self.context = hooks, context
        self.arrangement = hooks.stream_arrange(context)
        if context.group_size is None:
            survey(files, reader, self.arrangement, disable=disable)
        self.pads = bool(context.state and context.state.get("pads"))  # the run's trainer pads its blocks
        self.seen = False  # a chunk with rows was read (arrange runs only then)
        self.stds: list = []  # per kept file, its steps' reward std

    def rows(self, chunk, threshold, row0: int):
        """None: the chunk is left out; True: counted as any chunk is (its rows first cut where the
        rule cuts: AReaL's short tasks); else its blocks' rows of cells (:func:`block_cells`)."""
        self.seen |= bool(chunk.hashes.size)
        if not self.hooks.GROUP_SIZE:
            if chunk.hashes.size:
                self.arrangement.take(chunk)
            return True
        if not chunk.hashes.size or not self.arrangement.take(chunk):
            return None
        if self.pads and chunk.padding is None:  # the whole-log reader then counts no padding at all
            raise ReadWhole(f"{chunk.file}: no completion column in a padding trainer's run: read whole")
        rows, stds = block_cells(chunk, threshold, row0, self.hooks, self.arrangement, self.pads)
        self.stds.append(stds)
        return rows

    def close(self) -> dict:
        """The rules' warnings said (into the context's), and what the counted log takes from them:
        ``context``, ``advantage_check`` (the check, the groups whose verdicts disagree),
        ``pads``, ``step_std``."""
        if self.seen:
            self.arrangement.close()
        blocks = self.hooks.GROUP_SIZE
        out = {
            "context": self.context,
            "advantage_check": self.arrangement.advantage_check() if blocks else (None, 0),
            "pads": self.pads,
            "step_std": _step_stds(self.stds) if blocks else None,
        }
        check = out["advantage_check"][0]
        if check and check["scale"] == "batch" and out["step_std"] is None:
            raise ReadWhole("LOG: scale_rewards='batch' with a step in two files: its std needs every reward")
        return out


def _step_stds(parts) -> tuple | None:
    """The steps' reward stds of the files (each (steps, std)), sorted by step; None where a step
    is in two files (its std is not one file's)."""
    steps = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
    std = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0)
    order = np.argsort(steps, kind="stable")
    steps, std = steps[order], std[order]
    return None if np.any(np.diff(steps) == 0) else (steps, std)


def survey(files, reader, arrangement, *, disable=None) -> None:
    """The first pass of a format whose rule needs the whole run (``stream_arrange``): TRL's
    (``survey_prompts``) reads each file's prompt column alone (and the columns the trainer's row
    filter needs), its rows the trainer groups hashed; AReaL's (``survey_rows``) each parsed
    chunk.  Files left out by their step alone are not read.  A file without the prompt column is
    left to the counting pass, which names it.  ``disable``: the progress bar's (None: on a terminal)."""
    from ..io.progress import progress_bar

    files = progress_bar(files, desc="first pass over the logs", unit="file", disable=disable, leave=False)
    if not hasattr(arrangement, "survey_prompts"):
        for path in files:
            read_file(path, reader, on_piece=lambda rd: _survey_rows(rd, arrangement))
        return
    hooks = hooks_of(reader.module)
    prompt = reader.cols["prompt"]
    wanted = {prompt, *arrangement.SURVEY_COLUMNS}
    for path in files:
        if arrangement.fate(file_step(reader.module, path)) is not None:
            continue
        hashes = []
        for table, _, _ in read_parquet(path, lambda schema: [n for n in schema.names if n in wanted]):
            if table is None or prompt not in table.column_names:
                continue
            table, _ = hooks.prepare(table, None) if hooks.prepare is not None else (table, None)
            members = hooks.members(table)
            if members is not None:
                table = table.filter(np.asarray(members, bool))
            h, ok = reader.hash_prompts(table.column(prompt))
            hashes.append(h[ok])
        arrangement.survey_prompts(np.concatenate(hashes) if hashes else np.zeros(0, np.int64))


def _survey_rows(reader, arrangement) -> None:
    for chunk in reader.chunks:
        arrangement.survey_rows(chunk)
    reader.chunks.clear()
    reader.verdicts.clear()


NO_ROW = np.iinfo(np.int64).max  # "no usable row" as a first-row index, as the cells mark it


def block_cells(chunk, threshold, row0: int, hooks, arrangement, pads: bool) -> tuple[dict, tuple]:
    """(the rows of cells, reduced by the caller; its steps' reward std, :func:`step_std`) of one kept file (a chunk keyed by ``arrangement.take``), one per block and
    prompt (a usable block: one cell), with its rows kept without a reward, its padding rows
    (``pads``: the run's trainer pads) and TRL's zero-std verdict; its advantages checked
    (``arrangement.check``).  A row is usable with a prompt, a step and a whole block; a block
    with an unusable row is lost whole, as :func:`gsd.diagnose.assemble.read_rollouts` decides."""
    n = chunk.hashes.size
    steps, reward = chunk.steps, chunk.reward
    conflict = chunk.conflict if chunk.conflict is not None else np.zeros(n, bool)
    usable = chunk.prompt_ok & chunk.step_ok & chunk.gkey_ok & ~conflict
    scored = usable & np.isfinite(reward)
    pair = np.stack([steps, chunk.gkey])
    lost = chunk.step_ok & ~usable
    keep = usable & ~in_pairs(pair, np.unique(pair[:, lost], axis=1)) if lost.any() else usable
    group, n_groups = pair_codes(steps[keep], chunk.gkey[keep])
    silent = hooks.zero_std(reward[keep], group, n_groups)
    verdict = np.full(n, -1, np.int8)
    verdict[keep] = silent[group]
    advantage = None if chunk.advantage is None else chunk.advantage[keep]
    arrangement.check(reward[keep], advantage, group, n_groups, silent)
    stds = step_std(steps[keep], reward[keep])  # scale_rewards="batch": a step is one file's generation
    r = np.where(scored, reward, np.nan)
    padding = usable & chunk.padding if pads and chunk.padding is not None else np.zeros(n, bool)
    placed = chunk.step_ok
    rows = {
        "step": steps[placed],
        "gkey": chunk.gkey[placed],
        "hash": np.where(usable, chunk.hashes, 0)[placed],
        "rows": scored[placed].astype(np.int64),
        "lo": np.where(scored, r, np.inf)[placed],
        "hi": np.where(scored, r, -np.inf)[placed],
        "top": scored[placed].astype(np.int64),
        "above": (scored & (r >= threshold))[placed].astype(np.int64)
        if threshold is not None
        else np.zeros(int(placed.sum()), np.int64),
        "mid": np.zeros(int(placed.sum()), bool),
        "first": np.where(usable, row0 + np.arange(n, dtype=np.int64), NO_ROW)[placed],
        "lost": ~usable[placed],
        "unscored": (usable & ~scored)[placed].astype(np.int32),  # the narrow types of Cells.EXTRA
        "pad": padding[placed].astype(np.int32),
        "verdict": verdict[placed],
    }
    return rows, stds
