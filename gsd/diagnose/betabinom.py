"""Exact expectations of a group's statistics when the solve rate p has a Beta(a, b) posterior.

The number of right answers k of a group of G drawn now, for a prompt whose p is Beta(a, b),
is beta-binomial: P(k) = C(G, k)·B(a + k, b + G − k)/B(a, b).  Every expectation here is an exact
finite sum over k (or a closed form), vectorised over arrays of (a, b, G) — one entry per
group — with no loop over groups (see :ref:`theory-allocation`):

* :func:`silent_prob` — P(k ∈ {0, G}) = [B(a, b + G) + B(a + G, b)] / B(a, b);
* :func:`expected_sigma` — E[σ̂] = Σ_k P(k)·sqrt(k(G − k))/G, the expected GRPO update of a
  Bernoulli-logit prompt (paper's convention, ddof 0, eps 0);
* :func:`expected_scale` — E[sqrt(p(1 − p))] = B(a + ½, b + ½)/B(a, b), the large-group update.

As a + b → ∞ with a/(a + b) = p they tend to :func:`gsd.silent_rate`, :func:`gsd.expected_update`
and sqrt(p(1 − p)) (the tests check this).
"""

from __future__ import annotations

import numpy as np
from scipy.special import betaln, gammaln

__all__ = ["silent_prob", "expected_sigma", "expected_scale", "betabinom_expectation"]

# Terms per dense block: bounds the temporary memory (a few arrays of 8 bytes each).
_BLOCK_TERMS = 1 << 21


def _abG(a, b, G):
    a, b, G = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64), np.asarray(G, np.int64))
    return a.ravel(), b.ravel(), G.ravel(), a.shape


def silent_prob(a, b, G) -> np.ndarray:
    """P(a group of G is silent) when p ~ Beta(a, b): [B(a, b + G) + B(a + G, b)] / B(a, b).

    Examples
    --------
    >>> round(float(silent_prob(1.0, 1.0, 8)), 12)   # uniform p: 2/(G + 1)
    0.222222222222
    """
    a, b, G, shape = _abG(a, b, G)
    base = betaln(a, b)
    q = np.exp(betaln(a, b + G) - base) + np.exp(betaln(a + G, b) - base)
    return np.minimum(q, 1.0).reshape(shape)


def expected_scale(a, b) -> np.ndarray:
    """E[sqrt(p(1 − p))] for p ~ Beta(a, b): B(a + ½, b + ½)/B(a, b)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return np.exp(betaln(a + 0.5, b + 0.5) - betaln(a, b))


def betabinom_expectation(a, b, G, f) -> np.ndarray:
    """E[f(k, G)] for k ~ BetaBinomial(G, a, b), exact, broadcast over (a, b, G).

    ``f`` takes int64 arrays k and G (same shape) and returns float64.  The sum runs over every
    k = 0 … G, one dense block per distinct G (rows chunked to bound memory).

    Examples
    --------
    >>> import numpy as np
    >>> round(float(betabinom_expectation(2.0, 3.0, 10, lambda k, G: k / G)), 12)   # E[k/G] = a/(a+b)
    0.4
    """
    a, b, G, shape = _abG(a, b, G)
    out = np.empty(a.shape)
    if a.size == 0:
        return out.reshape(shape)
    order = np.argsort(G, kind="stable")
    sizes, starts = np.unique(G[order], return_index=True)
    bounds = np.append(starts, G.size)
    for g, lo, hi in zip(sizes.tolist(), bounds[:-1], bounds[1:]):  # one dense block per distinct G
        k = np.arange(g + 1)
        fk = f(k, np.full(g + 1, g, dtype=np.int64))
        log_comb = gammaln(g + 1.0) - gammaln(k + 1.0) - gammaln(g - k + 1.0)
        rows = max(1, _BLOCK_TERMS // (g + 1))
        for s in range(lo, hi, rows):
            idx = order[s:min(hi, s + rows)]
            ai, bi = a[idx][:, None], b[idx][:, None]
            logp = log_comb + betaln(ai + k, bi + (g - k)) - betaln(ai, bi)
            out[idx] = np.exp(logp) @ fk
    return out.reshape(shape)


def _sigma(k, G):
    return np.sqrt(k * (G - k)) / G


def expected_sigma(a, b, G) -> np.ndarray:
    """E[σ̂] = E[sqrt(k(G − k))/G], k ~ BetaBinomial(G, a, b): the expected GRPO update.

    Examples
    --------
    >>> import gsd
    >>> s = 1e6   # a posterior concentrated at p = 0.3 gives the known-p value
    >>> bool(abs(expected_sigma(0.3 * s, 0.7 * s, 8) - gsd.expected_update(0.3, 8)) < 1e-5)
    True
    """
    return betabinom_expectation(a, b, G, _sigma)
