"""Read GRPO rollout logs into the trainer's groups: per rollout a prompt, a step, a group, a reward.

Formats (what each trainer writes, and its quirks, live in :mod:`gsd.integrations`):

* ``trl`` — ``GRPOTrainer(log_completions=True)``: ``completions/completions_{step:05d}.parquet``.
  A group is a block of ``num_generations`` consecutive rows (inferred from the file, or
  ``group_size=``); a file that repeats the previous file's generation under a new step
  (``num_iterations`` or ``steps_per_generation`` > 1) is counted once; steps without a file
  (``logging_steps`` > 1) are listed; with ``trainer_state.json`` at hand, evaluation steps are
  left out and TRL's own ``frac_reward_zero_std`` is kept beside the measured silence.
* ``verl`` — ``trainer.rollout_data_dir``: ``{step}.jsonl``.  verl writes no group id and
  reorders rows, so a group is the rows of one step with the same ``input`` text, or with the
  same value of ``group_col`` (a reward extra key holding a group id or dataset index).
* ``table`` — any CSV, parquet or JSONL file with a prompt-id, a reward, optionally a step and a
  group column, named by the caller.

The reward is the one the trainer normalises — verl's ``score``, the sum of TRL's reward columns
— or a weighted sum named by ``reward`` (``"correct+0.5*fmt"``).  Only four numbers per rollout
are kept in memory (prompt hash, step, group, reward: 32 bytes), never the answer text.  A row
that cannot be used is counted and reported with its file and line, and the group it belonged to
is *incomplete*: left out of the diagnosis and counted.
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
from ..integrations import trl as _trl
from ..integrations import verl as _verl

__all__ = ["FORMATS", "RolloutLog", "BadRow", "read_rollouts", "find_log_files", "detect_format", "parse_reward"]

#: Formats understood by :func:`read_rollouts` (``"auto"`` guesses from the file names).
FORMATS = ("auto", "verl", "trl", "table")

_TRAINERS = {"trl": _trl, "verl": _verl}
_TABLE_SUFFIXES = (".csv", ".parquet", ".jsonl", ".json")
_LABEL_CHARS = 80  # characters of each distinct prompt kept as its label
_MAX_LISTED = 1000  # bad rows listed one by one (all are counted)
_MAX_STEP = 2**53  # steps beyond this cannot be told apart once a table tool turns them into floats


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


def _walk(folder: Path) -> list[Path]:
    """The files under ``folder`` (hidden files skipped), or an InputError for an unreadable or huge tree."""
    def unreadable(exc):
        raise InputError(f"LOG: cannot read the folder {str(exc.filename)!r} ({exc.strerror})")

    files, seen = [], 0
    for root, dirs, names in os.walk(folder, onerror=unreadable):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        seen += len(dirs) + len(names)
        if seen > _MAX_FOLDER_ENTRIES:
            raise InputError(f"LOG: {str(folder)!r} holds more than {_MAX_FOLDER_ENTRIES:,} files and folders; "
                             "name the log files or the run's log folder")
        files.extend(Path(root, n) for n in names if not n.startswith("."))
    return [p for p in files if p.is_file()]


# A folder is searched recursively; beyond this many entries it is not a log folder (``/``, a home).
_MAX_FOLDER_ENTRIES = 200_000


def _format_of(path: Path):
    for name, module in _TRAINERS.items():
        if module.is_log_file(path):
            return name
    return None


def _files_in_folder(folder: Path, fmt: str, notes: list) -> list[Path]:
    """The log files of one run under ``folder``: one format, one dump folder."""
    files = _walk(folder)
    by_fmt = {name: [p for p in files if module.is_log_file(p)] for name, module in _TRAINERS.items()}
    if fmt == "auto" and by_fmt["trl"] and by_fmt["verl"]:
        raise InputError(f"LOG: {str(folder)!r} holds both {_trl.FILE_DESCRIPTION} files ({len(by_fmt['trl'])}) and "
                         f"{_verl.FILE_DESCRIPTION} files ({len(by_fmt['verl'])}): pass --format trl or --format verl, "
                         "or name the folder of one run")
    for name in _TRAINERS:
        other = "verl" if name == "trl" else "trl"
        if fmt == name and not by_fmt[name] and by_fmt[other]:
            raise InputError(f"format {name}: no {_TRAINERS[name].FILE_DESCRIPTION} file in {folder}, but "
                             f"{len(by_fmt[other])} {_TRAINERS[other].FILE_DESCRIPTION} file(s): use --format {other}")
    chosen = fmt if fmt in _TRAINERS else next((n for n in _TRAINERS if by_fmt[n] and fmt == "auto"), None)
    if chosen is None:
        return [p for p in files if p.suffix.lower() in _TABLE_SUFFIXES]
    found = by_fmt[chosen]
    parents = sorted({p.parent for p in found})
    if len(parents) > 1 and chosen == "verl":
        training = [d for d in parents if not _verl.is_validation_folder(d)]
        left = [d for d in parents if _verl.is_validation_folder(d)]
        if len(training) == 1 and left:
            notes.append(f"read the training dump {training[0]}; left out the validation dump(s) "
                         + ", ".join(map(str, left)))
            parents = training
            found = [p for p in found if p.parent == training[0]]
    if len(parents) > 1:
        raise InputError(f"LOG: {str(folder)!r} holds {_TRAINERS[chosen].FILE_DESCRIPTION} files in {len(parents)} "
                         f"folders ({', '.join(map(str, parents[:4]))}{', ...' if len(parents) > 4 else ''}): "
                         "name the folder of one run (files of several runs are never mixed)")
    return found


def _discover(paths, fmt: str):
    """(files sorted by step, format, notes, TRL trainer_state path or None)."""
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
            matches = sorted(Path(m) for m in _glob.glob(text, recursive=True) if Path(m).is_file())
            if not matches:
                raise InputError(f"LOG: the pattern {text!r} matches no file")
            found.extend(matches)
        else:
            raise InputError(f"LOG: {text!r} is neither a file, a folder nor a glob pattern that matches")
    unique = list(dict.fromkeys(p.resolve() for p in found))
    if not unique:
        raise InputError(f"LOG: no rollout log file found in {', '.join(map(str, paths))} "
                         f"(expected {_verl.FILE_DESCRIPTION}, {_trl.FILE_DESCRIPTION} or a CSV/parquet/JSONL table)")
    if fmt == "auto":
        fmt = detect_format(unique)
    if fmt in _TRAINERS:
        module = _TRAINERS[fmt]
        wrong = [p for p in unique if not module.is_log_file(p)]
        if fmt == "trl" and any(p.suffix != ".parquet" for p in unique):
            raise InputError(f"format trl reads {_trl.FILE_DESCRIPTION} files, got {next(p for p in unique if p.suffix != '.parquet')}")
        if fmt == "verl" and any(p.suffix.lower() not in (".jsonl", ".json") for p in unique):
            bad = next(p for p in unique if p.suffix.lower() not in (".jsonl", ".json"))
            raise InputError(f"format verl reads {_verl.FILE_DESCRIPTION} rollout dumps, got {bad}")
        if not wrong:
            by_step: dict[int, Path] = {}
            for p in unique:
                s = module.step_of(p)
                if s in by_step:
                    raise InputError(f"LOG: step {s} is in two files, {by_step[s]} and {p} (two runs, or a validation "
                                     "dump beside the training one?): name the files of one run")
                by_step[s] = p
            parents = sorted({p.parent for p in unique})
            if len(parents) > 1:
                notes.append(f"files read from {len(parents)} folders: " + ", ".join(map(str, parents)))
    unique.sort(key=lambda p: (_step_from_name(p) is None, _step_from_name(p) or 0, str(p)))
    state = None
    if fmt == "trl":
        roots = folders or sorted({p.parent for p in unique})
        for root in roots:
            state = _trl.find_trainer_state(root) or _trl.find_trainer_state(Path(root).parent)
            if state is not None:
                break
    return unique, fmt, notes, state


def find_log_files(paths, fmt: str = "auto") -> list[Path]:
    """The log files named by ``paths`` (files, folders or glob patterns), sorted by step.

    A folder is searched recursively for ``completions_*.parquet`` (TRL), ``{step}.jsonl``
    (verl) or any table file, depending on ``fmt``; a folder holding both TRL and verl files,
    or one trainer's files in several folders (other than a verl validation dump beside the
    training one), is an error rather than a mix.
    """
    return _discover(paths, fmt)[0]


def _step_from_name(p: Path):
    m = re.search(r"(\d+)$", p.stem)
    return int(m.group(1)) if m else None


def detect_format(files) -> str:
    """``"trl"`` if every file is a ``completions_*.parquet``, ``"verl"`` if every file is a
    ``{step}.jsonl``, else ``"table"``."""
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
        name = next((n for n in names if text.startswith(n, j) and re.match(r"\s*(?:[+-]|$)", text[j + len(n):])), None)
        if name is None:
            rest = re.match(r"[^+\-]*", text[j:]).group(0).strip()
            where = "" if rest == text else f" (in --reward {spec!r})"
            raise InputError(f"reward column {rest!r} not found{where}; columns: {', '.join(map(str, columns))}")
        value = (float(coef) if coef else 1.0) * (-1.0 if sign == "-" else 1.0)
        if not math.isfinite(value):
            raise InputError(f"reward: coefficient {coef!r} of {spec!r} is not a finite number")
        terms.append((value, name))
        i = j + len(name)
    if i < len(text):
        raise InputError(f"reward: cannot read {spec!r} after {text[:i]!r} (terms are name or coef*name, joined by + or -)")
    return terms


def _reward_text(terms) -> str:
    """``[(1, "a"), (0.5, "b")]`` → ``"a + 0.5*b"``."""
    parts = []
    for c, name in terms:
        term = name if abs(c) == 1 else f"{abs(c):g}*{name}"
        parts.append((f"-{term}" if c < 0 else term) if not parts else f"{'-' if c < 0 else '+'} {term}")
    return " ".join(parts)


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
    gkey: np.ndarray | None  # int64 hash of the group column
    gkey_ok: np.ndarray | None
    lines: np.ndarray | None  # 1-based line numbers (None: the non-blank lines of a JSONL file, in order)
    advantage: np.ndarray | None = None
    fingerprint: str | None = None
    unattributed_bad: int = 0  # lines that are not rows at all (malformed JSON, CSV): their group is unknown

    def line_numbers(self) -> np.ndarray:
        if self.lines is None:
            self.lines = _nonblank_lines(self.file)
        return self.lines


class _Reader:
    """Reads the files of one run, one at a time, keeping labels, reward columns and bad rows."""

    def __init__(self, fmt, cols, reward):
        self.fmt, self.cols, self.reward_spec = fmt, cols, reward
        self.terms = None  # [(coef, column)] once the first file's columns are known
        self.labels: dict[int, str] = {}
        self.bad_rows: list[BadRow] = []
        self.bad_count = 0
        self.chunks: list[_Chunk] = []

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
        if self.fmt == "verl":
            if _verl.DEFAULT_REWARD in columns:
                return [(1.0, _verl.DEFAULT_REWARD)]
            raise InputError(f"{path}: no 'score' key; choose the reward with --reward KEY (keys: {', '.join(columns)})")
        if self.fmt == "trl":
            cands = [c for c in columns if c not in _trl.NOT_REWARD and _is_number_type(dtypes.get(c), pa)]
            if not cands:
                raise InputError(f"{path}: no reward column (numeric columns other than step and advantage); "
                                 f"columns: {', '.join(columns)}")
            return [(1.0, c) for c in cands]
        raise InputError(f"{path}: name the reward column with --reward (columns: {', '.join(columns)})")

    # -- one table of rows

    def add(self, path, table, lines, *, extra_bad=0):
        import pyarrow.compute as pc

        if self.fmt == "trl" and "mode" in table.column_names:
            # TRL versions that mark evaluation rows: keep training rows only.
            train = np.asarray(pc.fill_null(pc.equal(table.column("mode"), "train"), False).to_numpy(zero_copy_only=False),
                               dtype=bool)
            if lines is None:
                lines = np.arange(1, table.num_rows + 1)
            lines = lines[train]
            import pyarrow as pa

            table = table.filter(pa.array(train)).drop_columns(["mode"])
        columns = table.column_names
        dtypes = {name: table.schema.field(name).type for name in columns}
        pcol = self.cols["prompt"]
        if pcol not in columns:
            raise InputError(f"{path}: no prompt column {pcol!r}; columns: {', '.join(columns)}"
                             + ("" if self.fmt != "table" else " (name it with --prompt-col)"))
        if self.terms is None:
            self.terms = self._terms(columns, dtypes, path)
        missing = [name for _, name in self.terms if name not in columns]
        if missing:
            raise InputError(f"{path}: reward column {missing[0]!r} not found; columns: {', '.join(columns)}")
        parts = np.stack([_numeric(table.column(name), name, path) for _, name in self.terms])
        coefs = np.array([c for c, _ in self.terms])[:, None]
        # TRL's sum over reward functions: one that returned None counts as 0, unless none applied.
        reward = parts[0] * coefs[0] if len(self.terms) == 1 else np.where(
            np.isnan(parts).all(axis=0), np.nan, np.nansum(parts * coefs, axis=0))
        n = table.num_rows
        scol = self.cols["step"]
        if scol and scol in columns:
            steps, step_ok = _integers(table.column(scol))
        else:
            if scol and self.fmt == "table" and self.cols.get("step_required"):
                raise InputError(f"{path}: no step column {scol!r}; columns: {', '.join(columns)}")
            from_name = _step_from_name(path)
            steps, step_ok = np.full(n, from_name if from_name is not None else 0, np.int64), np.ones(n, bool)
        hashes, prompt_ok = self._hash_prompts(table.column(pcol))
        gkey = gkey_ok = None
        gcol = self.cols.get("group")
        if gcol:
            if gcol not in columns:
                raise InputError(f"{path}: no group column {gcol!r}; columns: {', '.join(columns)}")
            gkey, gkey_ok = _hash_values(table.column(gcol))
        advantage = None
        if self.fmt == "trl" and "advantage" in columns:
            advantage = _numeric(table.column("advantage"), "advantage", path)
        fingerprint = _trl.generation_fingerprint(table) if self.fmt == "trl" else None
        self.chunks.append(_Chunk(path, hashes, prompt_ok, steps, step_ok, reward, gkey, gkey_ok, lines, advantage,
                                  fingerprint, extra_bad))

    def _hash_prompts(self, arr):
        """64-bit hashes of the prompts (each distinct one hashed once) and which rows have one."""
        import pandas as pd
        import pyarrow as pa
        import pyarrow.compute as pc

        strings, structured = _as_string_array(arr)
        ok = ~np.asarray(strings.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        enc = pc.dictionary_encode(strings)
        if isinstance(enc, pa.ChunkedArray):
            enc = enc.combine_chunks()
        uniq = np.asarray(enc.dictionary.to_numpy(zero_copy_only=False), dtype=object)
        h = pd.util.hash_array(uniq, categorize=False).astype(np.int64) if uniq.size else np.zeros(0, np.int64)
        for hv, text in zip(h.tolist(), uniq.tolist()):
            if hv not in self.labels:
                self.labels[hv] = (_trl.chat_label(json.loads(text)) if structured else text)[:_LABEL_CHARS]
        idx = enc.indices.fill_null(0).to_numpy(zero_copy_only=False) if len(enc) else np.zeros(0, np.int64)
        hashes = h[idx] if h.size else np.zeros(len(idx), np.int64)
        return np.where(ok, hashes, 0).astype(np.int64), ok


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
    return pa.array([None if v is None else (json.dumps(v, sort_keys=True, ensure_ascii=False) if structured else str(v))
                     for v in values], type=pa.string()), structured


def _hash_values(arr):
    """64-bit hashes of a group-id column's values (as text) and which rows have one."""
    import pandas as pd

    strings, _ = _as_string_array(arr)
    values = np.asarray(strings.to_numpy(zero_copy_only=False), dtype=object)
    ok = ~np.asarray(strings.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    h = np.zeros(values.size, np.int64)
    if ok.any():
        h[ok] = pd.util.hash_array(values[ok], categorize=True).astype(np.int64)
    return h, ok


def _numeric(arr, name, file):
    """A pyarrow column as float64 with NaN for missing or non-numeric entries; the strings
    ``"True"``/``"False"`` (verl's dump of numpy booleans) read as 1/0."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return arr.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False).astype(np.float64)
    if pa.types.is_null(t):
        return np.full(len(arr), np.nan)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        import pandas as pd

        s = pd.Series(arr.to_numpy(zero_copy_only=False), dtype=object)
        out = pd.to_numeric(s, errors="coerce").to_numpy(np.float64)
        mapped = s.map(_verl.BOOL_STRINGS)
        return np.where(mapped.notna().to_numpy(), mapped.to_numpy(np.float64, na_value=np.nan), out)
    raise InputError(f"{file}: column {name!r} holds {t}, not numbers")


def _integers(arr):
    """A step column as int64 and a mask of the rows that hold an exact integer (never through
    float64 for integer columns; a float or text step must be integral and below 2^53)."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    valid = ~np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_integer(t):
        if pa.types.is_uint64(t):
            raw = arr.fill_null(0).to_numpy(zero_copy_only=False)
            ok = valid & (raw < 2**63)
            return np.where(ok, raw, 0).astype(np.int64), ok
        return arr.fill_null(0).cast(pa.int64()).to_numpy(zero_copy_only=False).astype(np.int64), valid
    if pa.types.is_string(t) or pa.types.is_large_string(t):  # a CSV's steps: text read as exact integers
        import pyarrow.compute as pc

        text = pc.utf8_trim_whitespace(arr)
        ok = np.asarray(pc.fill_null(pc.match_substring_regex(text, r"^[-+]?[0-9]{1,18}$"), False)
                        .to_numpy(zero_copy_only=False), dtype=bool)  # 18 digits always fit int64
        out = np.zeros(len(arr), np.int64)
        if ok.any():
            out[ok] = pc.cast(text.filter(pa.array(ok)), pa.int64()).to_numpy(zero_copy_only=False)
        return out, ok
    f = _numeric(arr, "step", "")
    ok = np.isfinite(f) & (f == np.round(f)) & (np.abs(f) < _MAX_STEP)
    return np.where(ok, f, 0).astype(np.int64), ok


def _is_number_type(t, pa):
    return t is not None and (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t))


_CHUNK_ROWS = 1 << 20  # rows per piece of a parquet or CSV file (bounds the memory of a big table)


def _read_file(path: Path, reader: _Reader):
    """Read one file (any format), piece by piece, into the reader's chunks."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        pieces = _read_parquet(path, reader)
    elif suffix in (".jsonl", ".json"):
        pieces = _read_jsonl(path)
    elif suffix == ".csv":
        pieces = _read_csv(path)
    else:
        raise InputError(f"{path}: unknown file type {suffix!r} (expected .jsonl, .parquet or .csv)")
    for table, lines, bad in pieces:
        for line, why in bad:
            reader.bad(path, line, why)
        if table is not None and table.num_rows:
            reader.add(path, table, lines, extra_bad=len(bad))
        elif bad:
            reader.chunks.append(_empty_chunk(path, len(bad)))


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
        raise InputError(f"{path}: not a readable parquet file ({type(exc).__name__}: {str(exc).splitlines()[0]})") from None
    schema = pf.schema_arrow
    if reader.fmt == "trl":
        names = None
    else:
        cols = reader.cols
        wanted = {cols["prompt"], cols["step"], cols.get("group")}
        if reader.reward_spec:
            wanted |= {name for _, name in parse_reward(reader.reward_spec, schema.names)}
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
        if reader.fmt != "trl":
            table = pa.Table.from_batches([batch])
            yield table, np.arange(start, start + table.num_rows), []
            pieces = []
        start += batch.num_rows
    if reader.fmt == "trl":  # one generation is one table (its blocks and its fingerprint)
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
        yield table, None, []  # line numbers are counted only if a row turns out unusable
        return
    records, lines, bad = [], [], []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, text in enumerate(fh, start=1):
            if not text.strip():
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
            columns[k] = pa.array([None if v is None else float(v) for v in values], type=pa.float64()) \
                if float in kinds else pa.array(values, type=pa.int64())
        else:  # mixed or text: text ("True"/"False" and numbers in text are read as numbers later)
            columns[k] = pa.array([None if v is None else str(v) for v in values], type=pa.string())
    yield pa.table(columns), np.asarray(lines), bad


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
    reward becomes a reported row, not a failed file); rows with the wrong number of fields are
    reported with their line."""
    import warnings

    import pandas as pd
    import pyarrow as pa

    try:
        chunks = pd.read_csv(path, dtype=str, on_bad_lines="warn", chunksize=_CHUNK_ROWS)
    except pd.errors.EmptyDataError:
        return
    except (UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise InputError(f"{path}: not a readable CSV file ({exc})") from None
    next_line = 2  # line of the first data row (after the header), 1-based
    with chunks:  # closes the file when the caller stops early (an error in a later chunk)
        while True:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    df = next(chunks)
                except StopIteration:
                    break
                except (UnicodeDecodeError, pd.errors.ParserError) as exc:
                    raise InputError(f"{path}: not a readable CSV file ({exc})") from None
            bad = [(int(m.group(1)), f"malformed CSV row ({m.group(2).strip()})")
                   for w in caught for m in re.finditer(r"Skipping line (\d+): (.*)", str(w.message))]
            skipped = [b[0] for b in bad]
            # Data rows are consecutive lines once the skipped ones are taken out (no quoted newlines).
            lines = np.arange(next_line, next_line + len(df) + len(skipped))
            if skipped:
                lines = lines[~np.isin(lines, skipped)][: len(df)]
            next_line = int(lines[-1]) + 1 if len(lines) else next_line + len(skipped)
            yield pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False), lines, bad


# --------------------------------------------------------------------------------------------
# Chunks → the trainer's groups


def _trl_generations(reader: _Reader, state_path, group_size, warnings):
    """TRL: drop repeated generations and evaluation files, infer G, give each block its key."""
    repeated, eval_steps, zero_std = [], [], {}
    state = None
    if state_path is not None:
        state = _trl.read_trainer_state(state_path)
        zero_std = state["zero_std"]
    kept, previous = [], None
    for ch in reader.chunks:
        step = _trl.step_of(ch.file)
        if state is not None and step in state["eval_steps"]:
            eval_steps.append(step)
            continue
        if ch.fingerprint is not None and ch.fingerprint == previous:
            repeated.append(step)
            continue
        previous = ch.fingerprint
        kept.append(ch)
    if eval_steps:
        warnings.append(f"steps {_span(eval_steps)} evaluated ({state_path.name}): their files hold evaluation "
                        "completions (TRL writes them under the training file name) and are left out")
    if repeated:
        warnings.append(f"{len(repeated)} file(s) repeat the previous step's generation (num_iterations or "
                        f"steps_per_generation > 1): counted once, at their first step; repeated steps {_span(repeated)}")
    if state is None:
        sizes = Counter(ch.hashes.size for ch in kept)
        if len(sizes) > 1:
            warnings.append(f"the files hold different numbers of rows ({', '.join(map(str, sorted(sizes)))}): TRL writes "
                            "evaluation completions under the training file name; give the run's output_dir with its "
                            "trainer_state.json to leave the evaluation steps out")
    G = group_size
    if G is None:
        G = _trl.infer_group_size(ch.hashes[ch.prompt_ok] for ch in kept)
        if G < 2:
            raise InputError("TRL log: cannot infer num_generations from the files (consecutive rows of one prompt "
                             f"come in runs whose greatest common divisor is {G}); pass --group-size G")
    for index, ch in enumerate(kept):
        n = ch.hashes.size
        block = np.arange(n) // G
        if n % G:
            warnings.append(f"{ch.file.name}: {n} rows is not a multiple of the group size {G}; its last "
                            f"{n % G} row(s) form an incomplete group")
        # Every block must hold one prompt, or G is wrong.
        first = ch.hashes[block * G]
        wrong = ch.prompt_ok & (ch.hashes != first)
        if wrong.any():
            at = int(np.flatnonzero(wrong)[0])
            raise InputError(f"{ch.file}: rows {at // G * G + 1}-{at // G * G + G} do not hold one prompt, so groups "
                             f"are not blocks of {G} rows; pass the run's num_generations with --group-size")
        ch.gkey = (np.int64(index) << 32) + block
        ch.gkey_ok = np.ones(n, bool)
        if n % G:
            ch.gkey_ok[n - n % G:] = False  # a block cut short: its group is incomplete
    reader.chunks = kept
    return G, repeated, eval_steps, zero_std


def _span(steps) -> str:
    steps = list(steps)
    return ", ".join(map(str, steps[:10])) + (f" ... ({len(steps)} in all)" if len(steps) > 10 else "")


def _assemble(reader: _Reader, fmt, group_col, warnings):
    """Concatenate the chunks; drop unusable rows and the groups they belonged to."""
    chunks = [c for c in reader.chunks if c.hashes.size]
    if not chunks:
        return None
    h = np.concatenate([c.hashes for c in chunks])
    step = np.concatenate([c.steps for c in chunks])
    reward = np.concatenate([c.reward for c in chunks])
    prompt_ok = np.concatenate([c.prompt_ok for c in chunks])
    step_ok = np.concatenate([c.step_ok for c in chunks])
    if chunks[0].gkey is not None:  # TRL blocks, or a group column
        gkey = np.concatenate([c.gkey for c in chunks])
        gkey_ok = np.concatenate([c.gkey_ok for c in chunks])
    else:  # the prompt text within the step
        gkey, gkey_ok = h, prompt_ok
    reward_ok = np.isfinite(reward)
    usable = prompt_ok & step_ok & reward_ok & gkey_ok
    # Report each unusable row once, with its first reason.
    offsets = np.cumsum([0] + [c.hashes.size for c in chunks])
    unscorable = prompt_ok & ~reward_ok if fmt == "trl" else np.zeros(h.size, bool)
    for mask, why in ((~prompt_ok, "no prompt"),
                      (unscorable, "every reward function returned None (TRL leaves the row out of its group's "
                                   "mean and std, so the group stays whole)"),
                      (prompt_ok & ~reward_ok & ~unscorable, "reward is missing, not a number or not finite"),
                      (prompt_ok & reward_ok & ~step_ok, "step is missing or not an integer"),
                      (prompt_ok & reward_ok & step_ok & ~gkey_ok,
                       f"no value in the group column {group_col!r}" if group_col else "its group is cut short")):
        for i in np.flatnonzero(mask):
            c = int(np.searchsorted(offsets, i, side="right") - 1)
            if len(reader.bad_rows) < _MAX_LISTED:
                reader.bad_rows.append(BadRow(str(chunks[c].file), int(chunks[c].line_numbers()[i - offsets[c]]), why))
            reader.bad_count += 1
    # A group that lost a row is incomplete: left out whole.  Rows whose group is known (step and
    # key readable) mark it; TRL blocks are known by position even when the row is unusable.
    known = step_ok & (gkey_ok | (fmt == "trl"))
    lost = known & ~usable & ~unscorable
    pair = np.stack([step, gkey])
    incomplete = np.zeros(h.size, bool)
    if lost.any():
        bad_pairs = np.unique(pair[:, lost], axis=1)
        incomplete = _in_pairs(pair, bad_pairs)
    # Lines that are not rows (malformed JSON, CSV) belong to an unknown group of their file's
    # step.  Where that step's groups otherwise all have one size (a trainer's fixed n), the
    # groups short of it lost those lines; elsewhere the loss cannot be placed, and is said.
    keep = usable & ~incomplete
    for c in reader.chunks:
        if not c.unattributed_bad or fmt == "trl":
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
            warnings.append(f"{c.file.name}: {c.unattributed_bad} unreadable line(s) could not be placed in a group; "
                            "the group(s) they belonged to may be counted short")
    keep = usable & ~incomplete
    lost_groups = pair_codes(step[incomplete], gkey[incomplete])[1]
    return {"hash": h[keep], "step": step[keep], "reward": reward[keep], "gkey": gkey[keep],
            "incomplete_groups": int(lost_groups), "incomplete_rollouts": int((incomplete & usable).sum()),
            "advantage": np.concatenate([c.advantage for c in chunks])[keep]
            if fmt == "trl" and all(c.advantage is not None for c in chunks) else None}


def pair_codes(a, b):
    """Dense codes of the pairs (a[i], b[i]), numbered in (a, b) order, and the number of pairs:
    a lexicographic sort of two int64 keys (``np.unique(axis=1)`` sorts a void view, ~5x slower)."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.size == 0:
        return np.zeros(0, np.int64), 0
    order = np.lexsort((b, a))
    sa, sb = a[order], b[order]
    new = np.r_[True, (sa[1:] != sa[:-1]) | (sb[1:] != sb[:-1])]
    codes = np.empty(a.size, np.int64)
    codes[order] = np.cumsum(new) - 1
    return codes, int(new.sum())


def _in_pairs(pair, bad_pairs):
    """Which columns of ``pair`` (2 × n) are among the columns of ``bad_pairs``."""
    import pandas as pd

    index = pd.MultiIndex.from_arrays([bad_pairs[0], bad_pairs[1]])
    return index.get_indexer(pd.MultiIndex.from_arrays([pair[0], pair[1]])) >= 0


def read_rollouts(paths, *, fmt: str = "auto", reward: str | None = None, prompt_col: str | None = None,
                  step_col: str | None = None, group_col: str | None = None, group_size: int | None = None,
                  progress: bool | None = None) -> RolloutLog:
    """Read rollout logs (verl, TRL or a plain table) into the trainer's groups.

    Parameters
    ----------
    paths : str, Path or list of them
        Files, folders or glob patterns: a TRL ``output_dir`` (or its ``completions/``), a verl
        ``rollout_data`` folder (or the run folder holding it beside ``validation_data``), tables.
    fmt : ``"auto"``, ``"verl"``, ``"trl"`` or ``"table"``
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
        TRL's ``num_generations`` (default: inferred from the files).
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
            raise InputError(f"group_size must be at least 2 (TRL's num_generations), got {group_size}")
    files, fmt, warnings, state_path = _discover(paths, fmt)
    # A table saved by gsd's GroupTracker says which columns it holds and how it was grouped.
    declared = _trl.tracker_table(files) if fmt == "table" and reward is None and group_col is None else None
    if declared:
        reward, group_col = declared["reward_col"], declared["group_col"]
    if group_size is not None and fmt != "trl":
        raise InputError(f"group_size is TRL's num_generations (groups are blocks of rows); the {fmt} format groups "
                         "by prompt or by --group-col")
    if group_col is not None and fmt == "trl":
        raise InputError("group_col: TRL groups are blocks of num_generations rows; use --group-size")
    defaults = {"verl": ("input", "step"), "trl": ("prompt", "step"), "table": ("prompt", "step")}[fmt]
    cols = {"prompt": prompt_col or defaults[0], "step": step_col or defaults[1], "step_required": step_col is not None,
            "group": group_col}

    from ..progress import progress_bar

    reader = _Reader(fmt, cols, reward)
    disable = None if progress is None else not progress
    for path in progress_bar(files, desc="reading logs", unit="file", disable=disable, leave=False):
        _read_file(path, reader)
    G, repeated, eval_steps, zero_std = None, [], [], {}
    if fmt == "trl" and any(c.hashes.size for c in reader.chunks):
        G, repeated, eval_steps, zero_std = _trl_generations(reader, state_path, group_size, warnings)
    got = _assemble(reader, fmt, group_col, warnings)
    if got is None or got["hash"].size == 0:
        detail = f"; first unusable row: {reader.bad_rows[0]}" if reader.bad_rows else ""
        raise InputError(f"LOG: no usable rollout in {len(files)} file(s){detail}")
    uniq, code = np.unique(got["hash"], return_inverse=True)
    labels = np.array([reader.labels[int(v)] for v in uniq.tolist()], dtype=object)
    group, _ = pair_codes(got["step"], got["gkey"])
    code = code.astype(np.int64).ravel()
    terms = reader.terms or []
    reward_name = _reward_text(terms)
    if fmt == "trl":
        group_by = f"blocks of {G} consecutive rows of one generation (num_generations, " \
                   f"{'given' if group_size else 'inferred from the files'})"
    elif group_col:
        group_by = f"rows of one step with the same {group_col!r}"
    else:
        group_by = f"rows of one step with the same {cols['prompt']} text"
    silence = f"zero std of {reward_name!r} within each group (every reward equal), as the trainer normalises it"
    if fmt == "trl" and not reward and len(terms) > 1:
        warnings.append(f"reward = {reward_name} with weight 1 each: TRL does not log its reward_weights; "
                        "if the run weighted them, give the weights with --reward 'a+0.5*b'")
    _check_groups(code, group, got, fmt, group_col, G, warnings)
    missing = []
    if fmt in _TRAINERS:
        module = _TRAINERS[fmt]
        have = {module.step_of(Path(f)) for f in files}
        last = max(have)
        if last <= 10**7:
            missing = sorted(set(range(1, last + 1)) - have)
        if missing:
            warnings.append(f"{len(missing)} of the {last} steps have no log file ({_span(missing)}): the figures "
                            "are those of the logged rollouts, not of the whole generation"
                            + (" (TRL writes one file per logging step: logging_steps > 1)" if fmt == "trl" else ""))
    if declared:
        reward_name, group_by, silence, G = (declared["reward_name"], declared["group_by"], declared["silence"],
                                             declared["group_size"])
    if got["incomplete_groups"]:
        warnings.append(f"{got['incomplete_groups']} group(s) lost a row to an unusable line: incomplete, left out "
                        f"({got['incomplete_rollouts']} usable rollouts in them)")
    return RolloutLog(prompt=code, step=got["step"], reward=got["reward"], labels=labels, hashes=uniq,
                      files=[str(f) for f in files], fmt=fmt, reward_name=reward_name, group=group, group_by=group_by,
                      silence=silence, group_size=G, repeated_steps=repeated, missing_steps=missing,
                      eval_steps=eval_steps, incomplete_groups=got["incomplete_groups"],
                      incomplete_rollouts=got["incomplete_rollouts"], trainer_silent=zero_std,
                      threshold=declared["threshold"] if declared else None, trainer="trl" if declared else None,
                      warnings=warnings,
                      bad_rows=reader.bad_rows, bad_count=reader.bad_count)


def _check_groups(code, group, got, fmt, group_col, G, warnings):
    """Warnings about the groups the log allows: merged duplicates, several prompts in a group,
    and (TRL) silence that disagrees with the logged advantages."""
    sizes = np.bincount(group)
    mixed = pair_codes(group, code)[1] - sizes.size
    if mixed and group_col:
        warnings.append(f"the group column {group_col!r} puts several prompts in one group ({mixed} extra prompt-groups)")
    if fmt != "trl" and not group_col and sizes.size:
        usual = Counter(sizes.tolist()).most_common(1)[0][0]
        merged = (sizes > usual) & (sizes % usual == 0) if usual > 1 else np.zeros(sizes.size, bool)
        if merged.any():
            gstep = np.zeros(sizes.size, np.int64)
            gstep[group] = got["step"]
            steps = np.unique(gstep[merged])
            warnings.append(f"{int(merged.sum())} group(s) hold a multiple of the usual {usual} rollouts (steps "
                            f"{_span(steps.tolist())}): probably duplicated prompts merged into one group; "
                            "log a group id or dataset index as a reward extra key and pass --group-col KEY")
    if fmt == "trl" and got["advantage"] is not None:
        adv = got["advantage"]
        r = got["reward"]
        top = np.full(sizes.size, -np.inf)
        bottom = np.full(sizes.size, np.inf)
        np.maximum.at(top, group, r)
        np.minimum.at(bottom, group, r)
        amax = np.zeros(sizes.size)
        np.maximum.at(amax, group, np.abs(np.nan_to_num(adv, nan=0.0)))
        silent = silent_groups(top, bottom)
        # TRL's float32 rounding leaves |A| up to ~6e-4 on a silent group of graded rewards.
        trainer_silent = amax <= 1e-3
        disagree = int((silent != trainer_silent).sum())
        if disagree and np.any(amax > 0):
            warnings.append(f"{disagree} group(s) are silent under the reward used but not under the advantages TRL "
                            "logged (or the reverse): the reward weights probably differ from the run's reward_weights; "
                            "give them with --reward 'a+0.5*b'")


def silent_groups(top, bottom):
    """A group is silent when its rewards are all equal: max − min within 1e-9 of the larger
    magnitude (float32 trainers round a sum such as 0.1 + 0.2 differently from 0.3)."""
    top = np.asarray(top, np.float64)
    bottom = np.asarray(bottom, np.float64)
    return (top - bottom) <= 1e-9 * np.maximum(1.0, np.maximum(np.abs(top), np.abs(bottom)))
