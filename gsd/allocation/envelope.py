"""The upper concave envelope of each row of a table over common abscissae: which points lie on it.

The allocator plans on each prompt's values in (rollouts, value) space; where a row is not concave
(a look-ahead value's hard prompts, G = 1 worth 0 at g_min = 1), the points below its envelope are
never the best use of their rollouts and the envelope's segments are handed out instead.
"""

from __future__ import annotations

import numpy as np

__all__ = ["envelope_mask"]

# Rows whose slopes rise by less than this (relative) are concave to rounding.
_CONCAVE_RTOL = 1e-11


def envelope_mask(x, Y):
    """Mask of the points of each row of Y (over common abscissae x) on its upper concave envelope.

    A point strictly below the chord of its active neighbours lies below the envelope, so such
    points can be dropped all at once; repeating until none is left gives the envelope's vertices.
    Slopes that rise by less than a relative 1e-11, or by less than the rounding of the values
    (8 ulp of the magnitude of V per rollout), count as equal.
    """
    rows, m = Y.shape
    active = np.ones((rows, m), dtype=bool)
    if m <= 2:
        return active
    bent = ~_concave_rows(x, Y)
    if not bent.any():
        return active  # the common case (every one-step value for g_min ≥ 2): one vectorised check
    if not bent.all():  # peel only the rows that bend (the horizon values' hard prompts)
        active[bent] = envelope_mask(x, Y[bent])
        return active
    pos = np.arange(m)
    while True:
        idx = np.where(active, pos, -1)
        prev = np.maximum.accumulate(np.concatenate([np.full((rows, 1), -1), idx[:, :-1]], axis=1), axis=1)
        idx_r = np.where(active, pos, m)[:, ::-1]
        nxt = np.minimum.accumulate(np.concatenate([np.full((rows, 1), m), idx_r[:, :-1]], axis=1), axis=1)[:, ::-1]
        inner = active & (prev >= 0) & (nxt < m)
        if not inner.any():
            return active
        r_i, c_i = np.nonzero(inner)
        pv, nx = prev[r_i, c_i], nxt[r_i, c_i]
        s_in = (Y[r_i, c_i] - Y[r_i, pv]) / (x[c_i] - x[pv])
        s_out = (Y[r_i, nx] - Y[r_i, c_i]) / (x[nx] - x[c_i])
        # Rounding of the values themselves (a few ulp of |V|) bounds how well a slope is known:
        # far out on the grid, nonsilent's increments fall below the ulp of V ≈ 1.
        vmax = np.maximum(np.maximum(np.abs(Y[r_i, pv]), np.abs(Y[r_i, c_i])), np.abs(Y[r_i, nx]))
        dx = np.minimum(x[c_i] - x[pv], x[nx] - x[c_i])
        tol = _CONCAVE_RTOL * np.maximum(np.abs(s_in), np.abs(s_out)) + 8 * np.finfo(float).eps * vmax / dx
        below = s_out > s_in + tol
        if not below.any():
            return active
        active[r_i[below], c_i[below]] = False


def _concave_rows(x, Y):
    """Rows whose slopes never rise beyond rounding (the tolerance of :func:`envelope_mask`)."""
    dx = np.diff(x)
    slope = np.diff(Y, axis=1) / dx
    vmax = np.maximum(np.abs(Y[:, :-2]), np.maximum(np.abs(Y[:, 1:-1]), np.abs(Y[:, 2:])))
    tol = _CONCAVE_RTOL * np.maximum(np.abs(slope[:, :-1]), np.abs(slope[:, 1:])) + 8 * np.finfo(
        float
    ).eps * vmax / np.minimum(dx[:-1], dx[1:])
    return (np.diff(slope, axis=1) <= tol).all(axis=1)
