r"""The difficulty distribution of a step from two logged numbers: its mean reward and its zero-std fraction.

A trainer's scalar log holds, per step, the mean reward :math:`\hat m` and (TRL) the fraction
:math:`\hat z` of groups whose G rewards were all equal.  For right/wrong rewards, with the
step's prompts drawn from a population of solve rates p,

.. math::  E[\hat m] = E[p], \qquad E[\hat z] = E[p^G + (1-p)^G] .

Two numbers pin two parameters.  Under :math:`p \sim \mathrm{Beta}(a, b)`, written with the mean
:math:`m = a/(a+b)` and the concentration :math:`\kappa = a + b`,

.. math::  z(\kappa) = \frac{B(a+G, b) + B(a, b+G)}{B(a, b)}

(:func:`gsd.expected_silent_rate`, stable at any a, b, G).  At fixed m, a smaller κ is a
mean-preserving spread of p (the Beta family with one mean is ordered in the convex order), and
:math:`p^G + (1-p)^G` is convex for G ≥ 2, so z(κ) decreases strictly from 1 (κ → 0: every p is
0 or 1) to :math:`m^G + (1-m)^G` (κ → ∞: every p equals m, the pooled estimate).  Hence:

* :math:`m^G + (1-m)^G < \hat z < 1`: exactly one Beta, found by bisection in log κ (vectorised
  over steps);
* :math:`\hat z \le m^G + (1-m)^G`: **no Beta fits** (nor any population: by Jensen the pooled
  value is the least silent fraction a mean of m allows).  Sampling noise of a few groups, or
  rewards that are not right/wrong, put a step there;
* :math:`\hat z = 1`: every group silent, the limit κ → 0 (every p is 0 or 1).

The fitted Beta predicts the silent fraction at another group size G′,
:math:`E[p^{G'} + (1-p)^{G'}]`, and is a population for the group-size advice
(:meth:`DifficultyFit.population` is a :class:`gsd.BetaPosterior`).  The pooled estimate
:math:`\hat m^{G'} + (1-\hat m)^{G'}` (what a tool that reads only the mean reward can say) is
always a lower bound of the truth, by Jensen.

Intervals (:func:`silent_interval`) are a parametric bootstrap of the logged fractions'
sampling noise: n groups per step drawn from the fitted Beta, G answers each, the two
fractions recomputed and refitted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ..errors import InputError
from ..validation import as_group_size, as_scalar_group_size, shown

__all__ = ["DifficultyFit", "FIT_STATUS", "beta_from_moments", "silent_interval"]

#: What :func:`beta_from_moments` says of a step: ``"fit"`` (one Beta), ``"point_mass"`` (ẑ equals the
#: pooled value to rounding: κ = ∞), ``"all_silent"`` (ẑ = 1: κ → 0, every p is 0 or 1), ``"no_beta"``
#: (ẑ below the pooled value, or m ∈ {0, 1} with ẑ < 1: no population of solve rates has these
#: moments), ``"missing"`` (a moment is not logged at that step).
FIT_STATUS = ("fit", "point_mass", "all_silent", "no_beta", "missing")
# The bisection's bracket of κ = a + b and its steps (2^-64 of ~60 in log κ: float64's limit).
_KAPPA_LO, _KAPPA_HI, _BISECTIONS = 1e-9, 1e16, 64
# ẑ within this of the pooled value is the pooled value (rounding of the logged fraction).
_POINT_TOL = 1e-12
# Most bootstrap draws (replicates x steps x groups) held at once.
_CHUNK = 2_000_000
# Most draws of one step's replicates (replicates x groups): ~0.5 GB of working arrays.
_MAX_DRAWS = 20_000_000


def _silent_beta(m, kappa, G):
    """E[p^G + (1−p)^G] under Beta(mκ, (1−m)κ), arrays of one shape (finite κ > 0, 0 < m < 1)."""
    from ..allocation import log_beta_moment

    a, b = m * kappa, (1.0 - m) * kappa
    return np.minimum(np.exp(log_beta_moment(a, b, G, 0)) + np.exp(log_beta_moment(a, b, 0, G)), 1.0)


def _pooled(m, G):
    from .silent import minor_rate as _minor
    from .silent import silent_from_minor as _silent

    return _silent(_minor(np.asarray(m, dtype=np.float64)), np.asarray(G, dtype=np.float64))


def _solve_kappa(m, z, G):
    """κ with z(κ) = ẑ at fixed m, and the status code (index into FIT_STATUS), elementwise.

    m, z: float arrays of one shape, finite, in [0, 1]; G: int array of that shape (≥ 2)."""
    kappa = np.full(m.shape, np.nan)
    status = np.full(m.shape, FIT_STATUS.index("no_beta"), dtype=np.int8)
    interior = (m > 0) & (m < 1)
    pooled = np.where(interior, _pooled(np.clip(m, 0, 1), G), 1.0)
    every = z >= 1.0
    kappa[every] = 0.0
    status[every] = FIT_STATUS.index("all_silent")
    near = interior & ~every & (np.abs(z - pooled) <= _POINT_TOL)
    kappa[near] = np.inf
    status[near] = FIT_STATUS.index("point_mass")
    todo = interior & ~every & (z > pooled + _POINT_TOL)
    if todo.any():
        mm, zz, gg = m[todo], z[todo], G[todo]
        lo = np.full(mm.shape, np.log(_KAPPA_LO))
        hi = np.full(mm.shape, np.log(_KAPPA_HI))
        for _ in range(_BISECTIONS):  # z(κ) decreases in κ: keep z(e^lo) >= ẑ >= z(e^hi)
            mid = 0.5 * (lo + hi)
            above = _silent_beta(mm, np.exp(mid), gg) >= zz
            lo = np.where(above, mid, lo)
            hi = np.where(above, hi, mid)
        k = np.exp(0.5 * (lo + hi))
        # beyond the bracket's ends: ẑ within float64 rounding of 1 or of the pooled value
        k = np.where(_silent_beta(mm, np.full(mm.shape, _KAPPA_HI), gg) >= zz, np.inf, k)
        kappa[todo] = k
        status[todo] = np.where(np.isinf(k), FIT_STATUS.index("point_mass"), FIT_STATUS.index("fit"))
    return kappa, status


def _names(code):
    """The status names of an array of codes, as an object array of the codes' shape (0-d included)."""
    out = np.empty(np.shape(code), dtype=object)
    out[...] = np.asarray(FIT_STATUS, dtype=object)[code]
    return out


def _moments(mean: ArrayLike, zero_std: ArrayLike, G: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """mean, zero_std as float arrays (NaN allowed: a step without the moment) and G, broadcast."""
    out = []
    for name, v in (("mean", mean), ("zero_std", zero_std)):
        try:
            arr = np.asarray(v, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError(f"{name} must be numbers in [0, 1] (NaN: not logged), got {v!r}") from None
        bad = np.isinf(arr) | (arr < 0) | (arr > 1)
        if bad.any():
            why = " (a mean reward outside [0, 1]: the rewards are not right/wrong)" if name == "mean" else ""
            raise InputError(f"{name} must lie in [0, 1] or be NaN (not logged){why}, got {shown(arr[bad])}")
        out.append(arr)
    G = as_group_size(G, "G", minimum=2, maximum=10**9)
    try:
        m, z, G = np.broadcast_arrays(out[0], out[1], G)
    except ValueError:
        raise InputError(
            f"shapes do not broadcast together: mean {out[0].shape}, zero_std {out[1].shape}, G {G.shape}"
        ) from None
    return m, z, G


@dataclass(frozen=True)
class DifficultyFit:
    r"""Per step, the Beta(a, b) of solve rates whose mean and zero-std fraction at G are the logged ones.

    Attributes
    ----------
    mean, zero_std : ndarray
        The logged moments m̂ and ẑ (NaN where not logged).
    G : ndarray
        The group size the zero-std fraction was counted at.
    kappa : ndarray
        κ = a + b: 0 for ``"all_silent"``, inf for ``"point_mass"``, NaN where no Beta fits.
    status : ndarray of str
        One of :data:`FIT_STATUS` per step.
    """

    mean: np.ndarray
    zero_std: np.ndarray
    G: np.ndarray
    kappa: np.ndarray
    status: np.ndarray

    @property
    def a(self) -> np.ndarray:
        """a = m·κ (NaN where no Beta fits)."""
        return self.mean * self.kappa

    @property
    def b(self) -> np.ndarray:
        """b = (1 − m)·κ."""
        return (1.0 - self.mean) * self.kappa

    def silent_at(self, G) -> np.ndarray:
        r"""The predicted silent fraction :math:`E[p^{G'} + (1-p)^{G'}]` at group size(s) ``G``.

        Broadcast against the steps: a 1-d array of steps and ``G`` of shape (k, 1) gives (k, steps).
        NaN where no Beta fits; 1 where every group was silent; the pooled value at a point mass.
        """
        G = as_group_size(G, "G", minimum=1, maximum=10**9)
        m, kappa, G = np.broadcast_arrays(self.mean, self.kappa, G)
        out = np.full(m.shape, np.nan)
        fin = np.isfinite(kappa) & (kappa > 0)
        out[fin] = _silent_beta(m[fin], kappa[fin], G[fin])
        point = np.isinf(kappa)
        out[point] = _pooled(m[point], G[point])
        out[kappa == 0] = 1.0
        return out

    def population(self, step: int):
        """The fitted Beta of step index ``step`` as a :class:`gsd.BetaPosterior` (the population of
        solve rates the group-size advice takes), or an InputError when that step has no proper Beta."""
        from .posterior import BetaPosterior

        i = int(step)
        flat_k = np.ravel(self.kappa)
        if not -flat_k.size <= i < flat_k.size:
            raise InputError(f"step must index one of the {flat_k.size} fitted steps, got {step!r}")
        if not (np.isfinite(flat_k[i]) and flat_k[i] > 0):
            raise InputError(f"step {step}: no proper Beta (status {np.ravel(self.status)[i]!r})")
        m = float(np.ravel(self.mean)[i])
        return BetaPosterior(a=np.array(m * flat_k[i]), b=np.array((1 - m) * flat_k[i]), prior=(0.0, 0.0))


def beta_from_moments(mean: ArrayLike, zero_std: ArrayLike, G: ArrayLike) -> DifficultyFit:
    r"""Fit p ~ Beta(a, b) per step to the mean reward and the zero-std fraction at group size G.

    Solves :math:`a/(a+b) = \hat m` and :math:`[B(a+G, b) + B(a, b+G)]/B(a, b) = \hat z` (module
    docstring: one solution exactly when :math:`\hat m^G + (1-\hat m)^G < \hat z < 1`).

    Parameters
    ----------
    mean : array_like
        Per step, the mean right/wrong reward (in [0, 1]; NaN: not logged).
    zero_std : array_like
        Per step, the fraction of groups whose rewards were all equal (TRL's
        ``frac_reward_zero_std``; NaN: not logged).
    G : int or array_like
        Group size the fraction was counted at, 2 to 10^9; broadcast against the steps.

    Returns
    -------
    DifficultyFit

    Examples
    --------
    >>> fit = beta_from_moments([0.5, 0.5, 0.5], [0.2, 0.0078125, 0.001], 8)
    >>> fit.status.tolist()
    ['fit', 'point_mass', 'no_beta']
    >>> round(float(fit.silent_at(8)[0]), 12)
    0.2
    """
    m, z, G = _moments(mean, zero_std, G)
    kappa = np.full(m.shape, np.nan)
    code = np.full(m.shape, FIT_STATUS.index("missing"), dtype=np.int8)
    seen = np.isfinite(m) & np.isfinite(z)
    if seen.any():
        kappa[seen], code[seen] = _solve_kappa(m[seen], z[seen], G[seen])
    return DifficultyFit(mean=m, zero_std=z, G=G, kappa=kappa, status=_names(code))


def silent_interval(
    fit: DifficultyFit, G: ArrayLike, groups: ArrayLike, *, level: float = 0.9, draws: int = 200, seed: int = 0
):
    r"""A parametric-bootstrap interval of the predicted silent fraction at group size(s) ``G``.

    The logged fractions are averages over a finite step: ``groups`` groups of ``fit.G`` answers.
    Each replicate draws that many solve rates from the step's fitted Beta, a binomial count of
    right answers per group, recomputes :math:`\hat m` and :math:`\hat z`, refits and predicts at
    ``G``; the interval is the replicates' equal-tailed ``level`` quantiles.  A replicate whose
    :math:`\hat z` falls at or below the pooled value (no Beta) is scored at that limit, the point
    mass :math:`\hat m^{G'} + (1-\hat m)^{G'}`.  A step with no proper Beta (``"no_beta"``,
    ``"missing"``) gets NaN; ``"all_silent"`` is [1, 1]; ``"point_mass"`` is resampled from p ≡ m̂.

    Parameters
    ----------
    fit : DifficultyFit
        From :func:`beta_from_moments` (1-d: one entry per step).
    G : int or array_like
        Group size(s) to predict at, 1 to 10^9 (a 1-d list gives one column each).
    groups : int
        Groups per step behind the logged fractions (TRL: generation batch / num_generations).
    level : float, optional
        Coverage of the interval, in (0, 1) (default 0.9).
    draws : int, optional
        Bootstrap replicates, 10 to 10^5 (default 200).
    seed : int, optional
        Seed of numpy's generator.

    Returns
    -------
    (lo, hi) : tuple of ndarray
        Each of shape (steps, len(G)) (G a list) or (steps,) (G one integer).
    """
    if not isinstance(fit, DifficultyFit):
        raise InputError(f"fit must be a DifficultyFit (from beta_from_moments), got {type(fit).__name__}")
    if np.ndim(fit.mean) != 1:
        raise InputError(f"fit must hold a 1-d array of steps, got shape {np.shape(fit.mean)}")
    scalar = np.ndim(G) == 0
    Gs = np.atleast_1d(as_group_size(G, "G", minimum=1, maximum=10**9))
    n = as_scalar_group_size(groups, "groups", minimum=1, maximum=10**7)
    if not (isinstance(level, (int, float)) and 0.0 < level < 1.0):
        raise InputError(f"level must be a number in (0, 1), got {level!r}")
    B = as_scalar_group_size(draws, "draws", minimum=10, maximum=10**5)
    if B * n > _MAX_DRAWS:  # one step's replicates are drawn at once: refused before any memory is taken
        raise InputError(
            f"draws × groups must be at most {_MAX_DRAWS:,} (one step's replicates are held at once), "
            f"got draws={B} × groups={n}"
        )
    steps = fit.mean.size
    lo = np.full((steps, Gs.size), np.nan)
    hi = np.full((steps, Gs.size), np.nan)
    status = np.asarray(fit.status)
    lo[status == "all_silent"] = hi[status == "all_silent"] = 1.0
    live = np.flatnonzero((status == "fit") | (status == "point_mass"))
    rng = np.random.default_rng(seed)
    per_step = B * n
    chunk = max(1, _CHUNK // per_step)
    q = [(1 - level) / 2, (1 + level) / 2]
    for start in range(0, live.size, chunk):
        idx = live[start : start + chunk]
        m = fit.mean[idx][:, None, None]
        kappa = fit.kappa[idx][:, None, None]
        g0 = fit.G[idx][:, None, None]
        shape = (idx.size, B, n)
        finite = np.broadcast_to(np.isfinite(kappa), shape)
        p = np.broadcast_to(m, shape).copy()
        a = np.broadcast_to(m * np.where(np.isfinite(kappa), kappa, 1.0), shape)
        b = np.broadcast_to((1 - m) * np.where(np.isfinite(kappa), kappa, 1.0), shape)
        p[finite] = rng.beta(a[finite], b[finite])
        k = rng.binomial(np.broadcast_to(g0, shape), p)
        m_star = k.sum(-1) / (n * fit.G[idx][:, None])
        z_star = ((k == 0) | (k == g0)).mean(-1)
        gg = np.broadcast_to(fit.G[idx][:, None], m_star.shape)
        kap, code = _solve_kappa(m_star.ravel(), z_star.ravel(), gg.ravel())
        # a replicate with no Beta (ẑ* at or below its pooled value, or m* ∈ {0, 1} with ẑ* < 1):
        # the limit κ = ∞
        kap = np.where(code == FIT_STATUS.index("no_beta"), np.inf, kap)
        rep = DifficultyFit(mean=m_star.ravel(), zero_std=z_star.ravel(), G=gg.ravel(), kappa=kap, status=_names(code))
        pred = rep.silent_at(Gs[:, None])  # (len(G), idx.size * B)
        pred = pred.reshape(Gs.size, idx.size, B)
        qs = np.quantile(pred, q, axis=-1)  # (2, len(G), idx.size)
        lo[idx], hi[idx] = qs[0].T, qs[1].T
    if scalar:
        return lo[:, 0], hi[:, 0]
    return lo, hi
