"""Load one log file — parquet, JSONL or CSV — as pyarrow tables, piece by piece: each piece with the
line (or row) of each of its rows and the lines that are not rows, named with why.

Nothing here knows a trainer: :mod:`gsd.diagnose.parse` says which parquet columns to read and
turns the tables into a run's rows.  pandas is not imported: JSONL through pyarrow's reader (a
line-by-line pass on a malformed line), CSV through Python's ``csv`` module read as pandas's
``read_csv(dtype=str)`` reads it.
"""

from __future__ import annotations

import json

import numpy as np

from ..io.arrow_arrays import from_numpy, text_array
from ..validation import InputError

__all__ = [
    "CHUNK_ROWS",
    "CSV_MISSING",
    "read_parquet",
    "read_jsonl",
    "jsonl_rows",
    "arrow_json",
    "read_csv",
    "read_regular_csv",
    "read_csv_rows",
    "nonblank_lines",
]

CHUNK_ROWS = 1 << 20  # rows per piece of a parquet or CSV file (bounds the memory of a big table)


def read_parquet(path, pick_columns, whole: bool = False, dictionary=()):
    """Row batches of the columns ``pick_columns(schema)`` names (None: every column); ``whole``:
    the file as one table (TRL: one generation is one table, its blocks and its fingerprint).
    The text columns named in ``dictionary`` (a prompt, repeated G times) are read as
    dictionaries: each distinct text decoded once per batch, not once per row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a non-parquet file
        raise InputError(
            f"{path}: not a readable parquet file ({type(exc).__name__}: {str(exc).splitlines()[0]})"
        ) from None
    names = None if whole else pick_columns(pf.schema_arrow)
    text = [f.name for f in pf.schema_arrow if f.name in dictionary and pa.types.is_string(f.type)]
    if text and not whole:
        pf = pq.ParquetFile(path, read_dictionary=text)
    start = 1
    batches = pf.iter_batches(batch_size=CHUNK_ROWS, columns=names)
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


def read_jsonl(path):
    """pyarrow's JSON reader over the file; on a malformed line (or text that is not UTF-8) the
    lines are checked one by one, each bad one counted and named, and the good ones read by the
    same pyarrow reader (:func:`jsonl_rows`): a row reads the same whether or not a malformed
    line sits elsewhere in its file.  Where pyarrow cannot read the good lines either (one key
    holding text in some rows and numbers in others), they are read in Python, numbers as
    pyarrow reads them (an integer beyond int64 as a float)."""

    if path.stat().st_size == 0:
        return
    with open(path, "rb") as fh:
        table = arrow_json(fh)
    if table is not None:
        yield table, None, []  # line numbers are counted only if a row turns out unusable
        return
    yield jsonl_rows(path)


def arrow_json(source):
    """pyarrow's JSON reader on ``source`` (a file or bytes): the table, or None where it refuses
    (a malformed line, a key of two types, text that is not UTF-8)."""
    import pyarrow as pa
    import pyarrow.json as pj

    try:
        table = pj.read_json(source, read_options=pj.ReadOptions(block_size=JSON_BLOCK))
        table.validate(full=True)  # pyarrow's JSON reader does not check that strings are UTF-8
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    return table


JSON_BLOCK = 1 << 24  # bytes pyarrow's JSON reader infers types from at a time


def jsonl_rows(path):
    """(table, line of each row, [(line, why)] of the lines that are not rows) of a JSONL file
    read line by line: every line that is not a JSON object counted with why; the others read
    by pyarrow's JSON reader as the whole file would be (the same types, the same numbers), or
    in Python where pyarrow refuses them too."""
    import io

    good, lines, bad, records = [], [], [], []
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
            good.append(raw if raw.endswith(b"\n") else raw + b"\n")
            records.append(obj)
            lines.append(number)
    if not records:
        return None, None, bad
    table = arrow_json(io.BytesIO(b"".join(good)))
    if table is None:
        table = _python_table(records)
    return table, np.asarray(lines), bad


def _python_table(records):
    """Rows pyarrow's reader refuses as a table: numbers as pyarrow reads them, a key that holds
    text, structures or several types as text (numbers in text are read as numbers later)."""
    import pyarrow as pa

    records = [{k: _plain(v) for k, v in r.items() if k not in ("output", "completion", "gts")} for r in records]
    keys = list(dict.fromkeys(k for r in records for k in r))
    columns = {}
    for k in keys:
        values = [r.get(k) for r in records]
        kinds = {type(v) for v in values if v is not None}
        if kinds <= {int, float} and kinds:
            columns[k] = _number_column(values, float in kinds)
        else:  # mixed or text: text ("True"/"False" and numbers in text are read as numbers later)
            columns[k] = text_array([None if v is None else str(v) for v in values])
    return pa.table(columns)


def _number_column(values, floats: bool):
    """A JSON key's numbers as a float64 (``floats``) or int64 pyarrow column, None missing."""

    present = np.array([v is not None for v in values], bool)
    filled = [0 if v is None else v for v in values]
    try:
        numbers = np.array(filled, np.float64 if floats else np.int64)
    except OverflowError:  # an integer beyond int64: a float, as pyarrow's JSON reader reads it
        numbers = np.array([float(v) for v in filled], np.float64)
    return from_numpy(numbers, present)


def _plain(v):
    """A JSON value as a column entry: booleans as 1/0 (a score written as true/false beside 0/1
    is the same reward), structures as their JSON text."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (dict, list)):
        return json.dumps(v, sort_keys=True)
    return v


def nonblank_lines(path) -> np.ndarray:
    """1-based numbers of the non-blank lines of a text file (pyarrow's JSON reader skips blank ones)."""
    with open(path, "rb") as fh:
        return np.array([i for i, text in enumerate(fh, start=1) if text.strip()], dtype=np.int64)


def read_csv(path):
    """Chunks of a CSV (every field read as text, numbers parsed later so that a non-numeric
    reward becomes a reported row, not a failed file), read as pandas's ``read_csv(dtype=str)``
    reads one: blank lines skipped, pandas's missing-value words (``""``, ``NA``, ``nan``,
    ``None``, ...) read as missing, a short row padded with missing fields, repeated column names
    numbered (``a``, ``a.1``); a row with too many fields is reported with its line.  As in pandas,
    a first data row with k fields more than the header makes the first k fields of every row an
    index, left out.

    A regular file (one row per line, every row of the header's width, UTF-8) is parsed by
    pyarrow's CSV reader; any other by Python's ``csv`` module, row by row.
    """
    fast = read_regular_csv(path)
    if fast is not None:
        yield from fast
    else:
        yield from read_csv_rows(path)


def read_csv_rows(path):
    """:func:`read_csv` by Python's ``csv`` module, row by row: the reader of any CSV, regular
    or not (:func:`read_regular_csv` is the fast one, for regular files only)."""
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
        index_fields = None  # fields of each row that are an index (pandas's implicit index), left out
        while True:
            try:
                lines, chunk, end = _csv_rows(rows, itertools.islice(rows, CHUNK_ROWS))
            except (UnicodeDecodeError, csv.Error) as exc:
                raise InputError(f"{path}: not a readable CSV file ({exc})") from None
            if end:
                break
            if index_fields is None:
                first = next((row for row in chunk if not _blank_row(row)), None)
                index_fields = max(len(first) - len(names), 0) if first is not None else 0
            yield _csv_table(names, lines, chunk, index_fields)


def read_regular_csv(path):
    """The pieces of a regular CSV read by pyarrow (every field as text, pandas's missing-value
    words missing), or None where the file is not regular: a blank or multi-line row, a row of
    another width, text that is not UTF-8, a header of fewer than two columns."""
    import csv

    import pyarrow as pa
    import pyarrow.csv as pcsv

    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            header = next(csv.reader(fh), None)
    except (UnicodeDecodeError, csv.Error):
        return None
    if header is None or _blank_row(header) or len(header) < 2:
        return None
    names = _csv_names(header)
    irregular = []

    def note(row):  # a row of another width: the file is read row by row instead
        irregular.append(row.number)
        return "skip"

    try:
        table = pcsv.read_csv(
            path,
            read_options=pcsv.ReadOptions(column_names=names, skip_rows=1, block_size=1 << 22),
            parse_options=pcsv.ParseOptions(invalid_row_handler=note),
            convert_options=pcsv.ConvertOptions(
                column_types={name: pa.string() for name in names},
                null_values=list(CSV_MISSING),
                strings_can_be_null=True,
                quoted_strings_can_be_null=True,
            ),
        )
    except pa.ArrowException:
        return None
    if irregular or table.num_rows + 1 != _line_count(path):  # a blank line, a quoted line break
        return None
    return [
        (table.slice(start, CHUNK_ROWS), np.arange(start + 2, start + 2 + min(CHUNK_ROWS, table.num_rows - start)), [])
        for start in range(0, table.num_rows, CHUNK_ROWS)
    ]


def _line_count(path) -> int:
    """Lines of a file (a last line without its line break counted)."""
    count, last = 0, b"\n"
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


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


def _csv_table(names, lines, rows, index_fields: int = 0):
    """One chunk of CSV rows → (pyarrow table of text, each row's line, [(line, why)] for the
    rows with too many fields); ``index_fields``: fields at the start of each row that are an
    index, left out."""
    import pyarrow as pa
    import pyarrow.compute as pc

    width = len(names) + index_fields
    sizes = np.fromiter(map(len, rows), np.int64, len(rows))
    lines = np.asarray(lines, np.int64)
    blank = sizes <= 1
    if blank.any():  # only a one-field row can be blank; look at those alone
        blank[blank] = [_blank_row(rows[i]) for i in np.flatnonzero(blank).tolist()]
    wide = (sizes > width) & ~blank
    bad = [
        (int(lines[i]), f"malformed CSV row (expected {width} fields, saw {int(sizes[i])})")
        for i in np.flatnonzero(wide)
    ]
    keep = np.flatnonzero(~blank & ~wide)
    good = [rows[i] for i in keep.tolist()] if keep.size < len(rows) else rows
    short = np.flatnonzero(sizes[keep] < width).tolist()
    for i in short:  # a short row's missing fields are missing values
        good[i] = list(good[i]) + [None] * (width - len(good[i]))
    missing = text_array(CSV_MISSING)
    columns = []
    for values in list(zip(*good))[index_fields:] if good else [()] * len(names):
        col = text_array(values)
        columns.append(pc.if_else(pc.is_in(col, value_set=missing), pa.nulls(len(col), col.type), col))
    return pa.Table.from_arrays(columns, names=names), lines[keep], bad
