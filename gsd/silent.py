"""Silent groups: how often a group of G answers carries no signal (DESIGN §1.2).

A group is silent when its G binary rewards agree (k ∈ {0, G}, σ = 0).  For a prompt answered
right with probability p, independently,

    P_silent(p, G) = p^G + (1 − p)^G.

Written as a^G + exp(G·log1p(−a)) with a = min(p, 1 − p), so that neither term loses digits
when p is within 1e-12 of 0 or 1 and G is 10^5; the complement 1 − P_silent is computed with
``expm1`` for the same reason (it is DAPO's acceptance rate).
"""

from __future__ import annotations

import numpy as np

from ._validate import InputError, _show, as_group_size, as_open_unit, as_probability

__all__ = [
    "UNREACHABLE",
    "silent_rate",
    "nonsilent_rate",
    "silent_rate_subsampled",
    "group_size_for_silent_rate",
    "dapo_generation_cost",
]

#: Returned as a group size when no finite G reaches the target (p = 0 or p = 1).
UNREACHABLE = -1


def _minor(p):
    """a = min(p, 1 − p); 1 − p is exact in floating point for p ≥ 1/2."""
    return np.minimum(p, 1.0 - p)


def _silent(a, G):
    return np.power(a, G) + np.exp(G * np.log1p(-a))


def _nonsilent(a, G):
    return -np.expm1(G * np.log1p(-a)) - np.power(a, G)


def silent_rate(p, G):
    """P_silent(p, G) = p^G + (1 − p)^G (DESIGN §1.2), broadcast over p and G.

    Examples
    --------
    >>> float(silent_rate(0.5, 8))
    0.0078125
    """
    p = as_probability(p)
    G = as_group_size(G)
    return _silent(_minor(p), G)


def nonsilent_rate(p, G):
    """1 − P_silent(p, G): the probability that a group carries signal (DAPO's acceptance rate).

    Computed as −expm1(G·log1p(−a)) − a^G, a = min(p, 1 − p), accurate where 1 − P_silent ~ G·p.
    """
    p = as_probability(p)
    G = as_group_size(G)
    return _nonsilent(_minor(p), G)


def silent_rate_subsampled(k, n, G):
    """Exact silent probability of a G-subset drawn without replacement from n logged rollouts.

    If k of the n logged rollouts are right, the number right in the subset is hypergeometric
    and the subset is silent with probability

        [C(k, G) + C(n − k, G)] / C(n, G).

    This is the finite-sample counterpart of :func:`silent_rate` at p̂ = k/n (DESIGN §1.5).
    Broadcast over k, n and G; needs 0 ≤ k ≤ n and 1 ≤ G ≤ n.
    """
    k = as_group_size(k, "k", minimum=0)
    n = as_group_size(n, "n", minimum=1)
    G = as_group_size(G)
    k, n, G = np.broadcast_arrays(k, n, G)
    if (k > n).any():
        raise InputError(f"k must be <= n, got k={_show(k[k > n])} with n={_show(n[k > n])}")
    if (G > n).any():
        raise InputError(f"G must be <= n (a subset of the logged rollouts), got G={_show(G[G > n])} with n={_show(n[G > n])}")
    # scipy's argument order: (x, M = population, n = successes, N = draws).
    from scipy.stats import hypergeom  # imported here: scipy.stats takes ~1 s to load

    return hypergeom.pmf(0, n, k, G) + hypergeom.pmf(G, n, k, G)


def group_size_for_silent_rate(p, delta):
    """Smallest G with P_silent(p, G) ≤ delta (DESIGN §1.4, the silent-rate form of planning).

    P_silent decreases in G for 0 < p < 1, and m^G ≤ P_silent ≤ 2·m^G with m = max(p, 1 − p),
    so the answer lies in [log δ / log m, log(δ/2) / log m]; an integer bisection over that
    bracket finds it exactly.  p = 0 or 1 is silent at every G: returns :data:`UNREACHABLE`.
    Returns int64 of the broadcast shape; always ≥ 2 (a single answer is always silent).
    """
    p = as_probability(p)
    delta = as_open_unit(delta, "delta")
    p, delta = np.broadcast_arrays(p, delta)
    a = _minor(p)
    ok = a > 0
    a_ok = np.where(ok, a, 0.5)
    log_m = np.log1p(-a_ok)
    lo = np.maximum(2, np.ceil(np.log(delta) / log_m)).astype(np.int64)
    hi = np.maximum(2, np.ceil(np.log(delta / 2) / log_m)).astype(np.int64)
    # Invariant: P(hi) <= delta; the answer is in [lo, hi].
    while True:
        open_ = lo < hi
        if not open_.any():
            break
        mid = (lo + hi) // 2
        good = _silent(a_ok, mid.astype(np.float64)) <= delta
        hi = np.where(open_ & good, mid, hi)
        lo = np.where(open_ & ~good, mid + 1, lo)
    return np.where(ok, hi, UNREACHABLE)


def dapo_generation_cost(p, G, *, max_draws=None):
    """Expected groups generated per prompt under DAPO's dynamic sampling (DESIGN §1.2).

    A silent group is dropped and redrawn.  With unlimited redraws the number of groups drawn
    until one carries signal is geometric: E = 1 / (1 − P_silent).  With at most ``max_draws``
    draws in all (the paper's campaign uses 4) it is truncated:

        E = Σ_{d=0}^{D−1} P_silent^d = (1 − P_silent^D) / (1 − P_silent).

    Multiply by G for rollouts.  p = 0 or 1 with unlimited redraws costs ``inf``.
    """
    p = as_probability(p)
    G = as_group_size(G)
    a = _minor(p)
    q = _nonsilent(a, G)
    with np.errstate(divide="ignore", invalid="ignore"):
        if max_draws is None:
            return 1.0 / q
        D = as_group_size(max_draws, "max_draws")
        # log s = log1p(−q): q is the accurate one of the two when s is close to 1.
        # (1 − s^D)/(1 − s) → D as s → 1 (a prompt that is always silent uses every draw).
        cost = -np.expm1(D * np.log1p(-q)) / q
        return np.where(q > 0, cost, D * np.ones_like(cost))
