"""The look-ahead values ``horizon`` and ``dr_horizon``: the gain F(z_H) − F(z_0) of the run's objective
(F = 2·arcsin√p for GRPO, p for Dr.GRPO) along a prompt's mean-field logit path over H steps, at known p
or under a posterior.

The path is z_{t+1} = z_t + lr·m(z_t, G), m the expected logit update of one step (E[f(k, G)] for GRPO
in the run's std convention, E[σ̂²] = p(1−p)(1 − 1/G) for Dr.GRPO).  The H-step gain is tabulated
once per (grid, value, convention, lr, H) on a logit grid (:func:`horizon_table`), read at known
rates by linear interpolation (:func:`horizon_at_points`) and integrated against a posterior of
logit p (:func:`horizon_quadrature`).  See :ref:`theory-allocation-run`.
"""

from __future__ import annotations

import numpy as np

from .expectations import sigma_table

__all__ = ["horizon_table", "horizon_at_points", "horizon_quadrature", "horizon_point", "horizon_beta"]

# The horizon values follow every prompt's logit along its mean-field path z_{t+1} = z_t + lr·m(z_t, G)
# on a uniform grid of logits; m is tabulated once on that grid and interpolated linearly, and the
# H-step map is built by squaring the one-step map.  The
# grid spans p from 8e-7 to 1 − 8e-7 (beyond it a prompt's update is below 1e-6 per step) at a step
# of 0.02 in z: each linear interpolation (of m, of the k-step maps, of the gain) errs by at most
# (0.02)²/8 times the interpolated function's curvature on the cell.  Relative to the gain this is
# ~1e-4 where the gain is flat in z, up to ~1e-3 where it is steep (lr = 2, H ≈ 40, the gain's
# take-off): tests/allocation/test_lookahead.py carries these errors through the squaring.
_HZ_LO, _HZ_HI, _HZ_N = -14.0, 14.0, 1401
#: The logits z on which the horizon values are tabulated, and their spacing (the tests carry the
#: interpolation error through the squaring on this grid).
LOGIT_GRID = np.linspace(_HZ_LO, _HZ_HI, _HZ_N)
LOGIT_GRID_STEP = (_HZ_HI - _HZ_LO) / (_HZ_N - 1)
# A posterior narrower than this many grid steps (sd of its logit) is integrated by Gauss–Hermite
# around its logit's mean instead of on the grid (it would fall between two nodes).
_HZ_NARROW = 4.0
_HZ_CACHE: dict = {}


def _objective(h, z):
    """The run's objective at logit z: 2·arcsin√p = 2·arctan(e^{z/2}) (GRPO), p (Dr.GRPO)."""
    from scipy.special import expit

    return 2.0 * np.arctan(np.exp(0.5 * z)) if h == "horizon_grpo" else expit(z)


def _lerp_rows(table, z):
    """table (nodes × cols) interpolated linearly at logits z (rows × cols, or rows for every col)."""
    u = (np.clip(z, _HZ_LO, _HZ_HI) - _HZ_LO) / LOGIT_GRID_STEP
    i0 = np.minimum(u.astype(np.int64), _HZ_N - 2)
    fr = u - i0
    if z.ndim == 2:
        col = np.arange(table.shape[1])[None, :]
        return table[i0, col] * (1.0 - fr) + table[i0 + 1, col] * fr
    return table[i0] * (1.0 - fr)[:, None] + table[i0 + 1] * fr[:, None]


def horizon_table(grid, h, f, look):
    """Gain F(z_H) − F(z_0) of the mean-field path from every grid logit z_0, per G of ``grid``.

    m(z, G) is the expected logit update of one step: E[f(k, G)] (GRPO, the run's std convention)
    or E[σ̂²] = p(1−p)(1 − 1/G) (Dr.GRPO).  Cached per (grid, value, convention, lr, H): a run
    replans with the same ones.
    """
    lr, H, ddof, eps = look
    key = (grid.tobytes(), h, ddof, eps, lr, H)
    if key in _HZ_CACHE:
        return _HZ_CACHE[key]
    from scipy.special import expit

    if h == "horizon_grpo":
        m = sigma_table(grid, f, p=expit(LOGIT_GRID))
    else:
        m = (expit(LOGIT_GRID) * expit(-LOGIT_GRID))[:, None] * (1.0 - 1.0 / grid.astype(np.float64))[None, :]
    m = np.where(grid[None, :] >= 2, m, 0.0)
    # The one-step map Φ(z) = z + lr·m(z, G) is the same at every step, so Φ^H from every grid
    # logit is built by squaring (Φ^{2k} = Φ^k ∘ Φ^k, each tabulated on the grid) in log2(H)
    # compositions rather than H steps.  Maps are tabulated as displacements Φ^k(z) − z, which
    # interpolate linearly as accurately as m does, and are taken as 0 beyond the grid (p within
    # 8e-7 of 0 or 1 moves by less than 1e-6 a step).
    z0 = np.broadcast_to(LOGIT_GRID[:, None], m.shape)
    power = lr * m  # displacement of Φ
    total = np.zeros_like(m)  # displacement of Φ^(bits of H so far)
    bits = H
    while True:
        if bits & 1:
            total = total + _shift(power, z0 + total)
        bits >>= 1
        if not bits:
            break
        power = power + _shift(power, z0 + power)
    tab = _objective(h, z0 + total) - _objective(h, LOGIT_GRID)[:, None]
    if len(_HZ_CACHE) >= 8:
        _HZ_CACHE.pop(next(iter(_HZ_CACHE)))
    _HZ_CACHE[key] = tab
    return tab


def _shift(disp, z):
    """A displacement table (nodes × cols) read at logits z (nodes × cols), 0 beyond the grid."""
    inside = (z >= _HZ_LO) & (z <= _HZ_HI)
    return np.where(inside, _lerp_rows(disp, z), 0.0)


def _logit(p):
    with np.errstate(divide="ignore"):
        return np.log(p) - np.log1p(-p)


def horizon_at_points(p, tab):
    """The gain table at known solve rates p (rows × cols); 0 at p ∈ {0, 1} (silent for ever)."""
    return np.where(((p > 0) & (p < 1))[:, None], _lerp_rows(tab, _logit(p)), 0.0)


def horizon_quadrature(a, b, tab):
    """E[gain] under Beta(a, b), rows × cols: the density of z = logit p, σ(z)^a σ(−z)^b / B(a, b),
    is smooth and decays exponentially in ``|z|``, so the trapezoid rule on the grid converges fast
    (the mass beyond the grid, where the gain is below 1e-6 per step, is left out, not spread);
    posteriors too narrow for the grid use 9-point Gauss–Hermite on their logit's normal
    approximation (mean ψ(a) − ψ(b), variance ψ'(a) + ψ'(b))."""
    from scipy.special import betaln, digamma, log_expit, polygamma

    out = np.empty((a.size, tab.shape[1]))
    mu = digamma(a) - digamma(b)
    sd = np.sqrt(polygamma(1, a) + polygamma(1, b))
    narrow = sd < _HZ_NARROW * LOGIT_GRID_STEP
    wide = np.nonzero(~narrow)[0]
    lp, lq = log_expit(LOGIT_GRID), log_expit(-LOGIT_GRID)
    block = max(1, (1 << 21) // _HZ_N)
    for r0 in range(0, wide.size, block):
        idx = wide[r0 : r0 + block]
        # The density itself, not weights renormalised to the grid: a prior like Beta(0.3, ·) keeps
        # percents of its mass below p = 8e-7, where the gain is 0, and renormalising would hand
        # that mass to the grid.
        w = np.exp(a[idx, None] * lp + b[idx, None] * lq - betaln(a[idx], b[idx])[:, None]) * LOGIT_GRID_STEP
        out[idx] = w @ tab
    if narrow.any():
        x, wh = np.polynomial.hermite_e.hermegauss(9)  # nodes for the weight exp(−x²/2)
        wh = wh / wh.sum()
        zq = mu[narrow, None] + sd[narrow, None] * x[None, :]  # rows × 9
        vals = _lerp_rows(tab, zq.ravel()).reshape(zq.shape[0], x.size, tab.shape[1])
        out[narrow] = np.einsum("rqc,q->rc", vals, wh)
    return out


def horizon_point(p, G, h, f, look):
    """Horizon value at arbitrary (p, G) pairs (allocation_value's path)."""
    grid, col = np.unique(G, return_inverse=True)
    tab = horizon_table(grid, h, f, look)
    vals = _lerp_rows(tab, _logit(p))  # rows × distinct G
    out = vals[np.arange(p.size), col]
    return np.where((p > 0) & (p < 1), out, 0.0)


def horizon_beta(a, b, G, h, f, look):
    """Horizon value under Beta(a, b) at arbitrary (a, b, G) triples."""
    grid, col = np.unique(G, return_inverse=True)
    tab = horizon_table(grid, h, f, look)
    return horizon_quadrature(a, b, tab)[np.arange(a.size), col]
