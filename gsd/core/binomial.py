"""Exact binomial expectations E[f(k)], k ~ Binom(G, p), broadcast over arrays of (p, G).

The expected updates of :ref:`theory-update` have no closed form, so they are summed term by term — but only over
the window of k where the binomial mass is not negligible, which keeps G = 10^5 cheap and
exact to rounding:

    k ∈ [μ − 12·sd − 40, μ + 12·sd + 40] ∩ [0, G],   μ = G·a, sd = sqrt(G·a(1−a)).

Bernstein's inequality bounds the mass outside by 2·exp(−t²/(2(sd² + t/3))) with
t = 12·sd + 40, i.e. below e^−60 ≈ 1e-26 for every (p, G).  Every f used here is bounded by 1
and vanishes at k = 0, so the expectations are at least of order P(k = 1)·f(1), and the
dropped tail is smaller still by many orders of magnitude.  The pmf comes from
``scipy.stats.binom.pmf`` (Boost's ibeta derivative: within ~100 ulp of mpmath where we
measured it, except at k = 0, where it reached 2,434 ulp and ``exp(G·log1p(−a))`` is used instead)
once per block of 64 terms, the
other terms of the block by the exact term ratio (within 5·63·2^−53 ≈ 3.5e-14 of the anchor's
precision, :func:`_sum_chunk`; tested against mpmath to 1e-12 for G = 129 … 10^5).

All pairs are flattened into one ragged vector of terms, evaluated in chunks, and reduced with
``np.add.reduceat`` — no Python loop over prompts or over k.  Up to G = 128 every k is summed
instead, as a dense ((G+1) × pairs) product built one power at a time in cache-sized blocks
(:func:`_dense_sum`); above G = 32 repeated (p, G) pairs are first reduced to distinct ones.
"""

from __future__ import annotations

import functools
import math
import threading

import numpy as np
from numpy.typing import ArrayLike

# Terms evaluated per chunk: bounds the temporary memory (~10 arrays of 8 bytes each).
_CHUNK_TERMS = 1 << 21
_SD_WIDTH = 12.0
_PAD = 40
_TINY = 1e-250
# Up to this G every term is summed densely (see _expectation_small).
DENSE_MAX_G = 128
# Up to this G the dense sum is used even when (p, G) pairs repeat (see symmetric_expectation).
_DIRECT_G = 32
#: Entries of one dense block (see _dense_sum): 2 MB of float64, cache-sized.
BLOCK_ENTRIES = 1 << 18


def binomial_window(a: np.ndarray, G: np.ndarray):
    """Inclusive [lo, hi] range of k that carries all but ~1e-26 of Binom(G, a)'s mass."""
    mu = G * a
    sd = np.sqrt(G * a * (1.0 - a))
    lo = np.maximum(0, np.floor(mu - _SD_WIDTH * sd - _PAD)).astype(np.int64)
    hi = np.minimum(G, np.ceil(mu + _SD_WIDTH * sd + _PAD)).astype(np.int64)
    return lo, hi


def symmetric_expectation(p: np.ndarray, G: np.ndarray, f) -> np.ndarray:
    """E[f(k, G)] for k ~ Binom(G, p), where f(k, G) = f(G − k, G) (symmetric).

    Symmetry lets us evaluate at a = min(p, 1 − p) only, where the pmf of a near-0 probability
    is computed without the cancellation of 1 − p (1 − p is exact for p ≥ 1/2 in floating point,
    Sterbenz's lemma).  ``p`` and ``G`` must already be validated and broadcast-compatible;
    ``f`` takes int64 arrays k and G (same shape) and returns float64.
    """
    p, G = np.broadcast_arrays(np.asarray(p, dtype=np.float64), np.asarray(G, dtype=np.int64))
    shape = p.shape
    a = np.minimum(p, 1.0 - p).ravel()
    n = G.ravel()
    if a.size == 0:
        return np.empty(shape)
    # Boost's pmf overflows for a near the smallest normal float.  There the k ≥ 2 terms are
    # below (G·a)² and E[f] = G·a·f(1) to rounding.
    tiny = a < _TINY
    if tiny.any():
        out = np.empty(a.shape)
        out[tiny] = n[tiny] * a[tiny] * f(np.ones(int(tiny.sum()), dtype=np.int64), n[tiny])
        if (~tiny).any():
            out[~tiny] = symmetric_expectation(a[~tiny], n[~tiny], f)
        return out.reshape(shape)
    # Up to G = 32 the dense sum costs less per pair (≤ 40 ns) than finding repeated pairs
    # (a lexsort, 40–70 ns per pair): those pairs are summed directly.
    direct = n <= _DIRECT_G
    if direct.all():
        return _expectation_small(a, n, f).reshape(shape)
    if not direct.any():
        return _deduplicated(a, n, f).reshape(shape)
    out = np.empty(a.shape)
    out[direct] = _expectation_small(a[direct], n[direct], f)
    out[~direct] = _deduplicated(a[~direct], n[~direct], f)
    return out.reshape(shape)


def _deduplicated(a, n, f):
    """:func:`_expectation_flat` once per distinct (a, G) pair when repeats are common."""
    # Real data repeats (p, G) pairs (Big-Math has 65 distinct p among 215,608 prompts).  A
    # simulator's p are mostly distinct after a few steps: there the sort would cost as much as
    # the sums, so it runs only when a spread probe of 1,024 pairs holds ≥ 10 % repeats (at
    # 4,000 distinct values among 10^5 pairs the probe already finds ~12 %).
    probe = np.linspace(0, a.size - 1, min(a.size, 1024)).astype(np.int64)  # distinct: step ≥ 1
    if probe.size < 2 or 10 * _distinct_pairs(a[probe], n[probe]) > 9 * probe.size:
        return _expectation_flat(a, n, f)
    first, inverse = unique_pairs(a, n)
    if first.size < a.size:
        return _expectation_flat(a[first], n[first], f)[inverse]
    return _expectation_flat(a, n, f)


def _distinct_pairs(x: np.ndarray, y: np.ndarray) -> int:
    """How many distinct (x, y) pairs two 1-d arrays hold (a sort of x alone when y is constant)."""
    if y.min() != y.max():
        return unique_pairs(x, y)[0].size
    xs = np.sort(x)
    return 1 + int(np.count_nonzero(xs[1:] != xs[:-1]))


def unique_pairs(x: np.ndarray, y: np.ndarray):
    """Distinct (x, y) pairs of two 1-d arrays: (index of one member of each, inverse map).

    A lexsort is several times faster than ``np.unique(..., axis=1)`` on 10^5 pairs.
    """
    order = np.lexsort((y, x))
    xs, ys = x[order], y[order]
    new = np.empty(order.size, dtype=bool)
    new[0] = True
    new[1:] = (xs[1:] != xs[:-1]) | (ys[1:] != ys[:-1])
    group = np.cumsum(new) - 1
    inverse = np.empty(order.size, dtype=np.int64)
    inverse[order] = group
    return order[new], inverse


def _expectation_flat(a, n, f):
    out = np.empty(a.shape, dtype=np.float64)
    small = n <= DENSE_MAX_G
    if small.any():
        out[small] = _expectation_small(a[small], n[small], f)
        if small.all():
            return out
        out[~small] = _expectation_flat(a[~small], n[~small], f)
        return out
    lo, hi = binomial_window(a, n)
    width = hi - lo + 1
    ends = np.cumsum(width)
    start = 0
    while start < a.size:
        # Largest run of pairs whose terms fit in one chunk (at least one pair).
        before = ends[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, before + _CHUNK_TERMS, side="right")))
        _sum_chunk(a, n, lo, width, f, out, start, stop)
        start = stop
    return out


@functools.lru_cache(maxsize=None)
def binomial_row(g: int) -> np.ndarray:
    """C(g, k) for k = 0 … g, each the float nearest the exact integer."""
    return np.array([float(math.comb(g, k)) for k in range(g + 1)])


def _expectation_small(a, n, f):
    """The full sum over k = 0 … G for small G, one dense ((G+1) × pairs) block per distinct G.

    pmf(k) = C(G, k)·a^k·(1−a)^(G−k) with the powers built by repeated products: the
    relative error is at most ~2G ulp (≤ 3e-14 at G = 128), and it is 10-50× faster than
    calling scipy's pmf term by term, which matters when a simulator evaluates 10^4 prompts
    every step.  Requires a ≥ _TINY (no underflow of a itself).
    """
    if n[0] == n.min() == n.max():  # one group size (a simulator's step): no grouping pass
        g = int(n[0])
        return _dense_sum(a, g, _weights(g, f))
    out = np.empty(a.shape)
    order = np.argsort(n, kind="stable")
    sizes, starts = np.unique(n[order], return_index=True)
    bounds = np.append(starts, n.size)
    for g, lo, hi in zip(sizes.tolist(), bounds[:-1], bounds[1:]):  # one block per distinct G
        idx = order[lo:hi]
        out[idx] = _dense_sum(a[idx], g, _weights(g, f))
    return out


def _weights(g: int, f) -> np.ndarray:
    """C(g, k)·f(k, g) for k = 0 … g."""
    return binomial_row(g) * f(np.arange(g + 1), np.full(g + 1, g, dtype=np.int64))


_local = threading.local()


def _scratch(size: int) -> np.ndarray:
    """A float64 work buffer of ``size`` entries, kept per thread between calls.

    A fresh multi-MB ``np.empty`` on every call is returned to the OS when freed (glibc's trim
    threshold) and paged in again by the next call — 4–5× the cost of the arithmetic at 6,000
    prompts and G = 8, where a simulator calls this every step.
    """
    buf = getattr(_local, "buf", None)
    if buf is None or buf.size < size:
        buf = _local.buf = np.empty(max(size, BLOCK_ENTRIES))
    return buf[:size]


def _dense_sum(a: np.ndarray, g: int, weights: np.ndarray) -> np.ndarray:
    """Σ_k weights[k]·a^k·(1−a)^(g−k) for each entry of ``a``, in column blocks.

    Row k of a (g+1, cols) buffer is built as a^k = a^(k−1)·a, then multiplied by
    (1−a)^(g−k), also built one factor at a time: the multiplications of two ``np.cumprod``
    along axis 0, in the same order (the same bits), one vectorised multiply per row.  numpy's
    cumprod does not vectorise across columns and full-width (g+1, pairs) temporaries spill the
    cache (and, above glibc's trim threshold, are paged in afresh on every call): blocks of
    ~2^18 entries are 3–10× faster at G = 8–128 on 10^4–10^5 prompts.  The loops run over the
    g+1 powers and the blocks, never over prompts.
    """
    out = np.empty(a.size)
    cols = max(1, min(a.size, max(256, BLOCK_ENTRIES // (g + 1))))
    buf, run = _scratch((g + 1) * cols).reshape(g + 1, cols), np.empty(cols)
    for s in range(0, a.size, cols):
        x = a[s : s + cols]
        up, d = buf[:, : x.size], run[: x.size]
        up[0] = 1.0
        for j in range(1, g + 1):
            np.multiply(up[j - 1], x, out=up[j])  # a^j
        b = 1.0 - x
        d[:] = b
        for j in range(g - 1, -1, -1):
            up[j] *= d  # a^j (1−a)^(g−j)
            if j:
                d *= b
        # Summed over k column by column (not a BLAS product, whose order of summation depends
        # on the block's width): an entry's value is the same in any batch.
        acc = out[s : s + x.size]
        np.multiply(up[0], weights[0], out=acc)
        for j in range(1, g + 1):
            acc += weights[j] * up[j]
    return out


# Terms per anchored block of :func:`_sum_chunk`: the pmf from scipy at each block's first k, the
# rest by the exact term ratio (each step ≤ 5 roundings: relative error ≤ 5·(_ANCHOR − 1)·2^−53
# ≈ 3.5e-14 at the block's last term, on top of the anchor's own few ulp).
_ANCHOR = 64


def binom_pmf(k: ArrayLike, G: ArrayLike, p: ArrayLike):
    """The binomial pmf C(G, k)·p^k·(1 − p)^(G − k) of ``scipy.stats.binom`` (Boost) without
    importing scipy.stats (~0.4 s and ~50 MB): the ufunc its ``_pmf`` calls, clipped to [0, 1] as
    ``binom.pmf`` clips it; on k in 0 … G (every k here) that is ``binom.pmf`` bit for bit.
    ``binom.pmf`` itself where scipy has no such ufunc."""
    try:
        from scipy.special._ufuncs import _binom_pmf
    except ImportError:  # pragma: no cover - another scipy layout
        from scipy.stats import binom

        return binom.pmf(k, G, p)
    return np.clip(_binom_pmf(k, G, p), 0.0, 1.0)


def _sum_chunk(a, n, lo, width, f, out, start, stop):
    """Σ_k pmf(k)·f(k) over each pair's window, for the pairs start … stop − 1.

    The window of each pair is cut into blocks of :data:`_ANCHOR` terms.  scipy's pmf (Boost,
    a few ulp) is called once per block, at its first k; the block's other terms follow by the
    ratio pmf(k + 1)/pmf(k) = (G − k)/(k + 1)·a/(1 − a), one ``cumprod`` along the block (a
    float64 multiply per term instead of a pmf call: ~20× faster, the cost of ``gsd plan
    --g-max 20000``).  a/(1 − a) is rounded twice and each step adds three roundings, so term j
    of a block is within 5·j·2^−53 ≤ 3.5e-14 of its exact ratio to the anchor; every term is ≥ 0
    (f ≥ 0 here), so the sum keeps that relative bound plus the anchor's error.
    """
    w = width[start:stop]
    nb = (w + _ANCHOR - 1) // _ANCHOR  # blocks per pair
    pair = np.repeat(np.arange(stop - start), nb)
    first = np.concatenate(([0], np.cumsum(nb)[:-1]))
    k0 = lo[start:stop][pair] + _ANCHOR * (np.arange(nb.sum()) - first[pair])
    hi = (lo[start:stop] + w - 1)[pair]
    G = n[start:stop][pair]
    x = a[start:stop][pair]
    k = k0[:, None] + np.arange(_ANCHOR)[None, :]  # (blocks, _ANCHOR)
    valid = k <= hi[:, None]
    kc = np.minimum(k, hi[:, None])
    ratio = np.empty(k.shape)
    # At k = 0 Boost's pmf can be far from its usual accuracy (2,434 ulp at G = 129, a = 0.0709,
    # against mpmath), and a block anchored there passes that error to every term it holds;
    # (1 − a)^G = exp(G·log1p(−a)) is within (G·|log1p(−a)| + 2) ulp (log1p, exp: 1 ulp each).
    ratio[:, 0] = np.where(k0 == 0, np.exp(G * np.log1p(-x)), binom_pmf(k0, G, x))
    r = (x / (1.0 - x))[:, None]
    ratio[:, 1:] = (G[:, None] - kc[:, :-1]) / (kc[:, :-1] + 1.0) * r
    terms = np.cumprod(ratio, axis=1)
    terms *= f(kc, np.broadcast_to(G[:, None], k.shape))
    terms[~valid] = 0.0
    out[start:stop] = np.add.reduceat(terms.sum(axis=1), first)
