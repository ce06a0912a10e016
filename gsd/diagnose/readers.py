"""Read GRPO rollout logs into three compact columns: prompt, step, reward.

Formats (what the trainers write, see :ref:`theory-logs`):

* ``verl`` — ``trainer.rollout_data_dir``: one ``{step}.jsonl`` per training step, one JSON
  object per rollout with ``input`` (the decoded prompt), ``output``, ``score`` (the summed
  token-level reward), ``step`` and any extra reward keys (e.g. ``acc``).  A prompt is its
  ``input`` text; a group is the rows of one step with the same input.
* ``trl`` — ``GRPOTrainer(log_completions=True)``: ``completions/completions_{step:05d}.parquet``
  with ``step``, ``prompt``, ``completion``, one column per reward function (named after the
  function), extra logged columns and ``advantage``.  With several reward functions choose one
  (``reward="name"``) or their sum (``reward="a+b"``; unweighted, a function that returned None
  for a rollout counts as 0 there, as in TRL).
* ``table`` — any CSV, parquet or JSONL file with a prompt-id, a reward and (optionally) a step
  column, named by the caller.

Only three things per rollout are kept in memory — a 64-bit hash of the prompt, the step and the
reward (24 bytes, so 10^7 rollouts take 240 MB) — never the answer text.  Files are read one at a
time (parquet: only the needed columns; JSONL: pyarrow's block reader, with a line-by-line
fallback for a file that has a malformed line).  A row that cannot be used (malformed JSON, a
missing or non-numeric reward, a missing prompt) is counted and reported with its file and line,
never dropped silently.
"""

from __future__ import annotations

import glob as _glob
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .._validate import InputError

__all__ = ["FORMATS", "RolloutLog", "BadRow", "read_rollouts", "find_log_files", "detect_format"]

#: Formats understood by :func:`read_rollouts` (``"auto"`` guesses from the file names).
FORMATS = ("auto", "verl", "trl", "table")

# Columns of TRL's completions table that are not rewards.
_TRL_NOT_REWARD = ("step", "prompt", "completion", "advantage", "mode", "image", "images")
_VERL_NOT_REWARD = ("input", "output", "gts", "step", "data_source", "request_id", "uid")
_TABLE_SUFFIXES = (".csv", ".parquet", ".jsonl", ".json")
_LABEL_CHARS = 80  # characters of each distinct prompt kept as its label
_MAX_LISTED = 1000  # bad rows listed one by one (all are counted)


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
    """The rollouts of a run: one entry per rollout in ``prompt``, ``step`` and ``reward``.

    Attributes
    ----------
    prompt : ndarray of int64
        Dense prompt code, 0 … P − 1 (``labels[code]`` is the prompt, ``hashes[code]`` its
        64-bit hash).
    step : ndarray of int64
        Training step of the rollout.
    reward : ndarray of float64
        Reward as logged (before any threshold).
    labels, hashes : ndarray
        Per prompt: the first 80 characters of its text (or its id) and its hash.
    files : list of str
        Files read, in order.
    bad_rows : list of BadRow
        The first 1000 unusable rows; ``bad_count`` counts all of them.
    fmt, reward_name : str
        The format read and the reward column(s) used.
    """

    prompt: np.ndarray
    step: np.ndarray
    reward: np.ndarray
    labels: np.ndarray
    hashes: np.ndarray
    files: list
    fmt: str
    reward_name: str
    bad_rows: list = field(default_factory=list)
    bad_count: int = 0

    @property
    def rows(self) -> int:
        return int(self.prompt.size)


# --------------------------------------------------------------------------------------------
# Finding files and guessing the format


def find_log_files(paths, fmt: str = "auto") -> list[Path]:
    """The log files named by ``paths`` (files, folders or glob patterns), sorted by step.

    A folder is searched recursively for ``*.jsonl`` (verl), ``completions_*.parquet`` (TRL) or
    any table file, depending on ``fmt``.
    """
    if isinstance(paths, (str, Path)):
        paths = [paths]
    found: list[Path] = []
    for raw in paths:
        text = str(raw)
        path = Path(text)
        if path.is_dir():
            found.extend(_files_in_folder(path, fmt))
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
                         "(expected verl's {step}.jsonl, TRL's completions_{step:05d}.parquet or a CSV/parquet/JSONL table)")
    return sorted(unique, key=lambda p: (_step_from_name(p) is None, _step_from_name(p) or 0, str(p)))


_NAMES = {"trl": "TRL's completions_{step:05d}.parquet", "verl": "verl's {step}.jsonl"}


# A folder is searched recursively; beyond this many entries it is not a log folder (``/``, a home).
_MAX_FOLDER_ENTRIES = 200_000


def _walk(folder: Path) -> list[Path]:
    """The files under ``folder`` (hidden files skipped), or an InputError for an unreadable or huge tree."""
    def unreadable(exc):
        raise InputError(f"LOG: cannot read the folder {str(exc.filename)!r} ({exc.strerror})")

    files, seen = [], 0
    for root, dirs, names in os.walk(folder, onerror=unreadable):
        seen += len(dirs) + len(names)
        if seen > _MAX_FOLDER_ENTRIES:
            raise InputError(f"LOG: {str(folder)!r} holds more than {_MAX_FOLDER_ENTRIES:,} files and folders; "
                             "name the log files or the run's log folder")
        files.extend(Path(root, n) for n in names if not n.startswith("."))
    return [p for p in files if p.is_file()]


def _files_in_folder(folder: Path, fmt: str) -> list[Path]:
    files = _walk(folder)
    trl = [p for p in files if _is_trl_name(p)]
    verl = [p for p in files if _is_verl_name(p)]
    for name, mine, other in (("trl", trl, verl), ("verl", verl, trl)):
        if fmt == name and not mine and other:
            theirs = "verl" if name == "trl" else "trl"
            raise InputError(f"format {name}: no {_NAMES[name]} file in {folder}, but {len(other)} "
                             f"{_NAMES[theirs]} file(s): use --format {theirs}")
    if fmt == "trl" or (fmt == "auto" and trl):
        return trl
    if fmt == "verl" or (fmt == "auto" and verl):
        return verl
    return [p for p in files if p.suffix.lower() in _TABLE_SUFFIXES]


def _is_trl_name(p: Path) -> bool:
    return p.suffix == ".parquet" and re.fullmatch(r"completions_\d+", p.stem) is not None


def _is_verl_name(p: Path) -> bool:
    return p.suffix == ".jsonl" and p.stem.isdigit()


def _step_from_name(p: Path):
    m = re.search(r"(\d+)$", p.stem)
    return int(m.group(1)) if m else None


def detect_format(files) -> str:
    """``"trl"`` if every file is a ``completions_*.parquet``, ``"verl"`` if every file is a
    ``{step}.jsonl``, else ``"table"``."""
    files = [Path(f) for f in files]
    if files and all(_is_trl_name(p) for p in files):
        return "trl"
    if files and all(_is_verl_name(p) for p in files):
        return "verl"
    return "table"


# --------------------------------------------------------------------------------------------
# One file → a chunk of (hash, step, reward) + labels


class _Collector:
    """Accumulates per-file chunks and the bad rows."""

    def __init__(self):
        self.hashes, self.steps, self.rewards = [], [], []
        self.labels: dict[int, str] = {}
        self.reward_names: list[str] = []
        self.bad_rows: list[BadRow] = []
        self.bad_count = 0

    def bad(self, file, line, reason):
        self.bad_count += 1
        if len(self.bad_rows) < _MAX_LISTED:
            self.bad_rows.append(BadRow(str(file), int(line), reason))

    def add(self, file, prompts, steps, rewards, lines=None):
        """Keep the rows whose prompt is a string and whose reward is a finite number.

        ``prompts``: a pyarrow array (string or other), ``steps``/``rewards``: float arrays with
        NaN where missing, ``lines``: 1-based line (row) numbers for the report, or None for a
        JSONL file read whole (they are then counted from the file, only if a row is bad).
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        prompts = _as_string_array(prompts)
        missing_prompt = np.asarray(prompts.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        bad_reward = ~np.isfinite(rewards)
        bad_step = ~np.isfinite(steps)
        if lines is None and (missing_prompt | bad_reward | bad_step).any():
            lines = _nonblank_lines(file)
        for mask, why in ((missing_prompt, "no prompt"), (bad_reward & ~missing_prompt, "reward is missing, not a number or not finite"),
                          (bad_step & ~missing_prompt & ~bad_reward, "step is missing or not an integer")):
            if not mask.any():
                continue
            for line in lines[mask][: max(0, _MAX_LISTED - len(self.bad_rows))]:
                self.bad_rows.append(BadRow(str(file), int(line), why))
            self.bad_count += int(mask.sum())
        keep = ~(missing_prompt | bad_reward | bad_step)
        if not keep.any():
            return
        prompts = prompts.filter(pa.array(keep))
        # Hash each distinct prompt once (a step holds each prompt G times).
        enc = pc.dictionary_encode(prompts).combine_chunks() if isinstance(prompts, pa.ChunkedArray) else pc.dictionary_encode(prompts)
        import pandas as pd

        uniq = np.asarray(enc.dictionary.to_numpy(zero_copy_only=False), dtype=object)
        h = pd.util.hash_array(uniq, categorize=False).astype(np.int64)
        for hv, text in zip(h.tolist(), uniq.tolist()):
            if hv not in self.labels:
                self.labels[hv] = text[:_LABEL_CHARS]
        idx = enc.indices.to_numpy(zero_copy_only=False)
        self.hashes.append(h[idx])
        self.steps.append(steps[keep].astype(np.int64))
        self.rewards.append(np.asarray(rewards[keep], dtype=np.float64))


def _as_string_array(arr):
    """Prompts as a pyarrow string array; structured prompts (chat messages) become their JSON."""
    import pyarrow as pa

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        return arr
    if pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type) or pa.types.is_dictionary(arr.type):
        return arr.cast(pa.string())
    # Conversational prompts (lists of {role, content}): one Python pass, the only per-row one.
    return pa.array([None if v is None else json.dumps(v, sort_keys=True, ensure_ascii=False) for v in arr.to_pylist()],
                    type=pa.string())


def _numeric(arr, name, file):
    """A pyarrow column as float64 with NaN for missing or non-numeric entries."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return arr.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False).astype(np.float64)
    if pa.types.is_null(t):
        return np.full(len(arr), np.nan)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        import pandas as pd

        return pd.to_numeric(pd.Series(arr.to_numpy(zero_copy_only=False)), errors="coerce").to_numpy(np.float64)
    raise InputError(f"{file}: column {name!r} holds {t}, not numbers")


def _pick_reward(columns, reward, fmt, file, dtypes):
    """The reward column names to sum, from the user's choice or the table's columns."""
    import pyarrow as pa

    if reward:
        names = [r.strip() for r in re.split(r"[+,]", reward) if r.strip()]
        missing = [n for n in names if n not in columns]
        if missing:
            raise InputError(f"{file}: reward column {missing[0]!r} not found; columns: {', '.join(columns)}")
        return names
    if fmt == "verl":
        if "score" in columns:
            return ["score"]
        raise InputError(f"{file}: no 'score' key; choose the reward with --reward KEY (keys: {', '.join(columns)})")
    if fmt == "trl":
        cands = [c for c in columns if c not in _TRL_NOT_REWARD and _is_number_type(dtypes.get(c), pa)]
        if len(cands) == 1:
            return cands
        if not cands:
            raise InputError(f"{file}: no reward column (numeric columns other than step and advantage); "
                             f"columns: {', '.join(columns)}")
        raise InputError(f"{file}: several reward columns ({', '.join(cands)}): choose one with --reward NAME "
                         f"or their sum with --reward {'+'.join(cands)}")
    raise InputError(f"{file}: name the reward column with --reward (columns: {', '.join(columns)})")


def _is_number_type(t, pa):
    return t is not None and (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t))


_CHUNK_ROWS = 1 << 20  # rows per piece of a parquet or CSV file (bounds the memory of a big table)


def _read_table_file(path: Path, fmt: str, cols: dict, reward, col: _Collector):
    """Read one file (any format), piece by piece, and hand its rows to the collector."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        pieces = _read_parquet(path, cols, reward)
    elif suffix in (".jsonl", ".json"):
        pieces = _read_jsonl(path, col)
    elif suffix == ".csv":
        pieces = _read_csv(path, col)
    else:
        raise InputError(f"{path}: unknown file type {suffix!r} (expected .jsonl, .parquet or .csv)")
    for table, lines in pieces:
        if table.num_rows:
            _add_table(path, fmt, cols, reward, col, table, lines)


def _add_table(path, fmt, cols, reward, col, table, lines):
    if fmt == "trl" and "mode" in table.column_names:
        # Some TRL versions log evaluation completions too, marked by a mode column: keep training.
        import pyarrow.compute as pc

        train = pc.fill_null(pc.equal(table.column("mode"), "train"), False)
        if lines is None:
            lines = np.arange(1, table.num_rows + 1)
        lines = lines[np.asarray(train.to_numpy(zero_copy_only=False), dtype=bool)]
        table = table.filter(train).drop_columns(["mode"])
        if table.num_rows == 0:
            return
    columns = table.column_names
    dtypes = {name: table.schema.field(name).type for name in columns}
    pcol = cols["prompt"]
    if pcol not in columns:
        raise InputError(f"{path}: no prompt column {pcol!r}; columns: {', '.join(columns)}"
                         + ("" if fmt != "table" else " (name it with --prompt-col)"))
    names = _pick_reward(columns, reward, fmt, path, dtypes)
    col.reward_names.extend(n for n in names if n not in col.reward_names)
    parts = np.stack([_numeric(table.column(name), name, path) for name in names])
    # Like TRL's sum over reward functions: one that did not apply (None) counts as 0, unless
    # none applied.  A single column keeps its NaN (a missing reward is a bad row).
    rewards = parts[0] if len(names) == 1 else np.where(np.isnan(parts).all(axis=0), np.nan, np.nansum(parts, axis=0))
    scol = cols["step"]
    if scol and scol in columns:
        steps = _numeric(table.column(scol), scol, path)
        steps = np.where(steps == np.round(steps), steps, np.nan)
    else:
        from_name = _step_from_name(path)
        if scol and fmt == "table" and cols.get("step_required"):
            raise InputError(f"{path}: no step column {scol!r}; columns: {', '.join(columns)}")
        steps = np.full(table.num_rows, float(from_name if from_name is not None else 0))
    col.add(path, table.column(pcol), steps, rewards, lines)


_NUMBER_TYPES = ("double", "float", "int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "uint64",
                 "bool", "halffloat")


def _read_parquet(path, cols, reward):
    """Row batches of the needed columns only (never the completions' text)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a non-parquet file
        raise InputError(f"{path}: not a readable parquet file ({type(exc).__name__}: {str(exc).splitlines()[0]})") from None
    schema = pf.schema_arrow
    wanted = {cols["prompt"], cols["step"], "mode"} | ({r.strip() for r in re.split(r"[+,]", reward)} if reward else set())
    if not reward:  # the reward is picked among the numeric columns: read those
        wanted |= {n for n, t in zip(schema.names, schema.types) if str(t) in _NUMBER_TYPES}
    names = [n for n in schema.names if n in wanted]
    start = 1
    batches = pf.iter_batches(batch_size=_CHUNK_ROWS, columns=names)
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (OSError, pa.ArrowException) as exc:  # a damaged file: say which, not a traceback
            raise InputError(f"{path}: parquet file damaged near row {start} ({str(exc).splitlines()[0]})") from None
        table = pa.Table.from_batches([batch])
        yield table, np.arange(start, start + table.num_rows)
        start += table.num_rows


def _read_jsonl(path, col: _Collector):
    """pyarrow's JSON reader; on a malformed line, a line-by-line pass that reports it."""
    import pyarrow as pa
    import pyarrow.json as pj

    if path.stat().st_size == 0:
        return
    try:
        table = pj.read_json(path, read_options=pj.ReadOptions(block_size=1 << 24))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        table = None
    if table is not None:
        yield table, None  # line numbers are counted only if a row turns out unusable
        return
    records, lines = [], []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                col.bad(path, number, f"not valid JSON ({exc.msg})")
                continue
            if not isinstance(obj, dict):
                col.bad(path, number, "not a JSON object")
                continue
            records.append({k: (v if not isinstance(v, (dict, list)) else json.dumps(v, sort_keys=True))
                            for k, v in obj.items() if k not in ("output", "completion", "gts")})
            lines.append(number)
    if not records:
        return
    import pandas as pd

    df = pd.DataFrame.from_records(records)
    for c in df.columns:  # mixed columns (numbers and text) stay objects: make them text
        if df[c].dtype == object:
            df[c] = df[c].map(lambda v: v if v is None or isinstance(v, str) else (None if v != v else str(v)))
    yield pa.Table.from_pandas(df, preserve_index=False), np.asarray(lines)


def _nonblank_lines(path) -> np.ndarray:
    """1-based numbers of the non-blank lines of a text file (pyarrow's JSON reader skips blank ones)."""
    with open(path, "rb") as fh:
        return np.array([i for i, text in enumerate(fh, start=1) if text.strip()], dtype=np.int64)


def _read_csv(path, col: _Collector):
    """Chunks of a CSV (every field read as text, numbers parsed later so that a non-numeric
    reward becomes a reported row, not a failed file); rows with the wrong number of fields are
    reported with their line."""
    import warnings

    import pandas as pd
    import pyarrow as pa

    try:
        reader = pd.read_csv(path, dtype=str, on_bad_lines="warn", chunksize=_CHUNK_ROWS)
    except pd.errors.EmptyDataError:
        return
    except (UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise InputError(f"{path}: not a readable CSV file ({exc})") from None
    next_line = 2  # line of the first data row (after the header), 1-based
    skipped_total = []
    with reader:  # closes the file when the caller stops early (an error in a later chunk)
        while True:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    df = next(reader)
                except StopIteration:
                    break
                except (UnicodeDecodeError, pd.errors.ParserError) as exc:
                    raise InputError(f"{path}: not a readable CSV file ({exc})") from None
            skipped = []
            for w in caught:
                for m in re.finditer(r"Skipping line (\d+): (.*)", str(w.message)):
                    skipped.append(int(m.group(1)))
                    col.bad(path, int(m.group(1)), f"malformed CSV row ({m.group(2).strip()})")
            skipped_total.extend(skipped)
            # Data rows are consecutive lines once the skipped ones are taken out (no quoted newlines).
            lines = np.arange(next_line, next_line + len(df) + len(skipped))
            if skipped:
                lines = lines[~np.isin(lines, skipped)][: len(df)]
            next_line = int(lines[-1]) + 1 if len(lines) else next_line + len(skipped)
            yield pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False), lines


# --------------------------------------------------------------------------------------------


def read_rollouts(paths, *, fmt: str = "auto", reward: str | None = None, prompt_col: str | None = None,
                  step_col: str | None = None, progress: bool | None = None) -> RolloutLog:
    """Read rollout logs (verl, TRL or a plain table) into a :class:`RolloutLog`.

    Parameters
    ----------
    paths : str, Path or list of them
        Files, folders or glob patterns.
    fmt : ``"auto"``, ``"verl"``, ``"trl"`` or ``"table"``
        ``"auto"`` decides from the file names (``{step}.jsonl`` → verl,
        ``completions_{step:05d}.parquet`` → TRL, anything else → table).
    reward : str, optional
        Reward column or key.  verl: ``score`` by default, or an extra key such as ``acc``.
        TRL: the reward function's column (required when there are several), or ``"a+b"`` for
        the sum of several.  Table: required.
    prompt_col, step_col : str, optional
        Prompt-id and step columns of a table (defaults ``prompt`` and ``step``; verl uses
        ``input``).  Without a step column, a file's step is the number its name ends with
        (``0`` if none).
    progress : bool, optional
        Show a progress bar over the files (default: when stderr is a terminal).

    Returns
    -------
    RolloutLog

    Raises
    ------
    InputError
        No file, an unreadable file, a missing column, or no usable row at all.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> rows = [{"input": "q1", "output": "...", "score": s, "step": 1} for s in (0, 1, 1, 0)]
    >>> _ = (d / "1.jsonl").write_text("\\n".join(json.dumps(r) for r in rows) + "\\n")
    >>> log = read_rollouts(d)
    >>> log.fmt, log.rows, log.reward.tolist(), log.labels.tolist()
    ('verl', 4, [0.0, 1.0, 1.0, 0.0], ['q1'])
    """
    if fmt not in FORMATS:
        raise InputError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    files = find_log_files(paths, fmt)
    if fmt == "auto":
        fmt = detect_format(files)
    defaults = {"verl": ("input", "step"), "trl": ("prompt", "step"), "table": ("prompt", "step")}[fmt]
    cols = {"prompt": prompt_col or defaults[0], "step": step_col or defaults[1],
            "step_required": step_col is not None}
    if fmt == "trl":
        bad = [f for f in files if f.suffix != ".parquet"]
        if bad:
            raise InputError(f"format trl reads TRL's completions_*.parquet files, got {bad[0]}")
    if fmt == "verl":
        bad = [f for f in files if f.suffix.lower() not in (".jsonl", ".json")]
        if bad:
            raise InputError(f"format verl reads verl's {{step}}.jsonl rollout dumps, got {bad[0]}")

    from ..progress import progress_bar

    col = _Collector()
    disable = None if progress is None else not progress
    for path in progress_bar(files, desc="reading logs", unit="file", disable=disable, leave=False):
        _read_table_file(path, fmt, cols, reward, col)
    if not col.hashes:
        detail = f"; first unusable row: {col.bad_rows[0]}" if col.bad_rows else ""
        raise InputError(f"LOG: no usable rollout in {len(files)} file(s){detail}")
    hashes = np.concatenate(col.hashes)
    uniq, code = np.unique(hashes, return_inverse=True)
    labels = np.array([col.labels[int(h)] for h in uniq.tolist()], dtype=object)
    reward_name = "+".join(col.reward_names)
    return RolloutLog(prompt=code.astype(np.int64), step=np.concatenate(col.steps), reward=np.concatenate(col.rewards),
                      labels=labels, hashes=uniq, files=[str(f) for f in files], fmt=fmt, reward_name=reward_name,
                      bad_rows=col.bad_rows, bad_count=col.bad_count)
