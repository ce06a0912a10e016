"""Read GRPO rollout logs into the trainer's groups: per rollout a prompt, a step, a group, a reward.

What each trainer writes, what a group and a silent group are for it, and its arithmetic live in
its own module of :mod:`gsd.integrations` (``trl``, ``verl``, ...); this reader knows no trainer by
name and asks the module of the format read (see the interface in :mod:`gsd.integrations`).
The format is the trainer's name, ``"table"`` — any CSV, parquet or JSONL file with a prompt-id,
a reward, optionally a step and a group column, named by the caller — or ``"auto"`` (from the
file names).

The reward is the one the trainer normalises (verl's ``score``, the sum of TRL's reward
columns), or a weighted sum named by ``reward`` (``"correct+0.5*fmt"``).  Only four numbers per
rollout are kept in memory (prompt hash, step, group, reward: 32 bytes), never the answer text.
A row that cannot be used is counted and reported with its file and line, and the group it
belonged to is *incomplete*: left out of the diagnosis and counted.  A run folder is read as one
run: files a resumed or an abandoned run left behind are detected and left out, with a warning.
"""

from __future__ import annotations

import glob as _glob
import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._validate import InputError
from ..arrow_arrays import from_numpy, text_array, to_numpy, valid
from ..integrations import TRAINERS, trainer_modules
from ..integrations._columns import pair_codes
from ..integrations.contract import TABLE, RunContext, TableHooks, resolve

__all__ = ["FORMATS", "RolloutLog", "BadRow", "read_rollouts", "find_log_files", "detect_format", "parse_reward"]

#: Formats understood by :func:`read_rollouts` (``"auto"`` guesses from the file names).
FORMATS = ("auto",) + TRAINERS + ("table",)

# {name: the trainer module's hooks}, each checked against the contract (gsd.integrations.contract).
_MODULES = {name: resolve(module) for name, module in trainer_modules().items()}
_TABLE_SUFFIXES = (".csv", ".parquet", ".jsonl", ".json")
_LABEL_CHARS = 80  # characters of each distinct prompt kept as its label
_MAX_LISTED = 1000  # bad rows listed one by one (all are counted)
_MAX_STEP = 2**53  # steps beyond this cannot be told apart once a table tool turns them into floats
# A later step's file older than an earlier one's by more than this was left by another attempt.
_MTIME_SLACK_S = 2.0


def _hooks(module) -> TableHooks:
    """A trainer's hooks, or a plain table's (every optional hook at its default)."""
    return TABLE if module is None else module


@dataclass(frozen=True)
class BadRow:
    """A row that could not be used: its file, 1-based line (or row) number and why."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass
class RolloutLog:
    """The rollouts of a run in complete groups: one entry per rollout in ``prompt``, ``step``,
    ``group`` and ``reward``.

    Attributes
    ----------
    prompt : ndarray of int64
        Dense prompt code, 0 … P − 1 (``labels[code]`` is the prompt, ``hashes[code]`` its hash).
    step : ndarray of int64
        Training step of the rollout (a generation counted once, at its first step).
    group : ndarray of int64
        Dense group code: the rollouts the trainer normalised together.
    reward : ndarray of float64
        The reward the trainer normalises (weighted sum for several columns), before any threshold.
    labels, hashes : ndarray
        Per prompt: its first 80 characters (a chat prompt: its last user message) and its hash.
    files : list of str
        Files read, in order (repeated generations and evaluation files included).
    fmt, reward_name : str
        The format read and the reward used (``"a + 0.5*b"``).
    group_by, silence : str
        How groups were formed; how silence is measured.
    group_size : int or None
        TRL's ``num_generations`` (given or inferred); None for verl and tables.
    repeated_steps, missing_steps, eval_steps : list of int
        Steps whose file repeats the previous generation; steps from 1 to the last one with no
        file; steps left out as evaluation (TRL with ``trainer_state.json``).
    incomplete_groups, incomplete_rollouts : int
        Groups that lost a row, left out, and their usable rollouts.
    trainer_silent : dict
        TRL's own ``frac_reward_zero_std`` per step, when ``trainer_state.json`` was found.
    silent : ndarray of bool or None
        Per group, the trainer's own verdict "every reward equal" (its dtype, summation and
        tolerance: the format module's ``zero_std``); None: the generic rule of
        :func:`silent_groups`.
    unscorable_rollouts : int
        Rows kept in their group without a finite reward (TRL: every reward function returned
        None; the trainer leaves them out of the group's mean and std and trains them with
        advantage 0).
    extra_outputs : int
        Outputs of multi-output sessions that are not the session's final one (verl V1): in the
        log, not in the group's statistics.
    padding : ndarray of bool or None
        Per row, True where the trainer padded the row in rather than generated it (trl-cgrpo's
        empty, reward-less rows); they stay in their block, out of the rollouts counted as
        generation and as wasted.  None: every row was generated.
    excluded_steps : list of int
        Steps whose file was left out as a left-over of another attempt or run.
    silent_observable : bool
        False when every group is live and the trainer filters silent groups before the dump:
        the generation's silent share is not in the log.
    advantage_check : dict or None
        The scaling the logged advantages show (TRL: ``{"scale": "group" | "batch" | "none" | None,
        ...}``).
    trainer : str or None
        The trainer whose convention the update follows when the format does not say it (a table
        saved by gsd's ``GroupTracker`` in a TRL run: ``"trl"``); None: the format's.
    threshold : float or None
        The threshold the log itself declares (a table saved by gsd's ``GroupTracker``):
        :func:`diagnose_log` uses it when given none.
    warnings : list of str
        What the reader could not undo, one line each.
    bad_rows : list of BadRow
        The first 1000 unusable rows; ``bad_count`` counts all of them.
    """

    prompt: np.ndarray
    step: np.ndarray
    reward: np.ndarray
    labels: np.ndarray
    hashes: np.ndarray
    files: list
    fmt: str
    reward_name: str
    group: np.ndarray | None = None
    group_by: str = "prompt"
    silence: str = ""
    group_size: int | None = None
    repeated_steps: list = field(default_factory=list)
    missing_steps: list = field(default_factory=list)
    eval_steps: list = field(default_factory=list)
    incomplete_groups: int = 0
    incomplete_rollouts: int = 0
    trainer_silent: dict = field(default_factory=dict)
    silent: np.ndarray | None = None
    unscorable_rollouts: int = 0
    extra_outputs: int = 0
    padding: np.ndarray | None = None
    excluded_steps: list = field(default_factory=list)
    silent_observable: bool = True
    advantage_check: dict | None = None
    trainer: str | None = None
    threshold: float | None = None
    warnings: list = field(default_factory=list)
    bad_rows: list = field(default_factory=list)
    bad_count: int = 0

    def __post_init__(self):
        if self.group is None:  # a log built by hand: one group per (step, prompt)
            self.group = pair_codes(self.step, self.prompt)[0]

    @property
    def rows(self) -> int:
        return int(self.prompt.size)


# --------------------------------------------------------------------------------------------
# Finding files


def _walk(folder: Path, hidden: bool = False) -> list[Path]:
    """The files under ``folder`` (hidden files skipped unless ``hidden``; symlinked folders not
    followed), or an InputError for an unreadable or huge tree."""

    def unreadable(exc):
        raise InputError(f"LOG: cannot read the folder {str(exc.filename)!r} ({exc.strerror})")

    files, seen = [], 0
    for root, dirs, names in os.walk(folder, onerror=unreadable):
        dirs[:] = [d for d in dirs if hidden or not d.startswith(".")]
        seen += len(dirs) + len(names)
        if seen > _MAX_FOLDER_ENTRIES:
            raise InputError(
                f"LOG: {str(folder)!r} holds more than {_MAX_FOLDER_ENTRIES:,} files and folders; "
                "name the log files or the run's log folder"
            )
        files.extend(Path(root, n) for n in names if hidden or not n.startswith("."))
    return [p for p in files if p.is_file()]


# A folder is searched recursively; beyond this many entries it is not a log folder (``/``, a home).
_MAX_FOLDER_ENTRIES = 200_000


def _glob_files(pattern: str) -> list[Path]:
    """The files a glob pattern matches, sorted.  A ``**`` pattern is matched over a walk that does
    not follow symlinked folders and stops at :data:`_MAX_FOLDER_ENTRIES` entries (Python's own
    recursive glob follows them, and a symlink loop makes it walk for ever); ``*`` and ``?`` do not
    match a leading dot, as in glob."""
    import fnmatch

    parts = Path(pattern).parts
    if "**" not in parts:
        return sorted(Path(m) for m in _glob.glob(pattern) if Path(m).is_file())
    first = next(i for i, part in enumerate(parts) if _glob.has_magic(part))
    root = Path(*parts[:first]) if first else Path(".")
    rules = [None if part == "**" else re.compile(fnmatch.translate(part)) for part in parts[first:]]
    hidden_ok = [part.startswith(".") for part in parts[first:]]

    def match(names, i=0) -> bool:
        if i == len(rules):
            return not names
        if rules[i] is None:  # ** : zero or more folders
            return match(names, i + 1) or (bool(names) and not names[0].startswith(".") and match(names[1:], i))
        return (
            bool(names)
            and (hidden_ok[i] or not names[0].startswith("."))
            and bool(rules[i].match(names[0]))
            and match(names[1:], i + 1)
        )

    if not root.is_dir():
        return []
    found = [p for p in _walk(root, hidden=True) if match(p.relative_to(root).parts)]
    return sorted(found)


def _format_of(path: Path):
    for name, module in _MODULES.items():
        if module.is_log_file(path):
            return name
    return None


def _files_in_folder(folder: Path, fmt: str, notes: list) -> list[Path]:
    """The log files of one run under ``folder``: one format, one dump folder."""
    files = _walk(folder)
    claims = [_format_of(p) for p in files]  # a file goes to the first trainer that claims it
    by_fmt = {name: [p for p, c in zip(files, claims) if c == name] for name in _MODULES}
    present = [name for name in _MODULES if by_fmt[name]]
    if fmt == "auto" and len(present) > 1:
        found = " and ".join(f"{_MODULES[n].FILE_DESCRIPTION} files ({len(by_fmt[n])})" for n in present)
        raise InputError(
            f"LOG: {str(folder)!r} holds {found}: pass --format "
            f"{' or --format '.join(present)}, or name the folder of one run"
        )
    if fmt in _MODULES and not by_fmt[fmt]:
        module = _MODULES[fmt]
        # A dump under names the trainer does not use: every file of its type (the rows give the step).
        loose = [p for p in files if p.suffix.lower() in module.SUFFIXES]
        if not loose and present:
            other = present[0]
            raise InputError(
                f"format {fmt}: no {module.FILE_DESCRIPTION} file in {folder}, but "
                f"{len(by_fmt[other])} {_MODULES[other].FILE_DESCRIPTION} file(s): use --format {other}"
            )
        by_fmt[fmt] = loose
    chosen = fmt if fmt in _MODULES else (present[0] if fmt == "auto" and present else None)
    if chosen is None:
        return [p for p in files if p.suffix.lower() in _TABLE_SUFFIXES]
    module = _MODULES[chosen]
    found = by_fmt[chosen]
    folder_of = _hooks(module).dump_folder
    parents = sorted({folder_of(p) for p in found})
    is_validation = _hooks(module).is_validation_folder
    if len(parents) > 1 and is_validation is not None:
        training = [d for d in parents if not is_validation(d)]
        left = [d for d in parents if is_validation(d)]
        if len(training) == 1 and left:
            notes.append(
                f"read the training dump {training[0]}; left out the validation dump(s) " + ", ".join(map(str, left))
            )
            parents = training
            found = [p for p in found if folder_of(p) == training[0]]
    if len(parents) > 1:
        raise InputError(
            f"LOG: {str(folder)!r} holds {module.FILE_DESCRIPTION} files in {len(parents)} "
            f"folders ({', '.join(map(str, parents[:4]))}{', ...' if len(parents) > 4 else ''}): "
            "name the folder of one run (files of several runs are never mixed)"
        )
    return found


def _discover(paths, fmt: str):
    """(files sorted by step, format, notes, run-state path or None, folders named)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    found: list[Path] = []
    notes: list[str] = []
    folders: list[Path] = []
    for raw in paths:
        text = str(raw)
        path = Path(text)
        if path.is_dir():
            found.extend(_files_in_folder(path, fmt, notes))
            folders.append(path)
        elif path.is_file():
            found.append(path)
        elif any(ch in text for ch in "*?["):
            matches = _glob_files(text)
            if not matches:
                raise InputError(f"LOG: the pattern {text!r} matches no file")
            found.extend(matches)
        elif path.exists():  # a FIFO, a socket, a device: reading it could block for ever
            raise InputError(f"LOG: {text!r} is not a regular file (a pipe, a socket or a device)")
        else:
            raise InputError(f"LOG: {text!r} is neither a file, a folder nor a glob pattern that matches")
    unique = list(dict.fromkeys(p.resolve() for p in found))
    if not unique:
        expected = ", ".join(m.FILE_DESCRIPTION for m in _MODULES.values())
        raise InputError(
            f"LOG: no rollout log file found in {', '.join(map(str, paths))} "
            f"(expected {expected} or a CSV/parquet/JSONL table)"
        )
    if fmt == "auto":
        fmt = detect_format(unique)
    module = _MODULES.get(fmt)
    if module is not None:
        wrong = next((p for p in unique if p.suffix.lower() not in module.SUFFIXES), None)
        if wrong is not None:
            raise InputError(f"format {fmt} reads {module.FILE_DESCRIPTION} files, got {wrong}")
        by_step: dict[int, Path] = {}
        for p in unique:
            s = module.step_of(p)
            if s is None:
                continue
            if s in by_step:
                raise InputError(
                    f"LOG: step {s} is in two files, {by_step[s]} and {p} (two runs, or a validation "
                    "dump beside the training one?): name the files of one run"
                )
            by_step[s] = p
        parents = sorted({_hooks(module).dump_folder(p) for p in unique})
        if len(parents) > 1:
            notes.append(f"files read from {len(parents)} folders: " + ", ".join(map(str, parents)))
    unique.sort(key=lambda p: (_file_step(module, p) is None, _file_step(module, p) or 0, str(p)))
    find_state = _hooks(module).find_state
    state = find_state(folders or sorted({p.parent for p in unique})) if find_state else None
    return unique, fmt, notes, state, folders


def _file_step(module, p: Path):
    """The step a file's name carries: the trainer's naming, else the number the name ends with."""
    if module is not None:
        return module.step_of(p)
    return _step_from_name(p)


def find_log_files(paths, fmt: str = "auto") -> list[Path]:
    """The log files named by ``paths`` (files, folders or glob patterns), sorted by step.

    A folder is searched recursively for ``completions_*.parquet`` (TRL), ``{step}.jsonl``
    (verl) or any table file, depending on ``fmt``; a folder holding both TRL and verl files,
    or one trainer's files in several folders (other than a verl validation dump beside the
    training one), is an error rather than a mix.
    """
    return _discover(paths, fmt)[0]


def _step_from_name(p: Path):
    m = re.search(r"(\d{1,18})$", p.stem)
    return int(m.group(1)) if m else None


def detect_format(files) -> str:
    """The trainer whose dump files these all are (``"trl"``: ``completions_*.parquet``,
    ``"verl"``: ``{step}.jsonl``, ...), else ``"table"``."""
    kinds = {_format_of(Path(f)) for f in files}
    return kinds.pop() if len(kinds) == 1 and None not in kinds else "table"


# --------------------------------------------------------------------------------------------
# The reward: a weighted sum of columns


_NUMBER = r"[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?"


def parse_reward(spec: str, columns) -> list[tuple[float, str]]:
    """``"correct+0.5*fmt-0.1*len"`` → ``[(1.0, "correct"), (0.5, "fmt"), (-0.1, "len")]``.

    Terms are joined by ``+`` or ``-``; each is ``name`` or ``coef*name``.  Names are matched
    against ``columns`` (the longest first, so a column whose name holds ``-`` is found).

    >>> parse_reward("correct+0.5*fmt", ["correct", "fmt", "step"])
    [(1.0, 'correct'), (0.5, 'fmt')]
    >>> parse_reward("acc-v2", ["acc-v2", "acc"])
    [(1.0, 'acc-v2')]
    """
    text = str(spec).strip()
    if not text:
        raise InputError("reward: an empty reward expression")
    if text in columns:
        return [(1.0, text)]
    names = sorted(map(str, columns), key=len, reverse=True)
    terms, i = [], 0
    while i < len(text):
        m = re.compile(r"\s*([+-])?\s*(?:(" + _NUMBER + r")\s*\*\s*)?").match(text, i)
        sign, coef = m.group(1), m.group(2)
        if sign is None and terms:
            break
        j = m.end()
        name = next(
            (n for n in names if text.startswith(n, j) and re.match(r"\s*(?:[+-]|$)", text[j + len(n) :])), None
        )
        if name is None:
            rest = re.match(r"[^+\-]*", text[j:]).group(0).strip()
            where = "" if rest == text else f" (in --reward-column {spec!r})"
            raise InputError(f"reward column {rest!r} not found{where}; columns: {', '.join(map(str, columns))}")
        value = (float(coef) if coef else 1.0) * (-1.0 if sign == "-" else 1.0)
        if not math.isfinite(value):
            raise InputError(f"reward: coefficient {coef!r} of {spec!r} is not a finite number")
        terms.append((value, name))
        i = j + len(name)
    if i < len(text):
        raise InputError(
            f"reward: cannot read {spec!r} after {text[:i]!r} (terms are name or coef*name, joined by + or -)"
        )
    return terms


def reward_text(terms) -> str:
    """``[(1, "a"), (0.5, "b")]`` → ``"a + 0.5*b"``."""
    parts = []
    for c, name in terms:
        term = name if abs(c) == 1 else f"{abs(c):g}*{name}"
        parts.append((f"-{term}" if c < 0 else term) if not parts else f"{'-' if c < 0 else '+'} {term}")
    return " ".join(parts)


_reward_text = reward_text  # the name other branches import


# --------------------------------------------------------------------------------------------
# One file → a chunk


@dataclass
class _Chunk:
    """Every row of one file, usable or not, in file order."""

    file: Path
    hashes: np.ndarray  # int64; 0 where the prompt is missing
    prompt_ok: np.ndarray
    steps: np.ndarray  # int64
    step_ok: np.ndarray
    reward: np.ndarray  # float64, NaN where unusable
    gkey: np.ndarray | None  # int64 key of the row's group within its step
    gkey_ok: np.ndarray | None
    lines: np.ndarray | None  # 1-based line numbers (None: the non-blank lines of a JSONL file, in order)
    advantage: np.ndarray | None = None
    fingerprint: str | None = None
    unattributed_bad: int = 0  # lines that are not rows at all (malformed JSON, CSV): their group is unknown
    file_step: int | None = None  # the step the file's name carries, else its rows' first step
    mtime: float = 0.0
    conflict: np.ndarray | None = None  # rows whose trainer key is written twice with different rewards
    padding: np.ndarray | None = None  # rows a padding trainer would have padded in (not generated)

    def line_numbers(self) -> np.ndarray:
        if self.lines is None:
            self.lines = _nonblank_lines(self.file)
        return self.lines


class _Reader:
    """Reads the files of one run, one at a time, keeping labels, reward columns and bad rows."""

    def __init__(self, fmt, cols, reward):
        self.fmt, self.cols, self.reward_spec = fmt, cols, reward
        self.module = _MODULES.get(fmt)
        self.terms = None  # [(coef, column)] once the first file's columns are known
        self.labels: dict[int, str] = {}
        self.bad_rows: list[BadRow] = []
        self.bad_count = 0
        self.chunks: list[_Chunk] = []
        self.extra_outputs = 0
        self.repeated_rows = 0  # rows whose trainer key and reward repeat an earlier row's: counted once
        self.keyed = False  # the trainer's own group keys were used
        self.verdicts: list = []  # per chunk, a saved per-row zero-std verdict (gsd's tracker table)
        self.pads = False  # the run's trainer pads its groups with rows it did not generate (trl-cgrpo)

    def bad(self, file, line, reason):
        self.bad_count += 1
        if len(self.bad_rows) < _MAX_LISTED:
            self.bad_rows.append(BadRow(str(file), int(line), reason))

    # -- the reward columns

    def _terms(self, columns, dtypes, path):
        import pyarrow as pa

        if self.reward_spec:
            try:
                return parse_reward(self.reward_spec, columns)
            except InputError as exc:
                raise InputError(f"{path}: {exc}") from None
        if self.module is None:
            if "reward" in columns:  # a table's column named reward is the reward (as gsd plan takes it)
                return [(1.0, "reward")]
            raise InputError(f"{path}: name the reward column with --reward-column (columns: {', '.join(columns)})")
        numeric = {c for c in columns if _is_number_type(dtypes.get(c), pa)}
        try:
            return self.module.default_reward(columns, numeric)
        except InputError as exc:
            raise InputError(f"{path}: {exc}") from None

    # -- one table of rows

    def add(self, path, table, lines, *, extra_bad=0):
        module = self.module
        prepare = _hooks(module).prepare
        if prepare is not None:
            table, lines = prepare(table, lines)
        members = _hooks(module).members(table)
        if members is not None and not members.all():
            self.extra_outputs += int((~members).sum())
            lines = (np.arange(1, table.num_rows + 1) if lines is None else lines)[members]
            table = table.filter(from_numpy(np.asarray(members, bool)))
        columns = table.column_names
        twice = sorted({c for c in columns if columns.count(c) > 1})
        if twice:
            raise InputError(
                f"{path}: the column name {twice[0]!r} is used by {columns.count(twice[0])} columns; "
                "rename them so that each column has one name"
            )
        dtypes = {name: table.schema.field(name).type for name in columns}
        pcol = self.cols["prompt"]
        if pcol not in columns:
            hint = " (name it with --prompt-column)" if module is None else ""
            if module is not None and self.cols["prompt"] == module.PROMPT_COL:  # --format names another trainer?
                other = sorted(
                    (
                        n
                        for n, m in _MODULES.items()
                        if m is not module
                        and m.PROMPT_COL in columns
                        and path.suffix.lower() in m.SUFFIXES
                        and _takes_reward(m, columns)
                    ),
                    key=lambda n: not _MODULES[n].is_log_file(path),
                )  # the one that names such files
                if other:
                    raise InputError(
                        f"{path}: --format {self.fmt}: no {pcol!r} column (columns: "
                        f"{', '.join(columns)}): its rows are {other[0]}'s: use --format {other[0]}"
                    )
            raise InputError(f"{path}: no prompt column {pcol!r}; columns: {', '.join(columns)}{hint}")
        if self.terms is None:
            self.terms = self._terms(columns, dtypes, path)
        missing = [name for _, name in self.terms if name not in columns]
        if missing:
            raise InputError(f"{path}: reward column {missing[0]!r} not found; columns: {', '.join(columns)}")
        parts = np.stack([_numeric(table.column(name), name, path) for _, name in self.terms])
        coefs = np.array([c for c, _ in self.terms])
        total = _hooks(module).total_reward or _total_reward
        reward = total(parts, coefs)
        overflow = np.isinf(reward) & np.isfinite(parts).all(axis=0)
        if overflow.any() and module is None:  # a trainer's own arithmetic overflows as the trainer's does
            raise InputError(
                f"{path}: the reward {_reward_text(self.terms)!r} overflows (its weighted sum is infinite "
                f"on {int(overflow.sum())} row(s) whose terms are finite): rescale the reward columns"
            )
        conflict = None
        row_keys = _hooks(module).row_keys(table)
        if row_keys is not None:  # a key written twice: once if the rewards agree, a contradiction if not
            keep, conflict = repeated_keys(row_keys, reward)
            if not keep.all():
                self.repeated_rows += int((~keep).sum())
                lines = (_nonblank_lines(path) if lines is None else lines)[keep]
                table, reward, conflict = table.filter(from_numpy(keep)), reward[keep], conflict[keep]
                parts = parts[:, keep]
        n = table.num_rows
        scol = self.cols["step"]
        from_name = _file_step(module, path)
        if scol and scol in columns:
            steps, step_ok = _integers(table.column(scol))
        else:
            if scol and module is None and self.cols.get("step_required"):
                raise InputError(f"{path}: no step column {scol!r}; columns: {', '.join(columns)}")
            steps, step_ok = np.full(n, from_name if from_name is not None else 0, np.int64), np.ones(n, bool)
        hashes, prompt_ok = self._hash_prompts(table.column(pcol))
        gkey = gkey_ok = None
        gcol = self.cols.get("group")
        if gcol:
            if gcol not in columns:
                raise InputError(f"{path}: no group column {gcol!r}; columns: {', '.join(columns)}")
            own = _hooks(module).group_column(table, gcol)
            gkey, gkey_ok = own if own is not None else _hash_values(table.column(gcol))
        else:
            keys = _hooks(module).group_keys(table)
            if keys is not None:
                gkey, gkey_ok = keys
                self.keyed = True
        if self.cols.get("silent") in columns:  # the trainer's own verdict, saved beside the rows
            self.verdicts.append(_numeric(table.column(self.cols["silent"]), self.cols["silent"], path))
        advantage = None
        if _hooks(module).check_advantages is not None and "advantage" in columns:
            advantage = _numeric(table.column("advantage"), "advantage", path)
        fingerprint = _hooks(module).fingerprint(table)
        first_step = from_name if from_name is not None else (int(steps[step_ok][0]) if step_ok.any() else 0)
        pad = _hooks(module).padding_rows
        padding = pad(table, parts) if pad is not None else None
        self.chunks.append(
            _Chunk(
                path,
                hashes,
                prompt_ok,
                steps,
                step_ok,
                reward,
                gkey,
                gkey_ok,
                lines,
                advantage,
                fingerprint,
                extra_bad,
                first_step,
                _mtime(path),
                conflict=conflict,
                padding=padding,
            )
        )

    def _hash_prompts(self, arr):
        """64-bit hashes of the prompts (each distinct one hashed once) and which rows have one."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from ..hashing import hash_text
        from ..integrations._columns import chat_label

        strings, structured = _as_string_array(arr)
        ok = valid(strings)
        enc = pc.dictionary_encode(strings)
        if isinstance(enc, pa.ChunkedArray):
            enc = enc.combine_chunks()
        uniq = to_numpy(enc.dictionary)
        h = hash_text(enc.dictionary)
        for hv, text in zip(h.tolist(), uniq.tolist()):
            if hv not in self.labels:
                self.labels[hv] = (chat_label(json.loads(text)) if structured else text)[:_LABEL_CHARS]
        idx = to_numpy(enc.indices, fill=0) if len(enc) else np.zeros(0, np.int64)
        hashes = h[idx] if h.size else np.zeros(len(idx), np.int64)
        return np.where(ok, hashes, 0).astype(np.int64), ok


def _total_reward(parts, coefs):
    """A table's reward: the weighted sum in float64; a term with no value counts as 0 unless
    every term is missing."""
    coefs = np.asarray(coefs, np.float64)[:, None]
    if parts.shape[0] == 1:
        return parts[0] * coefs[0]
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(np.isnan(parts).all(axis=0), np.nan, np.nansum(parts * coefs, axis=0))


def _mtime(path) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _as_string_array(arr):
    """(prompts as a pyarrow string array, whether they were structured); chat prompts (lists of
    {role, content}) become their JSON, so that equal conversations hash equal."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        return arr, False
    if pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type) or pa.types.is_dictionary(arr.type):
        return arr.cast(pa.string()), False
    values = arr.to_pylist()
    structured = any(isinstance(v, (list, dict)) for v in values)
    return text_array(
        [
            None if v is None else (json.dumps(v, sort_keys=True, ensure_ascii=False) if structured else str(v))
            for v in values
        ]
    ), structured


def _hash_values(arr):
    """64-bit hashes of a group-id column's values (as text) and which rows have one."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..hashing import hash_text

    strings, _ = _as_string_array(arr)
    ok = valid(strings)
    h = np.zeros(len(strings), np.int64)
    if ok.any():
        enc = pc.dictionary_encode(strings.filter(from_numpy(ok)))  # each value hashed once
        h[ok] = hash_text(enc.dictionary)[to_numpy(enc.indices)]
    return h, ok


def _numeric(arr, name, file):
    """A pyarrow column as float64 with NaN for missing or non-numeric entries; the strings
    ``"True"``/``"False"`` (verl's dump of numpy booleans) read as 1/0."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return to_numpy(arr.cast(pa.float64(), safe=False), fill=np.nan).astype(np.float64)
    if pa.types.is_null(t):
        return np.full(len(arr), np.nan)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        import pyarrow.compute as pc

        from ..integrations._columns import text_to_numbers

        out = text_to_numbers(arr)
        for text, value in _BOOL_STRINGS.items():
            out[to_numpy(pc.is_in(arr, value_set=text_array([text])), fill=False)] = value
        return out
    raise InputError(f"{file}: column {name!r} holds {t}, not numbers")


# Booleans written as text (verl dumps numpy booleans as "True"/"False").
_BOOL_STRINGS = {"True": 1.0, "False": 0.0, "true": 1.0, "false": 0.0}


def _integers(arr):
    """A step column as int64 and a mask of the rows that hold an exact integer (never through
    float64 for integer columns; a float or text step must be integral and below 2^53)."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    present = valid(arr)
    if pa.types.is_integer(t):
        if pa.types.is_uint64(t):
            raw = to_numpy(arr, fill=0)
            ok = present & (raw < 2**63)
            return np.where(ok, raw, 0).astype(np.int64), ok
        return to_numpy(arr.cast(pa.int64()), fill=0).astype(np.int64), present
    if pa.types.is_string(t) or pa.types.is_large_string(t):  # a CSV's steps: text read as exact integers
        import pyarrow.compute as pc

        # pandas writes integer steps of a float column as "1.0": a zero fraction is the same integer.
        text = pc.replace_substring_regex(pc.utf8_trim_whitespace(arr), r"\.0*$", "")
        ok = to_numpy(pc.match_substring_regex(text, r"^[-+]?[0-9]{1,18}$"), fill=False)  # 18 digits fit int64
        out = np.zeros(len(arr), np.int64)
        if ok.any():
            out[ok] = to_numpy(pc.cast(text.filter(from_numpy(ok)), pa.int64()))
        # 19 digits: read as uint64 (never overflows), kept below 2^63 (what int64 holds)
        long = to_numpy(pc.match_substring_regex(text, r"^\+?[0-9]{19}$"), fill=False)
        if long.any():
            big = to_numpy(pc.cast(pc.replace_substring(text.filter(from_numpy(long)), "+", ""), pa.uint64()))
            fits = big < np.uint64(2**63)
            idx = np.flatnonzero(long)[fits]
            out[idx], ok[idx] = big[fits].astype(np.int64), True
        return out, ok
    f = _numeric(arr, "step", "")
    ok = np.isfinite(f) & (f == np.round(f)) & (np.abs(f) < _MAX_STEP)
    return np.where(ok, f, 0).astype(np.int64), ok


def _takes_reward(module, columns) -> bool:
    """Whether a trainer finds its default reward among ``columns`` (what --format would read)."""
    try:
        module.default_reward(list(columns), set(columns))
    except InputError:
        return False
    return True


def repeated_keys(keys, reward):
    """(keep, conflict) for rows with a trainer's per-output key (int64 codes, -1 where none):
    of rows that share a key and a reward (NaN equal to NaN), the first is kept; rows that share
    a key with different rewards are all kept and flagged as a contradiction (which is right is
    unknown, so their group is left out whole)."""
    keys = np.asarray(keys, np.int64)
    keep = np.ones(keys.size, bool)
    conflict = np.zeros(keys.size, bool)
    has = keys >= 0
    if not has.any():
        return keep, conflict
    uniq, first, inv, count = np.unique(keys[has], return_index=True, return_inverse=True, return_counts=True)
    if (count == 1).all():
        return keep, conflict
    r = np.where(np.isnan(reward[has]), np.inf, reward[has])  # NaN as one value of its own
    top = np.full(uniq.size, -np.inf)
    bottom = np.full(uniq.size, np.inf)
    np.maximum.at(top, inv, r)
    np.minimum.at(bottom, inv, r)
    differ = (top != bottom)[inv]
    idx = np.flatnonzero(has)
    conflict[idx[differ]] = True
    keep[idx[~differ & (np.arange(idx.size) != first[inv])]] = False
    return keep, conflict


def _is_number_type(t, pa):
    return t is not None and (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t))


_CHUNK_ROWS = 1 << 20  # rows per piece of a parquet or CSV file (bounds the memory of a big table)


def _read_file(path: Path, reader: _Reader):
    """Read one file (any format), piece by piece, into the reader's chunks."""
    import pyarrow as pa

    from .._userinput import reading, refuse_binary

    suffix = path.suffix.lower()
    if suffix == ".parquet":
        pieces = _read_parquet(path, reader)
    elif suffix in (".jsonl", ".json"):
        pieces = _read_jsonl(path)
    elif suffix == ".csv":
        pieces = _read_csv(path)
    else:
        raise InputError(f"{path}: unknown file type {suffix!r} (expected .jsonl, .parquet or .csv)")
    if suffix != ".parquet":
        refuse_binary(path, "LOG")
    with reading(path, "LOG"):  # permission, a vanished file, an I/O error: one line naming the file
        try:
            for table, lines, bad in pieces:
                for line, why in bad:
                    reader.bad(path, line, why)
                if table is not None and table.num_rows:
                    reader.add(path, table, lines, extra_bad=len(bad))
                elif bad:
                    reader.chunks.append(_empty_chunk(path, len(bad)))
        except pa.ArrowException as exc:  # pyarrow's reader on bytes it cannot take
            raise InputError(f"LOG: cannot read {str(path)!r} ({str(exc).splitlines()[0][:200]})") from None


def _empty_chunk(path, bad):
    z = np.zeros(0, np.int64)
    return _Chunk(path, z, z.astype(bool), z, z.astype(bool), z.astype(float), None, None, z, None, None, bad)


def _read_parquet(path, reader):
    """Row batches of the needed columns (TRL: every column, to recognise a repeated generation)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a non-parquet file
        raise InputError(
            f"{path}: not a readable parquet file ({type(exc).__name__}: {str(exc).splitlines()[0]})"
        ) from None
    schema = pf.schema_arrow
    whole = _hooks(reader.module).READ_ALL_COLUMNS
    if whole:
        names = None
    else:
        cols = reader.cols
        wanted = {cols["prompt"], cols["step"], cols.get("group"), cols.get("silent"), "advantage"} | set(
            _hooks(reader.module).KEY_COLUMNS
        )
        if reader.reward_spec:
            wanted |= {name for _, name in parse_reward(reader.reward_spec, schema.names)}
        elif reader.module is not None:
            numeric = {f.name for f in schema if _is_number_type(f.type, pa)}
            wanted |= {name for _, name in reader.module.default_reward(schema.names, numeric)}
        else:
            wanted |= {"reward"}
        names = [n for n in schema.names if n in wanted]
    start = 1
    batches = pf.iter_batches(batch_size=_CHUNK_ROWS, columns=names)
    pieces = []
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            break
        except (OSError, pa.ArrowException) as exc:  # a damaged file: say which, not a traceback
            raise InputError(f"{path}: parquet file damaged near row {start} ({str(exc).splitlines()[0]})") from None
        pieces.append(batch)
        if not whole:
            table = pa.Table.from_batches([batch])
            yield table, np.arange(start, start + table.num_rows), []
            pieces = []
        start += batch.num_rows
    if whole:  # one generation is one table (its blocks and its fingerprint)
        table = pa.Table.from_batches(pieces, schema=pieces[0].schema) if pieces else None
        if table is not None:
            yield table, np.arange(1, table.num_rows + 1), []


def _read_jsonl(path):
    """pyarrow's JSON reader; on a malformed line or mixed types, a line-by-line pass."""
    import pyarrow as pa
    import pyarrow.json as pj

    if path.stat().st_size == 0:
        return
    try:
        table = pj.read_json(path, read_options=pj.ReadOptions(block_size=1 << 24))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        table = None
    if table is not None:
        try:  # pyarrow's JSON reader does not check that strings are UTF-8; a full validation does
            table.validate(full=True)
        except pa.ArrowInvalid:
            table = None
    if table is not None:
        yield table, None, []  # line numbers are counted only if a row turns out unusable
        return
    records, lines, bad = [], [], []
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:  # JSON is UTF-8: a row we cannot read is a bad row, named
                bad.append((number, f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"))
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                bad.append((number, f"not valid JSON ({exc.msg})"))
                continue
            if not isinstance(obj, dict):
                bad.append((number, "not a JSON object"))
                continue
            records.append({k: _plain(v) for k, v in obj.items() if k not in ("output", "completion", "gts")})
            lines.append(number)
    if not records:
        yield None, None, bad
        return
    keys = list(dict.fromkeys(k for r in records for k in r))
    columns = {}
    for k in keys:
        values = [r.get(k) for r in records]
        kinds = {type(v) for v in values if v is not None}
        if kinds <= {int, float} and kinds:
            columns[k] = _number_column(values, float in kinds)
        else:  # mixed or text: text ("True"/"False" and numbers in text are read as numbers later)
            columns[k] = text_array([None if v is None else str(v) for v in values])
    yield pa.table(columns), np.asarray(lines), bad


def _number_column(values, floats: bool):
    """A JSON key's numbers as a float64 (``floats``) or int64 pyarrow column, None missing."""
    import pyarrow as pa

    present = np.array([v is not None for v in values], bool)
    filled = [0 if v is None else v for v in values]
    try:
        numbers = np.array(filled, np.float64 if floats else np.int64)
    except OverflowError:  # an integer beyond int64
        raise pa.ArrowInvalid(f"an integer of key values is beyond int64 ({max(filled, key=abs)})") from None
    return from_numpy(numbers, present)


def _plain(v):
    """A JSON value as a column entry: booleans as 1/0 (a score written as true/false beside 0/1
    is the same reward), structures as their JSON text."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return v


def _nonblank_lines(path) -> np.ndarray:
    """1-based numbers of the non-blank lines of a text file (pyarrow's JSON reader skips blank ones)."""
    with open(path, "rb") as fh:
        return np.array([i for i, text in enumerate(fh, start=1) if text.strip()], dtype=np.int64)


def _read_csv(path):
    """Chunks of a CSV (every field read as text, numbers parsed later so that a non-numeric
    reward becomes a reported row, not a failed file), read as pandas's ``read_csv(dtype=str)``
    reads one: blank lines skipped, pandas's missing-value words (``""``, ``NA``, ``nan``,
    ``None``, ...) read as missing, a short row padded with missing fields, repeated column names
    numbered (``a``, ``a.1``); a row with too many fields is reported with its line."""
    import csv
    import itertools

    try:
        fh = open(path, newline="", encoding="utf-8-sig")  # a byte-order mark is not in the first name
    except UnicodeDecodeError as exc:  # pragma: no cover - open does not decode
        raise InputError(f"{path}: not a readable CSV file ({exc})") from None
    with fh:  # closes the file when the caller stops early (an error in a later chunk)
        rows = csv.reader(fh)
        try:
            header = next((row for row in rows if not _blank_row(row)), None)
        except (UnicodeDecodeError, csv.Error) as exc:
            raise InputError(f"{path}: not a readable CSV file ({exc})") from None
        if header is None:  # an empty file: no rows
            return
        names = _csv_names(header)
        while True:
            try:
                lines, chunk, end = _csv_rows(rows, itertools.islice(rows, _CHUNK_ROWS))
            except (UnicodeDecodeError, csv.Error) as exc:
                raise InputError(f"{path}: not a readable CSV file ({exc})") from None
            if end:
                break
            yield _csv_table(names, lines, chunk)


# What pandas's read_csv reads as a missing value (pandas._libs.parsers.STR_NA_VALUES).
CSV_MISSING = (
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A",
    "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
)  # fmt: skip


def _blank_row(row) -> bool:
    """A line pandas skips: empty, or blanks only."""
    return not row or (len(row) == 1 and not row[0].strip(" \t"))


def _csv_names(header) -> list[str]:
    """Column names as pandas's C parser gives them: an empty one is ``Unnamed: i``; a repeated
    one is numbered ``.1``, ``.2``, ..., skipping a name the header holds (``a,a,a.1`` →
    ``a, a.2, a.1``)."""
    names = [name if name else f"Unnamed: {i}" for i, name in enumerate(header)]
    counts: dict[str, int] = {}
    for i, name in enumerate(names):
        first, seen = name, counts.get(name, 0)
        while seen > 0:
            counts[first] = seen + 1
            name = f"{first}.{seen}"
            seen = seen + 1 if name in names else counts.get(name, 0)
        names[i] = name
        counts[name] = seen + 1
    return names


def _csv_rows(reader, rows):
    """(first line of each row, the rows, whether the file had no row left) of one chunk; blank
    lines left out.  A row's first line is the line after the previous row's last one."""
    lines, chunk = [], []
    before = reader.line_num
    for row in rows:
        lines.append(before + 1)
        chunk.append(row)
        before = reader.line_num
    return lines, chunk, not chunk


def _csv_table(names, lines, rows):
    """One chunk of CSV rows → (pyarrow table of text, each row's line, [(line, why)] for the
    rows with too many fields)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    width = len(names)
    sizes = np.fromiter(map(len, rows), np.int64, len(rows))
    lines = np.asarray(lines, np.int64)
    blank = sizes <= 1
    if blank.any():  # only a one-field row can be blank; look at those alone
        blank[blank] = [_blank_row(rows[i]) for i in np.flatnonzero(blank).tolist()]
    wide = (sizes > width) & ~blank
    bad = [(int(lines[i]), f"malformed CSV row (expected {width} fields, saw {int(sizes[i])})") for i in np.flatnonzero(wide)]
    keep = np.flatnonzero(~blank & ~wide)
    good = [rows[i] for i in keep.tolist()] if keep.size < len(rows) else rows
    short = np.flatnonzero(sizes[keep] < width).tolist()
    for i in short:  # a short row's missing fields are missing values
        good[i] = list(good[i]) + [None] * (width - len(good[i]))
    missing = text_array(CSV_MISSING)
    columns = []
    for values in zip(*good) if good else [()] * width:
        col = text_array(values)
        columns.append(pc.if_else(pc.is_in(col, value_set=missing), pa.nulls(len(col), col.type), col))
    return pa.Table.from_arrays(columns, names=names), lines[keep], bad


# --------------------------------------------------------------------------------------------
# Chunks → the trainer's groups


def _run_history(chunks, warnings):
    """A folder is read as one run.  A trainer writes its step files in step order, so in a folder
    where the file of some step is newer than every later step's file, those later files were
    left by an earlier attempt: a run resumed from an earlier checkpoint (or restarted in the
    same folder) rewrote the steps up to there and stopped, and the earlier attempt's later steps
    stayed behind.  They are left out when each is older than that newest file by more than a
    clock's slack and they are themselves in step order (a copied folder, whose times follow the
    copy's order, does not look like that)."""
    timed = [ch for ch in chunks if ch.mtime]
    if len(timed) < 2:
        return chunks, []
    times = np.array([ch.mtime for ch in timed])
    newest = int(np.argmax(times))
    tail = times[newest + 1 :]
    if not tail.size or not np.all(tail + _MTIME_SLACK_S < times[newest]) or not np.all(np.diff(tail) >= 0):
        return chunks, []
    stale_ids = {id(ch) for ch in timed[newest + 1 :]}
    stale = [ch.file_step for ch in timed[newest + 1 :]]
    warnings.append(
        f"steps {_span(stale)}: their files are older than the file of step {timed[newest].file_step} — "
        "left by an earlier attempt or another run in the same folder (a resume from an earlier checkpoint "
        "rewrites the steps after it), left out; name the files to read them anyway"
    )
    return [ch for ch in chunks if id(ch) not in stale_ids], stale


def _span(steps) -> str:
    steps = list(steps)
    return ", ".join(map(str, steps[:10])) + (f" ... ({len(steps)} in all)" if len(steps) > 10 else "")


def _assemble(reader: _Reader, group_col, warnings):
    """Concatenate the chunks; drop unusable rows and the groups they belonged to."""
    chunks = [c for c in reader.chunks if c.hashes.size]
    if not chunks:
        return None
    in_group = _hooks(reader.module).UNSCORABLE_IN_GROUP
    h = np.concatenate([c.hashes for c in chunks])
    step = np.concatenate([c.steps for c in chunks])
    reward = np.concatenate([c.reward for c in chunks])
    prompt_ok = np.concatenate([c.prompt_ok for c in chunks])
    step_ok = np.concatenate([c.step_ok for c in chunks])
    keyed = [c.gkey is not None for c in chunks]
    if any(keyed) and not all(keyed):
        raise InputError(
            "LOG: some files carry a group key and others do not (files of two trainers or versions "
            "in one folder?): name the files of one run"
        )
    if all(keyed):  # blocks, a group column or the trainer's keys
        gkey = np.concatenate([c.gkey for c in chunks])
        gkey_ok = np.concatenate([c.gkey_ok for c in chunks])
    else:  # the prompt text within the step
        gkey, gkey_ok = h, prompt_ok
    reward_ok = np.isfinite(reward)
    # A trainer that keeps a row without a finite reward in its group (TRL) counts it there.
    unscorable = prompt_ok & ~reward_ok if in_group else np.zeros(h.size, bool)
    conflict = np.concatenate([c.conflict if c.conflict is not None else np.zeros(c.hashes.size, bool) for c in chunks])
    usable = prompt_ok & step_ok & (reward_ok | unscorable) & gkey_ok & ~conflict
    # Report each unusable row once, with its first reason.
    offsets = np.cumsum([0] + [c.hashes.size for c in chunks])
    no_key = _hooks(reader.module).BAD_KEY
    for mask, why in (
        (~prompt_ok, "no prompt"),
        (prompt_ok & ~reward_ok & ~unscorable, "reward is missing, not a number or not finite"),
        (prompt_ok & (reward_ok | unscorable) & ~step_ok, "step is missing or not an integer"),
        (
            prompt_ok & (reward_ok | unscorable) & step_ok & ~gkey_ok,
            f"no value in the group column {group_col!r}" if group_col else no_key,
        ),
        (prompt_ok & (reward_ok | unscorable) & step_ok & gkey_ok & conflict, _hooks(reader.module).CONFLICT),
    ):
        for i in np.flatnonzero(mask):
            c = int(np.searchsorted(offsets, i, side="right") - 1)
            if len(reader.bad_rows) < _MAX_LISTED:
                reader.bad_rows.append(BadRow(str(chunks[c].file), int(chunks[c].line_numbers()[i - offsets[c]]), why))
            reader.bad_count += 1
    # A group that lost a row is incomplete: left out whole.  Rows whose group is known (step and
    # key readable) mark it; blocks of rows (TRL) are known by position even when the row is unusable.
    blocks = _hooks(reader.module).GROUP_SIZE
    known = step_ok & (gkey_ok | blocks)
    lost = known & ~usable
    pair = np.stack([step, gkey])
    incomplete = np.zeros(h.size, bool)
    if lost.any():
        bad_pairs = np.unique(pair[:, lost], axis=1)
        incomplete = _in_pairs(pair, bad_pairs)
    # A row with no group key but a prompt and a step belonged to one of that prompt's groups of
    # the step: which one is unknown, so they are all incomplete.
    orphan = step_ok & prompt_ok & ~gkey_ok & (not blocks)  # not ~blocks: ~False is -1, an index array
    if orphan.any():
        by_prompt = np.stack([step, h])
        incomplete |= _in_pairs(by_prompt, np.unique(by_prompt[:, orphan], axis=1))
    # Lines that are not rows (malformed JSON, CSV) belong to an unknown group of their file's
    # step.  Where that step's groups otherwise all have one size (a trainer's fixed n), the
    # groups short of it lost those lines; elsewhere the loss cannot be placed, and is said.
    keep = usable & ~incomplete
    for c in reader.chunks:
        if not c.unattributed_bad or blocks:
            continue
        in_step = keep & (step == c.steps[0]) if c.steps.size else np.zeros(h.size, bool)
        if not in_step.any():
            continue
        inv, _ = pair_codes(step[in_step], gkey[in_step])
        sizes = np.bincount(inv)
        usual = Counter(sizes.tolist()).most_common(1)[0][0]
        short = sizes < usual
        if short.any() and short.sum() <= c.unattributed_bad and np.all((sizes <= usual) | (sizes % usual == 0)):
            incomplete[np.flatnonzero(in_step)[short[inv]]] = True
        else:
            warnings.append(
                f"{c.file.name}: {c.unattributed_bad} unreadable line(s) could not be placed in a group; "
                "the group(s) they belonged to may be counted short"
            )
    keep = usable & ~incomplete
    counted = incomplete & (gkey_ok | blocks)  # a row without a key is not a group of its own
    lost_groups = pair_codes(step[counted], gkey[counted])[1]
    batch = np.concatenate([np.full(c.hashes.size, i, np.int64) for i, c in enumerate(chunks)])
    return {
        "hash": h[keep],
        "step": step[keep],
        "reward": reward[keep],
        "gkey": gkey[keep],
        "batch": batch[keep],
        "incomplete_groups": int(lost_groups),
        "incomplete_rollouts": int((incomplete & usable).sum()),
        "unscorable": int((unscorable & keep).sum()),
        "padding": np.concatenate([c.padding for c in chunks])[keep]
        if reader.pads and all(c.padding is not None for c in chunks)
        else None,
        "advantage": np.concatenate([c.advantage for c in chunks])[keep]
        if all(c.advantage is not None for c in chunks)
        else None,
        "verdict": np.concatenate(reader.verdicts)[keep]
        if reader.verdicts and len(reader.verdicts) == len(chunks)
        else None,
    }


def _in_pairs(pair, bad_pairs):
    """Which columns of ``pair`` (2 × n) are among the columns of ``bad_pairs``: both numbered
    together, a pair is bad when its code is one of a bad pair's."""
    k = bad_pairs.shape[1]
    codes, n = pair_codes(np.r_[bad_pairs[0], pair[0]], np.r_[bad_pairs[1], pair[1]])
    bad = np.zeros(n, bool)
    bad[codes[:k]] = True
    return bad[codes[k:]]


def read_rollouts(
    paths,
    *,
    fmt: str = "auto",
    reward: str | None = None,
    prompt_col: str | None = None,
    step_col: str | None = None,
    group_col: str | None = None,
    group_size: int | None = None,
    progress: bool | None = None,
) -> RolloutLog:
    """Read rollout logs (verl, TRL or a plain table) into the trainer's groups.

    Parameters
    ----------
    paths : str, Path or list of them
        Files, folders or glob patterns: a TRL ``output_dir`` (or its ``completions/``), a verl
        ``rollout_data`` folder (or the run folder holding it beside ``validation_data``), tables.
    fmt : ``"auto"``, a trainer of :data:`gsd.integrations.TRAINERS` (``"trl"``, ``"verl"``, ...) or ``"table"``
        ``"auto"`` decides from the file names.
    reward : str, optional
        The reward whose zero std makes a group silent: a column / key, or a weighted sum
        ``"correct+0.5*fmt"`` (terms ``name`` or ``coef*name`` joined by ``+`` or ``-``).
        Default: verl's ``score``; TRL, the sum of its reward columns with weight 1 (TRL does not
        log its ``reward_weights``: give them here); a table, required.
    prompt_col, step_col : str, optional
        Prompt-id and step columns of a table (defaults ``prompt`` and ``step``; verl uses
        ``input``).  Without a step column, a file's step is the number its name ends with.
    group_col : str, optional
        A column (verl: a reward extra key) whose value identifies a group within a step, e.g. a
        dataset index: groups are exact even when a prompt text appears twice in a step.
    group_size : int, optional
        The size of a group that is a block of consecutive rows (TRL's ``num_generations``;
        default: inferred from the files).
    progress : bool, optional
        Show a progress bar over the files (default: when stderr is a terminal).

    Returns
    -------
    RolloutLog

    Raises
    ------
    InputError
        No file, an unreadable file, files of several runs or formats, a missing column, or no
        usable row at all.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> rows = [{"input": "q1", "output": "...", "score": s, "step": 1} for s in (0, 1, 1, 0)]
    >>> _ = (d / "1.jsonl").write_text("\\n".join(json.dumps(r) for r in rows) + "\\n")
    >>> log = read_rollouts(d)
    >>> log.fmt, log.rows, log.reward.tolist(), log.labels.tolist(), log.group_by
    ('verl', 4, [0.0, 1.0, 1.0, 0.0], ['q1'], 'rows of one step with the same input text')
    """
    if fmt not in FORMATS:
        raise InputError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if group_size is not None:
        from .._validate import as_group_size

        group_size = int(as_group_size(group_size, "group_size"))
        if group_size < 2:
            raise InputError(f"group_size must be at least 2 (the trainer's group size), got {group_size}")
    files, fmt, warnings, state_path, folders = _discover(paths, fmt)
    module = _MODULES.get(fmt)
    # A table saved by gsd's GroupTracker says which columns it holds and how it was grouped.
    declared = None
    if module is None and reward is None and group_col is None:
        from ..integrations.tracker_table import read_description

        declared = read_description(files)
    if declared:
        reward, group_col = declared["reward_col"], declared["group_col"]
    if group_size is not None and not _hooks(module).GROUP_SIZE:
        raise InputError(
            f"group_size is the number of consecutive rows of a group (TRL's num_generations); the {fmt} "
            "format groups by prompt or by --group-column"
        )
    if group_col is not None and not _hooks(module).GROUP_COL:
        raise InputError(f"group_col: {fmt} groups are blocks of rows; use --group-size")
    defaults = (module.PROMPT_COL, module.STEP_COL) if module is not None else ("prompt", "step")
    cols = {
        "prompt": prompt_col or defaults[0],
        "step": step_col or defaults[1],
        "step_required": step_col is not None,
        "group": group_col,
        "silent": declared.get("silent_col") if declared else None,
    }

    from ..progress import progress_bar

    reader = _Reader(fmt, cols, reward)
    disable = None if progress is None else not progress
    for path in progress_bar(files, desc="reading logs", unit="file", disable=disable, leave=False):
        _read_file(path, reader)
    context = RunContext(
        group_size=group_size, group_size_given=group_size is not None, warnings=warnings, state_path=state_path
    )
    if state_path is not None:
        context.state = module.read_state(state_path)
        context.state_is_final = Path(state_path).parent.name != "" and not Path(state_path).parent.name.startswith(
            "checkpoint-"
        )
        warnings.extend(context.state.get("notes", ()))
        if context.state.get("skipped"):
            warnings.append(
                f"{state_path.name}: {context.state['skipped']} log_history entr(ies) whose step is not a "
                "whole number were skipped"
            )
    excluded = []
    if module is not None and any(c.hashes.size for c in reader.chunks):
        reader.chunks = [c for c in reader.chunks if c.hashes.size or c.unattributed_bad]
        if folders and _hooks(module).RUN_HISTORY:  # files named one by one are read as named
            reader.chunks, excluded = _run_history(reader.chunks, warnings)
        arrange = _hooks(module).arrange
        if arrange is not None:
            reader.chunks = arrange([c for c in reader.chunks if c.hashes.size], context)
            excluded = sorted(set(excluded) | set(context.excluded_steps))
    reader.pads = bool(context.state and context.state.get("pads"))
    got = _assemble(reader, group_col, warnings)
    if got is None or got["hash"].size == 0:
        detail = f"; first unusable row: {reader.bad_rows[0]}" if reader.bad_rows else ""
        raise InputError(f"LOG: no usable rollout in {len(files)} file(s){detail}")
    uniq, code = np.unique(got["hash"], return_inverse=True)
    labels = np.array([reader.labels[int(v)] for v in uniq.tolist()], dtype=object)
    group, n_groups = pair_codes(got["step"], got["gkey"])
    code = code.astype(np.int64).ravel()
    terms = reader.terms or []
    reward_name = _reward_text(terms)
    G = context.group_size if _hooks(module).GROUP_SIZE else None
    context.keyed = reader.keyed
    described = _hooks(module).describe_groups(context)
    if group_col:
        group_by = f"rows of one step with the same {group_col!r}"
    elif described:
        group_by = described
    else:
        group_by = f"rows of one step with the same {cols['prompt']} text"
    silence = f"zero std of {reward_name!r} within each group (every reward equal), as the trainer normalises it"
    rule = _hooks(module).zero_std
    silent = rule(got["reward"], group, n_groups) if rule is not None else None
    if got.get("verdict") is not None:  # a table that saved the trainer's verdict per group
        silent = np.zeros(n_groups, bool)
        np.logical_or.at(silent, group, got["verdict"] > 0)
    if _hooks(module).REWARD_WEIGHTS_UNLOGGED and not reward and len(terms) > 1:
        warnings.append(
            f"reward = {reward_name} with weight 1 each: TRL does not log its reward_weights; "
            "if the run weighted them, give the weights with --reward-column 'a+0.5*b'"
        )
    advantage_check = _check_groups(code, group, n_groups, got, module, group_col, silent, warnings)
    note = _hooks(module).trainer_silent_note(advantage_check)
    if note and context.trainer_silent:
        warnings.append(note)
    missing = []
    if module is not None:
        have = (
            {c.file_step for c in reader.chunks if c.file_step is not None}
            | set(excluded)
            | set(context.repeated_steps)
            | set(context.eval_steps)
        )
        named = [module.step_of(Path(f)) for f in files]
        if have and all(s is not None for s in named):
            last = max(have)
            if last <= 10**7:
                missing = sorted(set(range(1, last + 1)) - have)
            if missing:
                warnings.append(
                    f"{len(missing)} of the {last} steps have no log file ({_span(missing)}): the figures "
                    "are those of the logged rollouts, not of the whole generation"
                    + (
                        " (TRL writes one file per logging step: logging_steps > 1)"
                        if _hooks(module).GROUP_SIZE
                        else ""
                    )
                )
    observable = True
    note = _hooks(module).FILTER
    if note and silent is not None and n_groups and not silent.any() and np.bincount(group).min() >= 2:
        observable = False
        warnings.append(
            f"no group is silent at any step: either none was, or the trainer removed them before the dump "
            f"({note}); the log cannot tell which, so the generation's silent share is not given "
            "(summary.silent_frac_dumped is that of the dumped groups)"
        )
    if declared:
        reward_name, group_by, silence, G = (
            declared["reward_name"],
            declared["group_by"],
            declared["silence"],
            declared["group_size"],
        )
    got["incomplete_groups"] += context.short_groups  # groups the trainer module found short
    got["incomplete_rollouts"] += context.short_rollouts
    if got["incomplete_groups"]:
        warnings.append(
            f"{got['incomplete_groups']} group(s) lost a row to an unusable line: incomplete, left out "
            f"({got['incomplete_rollouts']} usable rollouts in them)"
        )
    padded = got["padding"] if got.get("padding") is not None and got["padding"].any() else None
    if padded is not None:
        got["unscorable"] -= int(padded.sum())
        warnings.append(
            f"{int(padded.sum())} row(s) are padding, not generation: the trainer (trl-cgrpo: cgrpo/ "
            "metrics in trainer_state.json) stopped those prompts early and filled their block with "
            "empty, reward-less rows; they are left out of the rollouts and the wasted ones"
        )
    if got["unscorable"]:
        warnings.append(
            f"{got['unscorable']} rollout(s) have no finite reward (every reward function returned None, "
            "or an infinite reward): kept in their group as the trainer keeps them, out of its mean and std"
        )
    if reader.repeated_rows:
        warnings.append(
            f"{reader.repeated_rows} row(s) repeat an earlier row's key and reward (the same output "
            "written twice): counted once"
        )
    if reader.extra_outputs:
        warnings.append(
            f"{reader.extra_outputs} output(s) of multi-output sessions are not their session's final "
            "output: counted once per session, at its final output, as the trainer's advantage does"
        )
    return RolloutLog(
        prompt=code,
        step=got["step"],
        reward=got["reward"],
        labels=labels,
        hashes=uniq,
        files=[str(f) for f in files],
        fmt=fmt,
        reward_name=reward_name,
        group=group,
        group_by=group_by,
        silence=silence,
        group_size=G,
        repeated_steps=context.repeated_steps,
        missing_steps=missing,
        eval_steps=context.eval_steps,
        incomplete_groups=got["incomplete_groups"],
        incomplete_rollouts=got["incomplete_rollouts"],
        trainer_silent=context.trainer_silent,
        silent=silent,
        unscorable_rollouts=got["unscorable"],
        extra_outputs=reader.extra_outputs,
        padding=padded,
        excluded_steps=excluded,
        silent_observable=observable,
        advantage_check=advantage_check,
        threshold=declared["threshold"] if declared else None,
        trainer=declared.get("trainer") if declared else None,
        warnings=warnings,
        bad_rows=reader.bad_rows,
        bad_count=reader.bad_count,
    )


def _check_groups(code, group, n_groups, got, module, group_col, silent, warnings):
    """Warnings about the groups the log allows (merged duplicates, several prompts in a group);
    where the log carries the advantages, the scaling they show, checked group by group."""
    sizes = np.bincount(group, minlength=n_groups)
    mixed = pair_codes(group, code)[1] - sizes.size
    if mixed and group_col:
        warnings.append(
            f"the group column {group_col!r} puts several prompts in one group ({mixed} extra prompt-groups)"
        )
    gstep = np.zeros(sizes.size, np.int64)
    gstep[group] = got["step"]
    if not _hooks(module).GROUP_SIZE and not group_col and sizes.size:
        usual = Counter(sizes.tolist()).most_common(1)[0][0]
        merged = (sizes > usual) & (sizes % usual == 0) if usual > 1 else np.zeros(sizes.size, bool)
        if merged.any():
            steps = np.unique(gstep[merged])
            warnings.append(
                f"{int(merged.sum())} group(s) hold a multiple of the usual {usual} rollouts (steps "
                f"{_span(steps.tolist())}): probably duplicated prompts merged into one group; "
                "log a group id or dataset index as a reward extra key and pass --group-column KEY"
            )
        # One size per step, but not the same at every step: two runs in one folder, or a changed n.
        steps_u, sidx = np.unique(gstep, return_inverse=True)
        top = np.zeros(steps_u.size, np.int64)
        bottom = np.full(steps_u.size, np.iinfo(np.int64).max)
        np.maximum.at(top, sidx, sizes)
        np.minimum.at(bottom, sidx, sizes)
        uniform = top == bottom
        if uniform.all() and np.unique(top).size > 1 and bottom.min() >= 2:
            sizes_seen = np.unique(top)
            warnings.append(
                "the group size changes between steps ("
                + ", ".join(f"{g} at steps {_span(steps_u[top == g].tolist())}" for g in sizes_seen.tolist())
                + "): two runs in one folder, or a run restarted with another rollout.n?"
            )
    check = _hooks(module).check_advantages
    if check is None or got["advantage"] is None:
        return None
    adv = got["advantage"]
    result = check(got["reward"], adv, group, n_groups, got["batch"])
    amax = np.zeros(n_groups)
    np.maximum.at(amax, group, np.abs(np.nan_to_num(adv, nan=0.0)))
    if not np.any(amax > 0):  # no advantages logged (zeros): nothing to check
        return None
    if result["scale"] is None:
        # TRL's float32 rounding leaves |A| up to ~1e-3 on a silent group of graded rewards.
        disagree = int((silent != (amax <= 1e-3)).sum()) if silent is not None else 0
        warnings.append(
            "the logged advantages fit no scaling of the reward used (scale_rewards group, batch or none; "
            f"{disagree} group(s) silent under one and not the other): the reward weights probably differ "
            "from the run's reward_weights (give them with --reward-column 'a+0.5*b'), or the run "
            "aggregated rewards another way (multi_objective_aggregation)"
        )
    return result


def silent_groups(top, bottom):
    """A group is silent when its rewards are all equal: max − min within 1e-9 of the larger
    magnitude (float32 trainers round a sum such as 0.1 + 0.2 differently from 0.3)."""
    top = np.asarray(top, np.float64)
    bottom = np.asarray(bottom, np.float64)
    return (top - bottom) <= 1e-9 * np.maximum(1.0, np.maximum(np.abs(top), np.abs(bottom)))
