"""Tables kept as numpy columns and handed out as pandas DataFrames only when a caller reads one.

``gsd diagnose`` on a small log must start light: pandas 3 imports pyarrow with it, about 100 MB
of memory before any work, while the arithmetic of a diagnosis needs numpy alone.  So the
diagnosis and the group-size advice compute their tables as ``{column: ndarray}`` dicts (the
report, the JSON and the headline read those), and their public attributes (``Diagnosis.steps``,
``GroupSizeAdvice.table``, ...) build the DataFrame on first access, once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Columns", "as_frame", "as_columns", "FrameAttribute", "group_sums"]

#: A table as ordered numpy columns of one length.
Columns = dict[str, np.ndarray]


def as_frame(table) -> pd.DataFrame:
    """``table`` (a :data:`Columns` dict or a DataFrame) as a pandas DataFrame."""
    import pandas as pd

    return table if isinstance(table, pd.DataFrame) else pd.DataFrame(dict(table))


def as_columns(table) -> Columns:
    """``table`` (a :data:`Columns` dict or a DataFrame) as numpy columns, without importing pandas."""
    if isinstance(table, Mapping):
        return {str(k): np.asarray(v) for k, v in table.items()}
    return {str(c): table[c].to_numpy() for c in table.columns}


class FrameAttribute:
    """An attribute that stores a table as given (numpy columns or a DataFrame) and reads as a
    DataFrame, built from the columns on the first read and kept.  ``obj.columns_of(name)`` (see
    :func:`columns_of`) reads the same table as numpy columns without pandas."""

    def __set_name__(self, owner, name: str) -> None:
        self.name, self.slot = name, f"_{name}_table"

    def __get__(self, obj, objtype=None) -> Any:
        if obj is None:
            return self
        value = obj.__dict__[self.slot]
        if isinstance(value, Mapping):
            value = obj.__dict__[self.slot] = as_frame(value)
        return value

    def __set__(self, obj, value) -> None:
        obj.__dict__[self.slot] = value


def columns_of(obj, name: str) -> Columns:
    """The table of ``obj``'s :class:`FrameAttribute` ``name`` as numpy columns (no pandas import
    when it was never read as a DataFrame)."""
    return as_columns(obj.__dict__[f"_{name}_table"])


def group_sums(key, columns: Mapping[str, np.ndarray]) -> tuple[np.ndarray, Columns]:
    """The sorted distinct values of ``key`` and, per value, the sum of each column over its rows
    (``DataFrame.groupby(key, sort=True).sum()`` for numeric and boolean columns; booleans count).

    Sums run in row order in float64 (integers and booleans exactly, below 2^53), then integer and
    boolean columns come back as int64.

    >>> keys, sums = group_sums(np.array([3, 1, 3]), {"x": np.array([1.0, 2.0, 4.0]), "b": np.array([True, False, True])})
    >>> keys.tolist(), sums["x"].tolist(), sums["b"].tolist()
    ([1, 3], [2.0, 5.0], [0, 2])
    """
    keys, inverse = np.unique(np.asarray(key), return_inverse=True)
    inverse = inverse.ravel()
    out = {}
    for name, values in columns.items():
        v = np.asarray(values)
        s = np.bincount(inverse, weights=v.astype(np.float64), minlength=keys.size)
        out[name] = s.round().astype(np.int64) if v.dtype.kind in "biu" else s
    return keys, out
