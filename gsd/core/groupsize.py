"""Group-size planning: how many answers a prompt needs (:ref:`theory-law`).

Two targets:

* fidelity: the smallest G ≥ 2 with φ(p, G) ≥ 1 − ε, exactly (``rule="exact"``) or by the
  group-size law G ≳ 1/(8·ε·p(1−p)) (``rule="law"``);
* silence: the smallest G with P_silent(p, G) ≤ δ (:func:`gsd.core.silent.group_size_for_silent_rate`).

The exact search is a vectorised integer bisection.  It is valid because φ is nondecreasing in G
(proof in :func:`gsd.core.update.fidelity`; the tests also compare against a brute-force scan).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..validation import (
    MAX_EXACT_GROUP_SIZE,
    InputError,
    as_open_unit,
    as_probability,
    as_scalar_group_size,
    broadcast,
    numpy_result,
)
from .binomial import unique_pairs
from .silent import EXCEEDS_MAX, UNREACHABLE, group_size_for_silent_rate, silent_rate
from .update import fidelity

__all__ = [
    "UNREACHABLE",
    "EXCEEDS_MAX",
    "DEFAULT_MAX_GROUP_SIZE",
    "group_size_law",
    "required_group_size",
    "median_group_size",
    "plan_group_sizes",
]

DEFAULT_MAX_GROUP_SIZE = 1_000_000


def group_size_law(p: ArrayLike, epsilon: ArrayLike):
    r"""The group size the paper's law asks for, as a real number.

    Parameters
    ----------
    p : array_like
        Probability of a right answer, in [0, 1].
    epsilon : array_like
        Tolerated shortfall of the fidelity, in (0, 1).  Broadcasts with ``p``.

    Returns
    -------
    numpy.ndarray or float
        :math:`1/(8 \varepsilon p(1-p))`; inf at p ∈ {0, 1}.

    Notes
    -----
    Solving :math:`1 - 1/(8 G p(1-p)) \ge 1 - \varepsilon` (:func:`gsd.fidelity_law`) for G:

    .. math::

        G \gtrsim \frac{1}{8\,\varepsilon\,p(1-p)} = \frac{w(p)^2}{8\,\varepsilon},

    the square of the difficulty weight :math:`w(p)` (:ref:`theory-law`).  The paper's Table 2
    prints ``round`` of this value; :func:`required_group_size` with ``rule="law"`` returns its
    ceiling.

    Examples
    --------
    >>> gsd.group_size_law([0.5, 0.05], 0.05)
    array([10.        , 52.63157895])
    """
    p, epsilon = broadcast(p=as_probability(p), epsilon=as_open_unit(epsilon, "epsilon"))
    with np.errstate(divide="ignore", over="ignore"):  # inf at p ∈ {0, 1} and for subnormal p
        return 1.0 / (8.0 * epsilon * p * (1.0 - p))


@numpy_result
def required_group_size(
    p: ArrayLike, epsilon: ArrayLike, *, rule: str = "exact", max_group_size: int = DEFAULT_MAX_GROUP_SIZE
):
    r"""Smallest group size G ≥ 2 whose fidelity reaches 1 − ε.

    Parameters
    ----------
    p : array_like
        Probability of a right answer, in [0, 1].
    epsilon : array_like
        Tolerated shortfall of the fidelity, in (0, 1).  Broadcasts with ``p``.
    rule : {"exact", "law"}, optional
        ``"exact"`` (default): the exact fidelity :func:`gsd.fidelity`, by integer bisection;
        ``"law"``: :math:`\max(2, \lceil 1/(8 \varepsilon p(1-p)) \rceil)`.
    max_group_size : int, optional
        Search limit (default :data:`DEFAULT_MAX_GROUP_SIZE`); at most 10^9 for
        ``rule="exact"`` (the exact sums' limit) and 2^53 for ``rule="law"``.

    Returns
    -------
    numpy.ndarray of int64
        The smallest G, with two documented sentinels so that a dataset holding such prompts is
        still planned: :data:`UNREACHABLE` (−1) where p ∈ {0, 1} (every group is silent) and
        :data:`EXCEEDS_MAX` (0) where no G ≤ ``max_group_size`` reaches the target.

    Notes
    -----
    Solves :math:`\min\{G \ge 2 : \varphi(p, G) \ge 1 - \varepsilon\}`.  The bisection is
    valid because φ is nondecreasing in G (proof in :func:`gsd.fidelity`; the tests also
    compare with a brute-force scan).  The law's answer is smaller for hard prompts, where it
    overstates φ (:ref:`theory-law`).

    Examples
    --------
    >>> gsd.required_group_size([0.5, 0.05, 0.0], 0.05)
    array([11, 69, -1])
    >>> gsd.required_group_size([0.5, 0.05], 0.05, rule="law")
    array([10, 53])
    >>> int(gsd.required_group_size(0.001, 0.01, max_group_size=1000))  # EXCEEDS_MAX
    0
    """
    if rule not in ("exact", "law"):
        raise InputError(f"rule must be 'exact' or 'law', got {rule!r}")
    p = as_probability(p)
    epsilon = as_open_unit(epsilon, "epsilon")
    limit = {"maximum": MAX_EXACT_GROUP_SIZE} if rule == "exact" else {}
    cap = as_scalar_group_size(max_group_size, "max_group_size", minimum=2, **limit)
    p, epsilon = broadcast(p=p, epsilon=epsilon)
    shape = p.shape
    law = group_size_law(p, epsilon)
    interior = (p > 0) & (p < 1)
    out = np.full(shape, UNREACHABLE, dtype=np.int64)
    if rule == "law":
        g = np.maximum(2.0, np.ceil(law[interior]))
        out[interior] = np.where(g <= cap, g, EXCEEDS_MAX).astype(np.int64)
        return out
    # φ depends on p only through p(1−p): solve once per distinct (min(p, 1−p), ε).
    a = np.minimum(p, 1.0 - p)[interior]
    eps = epsilon[interior]
    if a.size == 0:
        return out
    first, inverse = unique_pairs(a, eps)
    ka, keps = a[first], eps[first]
    with np.errstate(over="ignore", divide="ignore"):  # a subnormal p: the law's G is inf, capped below
        guess = np.maximum(2.0, np.ceil(1.0 / (8.0 * keps * ka * (1.0 - ka))))
    g = _exact_search(ka, 1.0 - keps, guess, cap)
    out[interior] = g[inverse]
    return out


def _exact_search(a, target, guess, cap):
    """Smallest G in [2, cap] with φ(a, G) ≥ target, or EXCEEDS_MAX; relies on φ nondecreasing."""
    guess = np.minimum(guess, float(cap)).astype(np.int64)
    # Upper end of the bracket: grow from the law's value until the target is met.
    hi = guess.copy()
    met = fidelity(a, hi) >= target
    while True:
        grow = ~met & (hi < cap)
        if not grow.any():
            break
        hi = np.where(grow, np.minimum(2 * hi, cap), hi)
        met = np.where(grow, fidelity(a, hi) >= target, met)
    # Lower end: the law's value is a good starting point when φ just below it misses.
    below = np.maximum(guess - 1, 2)
    lo = np.where((guess > 2) & (fidelity(a, below) < target), guess, 2)
    lo = np.minimum(lo, hi)
    # Invariant: φ(hi) ≥ target where met; answer in [lo, hi].
    while True:
        open_ = met & (lo < hi)
        if not open_.any():
            break
        mid = (lo + hi) // 2
        good = fidelity(a, mid) >= target
        hi = np.where(open_ & good, mid, hi)
        lo = np.where(open_ & ~good, mid + 1, lo)
    return np.where(met, hi, EXCEEDS_MAX).astype(np.int64)


def median_group_size(p: ArrayLike, epsilon: ArrayLike, *, max_group_size: int = DEFAULT_MAX_GROUP_SIZE) -> float:
    r"""The group size that serves half of the prompts: the lower median of their required sizes.

    Parameters
    ----------
    p : array_like
        Solve rates of the prompts (e.g. posterior means), in [0, 1].
    epsilon : float
        Tolerated shortfall of the fidelity, in (0, 1).
    max_group_size : int, optional
        Search limit (default :data:`DEFAULT_MAX_GROUP_SIZE`, at most 10^9).

    Returns
    -------
    float
        The smallest G ≥ 2 whose fidelity :math:`\varphi(p, G) \ge 1 - \varepsilon` for at least
        half (rounded up) of the prompts some G can serve: the lower median of
        :func:`required_group_size` over the prompts with :math:`0 < p < 1`, a prompt above
        ``max_group_size`` counting as larger than every G.  NaN when no prompt has
        :math:`0 < p < 1` or the median is above ``max_group_size``.

    Notes
    -----
    Prompts at p ∈ {0, 1} are left out (no G makes their groups speak).  The lower median is a
    group size (the mean of two middle ones is not), and it is found by bisection on G — φ is
    nondecreasing in G, so "at least half reach the target at G" is monotone — without solving
    the prompts near 0 or 1 that need thousands.  ``gsd diagnose``'s
    ``median_group_size_recommended`` and the live ``gsd/recommended_group_size`` in a TRL run
    (:mod:`gsd.live`) are this function.

    Examples
    --------
    >>> gsd.median_group_size([0.5, 0.05, 0.0, 0.5], 0.05)  # required 11, 69, (none), 11
    11.0
    """
    p = as_probability(p).ravel()
    if np.ndim(epsilon) != 0:
        raise InputError(f"epsilon must be one number in (0, 1), got {epsilon!r}")
    epsilon = float(as_open_unit(epsilon, "epsilon"))
    cap = as_scalar_group_size(max_group_size, "max_group_size", minimum=2, maximum=MAX_EXACT_GROUP_SIZE)
    p = p[(p > 0) & (p < 1)]
    if p.size == 0:
        return float("nan")
    a = np.unique(np.minimum(p, 1.0 - p), return_counts=True)  # φ depends on p only through p(1−p)
    half, target = -(-p.size // 2), 1.0 - epsilon

    def enough(G):
        return int(a[1][fidelity(a[0], G) >= target].sum()) >= half

    lo, hi = 1, 2  # invariant: not enough at lo (φ(·, 1) = 0), enough at hi once found
    while not enough(hi):
        if hi >= cap:
            return float("nan")
        lo, hi = hi, min(2 * hi, cap)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return float(hi)


def plan_group_sizes(
    p: ArrayLike,
    *,
    epsilon: ArrayLike | None = None,
    delta: ArrayLike | None = None,
    rule: str = "exact",
    max_group_size: int = DEFAULT_MAX_GROUP_SIZE,
):
    r"""One group size per prompt, with what it buys (the table behind ``gsd plan``).

    Parameters
    ----------
    p : array_like
        Solve rates of the prompts, in [0, 1].
    epsilon : float or array_like, optional
        Fidelity target 1 − ε (:func:`required_group_size`).
    delta : float or array_like, optional
        Silent-rate target :math:`P_{\text{silent}} \le \delta`
        (:func:`gsd.group_size_for_silent_rate`).  Give exactly one of ``epsilon`` and ``delta``.
    rule : {"exact", "law"}, optional
        For ``epsilon``: the exact fidelity (default) or the paper's law.
    max_group_size : int, optional
        Search limit, at most 10^9 (the fidelity column is an exact sum).

    Returns
    -------
    pandas.DataFrame
        Columns ``p``; ``group_size`` (with the sentinels −1 = unreachable and 0 = above
        ``max_group_size``); ``status`` ("ok", "unreachable", "exceeds_max"); ``fidelity`` and
        ``silent_rate`` at the planned G (NaN where there is none).

    Examples
    --------
    >>> gsd.plan_group_sizes([0.5, 0.05, 1.0], epsilon=0.05)
          p  group_size       status  fidelity  silent_rate
    0  0.50          11           ok  0.950486     0.000977
    1  0.05          69           ok  0.950595     0.029035
    2  1.00          -1  unreachable       NaN          NaN
    """
    import pandas as pd

    return pd.DataFrame(plan_columns(p, epsilon=epsilon, delta=delta, rule=rule, max_group_size=max_group_size))


def plan_columns(p: ArrayLike, *, epsilon: ArrayLike | None, delta: ArrayLike | None, rule, max_group_size) -> dict:
    """The columns of :func:`plan_group_sizes` as numpy arrays (for callers that skip pandas)."""
    if (epsilon is None) == (delta is None):
        raise InputError("give exactly one of epsilon (fidelity target) or delta (silent-rate target)")
    as_scalar_group_size(max_group_size, "max_group_size", minimum=2, maximum=MAX_EXACT_GROUP_SIZE)
    p = np.atleast_1d(as_probability(p)).ravel()
    name, target = ("epsilon", epsilon) if epsilon is not None else ("delta", delta)
    target = as_open_unit(target, name)
    if target.size not in (1, p.size):  # one target, or one per prompt: the table has a row per prompt
        raise InputError(f"{name} must be one number or one per prompt ({p.size}), got {target.size} values")
    target = target.ravel() if target.size == p.size else target.reshape(())
    if epsilon is not None:
        g = required_group_size(p, target, rule=rule, max_group_size=max_group_size)
    else:
        g = group_size_for_silent_rate(p, target, max_group_size=max_group_size)
    ok = g >= 2
    status = np.where(ok, "ok", np.where(g == UNREACHABLE, "unreachable", "exceeds_max"))
    fid = np.full(p.shape, np.nan)
    sil = np.full(p.shape, np.nan)
    if ok.any():
        fid[ok] = fidelity(p[ok], g[ok])
        sil[ok] = silent_rate(p[ok], g[ok])
    return {"p": p, "group_size": g, "status": status, "fidelity": fid, "silent_rate": sil}


_plan_columns = plan_columns  # the name other branches import
