"""Parse the rows of a run's log tables, file by file, into chunks: per row its prompt's hash, step,
group key and reward, and whether each could be read.

The reward is the one the trainer normalises (verl's ``score``, the sum of TRL's reward columns),
or a weighted sum named by ``reward`` (``"correct+0.5*fmt"``, :func:`parse_reward`).  Only four
numbers per rollout are kept (prompt hash, step, group, reward), never the answer text; each
distinct prompt keeps its first 80 characters as a label.  A row that cannot be used is counted
and listed (:class:`BadRow`) with its file and line.  The trainer's own rules (which rows enter
its groups, its group keys, its reward sum) come from its module's hooks.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..io.arrow_arrays import from_numpy, text_array, to_numpy, valid
from ..io.numbers import step_values
from ..validation import InputError
from .discover import TRAINER_HOOKS, file_step, hooks_of
from .load import nonblank_lines, read_csv, read_jsonl, read_parquet

__all__ = ["BadRow", "Chunk", "Reader", "MAX_LISTED", "parse_reward", "reward_text", "read_file", "repeated_keys"]

_LABEL_CHARS = 80  # characters of each distinct prompt kept as its label
MAX_LISTED = 1000  # bad rows listed one by one (all are counted)
_MAX_STEP = 2**53  # steps beyond this cannot be told apart once a table tool turns them into floats


@dataclass(frozen=True)
class BadRow:
    """A row that could not be used: its file, 1-based line (or row) number and why."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


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


# --------------------------------------------------------------------------------------------
# One file → a chunk


@dataclass
class Chunk:
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
    # Each row's index into this piece's distinct prompts, and their hashes (hashes = prompt_hashes[prompt_codes]
    # where prompt_ok): dense small codes that a streaming reader groups by without sorting 64-bit hashes.
    prompt_codes: np.ndarray | None = None
    prompt_hashes: np.ndarray | None = None

    def line_numbers(self) -> np.ndarray:
        if self.lines is None:
            self.lines = nonblank_lines(self.file)
        return self.lines


class Reader:
    """Reads the files of one run, one at a time, keeping labels, reward columns and bad rows."""

    def __init__(self, fmt, cols, reward):
        self.fmt, self.cols, self.reward_spec = fmt, cols, reward
        self.module = TRAINER_HOOKS.get(fmt)
        self.terms = None  # [(coef, column)] once the first file's columns are known
        self.labels: dict[int, str] = {}
        self.bad_rows: list[BadRow] = []
        self.bad_count = 0
        self.chunks: list[Chunk] = []
        self.extra_outputs = 0
        self.repeated_rows = 0  # rows whose trainer key and reward repeat an earlier row's: counted once
        self.keyed = False  # the trainer's own group keys were used
        self.verdicts: list = []  # per chunk, a saved per-row zero-std verdict (gsd's tracker table)
        self.pads = False  # the run's trainer pads its groups with rows it did not generate (trl-cgrpo)

    def bad(self, file, line, reason):
        self.bad_count += 1
        if len(self.bad_rows) < MAX_LISTED:
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

    def parquet_columns(self, schema) -> list[str]:
        """The columns of a parquet file this run needs: prompt, step, group, verdict, advantage,
        the trainer's keys and the reward's terms."""
        import pyarrow as pa

        cols = self.cols
        wanted = {cols["prompt"], cols["step"], cols.get("group"), cols.get("silent"), "advantage"} | set(
            hooks_of(self.module).KEY_COLUMNS
        )
        if self.reward_spec:
            wanted |= {name for _, name in parse_reward(self.reward_spec, schema.names)}
        elif self.module is not None:
            numeric = {f.name for f in schema if _is_number_type(f.type, pa)}
            wanted |= {name for _, name in self.module.default_reward(schema.names, numeric)}
        else:
            wanted |= {"reward"}
        return [n for n in schema.names if n in wanted]

    # -- one table of rows

    def add(self, path, table, lines, *, extra_bad=0):
        """Parse one table of rows (a file, or a piece of one) into a chunk: the rows the trainer
        groups, their reward, step, prompt and group key."""
        table, lines = self._trainer_rows(table, lines)
        columns = table.column_names
        self._check_columns(path, columns)
        if self.terms is None:
            self.terms = self._terms(columns, {name: table.schema.field(name).type for name in columns}, path)
        self._flag_text_rewards(path, table, lines)
        parts, reward = self._reward(path, table)
        table, lines, parts, reward, conflict = self._drop_repeated(path, table, lines, parts, reward)
        steps, step_ok, from_name = self._steps(path, table)
        hashes, prompt_ok, codes, distinct = self._coded_prompts(table.column(self.cols["prompt"]))
        gkey, gkey_ok = self._group_keys(path, table)
        hooks = hooks_of(self.module)
        if self.cols.get("silent") in columns:  # the trainer's own verdict, saved beside the rows
            self.verdicts.append(numeric_column(table.column(self.cols["silent"]), self.cols["silent"], path))
        advantage = None
        if hooks.check_advantages is not None and "advantage" in columns:
            advantage = numeric_column(table.column("advantage"), "advantage", path)
        first_step = from_name if from_name is not None else (int(steps[step_ok][0]) if step_ok.any() else 0)
        self.chunks.append(
            Chunk(
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
                hooks.fingerprint(table),
                extra_bad,
                first_step,
                _mtime(path),
                conflict=conflict,
                padding=hooks.padding_rows(table, parts) if hooks.padding_rows is not None else None,
                prompt_codes=codes,
                prompt_hashes=distinct,
            )
        )

    def _trainer_rows(self, table, lines):
        """The rows the trainer groups: its own preparation (TRL: training rows only), then its
        members (verl V1: a session's final output; the others counted as extra outputs)."""
        hooks = hooks_of(self.module)
        if hooks.prepare is not None:
            table, lines = hooks.prepare(table, lines)
        members = hooks.members(table)
        if members is not None and not members.all():
            self.extra_outputs += int((~members).sum())
            lines = (np.arange(1, table.num_rows + 1) if lines is None else lines)[members]
            table = table.filter(from_numpy(np.asarray(members, bool)))
        return table, lines

    def _check_columns(self, path, columns) -> None:
        """An InputError for a column name used twice or a missing prompt column (naming the
        trainer whose rows these are when --format names another)."""
        module = self.module
        twice = sorted({c for c in columns if columns.count(c) > 1})
        if twice:
            raise InputError(
                f"{path}: the column name {twice[0]!r} is used by {columns.count(twice[0])} columns; "
                "rename them so that each column has one name"
            )
        pcol = self.cols["prompt"]
        if pcol in columns:
            return
        if module is None and not self.cols.get("prompt_given"):
            raise InputError(
                f"{path}: not a rollout log (one row per answer, with its prompt, reward and step): no "
                f"{pcol!r} column among {', '.join(columns[:12])}{', ...' if len(columns) > 12 else ''}"
            )
        if module is not None and pcol == module.PROMPT_COL:  # --format names another trainer?
            other = sorted(
                (
                    n
                    for n, m in TRAINER_HOOKS.items()
                    if m is not module
                    and m.PROMPT_COL in columns
                    and path.suffix.lower() in m.SUFFIXES
                    and _takes_reward(m, columns)
                ),
                key=lambda n: not TRAINER_HOOKS[n].is_log_file(path),
            )  # the one that names such files
            if other:
                raise InputError(
                    f"{path}: --format {self.fmt}: no {pcol!r} column (columns: "
                    f"{', '.join(columns)}): its rows are {other[0]}'s: use --format {other[0]}"
                )
        raise InputError(f"{path}: no prompt column {pcol!r}; columns: {', '.join(columns)}")

    def _reward(self, path, table):
        """(the reward's terms, one row per term; the reward the trainer normalises), in the
        trainer's arithmetic; a table's weighted sum that overflows is an InputError."""
        columns = table.column_names
        missing = [name for _, name in self.terms if name not in columns]
        if missing:
            raise InputError(f"{path}: reward column {missing[0]!r} not found; columns: {', '.join(columns)}")
        parts = np.stack([numeric_column(table.column(name), name, path) for _, name in self.terms])
        coefs = np.array([c for c, _ in self.terms])
        total = hooks_of(self.module).total_reward or _total_reward
        reward = total(parts, coefs)
        overflow = np.isinf(reward) & np.isfinite(parts).all(axis=0)
        if overflow.any() and self.module is None:  # a trainer's own arithmetic overflows as the trainer's does
            raise InputError(
                f"{path}: the reward {reward_text(self.terms)!r} overflows (its weighted sum is infinite "
                f"on {int(overflow.sum())} row(s) whose terms are finite): rescale the reward columns"
            )
        return parts, reward

    def _flag_text_rewards(self, path, table, lines) -> None:
        """Rows whose reward column holds text that is not a number (``"x"``): bad rows, named with
        their line.  They stay in their group (TRL groups rows by position) with no reward, as a
        reward the trainer could not score; a missing value, ``"nan"`` or ``"None"`` is only that.
        Only for a trainer that keeps a reward-less row in its group (TRL): elsewhere a row without
        a number is a bad row already (``report_unusable``)."""
        if not hooks_of(self.module).UNSCORABLE_IN_GROUP:
            return
        import pyarrow as pa
        import pyarrow.compute as pc

        bad = np.zeros(table.num_rows, dtype=bool)
        where = np.empty(table.num_rows, dtype=object)  # the first column whose text is not a number
        for _, name in self.terms:
            arr = table.column(name)
            if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
                continue
            arr = arr.combine_chunks()
            text = pc.utf8_lower(pc.utf8_trim_whitespace(arr))
            missing = ~valid(arr) | to_numpy(pc.is_in(text, value_set=text_array(_MISSING_TEXT)), fill=True)
            new = ~missing & np.isnan(numeric_column(arr, name, path)) & ~bad
            where[new] = name
            bad |= new
        if bad.any():
            lines = np.arange(1, table.num_rows + 1) if lines is None else np.asarray(lines)
            for line, name in zip(lines[bad].tolist(), where[bad].tolist()):
                self.bad(path, line, f"reward column {name!r}: text that is not a number")

    def _drop_repeated(self, path, table, lines, parts, reward):
        """A row whose trainer key is written twice: kept once if the rewards agree (the others
        counted as repeated rows), flagged as a contradiction if not; (table, lines, parts,
        reward, conflict) of the rows kept (conflict None: the trainer has no row keys)."""
        row_keys = hooks_of(self.module).row_keys(table)
        if row_keys is None:
            return table, lines, parts, reward, None
        keep, conflict = repeated_keys(row_keys, reward)
        if not keep.all():
            self.repeated_rows += int((~keep).sum())
            lines = (nonblank_lines(path) if lines is None else lines)[keep]
            table, reward, conflict = table.filter(from_numpy(keep)), reward[keep], conflict[keep]
            parts = parts[:, keep]
        return table, lines, parts, reward, conflict

    def _steps(self, path, table):
        """(step per row, which rows hold one, the step the file's name carries or None): the step
        column when there is one, else the file's step (0 without one)."""
        n, columns = table.num_rows, table.column_names
        scol = self.cols["step"]
        from_name = file_step(self.module, path)
        if scol and scol in columns:
            steps, step_ok = _integers(table.column(scol))
            return steps, step_ok, from_name
        if scol and self.module is None and self.cols.get("step_required"):
            raise InputError(f"{path}: no step column {scol!r}; columns: {', '.join(columns)}")
        return np.full(n, from_name if from_name is not None else 0, np.int64), np.ones(n, bool), from_name

    def _group_keys(self, path, table):
        """(group key per row, which rows hold one), or (None, None) when the prompt text within
        the step is the group: the group column named by the caller, else the trainer's own keys."""
        hooks = hooks_of(self.module)
        gcol = self.cols.get("group")
        if gcol:
            if gcol not in table.column_names:
                raise InputError(f"{path}: no group column {gcol!r}; columns: {', '.join(table.column_names)}")
            own = hooks.group_column(table, gcol)
            return own if own is not None else _hash_values(table.column(gcol))
        keys = hooks.group_keys(table)
        if keys is None:
            return None, None
        self.keyed = True
        return keys

    def hash_prompts(self, arr):
        """64-bit hashes of the prompts (each distinct one hashed once) and which rows have one."""
        return self._coded_prompts(arr)[:2]

    def _coded_prompts(self, arr):
        """64-bit hashes of the prompts (each distinct one hashed once), which rows have one, each
        row's index among the distinct prompts and their hashes.  A dictionary column of text (a
        parquet column written from categories) is hashed through its dictionary as it is."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from ..integrations.columns import chat_label
        from ..io.hashing import hash_text

        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        t = arr.type
        if pa.types.is_dictionary(t) and pa.types.is_string(t.value_type) and not arr.dictionary.null_count:
            enc, structured = arr, False  # already distinct texts and their indices
            ok = valid(arr)
        else:
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
        idx = to_numpy(enc.indices, fill=0).astype(np.int64) if len(enc) else np.zeros(0, np.int64)
        hashes = h[idx] if h.size else np.zeros(len(idx), np.int64)
        return np.where(ok, hashes, 0).astype(np.int64), ok, idx, h


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
    import pyarrow.compute as pc

    from ..io.hashing import hash_text

    strings, _ = _as_string_array(arr)
    ok = valid(strings)
    h = np.zeros(len(strings), np.int64)
    if ok.any():
        enc = pc.dictionary_encode(strings.filter(from_numpy(ok)))  # each value hashed once
        h[ok] = hash_text(enc.dictionary)[to_numpy(enc.indices)]
    return h, ok


def numeric_column(arr, name, file):
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

        from ..integrations.columns import text_to_numbers

        out = text_to_numbers(arr)
        for text, value in _BOOL_STRINGS.items():
            out[to_numpy(pc.is_in(arr, value_set=text_array([text])), fill=False)] = value
        return out
    raise InputError(f"{file}: column {name!r} holds {t}, not numbers")


# Text a reward column may hold for a reward that is missing (not a bad row): empty, NaN, None.
_MISSING_TEXT = ["", "nan", "-nan", "+nan", "none", "null", "na", "n/a"]

# Booleans written as text (verl dumps numpy booleans as "True"/"False").
_BOOL_STRINGS = {"True": 1.0, "False": 0.0, "true": 1.0, "false": 0.0}


def _integers(arr):
    """A step column as int64 and a mask of the rows that hold a step: an integer in [0, 2^63 − 1]
    (:func:`gsd.io.numbers.step_values`; never through float64 for integer columns; a float or
    text step must be integral and below 2^53).  A row without one is an unusable row, counted
    and named with its line."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    present = valid(arr)
    if pa.types.is_integer(t):
        raw = to_numpy(arr, fill=0)
        steps, ok = step_values(raw)
        return steps, ok & present
    if pa.types.is_string(t) or pa.types.is_large_string(t):  # a CSV's steps: text read as exact integers
        import pyarrow.compute as pc

        # pandas writes integer steps of a float column as "1.0": a zero fraction is the same integer.
        text = pc.replace_substring_regex(pc.utf8_trim_whitespace(arr), r"\.0*$", "")
        ok = to_numpy(pc.match_substring_regex(text, r"^\+?[0-9]{1,18}$"), fill=False)  # 18 digits fit int64
        out = np.zeros(len(arr), np.int64)
        if ok.any():
            out[ok] = to_numpy(pc.cast(pc.replace_substring(text.filter(from_numpy(ok)), "+", ""), pa.int64()))
        # 19 digits: read as uint64 (never overflows), kept below 2^63 (what int64 holds)
        long = to_numpy(pc.match_substring_regex(text, r"^\+?[0-9]{19}$"), fill=False)
        if long.any():
            big, fits = step_values(
                to_numpy(pc.cast(pc.replace_substring(text.filter(from_numpy(long)), "+", ""), pa.uint64()))
            )
            out[long], ok[long] = big, fits
        return out, ok
    return step_values(numeric_column(arr, "step", ""), float_limit=_MAX_STEP)


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


CHUNK_ROWS = 1 << 20  # rows per piece of a parquet or CSV file (bounds the memory of a big table)


def read_file(path: Path, reader: Reader, on_piece=None):
    """Read one file (any format), piece by piece, into the reader's chunks; ``on_piece(reader)``,
    when given, is called after each piece (a streaming caller takes the new chunks there and
    clears them, so that no more than one piece's rows are held)."""
    import pyarrow as pa

    from ..io.userinput import reading, refuse_binary

    suffix = path.suffix.lower()
    if suffix == ".parquet":
        pieces = read_parquet(
            path, reader.parquet_columns, hooks_of(reader.module).READ_ALL_COLUMNS, dictionary=(reader.cols["prompt"],)
        )
    elif suffix in (".jsonl", ".json"):
        pieces = read_jsonl(path)
    elif suffix == ".csv":
        pieces = read_csv(path)
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
                if on_piece is not None:
                    on_piece(reader)
        except pa.ArrowException as exc:  # pyarrow's reader on bytes it cannot take
            raise InputError(f"LOG: cannot read {str(path)!r} ({str(exc).splitlines()[0][:200]})") from None


def _empty_chunk(path, bad):
    z = np.zeros(0, np.int64)
    return Chunk(path, z, z.astype(bool), z, z.astype(bool), z.astype(float), None, None, z, None, None, bad)
