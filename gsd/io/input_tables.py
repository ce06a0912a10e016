"""Per-prompt and per-rollout tables from files: read, pick columns, judge every row.

The rule for file inputs: a row with a missing or invalid value is never dropped while the
others shift.  It stays in place with a ``status`` that says what is wrong, the other rows are
computed, and the caller's output keeps every input column in the input order.  A column that
is not there is an error that lists the columns that are.  The columns a command adds never
replace an input column of the same name: :func:`add_columns` suffixes them and says so.
Integers that a float64 would round (beyond 2^53) are refused, never silently merged.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError

__all__ = [
    "read_table",
    "require_columns",
    "numeric_column",
    "counts_from_columns",
    "counts_from_rollouts",
    "describe_bad_rows",
    "add_columns",
    "describe_renames",
    "table_notes",
    "OK",
    "EXACT_INT",
]

#: Status of a row whose values are usable.
OK = "ok"
#: Integers above this lose their last digits in float64 (2^53).
EXACT_INT = 2**53

_READERS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".csv.gz": "csv",
    ".jsonl": "jsonl",
    ".jsonl.gz": "jsonl",
    ".json": "json",
}


def read_table(path, *, option: str = "input") -> pd.DataFrame:
    """A parquet, CSV or JSONL file as a DataFrame (columns and row order as in the file).

    ``option`` names the argument in error messages (e.g. ``"input"`` for ``--input``).
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{option}: no such file {str(path)!r}")
    suffix = "".join(path.suffixes[-2:]).lower() if path.suffix.lower() == ".gz" else path.suffix.lower()
    kind = _READERS.get(suffix)
    if kind is None:
        raise InputError(f"{option}: unsupported file type {suffix!r} of {str(path)!r} (use .parquet, .csv or .jsonl)")
    try:
        if kind == "parquet":
            return pd.read_parquet(path)
        if kind == "csv":
            return pd.read_csv(path)
        return pd.read_json(path, lines=kind == "jsonl")
    except (OSError, ValueError, pd.errors.ParserError) as exc:  # damaged or mislabelled file
        raise InputError(f"{option}: cannot read {str(path)!r} as {kind}: {str(exc).splitlines()[0]}") from None


def require_columns(df: pd.DataFrame, columns: dict, source: str = "the input") -> None:
    """Every ``{option: column}`` must exist; otherwise a ValueError naming it and listing the columns."""
    for option, column in columns.items():
        if column not in df.columns:
            have = ", ".join(map(repr, map(str, df.columns))) or "none"
            raise InputError(f"{option}: {column!r} is not a column of {source}; its columns are: {have}")


def numeric_column(df: pd.DataFrame, column: str, *, integer: bool = False, lo=None, hi=None):
    """A column as float64 (NaN where unusable) and a per-row status.

    Statuses: ``"ok"``, ``"missing <column>"`` (empty / NaN / None), ``"<column> not a number"``,
    ``"<column> not finite"`` (±inf), ``"<column> not an integer"`` (when ``integer``),
    ``"<column> beyond 2^53"`` (when ``integer``: float64 would round it),
    ``"<column> below <lo>"`` / ``"<column> above <hi>"``.
    """
    raw = df[column]
    numeric = pd.to_numeric(raw, errors="coerce")
    values = numeric.to_numpy(np.float64, na_value=np.nan)
    status = np.full(len(df), OK, dtype=object)
    missing = raw.isna().to_numpy()
    status[missing] = f"missing {column}"
    status[~missing & np.isnan(values)] = f"{column} not a number"
    inf = np.isinf(values)
    status[inf] = f"{column} not finite"
    fin = np.isfinite(values)
    if integer:
        status[fin & (values != np.round(values))] = f"{column} not an integer"
        # Compared on the integers themselves where the column holds them: 2^53 + 1 reads as 2^53.
        kind = numeric.dtype.kind
        if kind in "iu" and not numeric.hasnans:  # int64 / uint64 as such: no per-row Python objects (10^6 rows)
            ints = numeric.to_numpy()
            huge = ints > EXACT_INT if kind == "u" else (ints > EXACT_INT) | (ints < -EXACT_INT)
        elif kind in "iuO":
            exact = numeric.to_numpy(object, na_value=None)
            huge = np.array([v is not None and abs(v) > EXACT_INT for v in exact], dtype=bool)
        else:
            huge = fin & (np.abs(values) >= EXACT_INT)  # a float at 2^53 may be a rounded 2^53 + 1
        status[huge] = f"{column} beyond 2^53"
    if lo is not None:
        status[fin & (values < lo)] = f"{column} below {lo}"
    if hi is not None:
        status[fin & (values > hi)] = f"{column} above {hi}"
    values = np.where(status == OK, values, np.nan)
    return values, status


def counts_from_columns(df: pd.DataFrame, k_column: str, n_column: str):
    """Right answers k and rollouts n per row, with a status (k > n, negative, missing, …).

    Returns (k, n, status): int64 arrays (0 where the row is not ok) and the per-row status.
    """
    k, sk = numeric_column(df, k_column, integer=True, lo=0)
    n, sn = numeric_column(df, n_column, integer=True, lo=0)
    status = np.where(sk != OK, sk, sn).astype(object)
    over = (status == OK) & (k > n)
    status[over] = f"{k_column} > {n_column}"
    ok = status == OK
    return np.where(ok, k, 0).astype(np.int64), np.where(ok, n, 0).astype(np.int64), status


def counts_from_rollouts(df: pd.DataFrame, prompt_column: str, reward_column: str):
    """One row per prompt (in order of first appearance) from a per-rollout table of 0/1 rewards.

    Returns (table, k, n, status).  The table's columns: the prompt column, ``rollouts`` (rows
    with a usable reward), ``right`` (their sum) and ``bad_rollouts`` (rows whose reward is
    missing or not 0/1; counted, never silently used) — a count column named like the prompt
    column is suffixed (:func:`add_columns`), never written over the ids.  ``k``, ``n``: right
    answers and usable rollouts per row (int64); ``status``: ``"ok"``, ``"no usable reward"``
    when every rollout of the prompt is bad, or ``"missing <prompt column>"`` for the one row
    that counts the rollouts without a prompt id — they belong to no prompt, so that row is never
    planned (pooling them would plan a pseudo-prompt that does not exist).
    """
    r, status = numeric_column(df, reward_column, lo=0, hi=1)
    binary = (status == OK) & ((r == 0) | (r == 1))
    status[(status == OK) & ~binary] = f"{reward_column} not 0 or 1"
    ids = df[prompt_column]
    if ids.dtype.kind == "f" and (np.abs(ids.to_numpy()) >= EXACT_INT).any():
        # A blank id makes a column of integers float64 when read: ids beyond 2^53 would merge.
        raise InputError(
            f"prompt-column: {prompt_column!r} holds ids beyond 2^53 read as floats (a missing id "
            "turns the column into floats), so distinct ids would merge; give the ids as text"
        )
    codes, uniques = pd.factorize(ids, use_na_sentinel=False)
    m = len(uniques)
    rollouts = np.bincount(codes, weights=binary, minlength=m).astype(np.int64)
    right = np.bincount(codes, weights=np.where(binary, r, 0.0), minlength=m).astype(np.int64)
    bad = np.bincount(codes, weights=~binary, minlength=m).astype(np.int64)
    out, _ = add_columns(
        pd.DataFrame({prompt_column: uniques}), {"rollouts": rollouts, "right": right, "bad_rollouts": bad}
    )
    status = np.where(rollouts > 0, OK, "no usable reward").astype(object)
    status[np.asarray(pd.isna(uniques), dtype=bool)] = f"missing {prompt_column}"
    ok = status == OK
    return out, np.where(ok, right, 0), np.where(ok, rollouts, 0), status


def describe_bad_rows(status, limit: int = 10) -> str:
    """'3 rows not usable: 4 (missing k), 7 (k > n), …' (0-based row numbers), or '' if all are ok."""
    status = np.asarray(status, dtype=object)
    bad = np.nonzero(status != OK)[0]
    if bad.size == 0:
        return ""
    shown = ", ".join(f"{i} ({status[i]})" for i in bad[:limit])
    more = f", … ({bad.size - limit} more)" if bad.size > limit else ""
    return f"{bad.size} row{'s' if bad.size > 1 else ''} not usable (0-based): {shown}{more}"


def add_columns(df: pd.DataFrame, new: dict, *, suffix: str = "_plan") -> tuple[pd.DataFrame, dict]:
    """``df`` (every row and column kept) with the ``new`` columns appended, and the renames.

    A new column whose name the input already uses gets ``suffix`` (then ``suffix2``, ...), so
    an input's own ``status`` or ``group_size`` is never overwritten; the caller reports the
    returned ``{name: new name}`` to the user.
    """
    out = df.copy()
    renamed = {}
    taken = set(map(str, out.columns))
    for name, values in new.items():
        final, i = name, 1
        while final in taken:
            final = f"{name}{suffix}{'' if i == 1 else i}"
            i += 1
        if final != name:
            renamed[name] = final
        taken.add(final)
        out[final] = values
    return out, renamed


def describe_renames(renamed: dict) -> str:
    """'the input has columns named status, group_size: the new ones are status_plan, group_size_plan'."""
    if not renamed:
        return ""
    return (
        f"the input already has column(s) {', '.join(renamed)}: kept as they are; the new one(s) are named "
        f"{', '.join(renamed.values())}"
    )


def table_notes(status, renamed: dict) -> list[str]:
    """What a command that writes a table tells the user about it: the rows it could not use
    (kept in place) and the columns it renamed."""
    lines = []
    bad = describe_bad_rows(status)
    if bad:
        lines.append(bad + " — kept in place, status says why")
    if renamed:
        lines.append(describe_renames(renamed))
    return lines
