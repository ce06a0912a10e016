"""pyarrow arrays to and from numpy arrays without pandas: through the arrays' buffers.

pyarrow imports pandas, when it is installed, on ``Array.to_numpy``, ``pa.array`` and
``pa.scalar`` (a compute call given a plain Python value makes a scalar): ~30 MB and a tenth of a
second that reading a log does not need.  The log reader and the trainers' format modules convert
through these functions instead; every other pyarrow call they make leaves pandas alone.

* :func:`to_numpy` — a column as a numpy array (numbers and booleans from their buffers, missing
  entries set to ``fill``; text and other types as an object array of Python values, None where
  missing);
* :func:`valid` — which entries are present;
* :func:`from_numpy` — a numpy array of booleans or numbers as a pyarrow array (e.g. a row mask
  for ``Table.filter``);
* :func:`text_array` — a pyarrow string array from Python strings (None: missing).
"""

from __future__ import annotations

import numpy as np

__all__ = ["to_numpy", "valid", "from_numpy", "text_array"]


def _whole(arr):
    import pyarrow as pa

    return arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr


def _bits(buf, offset: int, n: int) -> np.ndarray:
    """n bits of an Arrow bitmap (least significant bit first) from bit ``offset``, as bool."""
    if n == 0:
        return np.zeros(0, bool)
    return np.unpackbits(np.frombuffer(buf, np.uint8), bitorder="little")[offset : offset + n].astype(bool)


def _numpy_type(t):
    """The numpy dtype of an Arrow integer or floating type, else None."""
    import pyarrow as pa

    if pa.types.is_integer(t):
        return np.dtype(f"{'i' if pa.types.is_signed_integer(t) else 'u'}{t.bit_width // 8}")
    if pa.types.is_floating(t):
        return np.dtype(f"f{t.bit_width // 8}")
    return None


def valid(arr) -> np.ndarray:
    """Per entry, whether it holds a value (bool array)."""
    import pyarrow as pa

    arr = _whole(arr)
    n = len(arr)
    if arr.null_count == 0:
        return np.ones(n, bool)
    if pa.types.is_null(arr.type) or arr.null_count == n:
        return np.zeros(n, bool)
    return _bits(arr.buffers()[0], arr.offset, n)


def to_numpy(arr, fill=None) -> np.ndarray:
    """A pyarrow array (or chunked array) as a new, writeable numpy array.

    Booleans, integers and floats keep their dtype, their missing entries set to ``fill`` (the
    array then takes ``fill``'s type as numpy promotes it; ``fill`` None: the buffer's value,
    meaningless, so give a fill where entries may be missing).  Any other type (text, lists) is an
    object array of Python values with None where missing.
    """
    import pyarrow as pa

    arr = _whole(arr)
    t, n = arr.type, len(arr)
    if pa.types.is_boolean(t):
        values = _bits(arr.buffers()[1], arr.offset, n) if n else np.zeros(0, bool)
    elif _numpy_type(t) is not None:
        dtype = _numpy_type(t)
        values = np.frombuffer(arr.buffers()[1], dtype)[arr.offset : arr.offset + n].copy() if n else np.zeros(0, dtype)
    elif pa.types.is_null(t):
        return np.full(n, fill) if fill is not None else np.full(n, None, dtype=object)
    else:
        return np.array(arr.to_pylist() + [None], dtype=object)[:n]  # the None keeps a list value one object
    if fill is not None and arr.null_count:
        values = np.where(valid(arr), values, fill)
    return values


def from_numpy(values, present=None):
    """A 1-d numpy array of booleans, integers or floats as a pyarrow array; ``present`` (bool
    array, optional): which entries hold a value (default: all)."""
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    if values.ndim != 1:
        raise ValueError(f"from_numpy takes a 1-d array, got shape {values.shape}")
    n = values.size
    bitmap = None
    if present is not None and not np.all(present):
        bitmap = pa.py_buffer(np.packbits(np.asarray(present, bool), bitorder="little"))
    if values.dtype == bool:
        return pa.Array.from_buffers(pa.bool_(), n, [bitmap, pa.py_buffer(np.packbits(values, bitorder="little"))])
    if values.dtype.kind in "iu":
        t = getattr(pa, f"{'int' if values.dtype.kind == 'i' else 'uint'}{values.dtype.itemsize * 8}")()
    elif values.dtype.kind == "f" and values.dtype.itemsize in (4, 8):
        t = pa.float32() if values.dtype.itemsize == 4 else pa.float64()
    else:
        raise TypeError(f"from_numpy takes booleans, integers or floats, got {values.dtype}")
    return pa.Array.from_buffers(t, n, [bitmap, pa.py_buffer(values)])


def text_array(values):
    """A pyarrow string array of Python strings (None: a missing entry), encoded as UTF-8.

    A lone surrogate (JSON's ``"\\ud800"`` decodes to one; UTF-8 cannot hold it) is written as its
    escape, the six characters ``\\ud800``: the text stays one distinct prompt instead of an error.
    """
    import pyarrow as pa

    values = list(values)
    n = len(values)
    present = np.fromiter((v is not None for v in values), bool, n)
    encoded = [v.encode("utf-8", "backslashreplace") for v in values if v is not None]
    sizes = np.zeros(n, np.int64)
    sizes[present] = np.fromiter(map(len, encoded), np.int64, len(encoded))
    offsets = np.r_[0, np.cumsum(sizes)]
    if offsets[-1] > np.iinfo(np.int32).max:
        kind, offsets = pa.large_string(), offsets.astype(np.int64)
    else:
        kind, offsets = pa.string(), offsets.astype(np.int32)
    bitmap = None if present.all() else pa.py_buffer(np.packbits(present, bitorder="little"))
    return pa.Array.from_buffers(kind, n, [bitmap, pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))])
