"""Difficulty data: the Big-Math solve rates the project ships, or a user's per-problem file.

The shipped table ``bigmath_solve_rate_histogram.csv`` (``data/`` of the source tree, read
through :mod:`gsd.resources`)
counts, for each k = 0 … 64, the Big-Math problems that Llama-3.1-8B-Instruct solved in k of 64
rollouts (215,608 problems; provenance in the ``README.md`` beside it, shown in the docs under
"Data").  :func:`load_bigmath` expands it to one solve rate per
problem; :func:`load_solve_rates` reads a user's per-problem file instead (parquet, CSV or
JSONL with a ``llama8b_solve_rate`` column), so every analysis runs unchanged on either.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..resources import shipped_file
from ..validation import InputError

if TYPE_CHECKING:  # annotations only: pandas loads on first use
    import pandas as pd

__all__ = [
    "BIGMATH_ROLLOUTS",
    "BIGMATH_COLUMN",
    "data_dir",
    "load_histogram",
    "load_bigmath",
    "load_solve_rates",
]

BIGMATH_ROLLOUTS = 64
BIGMATH_COLUMN = "llama8b_solve_rate"
_HISTOGRAM = "bigmath_solve_rate_histogram.csv"


def data_dir() -> Path:
    """The folder holding the shipped histogram: the package's own (``data/``, :mod:`gsd.resources`),
    or ``$GSD_DATA_DIR`` when that environment variable is set."""
    env = os.environ.get("GSD_DATA_DIR")
    return Path(env) if env else shipped_file(_HISTOGRAM).parent


def load_histogram(path=None) -> pd.DataFrame:
    """The Big-Math solve-rate histogram: problems per number of right answers out of 64.

    Parameters
    ----------
    path : path-like, optional
        A histogram file of the same layout; default: the one the package ships (provenance
        on the :doc:`/data` page).

    Returns
    -------
    pandas.DataFrame
        Columns ``k`` (0 … 64, once each, in order), ``p_hat`` (= k/64) and ``count``; checked
        for consistency (:class:`gsd.InputError` otherwise).

    Examples
    --------
    >>> df = gsd.load_histogram()
    >>> int(df["count"].sum()), len(df)
    (215608, 65)
    """
    import pandas as pd  # here, not at the top: `gsd` commands that read no file start faster

    path = _histogram_path(path)
    df = pd.read_csv(path)
    _check_histogram(path, {c: df[c].to_numpy() for c in _HISTOGRAM_COLUMNS if c in df.columns})
    return df


#: The columns of a solve-rate histogram file.
_HISTOGRAM_COLUMNS = ("k", "p_hat", "count")


def _histogram_path(path) -> Path:
    path = Path(path) if path is not None else data_dir() / _HISTOGRAM
    if not path.is_file():
        raise InputError(f"path: no solve-rate histogram at {str(path)!r}")
    return path


def _check_histogram(path: Path, columns: dict) -> tuple[np.ndarray, np.ndarray]:
    """k and count (int64) of the columns (name → values) of a histogram file; InputError
    unless they hold numbers with k = 0 … n once each in order, p_hat = k/n and counts ≥ 0."""
    missing = set(_HISTOGRAM_COLUMNS) - set(columns)
    if missing:
        raise InputError(f"path: {str(path)!r} lacks columns {sorted(missing)}")
    try:
        k, p_hat, count = (np.asarray(columns[c], dtype=np.float64) for c in _HISTOGRAM_COLUMNS)
    except (TypeError, ValueError):
        raise InputError(f"path: {str(path)!r} holds a value that is not a number") from None
    n = int(k.max()) if k.size and np.isfinite(k).all() else -1
    if n < 1 or not np.array_equal(k, np.arange(n + 1)):
        raise InputError(f"path: {str(path)!r} must list k = 0 … n once each, in order")
    if not np.allclose(p_hat, k / n, atol=5e-7):
        raise InputError(f"path: {str(path)!r} has p_hat different from k/{n}")
    if not (np.isfinite(count) & (count >= 0)).all():
        raise InputError(f"path: {str(path)!r} has negative or non-finite counts")
    return k.astype(np.int64), count.astype(np.int64)


def _histogram_arrays(path=None) -> tuple[np.ndarray, np.ndarray]:
    """k and count of a histogram file, checked as :func:`load_histogram` checks it, read
    without pandas (whose import costs a simulation more than the rest of its start-up)."""
    import csv

    from .userinput import reading

    path = _histogram_path(path)
    with reading(path, "path"), open(path, newline="", encoding="utf-8") as f:
        try:
            rows = [r for r in csv.reader(f) if r]
        except (UnicodeDecodeError, csv.Error) as exc:  # a binary file under a CSV name
            raise InputError(f"path: {str(path)!r} is not a readable CSV file ({exc})") from None
    header = rows[0] if rows else []
    try:
        columns = {c: [r[header.index(c)] for r in rows[1:]] for c in _HISTOGRAM_COLUMNS if c in header}
    except IndexError:
        raise InputError(f"path: {str(path)!r} has a row shorter than its header") from None
    return _check_histogram(path, columns)


def load_bigmath(path=None, *, with_k: bool = False):
    """One solve rate per Big-Math problem, expanded from the shipped histogram.

    Parameters
    ----------
    path : path-like, optional
        A histogram file (:func:`load_histogram`); default: the shipped one.
    with_k : bool, optional
        Also return the integer counts k (needed for exact subsampling,
        :func:`gsd.silent_rate_subsampled`).

    Returns
    -------
    p : numpy.ndarray
        215,608 solve rates k/64, sorted by k.
    k : numpy.ndarray of int64
        Only with ``with_k=True``: the number of right answers out of 64.

    Examples
    --------
    >>> p = gsd.load_bigmath()
    >>> p.size, round(float(p.mean()), 4)
    (215608, 0.4845)
    >>> float(gsd.silent_rate(p, 8).mean())  # the paper: 44.3 % of prompts silent at G = 8
    0.44278...
    """
    k_values, counts = _histogram_arrays(path)
    k = np.repeat(k_values, counts)
    p = k / int(k_values[-1])
    return (p, k) if with_k else p


def load_solve_rates(path, column: str = BIGMATH_COLUMN) -> np.ndarray:
    """Per-problem solve rates from a parquet, CSV or JSONL file (rows with no value dropped).

    The column must hold numbers in [0, 1]; anything else raises ``InputError`` naming it.
    """
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise InputError(f"path: no such file {str(path)!r}")
    suffix = "".join(path.suffixes[-2:]).lower() if path.suffix == ".gz" else path.suffix.lower()
    if suffix not in (".parquet", ".pq", ".csv", ".csv.gz", ".jsonl", ".jsonl.gz", ".json"):
        raise InputError(f"path: unsupported file type {path.suffix!r} (use .parquet, .csv or .jsonl)")
    try:
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            names = pq.read_schema(path).names
            df = pd.read_parquet(path, columns=[column]) if column in names else pd.DataFrame(columns=names)
        elif suffix in (".csv", ".csv.gz"):
            df = pd.read_csv(path)
        else:
            df = pd.read_json(path, lines=suffix != ".json")
    except (ValueError, OSError, UnicodeError) as exc:  # pandas/pyarrow parse errors are ValueErrors
        raise InputError(
            f"path: cannot read {str(path)!r} as {suffix[1:]} ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''})"
        ) from None
    if column not in df.columns:
        raise InputError(f"column: {column!r} is not a column of {str(path)!r}; it has {[str(c) for c in df.columns]}")
    values = pd.to_numeric(df[column], errors="coerce")
    bad = values.isna() & df[column].notna()
    if bad.any():
        raise InputError(f"column: {column!r} holds non-numeric values, e.g. {df[column][bad].iloc[0]!r}")
    p = values.dropna().to_numpy(np.float64)
    if p.size == 0:
        raise InputError(f"column: {column!r} of {str(path)!r} has no values")
    out = (p < 0) | (p > 1)
    if out.any():
        raise InputError(f"column: {column!r} must hold solve rates in [0, 1], got {p[out][0]!r}")
    return p
