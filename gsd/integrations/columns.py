"""Helpers of the trainer modules: a per-rollout column for the log writers (a scalar broadcast,
or an array of the right length), a chat prompt's label, each group's smallest and largest reward."""

import numpy as np

from ..errors import InputError


def column(values, n: int, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim == 0:
        arr = np.full(n, arr.item())
    if arr.shape != (n,):
        raise InputError(f"{name} must have one entry per rollout ({n}), got shape {arr.shape}")
    return arr


def chat_label(messages) -> str:
    """The label of a conversational prompt: its last user message (else its last message)."""
    if not isinstance(messages, (list, tuple)) or not messages:
        return str(messages)
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    last = (users or [m for m in messages if isinstance(m, dict)] or [{"content": str(messages[-1])}])[-1]
    content = last.get("content", "")
    if isinstance(content, list):  # multimodal content: its text parts
        content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def group_range(values, group, n_groups: int):
    """Each group's smallest and largest value (±inf for an empty group): ``(lo, hi)``."""
    values = np.asarray(values, dtype=np.float64)
    group = np.asarray(group, dtype=np.int64)
    lo = np.full(n_groups, np.inf)
    hi = np.full(n_groups, -np.inf)
    np.minimum.at(lo, group, values)
    np.maximum.at(hi, group, values)
    return lo, hi


# A number as pandas's ``to_numeric`` reads text (and Python's ``float``, less its underscores and
# non-ASCII digits): ASCII blanks around it, a sign, digits with an optional point and exponent,
# or inf / infinity / nan in any case.
_NUMBER_TEXT = (
    r"^[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?|[nN][aA][nN])$"
)
_BLANKS = " \t\n\r\v\f"


def text_to_numbers(arr) -> np.ndarray:
    """A pyarrow string array as float64, NaN where an entry is missing or not a number: what
    ``pandas.to_numeric(values, errors="coerce")`` gives (same syntax, correctly rounded; a number
    beyond float64 is ±inf)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..io.arrow_arrays import from_numpy, to_numpy

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    text = pc.utf8_trim(arr, characters=_BLANKS)
    mask = to_numpy(pc.match_substring_regex(text, _NUMBER_TEXT), fill=False)
    out = np.full(len(arr), np.nan)
    if mask.any():
        out[mask] = to_numpy(pc.cast(text.filter(from_numpy(mask)), pa.float64()))
    out[np.isnan(out)] = np.nan  # one NaN ("-nan" parses with its sign bit set)
    return out


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
