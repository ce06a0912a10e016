"""Expectations behind the allocation values: E[f(k, G)] over k ~ Binom(G, p) or the beta-binomial of a
posterior Beta(a, b), at one G or at every G of a grid, and the beta moments E[p^i (1−p)^j].

f(k, G) is the GRPO term σ̂²/(σ̂_c + eps) of a std convention (σ̂ = sqrt(k(G−k))/G in the paper's,
``gsd.core.update.grpo_term``).  Three ways to the same sums, each where it is cheapest:

* :func:`beta_sigma`: one dense beta-binomial sum per (posterior, G), its pmf in logs;
* :func:`sigma_table`: every G up to g_max at once by the pmf recurrence over G (one answer added
  at a time), for known p or a posterior;
* :func:`sigma_on_grid`: the cheaper of the two for a grid (:func:`sigma_costs` counts their terms).

For known p at one G, :func:`sigma_on_grid` uses the windowed binomial sum of ``gsd.core.binomial``.
"""

from __future__ import annotations

import numpy as np

from ..core.binomial import symmetric_expectation
from ..core.silent import minor_rate as _minor

__all__ = [
    "log_rising",
    "log_rising_bound",
    "log_beta_moment",
    "beta_nonsilent",
    "beta_sigma",
    "sigma_table",
    "sigma_costs",
    "sigma_on_grid",
]

#: Terms per dense block of a beta-binomial sum: 512 kB per temporary array.  A block holds about
#: ten such temporaries at once (:func:`log_rising`'s Stirling branch, taken by posteriors of 100
#: counts or more), so this bounds the sum's transient memory to ~5 MB; at 2^21 terms it reached
#: ~77 MB while a long run's tables were predicted (the group tables of ``gsd diagnose``).  The sums
#: run row by row, so the block size never changes a value.
BLOCK_TERMS = 1 << 16
# A dense sum term (gammaln / betaln) costs about this many recurrence terms.
_DENSE_TERM_COST = 8


def log_rising(x, n):
    """log Γ(x + n) − log Γ(x) = log x(x+1)…(x+n−1), without cancelling two large log-gammas.

    For x ≥ 100 the two log-gammas are ~x·log x each and their difference would keep only about
    x·log x·2^−53 of absolute precision (1.5e-9 at x = 10^6); there Stirling's series is subtracted
    term by term, each difference written without cancellation (y = x + n):

        (x − ½)·log1p(n/x) + n·log y − n − n/(12xy) + n/(360xy)·(1/x² + 1/(xy) + 1/y²)
        − n/(1260xy)·(1/x⁴ + 1/(x³y) + 1/(x²y²) + 1/(xy³) + 1/y⁴),

    whose dropped next term is below 1/(1680·x⁷) ≤ 6e-18.  Below x = 100, ``gammaln(x + n) −
    gammaln(x)`` (abs(log Γ(x)) ≤ 360 there, so the cancellation costs at most ~360 ulp of 1).
    """
    from scipy.special import gammaln

    x, n = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(n, dtype=np.float64))
    big = x >= STIRLING_MIN_X
    out = np.empty(x.shape)
    small = ~big
    out[small] = gammaln(x[small] + n[small]) - gammaln(x[small])
    xb, nb = x[big], n[big]
    y = xb + nb
    ix, iy = 1.0 / xb, 1.0 / y
    c3 = (ix * ix + ix * iy + iy * iy) / 360.0
    c5 = (ix**4 + ix**3 * iy + (ix * iy) ** 2 + ix * iy**3 + iy**4) / 1260.0
    out[big] = (xb - 0.5) * np.log1p(nb / xb) + nb * np.log(y) - nb + nb * ix * iy * (c3 - c5 - 1.0 / 12.0)
    return out


#: Where :func:`log_rising` switches from two log-gammas to Stirling's series.
STIRLING_MIN_X = 100.0


def log_rising_bound(x, n):
    """A bound on the absolute error of :func:`log_rising` against log Γ(x+n)/Γ(x), from its roundings.

    x ≥ 100: 8 roundings of the largest of abs(n·log y), abs((x − ½)·log1p(n/x)) and n, plus the
    series' truncation (≤ 1/(1680·x⁷)); below: 4 roundings of abs(log Γ(x + n)) + abs(log Γ(x)) + 2
    (scipy's ``gammaln`` is within a few ulp, absolutely near its zeros at 1 and 2).  u = 2^−53.
    """
    from scipy.special import gammaln

    x, n = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(n, dtype=np.float64))
    u = 2.0**-53
    y = x + n
    series = 8 * u * np.maximum.reduce([np.abs(n * np.log(y)), np.abs((x - 0.5) * np.log1p(n / x)), n]) + 1.0 / (
        1680.0 * np.maximum(x, STIRLING_MIN_X) ** 7
    )
    direct = 4 * u * (np.abs(gammaln(y)) + np.abs(gammaln(x)) + 2.0)  # + 2: absolute, near log Γ's zeros
    return np.where(x >= STIRLING_MIN_X, series, direct)


def log_beta_moment(a, b, i, j):
    """log E[p^i (1−p)^j] under Beta(a, b) = log B(a+i, b+j) − log B(a, b), as rising factorials
    (stable at any count, see :func:`log_rising`)."""
    return log_rising(a, i) + log_rising(b, j) - log_rising(np.asarray(a) + b, np.asarray(i) + j)


def beta_nonsilent(a, b, G):
    """1 − E[p^G] − E[(1−p)^G] under Beta(a, b), without cancelling the larger term."""
    l1 = log_beta_moment(a, b, G, 0)
    l2 = log_beta_moment(a, b, 0, G)
    return -np.expm1(np.maximum(l1, l2)) - np.exp(np.minimum(l1, l2))


def beta_sigma(a, b, G, f):
    """E[f(k, G)] = Σ_k BetaBinom(k; G, a, b)·f(k, G) (f: the GRPO term, σ̂ in the paper's
    convention), dense, one block per distinct G ≥ 2.

    The pmf is C(G, k)·B(a + k, b + G − k)/B(a, b), evaluated in logs with ``scipy.special``
    (the same formula as ``scipy.stats.betabinom.pmf``, without its per-call argument handling,
    which costs more than the sum itself here).
    """
    from scipy.special import gammaln

    out = np.empty(a.shape)
    order = np.argsort(G, kind="stable")
    sizes, starts = np.unique(G[order], return_index=True)
    bounds = np.append(starts, G.size)
    for g, lo, hi in zip(sizes.tolist(), bounds[:-1], bounds[1:]):  # one block per distinct G
        if g + 1 > BLOCK_TERMS:  # a very large G: its k in blocks, so memory stays ~BLOCK_TERMS entries
            for i in order[lo:hi]:
                total = 0.0
                for k0 in range(0, g + 1, BLOCK_TERMS):
                    k = np.arange(k0, min(g + 1, k0 + BLOCK_TERMS))
                    lchoose = gammaln(g + 1.0) - gammaln(k + 1.0) - gammaln(g - k + 1.0)
                    total += float(np.exp(lchoose + log_beta_moment(a[i], b[i], k, g - k)) @ f(k, np.full(k.size, g)))
                out[i] = total
            continue
        k = np.arange(g + 1)
        fk = f(k, np.full(g + 1, g))
        lchoose = gammaln(g + 1.0) - gammaln(k + 1.0) - gammaln(g - k + 1.0)
        rows = max(1, BLOCK_TERMS // (g + 1))
        for r0 in range(lo, hi, rows):
            idx = order[r0 : min(hi, r0 + rows)]
            aa, bb = a[idx][:, None], b[idx][:, None]
            logpmf = lchoose + log_beta_moment(aa, bb, k, g - k)
            # Row by row (not a BLAS product, whose order of summation depends on the block's
            # rows): a posterior's value is the same in any batch, so a table predicted in
            # chunks equals the whole table's bit for bit.
            out[idx] = (np.exp(logpmf) * fk).sum(axis=1)
    return out


def sigma_table(grid, f, p=None, a=None, b=None):
    """E[f(k, G)] (f: the GRPO term, σ̂ in the paper's convention) at every G ≥ 2 of ``grid``
    for each row, by the pmf recurrence over G (0 at G < 2, whose groups are always silent).

    Adding one answer to a group of G: P_{G+1}(k) = P_G(k−1)·r(k−1, G) + P_G(k)·(1 − r(k, G)),
    r = p for known p and r = (a+k)/(a+b+G) under Beta(a, b) (Pólya's urn: the predictive
    probability of a right answer).  Each step is a convex combination, so the pmf stays exact
    to ~G ulp with no cancellation; the whole grid costs Σ_G (G+1) operations per row, like one
    dense sum at every G.  Rows are processed in blocks to bound memory.
    """
    point = p is not None
    rows = p.size if point else a.size
    gmax = int(grid[-1])
    col = np.full(gmax + 1, -1)
    col[grid] = np.arange(grid.size)
    out = np.zeros((rows, grid.size))
    block = max(1, (1 << 17) // (gmax + 2))  # ~1 MB per block: the sweep stays in cache (4x faster)
    k = np.arange(gmax + 1, dtype=np.float64)
    for r0 in range(0, rows, block):
        sl = slice(r0, min(rows, r0 + block))
        n = sl.stop - sl.start
        P = np.zeros((n, gmax + 2))
        P[:, 0] = 1.0
        up = np.empty((n, gmax + 1))
        if point:
            x = _minor(p[sl])[:, None]  # σ̂ is symmetric in k ↔ G−k: work with min(p, 1−p)
            r, q = x, 1.0 - x
        else:
            aa, bb = a[sl][:, None], b[sl][:, None]
        for g in range(gmax):  # P holds the pmf of g answers; build g + 1
            if not point:
                r = (aa + k[: g + 1]) / (aa + bb + g)
                q = (bb + g - k[: g + 1]) / (aa + bb + g)
            u = np.multiply(P[:, : g + 1], r, out=up[:, : g + 1])
            P[:, : g + 1] *= q
            P[:, 1 : g + 2] += u
            c = col[g + 1]
            if c >= 0 and g + 1 >= 2:
                out[sl, c] = P[:, : g + 2] @ f(np.arange(g + 2), np.full(g + 2, g + 1))
    return out


def sigma_costs(kind, rows, grid):
    """(terms of the pmf recurrence, of the dense sums at the grid's G) for E[σ̂] over ``rows``
    prompts: the recurrence pays every G up to g_max, a dense sum only the grid's (for known p
    a window of ~12·sqrt(G) + 80 terms around the mean, under a posterior every k)."""
    gmax = int(grid[-1])
    recurrence = rows * gmax * (gmax + 1) // 2
    g = grid.astype(np.float64)
    per_g = np.minimum(g + 1, 12 * np.sqrt(g) + 80) if kind == "point" else g + 1
    return recurrence, int(rows * _DENSE_TERM_COST * per_g.sum())


def sigma_on_grid(kind, grid, f, p=None, a=None, b=None):
    """E[f(k, G)] at every G of ``grid`` for each row, by the cheaper of the pmf recurrence and
    one dense sum per grid G (a sparse grid up to a large g_max)."""
    rows = p.size if kind == "point" else a.size
    recurrence, dense = sigma_costs(kind, rows, grid)
    if recurrence <= dense:
        return sigma_table(grid, f, p=p, a=a, b=b)
    on = grid >= 2
    out = np.zeros((rows, grid.size))
    G = np.broadcast_to(grid[on][None, :], (rows, int(on.sum()))).ravel()
    if kind == "point":
        out[:, on] = symmetric_expectation(np.repeat(p, on.sum()), G, f).reshape(rows, -1)
    else:
        out[:, on] = beta_sigma(np.repeat(a, on.sum()), np.repeat(b, on.sum()), G, f).reshape(rows, -1)
    return out
