"""Silent groups: how often a group of G answers carries no signal (:ref:`theory-silent`).

A group is silent when its G binary rewards agree (k ∈ {0, G}, σ = 0).  For a prompt answered
right with probability p, independently,

    P_silent(p, G) = p^G + (1 − p)^G.

Written as a^G + exp(G·log1p(−a)) with a = min(p, 1 − p), so that neither term loses digits
when p is within 1e-12 of 0 or 1 and G is 10^5; the complement 1 − P_silent is computed with
``expm1`` for the same reason (it is DAPO's acceptance rate).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..validation import (
    MAX_GROUP_SIZE,
    InputError,
    as_group_size,
    as_open_unit,
    as_probability,
    as_scalar_group_size,
    broadcast,
    numpy_result,
    shown,
)
from .arrays import FloatOrTensor, namespace

__all__ = [
    "UNREACHABLE",
    "EXCEEDS_MAX",
    "silent_rate",
    "nonsilent_rate",
    "silent_rate_subsampled",
    "group_size_for_silent_rate",
    "dapo_generation_cost",
]

#: Returned as a group size when no finite G reaches the target (p = 0 or p = 1).
UNREACHABLE = -1
#: Returned as a group size when the target needs a G above the caller's ``max_group_size``.
EXCEEDS_MAX = 0
# Logged rollouts per prompt that silent_rate_subsampled accepts (see there).
_MAX_LOGGED = 10**6


# The formulas below take numpy arrays or torch tensors (:mod:`gsd.core.arrays`): the simulator's
# ledger evaluates them on the run's device, the public functions on validated numpy arrays.
def minor_rate(p: FloatOrTensor, out: FloatOrTensor = None):
    """a = min(p, 1 − p); 1 − p is exact in floating point for p ≥ 1/2.  ``out``: a numpy array
    of p's shape to write it into."""
    if out is None:
        return namespace(p).minimum(p, 1.0 - p)
    np.subtract(1.0, p, out=out)
    return np.minimum(p, out, out=out)


_minor = minor_rate  # the name other branches import


def silent_from_minor(a: FloatOrTensor, G: FloatOrTensor, out: FloatOrTensor = None):
    """a^G + (1 − a)^G as a^G + exp(G·log1p(−a)); ``out``: a numpy array of a's shape to build it in."""
    xp = namespace(a)
    if out is None:
        s = xp.log1p(-a)
    else:
        s = np.log1p(np.negative(a, out=out), out=out)
    if isinstance(s, np.ndarray) and s.shape == np.broadcast_shapes(s.shape, np.shape(G)):
        # in place (a simulator step calls this on 10^5 prompts: every fresh array costs page
        # faults); the bits of a^G + exp(G·log1p(−a))
        s *= G
        np.exp(s, out=s)
        s += a**G
        return s
    return a**G + xp.exp(G * s)


_silent = silent_from_minor  # the name other branches import


def nonsilent_from_minor(a: FloatOrTensor, G: FloatOrTensor):
    xp = namespace(a)
    return -xp.expm1(G * xp.log1p(-a)) - a**G


_nonsilent = nonsilent_from_minor  # the name other branches import


def truncated_draws(q: FloatOrTensor, D: FloatOrTensor):
    """Expected draws Σ_{d<D} s^d = (1 − s^D)/(1 − s) with s = 1 − q the silent rate (q > 0),
    and D where q = 0 (a prompt that is always silent uses every draw).

    log s = log1p(−q): q is the accurate one of the two when s is close to 1.
    """
    xp = namespace(q)
    cost = -xp.expm1(D * xp.log1p(-q)) / q
    return xp.where(q > 0, cost, D * xp.ones_like(cost))


_truncated_draws = truncated_draws  # the name other branches import


def silent_rate(p: ArrayLike, G: ArrayLike):
    r"""Probability that a group of G answers is silent (all right or all wrong).

    Parameters
    ----------
    p : array_like
        Probability of a right answer, in [0, 1].
    G : array_like of int
        Group size, 1 ≤ G ≤ 2^53 (every integer exact in float64).  ``p`` and ``G``
        broadcast against each other.

    Returns
    -------
    numpy.ndarray or float
        :math:`P_{\text{silent}}(p, G)`, of the broadcast shape.

    Notes
    -----
    .. math::

        P_{\text{silent}}(p, G) = p^G + (1 - p)^G ,

    evaluated as :math:`a^G + \exp(G \log(1 - a))` with :math:`a = \min(p, 1-p)`, so that
    neither term loses digits for p within 1e-12 of 0 or 1 and G up to 10^5
    (:ref:`theory-silent`).

    Examples
    --------
    >>> gsd.silent_rate([0.5, 0.05], 8)
    array([0.0078125 , 0.66342043])
    >>> gsd.silent_rate(0.05, [8, 64])
    array([0.66342043, 0.03752414])
    """
    p = as_probability(p)
    p, G = broadcast(p=p, G=as_group_size(G))
    return silent_from_minor(minor_rate(p), G)


def nonsilent_rate(p: ArrayLike, G: ArrayLike):
    r"""Probability that a group carries signal, 1 − P_silent (DAPO's acceptance rate).

    Parameters
    ----------
    p : array_like
        Probability of a right answer, in [0, 1].
    G : array_like of int
        Group size, 1 ≤ G ≤ 2^53.

    Returns
    -------
    numpy.ndarray or float
        :math:`1 - p^G - (1-p)^G`, of the broadcast shape.

    Notes
    -----
    Computed as :math:`-\mathrm{expm1}(G \log(1 - a)) - a^G` with :math:`a = \min(p, 1-p)`,
    accurate where the rate is tiny (about G·p) — where ``1 - silent_rate(p, G)`` would return
    0 or noise.

    Examples
    --------
    >>> float(gsd.nonsilent_rate(1e-12, 8))  # 1 - silent_rate(1e-12, 8) gives 8.0e-12 ± 1e-16
    7.999999999972e-12
    """
    p = as_probability(p)
    p, G = broadcast(p=p, G=as_group_size(G))
    return nonsilent_from_minor(minor_rate(p), G)


def silent_rate_subsampled(k: ArrayLike, n: ArrayLike, G: ArrayLike):
    r"""Silent probability of G answers drawn without replacement from n logged rollouts.

    Parameters
    ----------
    k : array_like of int
        Right answers among the logged rollouts, 0 ≤ k ≤ n.
    n : array_like of int
        Logged rollouts of the prompt, ≥ 1.
    G : array_like of int
        Size of the subset, 1 ≤ G ≤ n.  ``k``, ``n`` and ``G`` broadcast together.

    Returns
    -------
    numpy.ndarray or float
        The exact probability that the subset is silent.

    Notes
    -----
    The number right in the subset is hypergeometric, so

    .. math::

        P_{\text{silent}} = \frac{\binom{k}{G} + \binom{n-k}{G}}{\binom{n}{G}} ,

    the finite-sample counterpart of :func:`silent_rate` at :math:`\hat p = k/n`; the paper
    reports both for Big-Math (:ref:`theory-paper`).

    Examples
    --------
    >>> float(gsd.silent_rate_subsampled(k=3, n=64, G=8))
    0.6653225806451614
    >>> gsd.silent_rate_subsampled([0, 32], 64, 8)
    array([1.        , 0.00475278])
    """
    k = as_group_size(k, "k", minimum=0)
    n = as_group_size(n, "n", minimum=1, maximum=_MAX_LOGGED)
    G = as_group_size(G)
    k, n, G = broadcast(k=k, n=n, G=G)
    if (k > n).any():
        raise InputError(f"k must be <= n, got k={shown(k[k > n])} with n={shown(n[k > n])}")
    if (G > n).any():
        raise InputError(
            f"G must be <= n (a subset of the logged rollouts), got G={shown(G[G > n])} with n={shown(n[G > n])}"
        )
    # scipy's argument order: (x, M = population, n = successes, N = draws).
    from scipy.stats import hypergeom  # imported here: scipy.stats takes ~1 s to load

    return hypergeom.pmf(0, n, k, G) + hypergeom.pmf(G, n, k, G)


@numpy_result
def group_size_for_silent_rate(p: ArrayLike, delta: ArrayLike, *, max_group_size: int = MAX_GROUP_SIZE):
    r"""Smallest group size whose silent rate is at most ``delta``.

    The silent-rate form of group-size planning (:ref:`theory-silent`, :ref:`theory-law`).

    Parameters
    ----------
    p : array_like
        Probability of a right answer, in [0, 1].
    delta : array_like
        Target silent rate, in (0, 1).  ``p`` and ``delta`` broadcast together.
    max_group_size : int, optional
        Largest G to return, at most and by default 2^53 (every integer exact in float64).

    Returns
    -------
    numpy.ndarray of int64
        The smallest G ≥ 2 with :math:`P_{\text{silent}}(p, G) \le \delta` (a single answer
        is always silent); :data:`UNREACHABLE` (−1) at p ∈ {0, 1}, silent at every G, and
        :data:`EXCEEDS_MAX` (0) where the answer is above ``max_group_size`` (p = 1e-20 needs
        G ≈ 4.6e20 for δ = 0.01: a sentinel, never an overflowed integer).

    Notes
    -----
    :math:`P_{\text{silent}}` decreases in G for 0 < p < 1 and
    :math:`m^G \le P_{\text{silent}} \le 2 m^G` with :math:`m = \max(p, 1-p)`, so the answer
    lies in :math:`[\log\delta / \log m,\ \log(\delta/2) / \log m]`; an integer bisection
    over that bracket finds it exactly.

    Examples
    --------
    >>> gsd.group_size_for_silent_rate([0.5, 0.05, 0.0], 0.01)
    array([ 8, 90, -1])
    >>> int(gsd.group_size_for_silent_rate(1e-20, 0.01))  # EXCEEDS_MAX
    0
    """
    p = as_probability(p)
    delta = as_open_unit(delta, "delta")
    cap = as_scalar_group_size(max_group_size, "max_group_size", minimum=2)
    p, delta = broadcast(p=p, delta=delta)
    a = minor_rate(p)
    ok = a > 0
    a_ok = np.where(ok, a, 0.5)
    log_m = np.log1p(-a_ok)
    # The bracket in floats first: for tiny p it lies far beyond int64.
    # A subnormal p (or δ/2 rounding to 0) puts the bracket's end at inf: capped below.
    with np.errstate(over="ignore", divide="ignore"):
        lo_f = np.maximum(2.0, np.ceil(np.log(delta) / log_m))
        # Slack beyond the bracket: at its end the bound can be tight (p = 1/2, δ = 2^−5: 2·m^6 = δ)
        # and P_silent computed one ulp above δ, which would report a reachable target as beyond
        # the cap.  The bisection below still returns the smallest G whose P_silent ≤ δ.
        hi_f = np.maximum(2.0, np.ceil(np.log(delta / 2) / log_m * (1 + 1e-9)) + 1)
    ok &= lo_f <= cap
    lo = np.where(ok, np.minimum(lo_f, cap), 2).astype(np.int64)
    hi = np.where(ok, np.minimum(hi_f, cap), 2).astype(np.int64)
    # P_silent(cap) may still exceed delta when lo ≤ cap < the answer.
    ok &= silent_from_minor(a_ok, hi.astype(np.float64)) <= delta
    # Invariant: P(hi) <= delta; the answer is in [lo, hi].
    while True:
        open_ = lo < hi
        if not open_.any():
            break
        mid = (lo + hi) // 2
        good = silent_from_minor(a_ok, mid.astype(np.float64)) <= delta
        hi = np.where(open_ & good, mid, hi)
        lo = np.where(open_ & ~good, mid + 1, lo)
    return np.where(ok, hi, np.where(a > 0, EXCEEDS_MAX, UNREACHABLE))


def dapo_generation_cost(p: ArrayLike, G: ArrayLike, *, max_draws: ArrayLike | None = None):
    r"""Expected groups drawn per prompt under DAPO's dynamic sampling.

    Parameters
    ----------
    p : array_like
        Probability of a right answer, in [0, 1].
    G : array_like of int
        Group size, 1 ≤ G ≤ 2^53.
    max_draws : int, optional
        Draws allowed in all (the paper's campaign: 4); None (default) redraws until a group
        carries signal.

    Returns
    -------
    numpy.ndarray or float
        Expected number of groups generated (multiply by G for rollouts); ``inf`` at
        p ∈ {0, 1} with unlimited redraws.

    Notes
    -----
    A silent group is dropped and redrawn, so the number of draws is geometric, truncated at
    :math:`D` = ``max_draws`` (:ref:`theory-silent`):

    .. math::

        \mathbb{E}[\text{draws}] = \frac{1}{1 - P_{\text{silent}}}
        \quad\text{or}\quad
        \sum_{d=0}^{D-1} P_{\text{silent}}^d = \frac{1 - P_{\text{silent}}^D}{1 - P_{\text{silent}}} .

    Examples
    --------
    >>> float(gsd.dapo_generation_cost(0.05, 8))
    2.9710656649360696
    >>> float(gsd.dapo_generation_cost(0.05, 8, max_draws=4))
    2.3955361244220703
    """
    p = as_probability(p)
    p, G = broadcast(p=p, G=as_group_size(G))
    a = minor_rate(p)
    q = nonsilent_from_minor(a, G)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # q = 0 or subnormal: inf
        if max_draws is None:
            return 1.0 / q
        D, q = broadcast(max_draws=as_group_size(max_draws, "max_draws"), p=q)
        return truncated_draws(q, D)
