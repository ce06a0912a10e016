"""Forgetting old rollouts: a count Δ steps old weighs 2^(−Δ/h), h the half-life in steps.

A policy that learns makes a prompt's old answers stale; discounting them by their age keeps its
posterior on the solve rate near the policy as it is now.  One discount (:func:`decay`) and one
check of a half-life (:func:`as_half_life`) serve ``gsd diagnose``, the live
:class:`gsd.live.tracker.GroupTracker` and the simulator's logged source; :data:`HALF_LIVES`
are the candidates ``half_life="auto"`` scores.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..validation import InputError, real_or_none, shown

__all__ = ["HALF_LIVES", "as_half_life", "decay"]

#: The half-lives ``half_life="auto"`` tries (steps; None: every earlier rollout counts fully),
#: longest first: a tie keeps the longer one.
HALF_LIVES: tuple[float | None, ...] = (None, 64.0, 32.0, 16.0, 8.0, 4.0, 2.0, 1.0, 0.5)


def as_half_life(half_life: object, *, auto: bool = False, name: str = "half_life") -> float | None | Literal["auto"]:
    """``half_life`` checked: None (no forgetting), a finite number of steps > 0 as a float, or,
    with ``auto``, the string ``"auto"``.

    Raises :class:`gsd.InputError` naming ``name`` and the value for anything else (a bool, any
    other string, NaN, ±inf, 0 or a negative number).

    Examples
    --------
    >>> as_half_life(8), as_half_life(None), as_half_life("auto", auto=True)
    (8.0, None, 'auto')
    """
    if half_life is None:
        return None
    if auto and isinstance(half_life, str) and half_life == "auto":
        return "auto"
    h = real_or_none(half_life)
    if h is None or h <= 0:
        allowed = "None, 'auto' or a finite number of steps > 0" if auto else "None or a finite number of steps > 0"
        raise InputError(f"{name} must be {allowed}, got {half_life!r}")
    return h


def decay(age: ArrayLike, half_life: float | None) -> NDArray[np.float64]:
    """2^(−age/half_life), elementwise: the weight of a count ``age`` steps old (1 for every age
    when ``half_life`` is None); ``age`` ≥ 0 (inf weighs 0), anything else (NaN, a negative age, bool,
    text) an InputError.

    Integer ages are differences of two steps taken exactly before they become floats (steps near
    2^62 are 1024 apart in float64); a half-life so short that age/half_life overflows weighs
    every older step 0, without a warning.

    Examples
    --------
    >>> decay([0, 1, 2, 8], 2.0).tolist()
    [1.0, 0.7071067811865476, 0.5, 0.0625]
    """
    h = as_half_life(half_life)
    age = np.asarray(age)
    if age.dtype.kind not in "iuf":  # bool, text, None: not a number of steps
        raise InputError(f"age must be numbers of steps >= 0, got {shown(age)} ({age.dtype})")
    if age.dtype.kind in "iu":
        age = age.astype(np.float64)  # exact up to 2^53 steps apart, relative to 2^-53 beyond
    bad = ~(age >= 0)  # NaN, and a count from the future (its weight would exceed a fresh one's 1)
    if bad.any():
        raise InputError(f"age must be numbers of steps >= 0, got {shown(age[bad])}")
    if h is None:
        return np.ones(age.shape)
    with np.errstate(over="ignore"):
        ratio = np.divide(age, h)
    return np.exp2(-ratio)
