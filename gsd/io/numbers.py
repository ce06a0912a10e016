"""Numbers read from a user's logs, checked where they are read: steps are integers in int64's range
(never wrapped, never an OverflowError), counts are non-negative integers, fractions lie in [0, 1],
seconds are finite and non-negative, and a value that is not a number is counted and said, never
dropped without a word.  Every reader of steps, counts and metric values (the scalar logs, the
timing logs, the rollout readers) goes through here.  Imports numpy only.
"""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

from ..errors import InputError

__all__ = [
    "INT64_MAX",
    "DroppedValues",
    "metric_value",
    "step_number",
    "step_array",
    "step_values",
    "count_array",
    "fraction_array",
    "seconds_value",
]

#: The largest step a reader accepts: int64's largest, what the frames and numpy index by.
INT64_MAX = 2**63 - 1
_TWO63 = 2.0**63  # the first float beyond int64: a float step must be below it


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def step_number(value, where: str) -> int:
    """A step as a Python int in [0, 2^63 − 1]: an int, or a float (or numpy scalar) holding an
    integer; bool, text, None, NaN, inf, fractions and values beyond int64 raise an InputError
    naming ``where`` and the value (a float of 1e20 is refused, not an OverflowError)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Real):
        raise InputError(f"{where}: the step must be an integer, got {_shown(value)}")
    if isinstance(value, Integral):
        step = int(value)
    else:
        v = float(value)
        if not (math.isfinite(v) and v.is_integer() and -_TWO63 <= v < _TWO63):
            raise InputError(f"{where}: the step must be an integer in [0, 2^63 - 1], got {_shown(value)}")
        step = int(v)
    if not 0 <= step <= INT64_MAX:
        raise InputError(f"{where}: the step must be an integer in [0, 2^63 - 1], got {_shown(value)}")
    return step


def step_array(values, where: str) -> np.ndarray:
    """A column of steps as int64, every one an integer in [0, 2^63 − 1] (a uint64 2^64 − 1 or a
    float 1e300 is refused by name, never wrapped); the error shows the first bad value."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "uif":
        return np.array([step_number(v, where) for v in arr.ravel()], dtype=np.int64).reshape(arr.shape)
    steps, ok = step_values(arr)
    if not ok.all():
        first = arr[~ok].ravel()[0]
        raise InputError(f"{where}: the step must be an integer in [0, 2^63 - 1], got {_shown(first.item())}")
    return steps


def step_values(values, float_limit: float = _TWO63) -> tuple[np.ndarray, np.ndarray]:
    """A numeric column of steps as (int64, which entries are steps): an integer in [0, 2^63 − 1],
    or a float holding an integer in [0, ``float_limit``) (a reader of text or JSON passes 2^53,
    beyond which a float no longer tells neighbouring integers apart).  The others — negative,
    fractional, NaN, inf, a uint64 beyond int64 — come back as 0 and False, never wrapped: the
    caller counts each as a bad row.

    >>> step_values(np.array([3.0, -1.0, 2.5, 1e20]), float_limit=2.0**53)[1].tolist()
    [True, False, False, False]
    """
    arr = np.asarray(values)
    if arr.dtype.kind == "u":
        ok = arr <= INT64_MAX
    elif arr.dtype.kind == "i":
        ok = arr >= 0
    elif arr.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(arr) & (arr == np.round(arr)) & (arr >= 0) & (arr < min(float_limit, _TWO63))
    else:
        raise InputError(f"steps must be numbers, got an array of {arr.dtype}")
    return np.where(ok, arr, 0).astype(np.int64), ok


def _checked(values, what: str, ok, rule: str) -> np.ndarray:
    """values as float64 with NaN (missing) kept; any other value failing ``ok`` raises naming it."""
    arr = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        bad = ~np.isnan(arr) & ~ok(arr)
    if bad.any():
        raise InputError(f"{what}: {rule}, got {_shown(arr[bad].ravel()[0].item())} ({int(bad.sum())} such values)")
    return arr


def count_array(values, what: str) -> np.ndarray:
    """Counts (groups evicted, rows, rollouts) as float64: finite non-negative integers or NaN
    (not logged); a negative, fractional or infinite count raises an InputError naming ``what``."""
    return _checked(
        values, what, lambda a: np.isfinite(a) & (a >= 0) & (a == np.round(a)), "counts must be integers >= 0"
    )


def fraction_array(values, what: str) -> np.ndarray:
    """Fractions (a silent share, frac_reward_zero_std) as float64 in [0, 1] or NaN (not logged)."""
    return _checked(values, what, lambda a: (a >= 0) & (a <= 1), "a fraction must lie in [0, 1]")


def seconds_value(value, where: str) -> float:
    """A duration in seconds: a finite real number >= 0 (not bool, not text), else an InputError."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Real) or not (0 <= float(value) < math.inf):
        raise InputError(f"{where}: seconds must be a finite number >= 0, got {_shown(value)}")
    return float(value)


def metric_value(value):
    """A logged metric as a float (NaN and inf kept: the writer logged them), or None when it is
    not a number (text, bool, None, a list or dict): the caller counts it in :class:`DroppedValues`."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Real):
        return None
    return float(value)


class DroppedValues:
    """Values of a log that are not numbers, counted per metric so that the reader says what it
    left out (``notes()``), never a column or a value gone without a word."""

    def __init__(self):
        self.counts: dict = {}
        self.examples: dict = {}

    def add(self, key, value, n: int = 1) -> None:
        if n > 0:
            self.counts[key] = self.counts.get(key, 0) + int(n)
            self.examples.setdefault(key, value)

    def take(self, key, value):
        """``metric_value(value)``, counting it here when it is not a number."""
        v = metric_value(value)
        if v is None:
            self.add(key, value)
        return v

    def notes(self) -> list:
        return [
            f"{n} value{'s' if n > 1 else ''} of {key!r} left out: not a number (e.g. {_shown(self.examples[key])})"
            for key, n in self.counts.items()
        ]
