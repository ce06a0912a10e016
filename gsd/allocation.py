"""Spending a rollout budget: how many answers each prompt should get.

A trainer draws G_i answers for prompt i and can afford B = Σ_i G_i rollouts per step.  Each G_i
is 0 (the prompt is skipped this step) or on the grid g_min, g_min + s, …, g_max, and the plan
maximises Σ_i V(p_i, G_i) for one of the values of a group of G answers (see
:ref:`theory-allocation`):

==============  ==========================================================================
``update``      E[σ̂], the expected GRPO update of a Bernoulli-logit prompt (silence and the
                finite-G attenuation included)
``dr_grpo``     E[σ̂²] = p(1−p)(1 − 1/G), Dr.GRPO's expected update
``progress``    p(1−p)·E[σ̂], the first-order change of p under GRPO
``nonsilent``   1 − p^G − (1−p)^G, the probability that the group carries a gradient
``knapsack``    (1 − p^G − (1−p)^G)·p(1−p)², the value of Knapsack RL (Li et al., 2025)
``gain``        √(p(1−p))·E[σ̂], the one-step gain of GRPO's objective 2·arcsin√p per unit lr
``dr_gain``     p(1−p)·E[σ̂²], the one-step gain of Dr.GRPO's objective p per unit lr
``horizon``     the gain of 2·arcsin√p over ``horizon`` steps at rate ``lr`` with G every step
``dr_horizon``  the same for Dr.GRPO and mean p (see :ref:`theory-allocation-run`)
==============  ==========================================================================

Every one-step value is w(p)·h(p, G) with a monomial weight w(p) = p^i (1−p)^j (i, j may be
halves) and h ∈ {E[σ̂], E[σ̂²], P(not silent)}.  When p is unknown and described by a posterior Beta(a, b) (see
:func:`gsd.posterior_from_counts`), the expectation over p is exact:

    E[p^i (1−p)^j h(p, G)] = B(a+i, b+j)/B(a, b) · E_{p ~ Beta(a+i, b+j)}[h(p, G)],

and E[h] is a beta-binomial sum (E[σ̂]), a ratio of beta functions (P(not silent)) or
E[p(1−p)](1 − 1/G) (E[σ̂²]).

The allocator works on the table of values of each distinct prompt (distinct p, or distinct
posterior) over the grid, takes the upper concave envelope of every row in (rollouts, value)
space and hands out envelope segments by decreasing value per rollout (the Lagrangian solution),
then spends the remainder greedily.  It is exactly optimal when every segment costs the same
number of rollouts (a separable concave problem with unit costs, where the greedy is optimal);
otherwise it reports an upper bound on its distance to the optimum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ._binomial import symmetric_expectation, unique_pairs
from ._errors import InputError
from ._validate import MAX_EXACT_GROUP_SIZE, _show, as_ddof, as_eps, as_group_size, as_probability, broadcast
from .posterior import BetaPosterior
from .silent import minor_rate as _minor
from .silent import nonsilent_from_minor as _nonsilent
from .silent import silent_from_minor as _silent
from .update import grpo_term as _grpo_term

if TYPE_CHECKING:  # pandas loads inside the two functions that build DataFrames
    import pandas as pd

__all__ = [
    "ALLOCATION_VALUES",
    "DEFAULT_PLAN",
    "HORIZON_VALUES",
    "PLAN_RULES",
    "Allocation",
    "UniformAdvice",
    "allocation_value",
    "allocate_group_sizes",
    "uniform_plan",
    "allocate_with_advice",
    "budget_plan",
    "expected_silent_rate",
    "uniform_group_size_advice",
    "concavity_violations",
]

#: value name → (i, j, h): V = p^i (1−p)^j · h(p, G).  The exponents may be fractional: the
#: posterior identity below holds for any real i, j > −a, −b.  ``horizon`` values are not of this
#: form: h names the run's objective and update, and the value is an H-step mean-field gain.
_VALUES = {
    "update": (0, 0, "sigma"),
    "dr_grpo": (0, 0, "sigma2"),
    "progress": (1, 1, "sigma"),
    "nonsilent": (0, 0, "nonsilent"),
    "knapsack": (1, 2, "nonsilent"),
    "gain": (0.5, 0.5, "sigma"),
    "dr_gain": (1, 1, "sigma2"),
    "horizon": (0, 0, "horizon_grpo"),
    "dr_horizon": (0, 0, "horizon_dr"),
}
#: Values that look past one step: they need the run's learning rate and a horizon in steps.
HORIZON_VALUES = ("horizon", "dr_horizon")
#: Values understood by :func:`allocation_value` and :func:`allocate_group_sizes`.
ALLOCATION_VALUES = tuple(_VALUES)
#: value name → (i, j, h) of every value (the public name of ``_VALUES``).
VALUE_FORMS = _VALUES
#: What ``gsd plan --budget --value`` takes: ``uniform`` (:func:`uniform_plan`) or a value.
PLAN_RULES = ("uniform", *ALLOCATION_VALUES)
#: ``gsd plan --budget``'s default: uniform G at the budget.  At equal generations no plan from
#: logged counts at the budget's rollouts per prompt beat uniform G in the allocation comparison,
#: and the ``update`` plan lost to it on U-shaped populations (docs/allocation_comparison.md).
DEFAULT_PLAN = "uniform"

# Terms per dense block of a beta-binomial sum (bounds temporary memory to ~16 MB per array).
_BLOCK_TERMS = 1 << 21
#: Terms of the dense beta-binomial sums one :func:`allocation_value` call under a posterior may
#: take (Σ (G + 1) over its distinct (posterior, G)): a few seconds, memory in blocks of _BLOCK_TERMS.
MAX_POSTERIOR_TERMS = 10**8
# Largest value table (distinct prompts × grid points) the allocator builds: 160 MB of float64 (its
# envelope, segment and index tables take a few times that).
_MAX_TABLE = 20_000_000
# Terms of the E[σ̂] sums one value table may take (prompts × Σ_G (G + 1)): a few seconds.  The
# pmf recurrence pays every G up to g_max whatever the grid, a dense sum only the grid's G: the
# cheaper is used, and a table beyond this is refused before any work.
_MAX_SUM_TERMS = 2_000_000_000
# A dense sum term (gammaln / betaln) costs about this many recurrence terms.
_DENSE_TERM_COST = 8
# Plans the greedy cannot certify are solved exactly by dynamic programming up to this work
# (prompts × grid points × budget): a fraction of a second.
_MAX_DP = 20_000_000
# Rows whose slopes rise by less than this (relative) are concave to rounding.
_CONCAVE_RTOL = 1e-11


def _value_spec(value, ddof, eps, lr=None, horizon=None):
    """(i, j, h, f, look): V = p^i (1−p)^j · h(p, G), f(k, G) the GRPO term σ̂²/(σ̂_c + eps) of
    the std convention (ddof, eps) that the ``update``, ``progress``, ``gain`` and ``horizon``
    values average, and look = (lr, horizon) for the horizon values (None otherwise)."""
    if value not in _VALUES:
        raise InputError(f"value must be one of {ALLOCATION_VALUES}, got {value!r}")
    ddof, eps = as_ddof(ddof), float(as_eps(eps))
    look = (*_horizon_args(value, lr, horizon), ddof, eps) if value in HORIZON_VALUES else None
    return (*_VALUES[value], _grpo_term(ddof, eps), look)


def _horizon_args(value, lr, horizon):
    """(lr, H) checked: a finite lr > 0 (at most 100) and an integer horizon 1 … 100,000 steps."""
    if lr is None or horizon is None:
        raise InputError(
            f"value {value!r} looks ahead: it needs lr= (the run's learning rate) and horizon= "
            f"(steps), got lr={lr!r}, horizon={horizon!r}"
        )
    if isinstance(lr, bool) or not isinstance(lr, int | float | np.integer | np.floating) or not (0 < lr <= 100):
        raise InputError(f"lr must be a finite number in (0, 100], got {lr!r}")
    if isinstance(horizon, bool) or not isinstance(horizon, int | np.integer) or not (1 <= horizon <= 100_000):
        raise InputError(f"horizon must be an integer in [1, 100000] (steps), got {horizon!r}")
    return float(lr), int(horizon)


# --------------------------------------------------------------------------- values, one pair at a time
def _point_value(p, G, spec):
    """V(p, G) for known p (arrays of one shape, G ≥ 0)."""
    i, j, h, f, look = spec
    out = np.zeros(p.shape)
    on = G >= 2  # a group of 0 or 1 answers is always silent: every value is 0
    if not on.any():
        return out
    pp, GG = p[on], G[on]
    if look is not None:
        out[on] = _horizon_point(pp, GG, h, f, look)
        return out
    if h == "sigma":
        base = symmetric_expectation(pp, GG, f)
    elif h == "sigma2":
        base = pp * (1.0 - pp) * (1.0 - 1.0 / GG)
    else:
        base = _nonsilent(_minor(pp), GG)
    out[on] = pp**i * (1.0 - pp) ** j * base
    return out


def _log_rising(x, n):
    """log Γ(x + n) − log Γ(x) = log x(x+1)…(x+n−1), without cancelling two huge log-gammas.

    For x ≥ 10^6 (a posterior of ~10^6 counts and more) the two log-gammas are ~x·log x and
    their difference would keep only ~x·1e-16 of absolute precision (2^53 counts: none); there
    Stirling's series is subtracted term by term: (x − ½)·log1p(n/x) + n·log(x + n) − n plus the
    1/(12x) corrections, accurate to ~1e-16 relative at that size.
    """
    from scipy.special import gammaln

    x, n = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(n, dtype=np.float64))
    big = x >= 1e6
    out = np.empty(x.shape)
    small = ~big
    out[small] = gammaln(x[small] + n[small]) - gammaln(x[small])
    xb, nb = x[big], n[big]
    y = xb + nb
    out[big] = (xb - 0.5) * np.log1p(nb / xb) + nb * np.log(y) - nb - nb / (12.0 * xb * y)
    return out


def log_beta_moment(a, b, i, j):
    """log E[p^i (1−p)^j] under Beta(a, b) = log B(a+i, b+j) − log B(a, b), as rising factorials
    (stable at any count, see :func:`_log_rising`)."""
    return _log_rising(a, i) + _log_rising(b, j) - _log_rising(np.asarray(a) + b, np.asarray(i) + j)


def _beta_nonsilent(a, b, G):
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
        if g + 1 > _BLOCK_TERMS:  # a very large G: its k in blocks, so memory stays ~_BLOCK_TERMS entries
            for i in order[lo:hi]:
                total = 0.0
                for k0 in range(0, g + 1, _BLOCK_TERMS):
                    k = np.arange(k0, min(g + 1, k0 + _BLOCK_TERMS))
                    lchoose = gammaln(g + 1.0) - gammaln(k + 1.0) - gammaln(g - k + 1.0)
                    total += float(np.exp(lchoose + log_beta_moment(a[i], b[i], k, g - k)) @ f(k, np.full(k.size, g)))
                out[i] = total
            continue
        k = np.arange(g + 1)
        fk = f(k, np.full(g + 1, g))
        lchoose = gammaln(g + 1.0) - gammaln(k + 1.0) - gammaln(g - k + 1.0)
        rows = max(1, _BLOCK_TERMS // (g + 1))
        for r0 in range(lo, hi, rows):
            idx = order[r0 : min(hi, r0 + rows)]
            aa, bb = a[idx][:, None], b[idx][:, None]
            logpmf = lchoose + log_beta_moment(aa, bb, k, g - k)
            out[idx] = np.exp(logpmf) @ fk
    return out


def _beta_value(a, b, G, spec):
    """E[V(p, G)] under Beta(a, b) (arrays of one shape, G ≥ 0)."""
    i, j, h, f, look = spec
    out = np.zeros(a.shape)
    on = G >= 2
    if not on.any():
        return out
    if look is not None:
        out[on] = _horizon_beta(a[on], b[on], G[on], h, f, look)
        return out
    aa, bb, GG = a[on] + i, b[on] + j, G[on]
    scale = np.exp(log_beta_moment(a[on], b[on], i, j)) if (i or j) else 1.0
    if h == "sigma":
        base = beta_sigma(aa, bb, GG, f)
    elif h == "sigma2":
        base = aa * bb / ((aa + bb) * (aa + bb + 1.0)) * (1.0 - 1.0 / GG)
    else:
        base = _beta_nonsilent(aa, bb, GG)
    out[on] = scale * base
    return out


def _as_source(p_or_posterior):
    """('beta', (a, b)) for a BetaPosterior, ('point', p) for probabilities."""
    if isinstance(p_or_posterior, BetaPosterior):
        return "beta", (p_or_posterior.a, p_or_posterior.b)
    return "point", as_probability(p_or_posterior)


def allocation_value(
    p_or_posterior,
    G,
    value: str = "update",
    *,
    ddof: int = 0,
    eps: float = 0.0,
    lr: float | None = None,
    horizon: int | None = None,
):
    """Expected value of a group of G answers for a prompt, exact, broadcast over prompts and G.

    Parameters
    ----------
    p_or_posterior : array_like of float in [0, 1], or BetaPosterior
        The prompt's solve rate, or its posterior (:func:`gsd.posterior_from_counts`); with a
        posterior the value is the exact expectation over p.
    G : array_like of int ≥ 0
        Group size; G = 0 (a skipped prompt) and G = 1 are worth 0 under every value.
    value : {"update", "dr_grpo", "progress", "nonsilent", "knapsack", "gain", "dr_gain", "horizon", "dr_horizon"}
    ddof : {0, 1}, optional
        The std the trainer divides the advantages by: 0 (population, the paper's; default) or 1
        (sample std, ``torch.std``'s default, as TRL and verl compute it).
    eps : float, optional
        Added to that std (default 0; TRL and verl add 1e-4 and 1e-6).
    lr, horizon : float, int, optional
        ``horizon`` and ``dr_horizon`` only (required there): the per-step logit rate (a tabular
        SGD policy's learning rate) and the number of steps looked ahead.

    Returns
    -------
    ndarray of float64, the broadcast shape of the prompts and G.

    Notes
    -----
    With σ̂ = sqrt(k(G−k))/G and k ~ Binom(G, p), in the paper's convention (ddof 0, eps 0):

    .. math::

        V_\\mathrm{update} = E[\\hat\\sigma], \\quad V_\\mathrm{dr\\_grpo} = p(1-p)(1 - 1/G), \\quad
        V_\\mathrm{progress} = p(1-p) E[\\hat\\sigma],

        V_\\mathrm{nonsilent} = 1 - p^G - (1-p)^G, \\quad
        V_\\mathrm{knapsack} = (1 - p^G - (1-p)^G)\\, p (1-p)^2 ,

        V_\\mathrm{gain} = \\sqrt{p(1-p)}\\, E[\\hat\\sigma], \\quad
        V_\\mathrm{dr\\_gain} = p(1-p)\\, E[\\hat\\sigma^2] ,

    and ``horizon`` / ``dr_horizon`` the gain F(z_H) − F(z_0) of the mean-field path
    z_{t+1} = z_t + lr·m(z_t, G) (F = 2·arcsin√p or p), tabulated on a logit grid (relative error
    ~1e-4) and integrated against the posterior of logit p (:ref:`theory-allocation-run`).

    Convention: ``update`` and ``progress`` average the logit update GRPO makes, E[σ̂²/(σ̂_c + eps)]
    with σ̂_c = σ̂·sqrt(G/(G − ddof)) the std the trainer divides by — σ̂ itself in the paper's
    convention, the same sum as :func:`gsd.expected_update` (method ``"grpo"``).  With ddof = 1
    and eps = 0 the value is sqrt((G−1)/G) times the paper's, a factor that depends on G and so
    moves the plan (see :func:`gsd.convention_gap`); ``dr_grpo``, ``nonsilent`` and ``knapsack``
    do not depend on the std.

    Under a posterior Beta(a, b), E[p^i(1−p)^j h(p, G)] = B(a+i, b+j)/B(a, b)·E_{Beta(a+i, b+j)}[h]:
    E[σ̂] becomes a beta-binomial sum over k = 0 … G, and E[p^G] = B(a+G, b)/B(a, b).
    See :ref:`theory-allocation`.

    Examples
    --------
    >>> round(float(allocation_value(0.5, 2)), 6)  # E[σ̂] = P(k = 1)·1/2
    0.25
    >>> round(float(allocation_value(0.5, 8, "nonsilent")), 6)
    0.992188
    >>> from gsd import posterior_from_counts
    >>> post = posterior_from_counts(0, 8, prior="uniform")  # 0 right of 8: probably hard
    >>> round(float(allocation_value(post, 16, "nonsilent")), 4)  # 1 − E[(1−p)^16] − E[p^16]
    0.64
    """
    spec = _value_spec(value, ddof, eps, lr, horizon)
    kind, src = _as_source(p_or_posterior)
    G = as_group_size(G, minimum=0, maximum=MAX_EXACT_GROUP_SIZE)
    if kind == "point":
        p, Gb = broadcast(p_or_posterior=src, G=G)
        return _point_value(p.ravel(), Gb.ravel(), spec).reshape(p.shape)
    a, Gb = broadcast(p_or_posterior=src[0], G=G)  # a posterior's a and b share one shape
    b = np.broadcast_to(src[1], a.shape)
    a, b, g = a.ravel(), b.ravel(), Gb.ravel()
    # Posteriors from counts repeat: evaluate each distinct (a, b, G) once.
    order = np.lexsort((g, b, a))
    new = np.ones(order.size, dtype=bool)
    new[1:] = (np.diff(a[order]) != 0) | (np.diff(b[order]) != 0) | (np.diff(g[order]) != 0)
    first = order[new]
    inverse = np.empty(order.size, dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    if spec[2] == "sigma" and spec[4] is None:  # the dense beta-binomial sums: their cost, before the work
        terms = int((g[first][g[first] >= 2].astype(np.float64) + 1).sum())
        if terms > MAX_POSTERIOR_TERMS:
            raise InputError(
                f"G = {_show(G)}: under a posterior, value {value!r} sums the beta-binomial pmf over every "
                f"k = 0 … G of each distinct (posterior, G), {terms:,} terms here, above the limit of "
                f"{MAX_POSTERIOR_TERMS:,} (a few seconds); use smaller G, or the posterior mean as p"
            )
    return _beta_value(a[first], b[first], g[first], spec)[inverse].reshape(Gb.shape)


def expected_silent_rate(p_or_posterior, G):
    """Probability that a group of G answers is silent: p^G + (1−p)^G, or its posterior mean.

    Under Beta(a, b) it is E[p^G] + E[(1−p)^G] = [B(a+G, b) + B(a, b+G)] / B(a, b).  G ≥ 1.

    Examples
    --------
    >>> round(float(expected_silent_rate(0.5, 8)), 7)
    0.0078125
    """
    kind, src = _as_source(p_or_posterior)
    G = as_group_size(G)
    if kind == "point":
        p, G = broadcast(p_or_posterior=src, G=G)
        return _silent(_minor(p), G)
    a, G = broadcast(p_or_posterior=src[0], G=G)
    b = np.broadcast_to(src[1], a.shape)
    # The two tails in logs; their sum never exceeds 1 in exact arithmetic, nor here by more
    # than rounding (clipped): a posterior of 2^53 counts must not report a rate of 2.
    return np.minimum(np.exp(log_beta_moment(a, b, G, 0)) + np.exp(log_beta_moment(a, b, 0, G)), 1.0)


# --------------------------------------------------------------------------- value tables on a grid
def _sigma_table(grid, f, p=None, a=None, b=None):
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


def _sigma_costs(kind, rows, grid):
    """(terms of the pmf recurrence, of the dense sums at the grid's G) for E[σ̂] over ``rows``
    prompts: the recurrence pays every G up to g_max, a dense sum only the grid's (for known p
    a window of ~12·sqrt(G) + 80 terms around the mean, under a posterior every k)."""
    gmax = int(grid[-1])
    recurrence = rows * gmax * (gmax + 1) // 2
    g = grid.astype(np.float64)
    per_g = np.minimum(g + 1, 12 * np.sqrt(g) + 80) if kind == "point" else g + 1
    return recurrence, int(rows * _DENSE_TERM_COST * per_g.sum())


def _sigma_on_grid(kind, grid, f, p=None, a=None, b=None):
    """E[f(k, G)] at every G of ``grid`` for each row, by the cheaper of the pmf recurrence and
    one dense sum per grid G (a sparse grid up to a large g_max)."""
    rows = p.size if kind == "point" else a.size
    recurrence, dense = _sigma_costs(kind, rows, grid)
    if recurrence <= dense:
        return _sigma_table(grid, f, p=p, a=a, b=b)
    on = grid >= 2
    out = np.zeros((rows, grid.size))
    G = np.broadcast_to(grid[on][None, :], (rows, int(on.sum()))).ravel()
    if kind == "point":
        out[:, on] = symmetric_expectation(np.repeat(p, on.sum()), G, f).reshape(rows, -1)
    else:
        out[:, on] = beta_sigma(np.repeat(a, on.sum()), np.repeat(b, on.sum()), G, f).reshape(rows, -1)
    return out


class TableLimit(InputError):
    """A value table beyond the allocator's limits (:func:`check_table_cost`): a plan that needs
    no table (the uniform one) goes on without it."""


def check_table_cost(kind, n_types: int, g_min: int, g_max: int, step: int, h: str) -> None:
    """Refuse, before any work, a value table beyond the allocator's limits (its size, and the
    terms of its E[σ̂] sums): the error names the grid and the limit.  ``kind``: "point" (known
    p) or "beta" (posteriors); ``h``: the value's kind (``_VALUES[value][2]``).  The simulator's
    config calls it too, so a run's plans are checked before its folder exists."""
    points = (g_max - g_min) // step + 1
    if n_types * points > _MAX_TABLE:
        raise TableLimit(
            f"g_max: {n_types} distinct prompts × {points:,} grid points (g_min={g_min}, g_max={g_max}, "
            f"step={step}) exceed the allocator's table limit ({_MAX_TABLE:,}); use a larger step, a smaller "
            "g_max or fewer distinct rates"
        )
    if h != "sigma":
        return
    grid = np.arange(g_min, g_max + 1, step, dtype=np.int64)
    terms = min(_sigma_costs(kind, n_types, grid))
    if terms > _MAX_SUM_TERMS:
        raise TableLimit(
            f"g_max: the expected updates of {n_types} distinct prompts on the grid g_min={g_min}, g_max={g_max}, "
            f"step={step} take ~{terms:.2g} terms, above the allocator's limit ({_MAX_SUM_TERMS:.0e}); use a "
            "smaller g_max, a larger step or fewer distinct rates"
        )


def _value_table(kind, src, grid, spec):
    """Rows × grid table of V for distinct prompts (src: p, or (a, b))."""
    i, j, h, f, look = spec
    Gg = grid[None, :].astype(np.float64)
    on = grid >= 2
    if look is not None:
        tab = _horizon_table(grid, h, f, look)
        table = _horizon_at_points(src, tab) if kind == "point" else _horizon_quadrature(*src, tab)
        return np.where(on[None, :], table, 0.0)
    if kind == "point":
        p = src[:, None]
        if h == "sigma":
            base = _sigma_on_grid(kind, grid, f, p=src)
        elif h == "sigma2":
            base = p * (1.0 - p) * (1.0 - 1.0 / Gg)
        else:
            base = _nonsilent(_minor(p), Gg)
        table = p**i * (1.0 - p) ** j * base
    else:
        a, b = src
        aa, bb = a + i, b + j
        if h == "sigma":
            base = _sigma_on_grid(kind, grid, f, a=aa, b=bb)
        elif h == "sigma2":
            base = (aa * bb / ((aa + bb) * (aa + bb + 1.0)))[:, None] * (1.0 - 1.0 / Gg)
        else:
            base = _beta_nonsilent(aa[:, None], bb[:, None], Gg)
        scale = np.exp(log_beta_moment(a, b, i, j))[:, None] if (i or j) else 1.0
        table = scale * base
    return np.where(on[None, :], table, 0.0)


# --------------------------------------------------------------------------- values that look ahead
# The horizon values follow every prompt's logit along its mean-field path z_{t+1} = z_t + lr·m(z_t, G)
# on a uniform grid of logits; m is tabulated once on that grid and interpolated linearly, and the
# H-step map is built by squaring the one-step map.  The
# grid spans p from 8e-7 to 1 − 8e-7 (beyond it a prompt's update is below 1e-6 per step) at a step
# of 0.02 in z: linear interpolation of the smooth m and of the gain then errs by ~(0.02)²/8 relative.
_HZ_LO, _HZ_HI, _HZ_N = -14.0, 14.0, 1401
_HZ = np.linspace(_HZ_LO, _HZ_HI, _HZ_N)
_HZ_STEP = (_HZ_HI - _HZ_LO) / (_HZ_N - 1)
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
    u = (np.clip(z, _HZ_LO, _HZ_HI) - _HZ_LO) / _HZ_STEP
    i0 = np.minimum(u.astype(np.int64), _HZ_N - 2)
    fr = u - i0
    if z.ndim == 2:
        col = np.arange(table.shape[1])[None, :]
        return table[i0, col] * (1.0 - fr) + table[i0 + 1, col] * fr
    return table[i0] * (1.0 - fr)[:, None] + table[i0 + 1] * fr[:, None]


def _horizon_table(grid, h, f, look):
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
        m = _sigma_table(grid, f, p=expit(_HZ))
    else:
        m = (expit(_HZ) * expit(-_HZ))[:, None] * (1.0 - 1.0 / grid.astype(np.float64))[None, :]
    m = np.where(grid[None, :] >= 2, m, 0.0)
    # The one-step map Φ(z) = z + lr·m(z, G) is the same at every step, so Φ^H from every grid
    # logit is built by squaring (Φ^{2k} = Φ^k ∘ Φ^k, each tabulated on the grid) in log2(H)
    # compositions rather than H steps.  Maps are tabulated as displacements Φ^k(z) − z, which
    # interpolate linearly as accurately as m does, and are taken as 0 beyond the grid (p within
    # 8e-7 of 0 or 1 moves by less than 1e-6 a step).
    z0 = np.broadcast_to(_HZ[:, None], m.shape)
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
    tab = _objective(h, z0 + total) - _objective(h, _HZ)[:, None]
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


def _horizon_at_points(p, tab):
    """The gain table at known solve rates p (rows × cols); 0 at p ∈ {0, 1} (silent for ever)."""
    return np.where(((p > 0) & (p < 1))[:, None], _lerp_rows(tab, _logit(p)), 0.0)


def _horizon_quadrature(a, b, tab):
    """E[gain] under Beta(a, b), rows × cols: the density of z = logit p, σ(z)^a σ(−z)^b / B(a, b),
    is smooth and decays exponentially in |z|, so the trapezoid rule on the grid converges fast
    (the mass beyond the grid, where the gain is below 1e-6 per step, is left out, not spread);
    posteriors too narrow for the grid use 9-point Gauss–Hermite on their logit's normal
    approximation (mean ψ(a) − ψ(b), variance ψ'(a) + ψ'(b))."""
    from scipy.special import betaln, digamma, log_expit, polygamma

    out = np.empty((a.size, tab.shape[1]))
    mu = digamma(a) - digamma(b)
    sd = np.sqrt(polygamma(1, a) + polygamma(1, b))
    narrow = sd < _HZ_NARROW * _HZ_STEP
    wide = np.nonzero(~narrow)[0]
    lp, lq = log_expit(_HZ), log_expit(-_HZ)
    block = max(1, (1 << 21) // _HZ_N)
    for r0 in range(0, wide.size, block):
        idx = wide[r0 : r0 + block]
        # The density itself, not weights renormalised to the grid: a prior like Beta(0.3, ·) keeps
        # percents of its mass below p = 8e-7, where the gain is 0, and renormalising would hand
        # that mass to the grid.
        w = np.exp(a[idx, None] * lp + b[idx, None] * lq - betaln(a[idx], b[idx])[:, None]) * _HZ_STEP
        out[idx] = w @ tab
    if narrow.any():
        x, wh = np.polynomial.hermite_e.hermegauss(9)  # nodes for the weight exp(−x²/2)
        wh = wh / wh.sum()
        zq = mu[narrow, None] + sd[narrow, None] * x[None, :]  # rows × 9
        vals = _lerp_rows(tab, zq.ravel()).reshape(zq.shape[0], x.size, tab.shape[1])
        out[narrow] = np.einsum("rqc,q->rc", vals, wh)
    return out


def _horizon_point(p, G, h, f, look):
    """Horizon value at arbitrary (p, G) pairs (allocation_value's path)."""
    grid, col = np.unique(G, return_inverse=True)
    tab = _horizon_table(grid, h, f, look)
    vals = _lerp_rows(tab, _logit(p))  # rows × distinct G
    out = vals[np.arange(p.size), col]
    return np.where((p > 0) & (p < 1), out, 0.0)


def _horizon_beta(a, b, G, h, f, look):
    """Horizon value under Beta(a, b) at arbitrary (a, b, G) triples."""
    grid, col = np.unique(G, return_inverse=True)
    tab = _horizon_table(grid, h, f, look)
    return _horizon_quadrature(a, b, tab)[np.arange(a.size), col]


# --------------------------------------------------------------------------- concave envelope
def _envelope(x, Y):
    """Mask of the points of each row of Y (over common abscissae x) on its upper concave envelope.

    A point strictly below the chord of its active neighbours lies below the envelope, so such
    points can be dropped all at once; repeating until none is left gives the envelope's vertices.
    Slopes that rise by less than a relative 1e-11, or by less than the rounding of the values
    (8 ulp of |V| per rollout), count as equal.
    """
    rows, m = Y.shape
    active = np.ones((rows, m), dtype=bool)
    if m <= 2:
        return active
    bent = ~_concave_rows(x, Y)
    if not bent.any():
        return active  # the common case (every one-step value for g_min ≥ 2): one vectorised check
    if not bent.all():  # peel only the rows that bend (the horizon values' hard prompts)
        active[bent] = _envelope(x, Y[bent])
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
    """Rows whose slopes never rise beyond rounding (the tolerance of :func:`_envelope`)."""
    dx = np.diff(x)
    slope = np.diff(Y, axis=1) / dx
    vmax = np.maximum(np.abs(Y[:, :-2]), np.maximum(np.abs(Y[:, 1:-1]), np.abs(Y[:, 2:])))
    tol = _CONCAVE_RTOL * np.maximum(np.abs(slope[:, :-1]), np.abs(slope[:, 1:])) + 8 * np.finfo(
        float
    ).eps * vmax / np.minimum(dx[:-1], dx[1:])
    return (np.diff(slope, axis=1) <= tol).all(axis=1)


def concavity_violations(
    p_or_posterior,
    *,
    value="update",
    g_min=2,
    g_max=512,
    step=1,
    skip=True,
    ddof: int = 0,
    eps: float = 0.0,
    lr: float | None = None,
    horizon: int | None = None,
):
    """Where a value's increments per rollout rise along the allocation grid (non-concave rows).

    Returns a DataFrame with one row per (prompt, grid point) that lies strictly below the upper
    concave envelope of its row in (rollouts, value) space: columns ``prompt`` (index into the
    flattened input), ``G`` and ``shortfall`` (envelope minus value, relative to the value).
    Empty when every row is concave, i.e. when the greedy on single increments is optimal.

    Examples
    --------
    >>> len(concavity_violations([0.05, 0.5], value="nonsilent", g_max=64))
    0
    >>> concavity_violations([0.5], value="update", g_min=1, g_max=4).G.tolist()  # V(1) = 0
    [1]
    """
    prob = _Problem(p_or_posterior, value, g_min, g_max, step, skip, ddof, eps, lr, horizon)
    x, Y, act = prob.x, prob.table_full, prob.active
    import pandas as pd  # here, not at module level: the simulator imports this module and never needs pandas

    r, c = np.nonzero(~act)
    if r.size == 0:
        return pd.DataFrame({"prompt": np.empty(0, np.int64), "G": np.empty(0, np.int64), "shortfall": np.empty(0)})
    env = np.empty(r.size)
    for_rows = np.unique(r)
    env_full = np.full(Y.shape, np.nan)
    for t in for_rows:  # only the few non-concave distinct rows
        env_full[t] = np.interp(x, x[act[t]], Y[t, act[t]])
    env = env_full[r, c]
    with np.errstate(divide="ignore", invalid="ignore"):
        short = np.where(Y[r, c] > 0, (env - Y[r, c]) / Y[r, c], np.inf)
    # Map distinct rows back to the first prompt of each type.
    first = np.full(prob.n_types, -1)
    first[prob.inverse[::-1]] = np.arange(prob.inverse.size)[::-1]
    return pd.DataFrame({"prompt": first[r], "G": x[c].astype(np.int64), "shortfall": short})


# --------------------------------------------------------------------------- the allocator
@dataclass(frozen=True)
class Allocation:
    """A plan: group sizes per prompt and what they buy.

    Attributes
    ----------
    group_size : ndarray of int64
        G per prompt (input shape); 0 = skipped this step.
    value : ndarray of float64
        Expected value of each prompt at its G.
    total : float
        Σ value, the objective.
    budget, spent : int
        Rollouts available and used (spent ≤ budget).
    multiplier : float
        The value per rollout of the last segment handed out (the Lagrange multiplier λ).
    exact : bool
        True when the plan is certified optimal over the grid: every envelope segment costs the
        same number of rollouts (greedy on equal-cost concave increments is optimal), or the
        Lagrangian bound is met.
    gap_bound : float
        Upper bound on (optimum − total); 0 when ``exact``.
    envelope : bool
        True when some prompt's values were not concave on the grid and the plan used their
        upper concave envelope (grid points below it are never chosen).
    envelope_sizes : ndarray of int64
        The grid G that lie below some prompt's envelope (never chosen for that prompt).
    value_name : str
    grid : tuple
        (g_min, g_max, step, skip).
    ddof, eps : int, float
        The std convention of the ``update`` and ``progress`` values.
    """

    group_size: np.ndarray
    value: np.ndarray
    total: float
    budget: int
    spent: int
    multiplier: float
    exact: bool
    gap_bound: float
    envelope: bool
    envelope_sizes: np.ndarray
    value_name: str
    grid: tuple = field(default=())
    ddof: int = 0
    eps: float = 0.0

    def summary(self) -> dict:
        """The scalars, for reports and ``--json``."""
        g = self.group_size
        return {
            "value": self.value_name,
            "budget": self.budget,
            "spent": self.spent,
            "total_value": self.total,
            "prompts": int(g.size),
            "skipped": int((g == 0).sum()),
            "mean_group_size_served": float(g[g > 0].mean()) if (g > 0).any() else 0.0,
            "multiplier": self.multiplier,
            "exact": self.exact,
            "gap_bound": self.gap_bound,
            "envelope": self.envelope,
            "envelope_sizes": self.envelope_sizes.tolist(),
            "g_min": self.grid[0],
            "g_max": self.grid[1],
            "step": self.grid[2],
            "skip": self.grid[3],
            "ddof": self.ddof,
            "eps": self.eps,
        }


def _grid_args(g_min, g_max, step):
    g_min = int(as_group_size(g_min, "g_min", minimum=1))
    g_max = int(as_group_size(g_max, "g_max", minimum=1))
    step = int(as_group_size(step, "step", minimum=1))
    if g_min > g_max:
        raise InputError(f"g_min must be <= g_max, got g_min={g_min} and g_max={g_max}")
    if (g_max - g_min) % step:
        raise InputError(f"step must divide g_max - g_min, got step={step} with g_min={g_min}, g_max={g_max}")
    return g_min, g_max, step


class _Problem:
    """The distinct prompts, their value table on the grid, its envelope and sorted segments."""

    def __init__(self, p_or_posterior, value, g_min, g_max, step, skip, ddof, eps, lr=None, horizon=None, reuse=None):
        """``reuse``: a _Problem of the same prompts, value, convention and grid (its skip may
        differ): its distinct prompts and value table are taken, not computed again."""
        self.spec = _value_spec(value, ddof, eps, lr, horizon)
        self.value_name = value
        self.ddof, self.eps = as_ddof(ddof), float(as_eps(eps))
        self.g_min, self.g_max, self.step = _grid_args(g_min, g_max, step)
        if not isinstance(skip, bool | np.bool_):
            raise InputError(f"skip must be True or False, got {skip!r}")
        self.skip = bool(skip)
        if reuse is not None:
            self.shape, self.inverse, self.counts, table = reuse.shape, reuse.inverse, reuse.counts, reuse.table
            self.n, self.n_types = reuse.n, reuse.n_types
            self._tabulate(table)
            return
        kind, src = _as_source(p_or_posterior)
        if kind == "point":
            flat = src.ravel()
            self.shape = src.shape
            uniq, inverse, counts = np.unique(flat, return_inverse=True, return_counts=True)
            types = uniq
        else:
            a, b = (x.ravel() for x in src)
            self.shape = src[0].shape
            first, inverse = unique_pairs(a, b)
            order = np.argsort(inverse[first])
            first = first[order]
            counts = np.bincount(inverse, minlength=first.size)
            types = (a[first], b[first])
        self.inverse, self.counts = inverse.ravel(), counts.astype(np.int64)
        self.n = self.inverse.size
        self.n_types = self.counts.size
        check_table_cost(kind, self.n_types, self.g_min, self.g_max, self.step, self.spec[2])
        grid = np.arange(self.g_min, self.g_max + 1, self.step, dtype=np.int64)
        self._tabulate(_value_table(kind, types, grid, self.spec))

    def _tabulate(self, table):
        """The envelope and sorted segments of the value table (distinct prompts × grid)."""
        self.table = table
        grid = np.arange(self.g_min, self.g_max + 1, self.step, dtype=np.int64)
        if self.skip:
            self.x = np.concatenate([[0], grid]).astype(np.float64)
            self.table_full = np.concatenate([np.zeros((self.n_types, 1)), table], axis=1)
        else:
            self.x = grid.astype(np.float64)
            self.table_full = table
        self.active = _envelope(self.x, self.table_full)
        self.envelope = not self.active.all()
        self.envelope_sizes = np.unique(np.broadcast_to(self.x, self.active.shape)[~self.active]).astype(np.int64)
        # Envelope segments, flat in row-major order (row, then increasing G).
        r, c = np.nonzero(self.active)
        same = r[1:] == r[:-1]
        self.seg_row, self.seg_start, self.seg_end = r[:-1][same], c[:-1][same], c[1:][same]
        self.seg_cost = (self.x[self.seg_end] - self.x[self.seg_start]).astype(np.int64)
        self.seg_gain = self.table_full[self.seg_row, self.seg_end] - self.table_full[self.seg_row, self.seg_start]
        slope = self.seg_gain / self.seg_cost
        useful = slope > 0  # concave rows: once a slope is ≤ 0, every later one is too
        self.seg_row, self.seg_start, self.seg_end = self.seg_row[useful], self.seg_start[useful], self.seg_end[useful]
        self.seg_cost, self.seg_gain, slope = self.seg_cost[useful], self.seg_gain[useful], slope[useful]
        # Slopes may rise along a row within the rounding tolerance of the envelope; their running
        # minimum keeps every row's segments in G order after the sort (a prompt takes a prefix).
        rank = np.arange(self.seg_row.size) - np.searchsorted(self.seg_row, self.seg_row)
        running = np.full(self.table_full.shape, np.inf)
        running[self.seg_row, rank] = slope
        self.seg_slope = np.minimum.accumulate(running, axis=1)[self.seg_row, rank]
        self.order = np.argsort(-self.seg_slope, kind="stable")  # ties keep row order, then G order
        wcost = self.seg_cost[self.order] * self.counts[self.seg_row[self.order]]
        self.cum_cost = np.cumsum(wcost)
        self.cum_gain = np.cumsum(self.seg_gain[self.order] * self.counts[self.seg_row[self.order]])
        # Equal costs certify the greedy (Gross) on the envelope; that is the grid's optimum too only
        # if no point below the envelope could be needed: one worth no more than the row's first
        # choice (V(1) = 0 at g_min = 1) never is, a pair under ddof 1 (worth sqrt(1/2) of the
        # paper's) may be when the budget cannot buy the next segment.
        harmless = self.active | (self.table_full <= self.table_full[:, :1])
        self.equal_costs = np.unique(self.seg_cost).size <= 1 and bool(harmless.all())
        self.next_seg = np.full(self.table_full.shape, -1, dtype=np.int64)
        self.next_seg[self.seg_row, self.seg_start] = np.arange(self.seg_row.size)
        self.base = 0 if self.skip else self.g_min * self.n

    def totals(self, budgets):
        """The objective of :meth:`solve` at each of ``budgets`` (ints ≥ 0), the same numbers: the
        segments taken grow with the budget, so one sweep over the sorted budgets builds every
        plan's end columns (O(segments) in all, not per budget)."""
        budgets = np.asarray(budgets, dtype=np.int64)
        out = np.empty(budgets.size)
        inexact = np.zeros(budgets.size, dtype=bool)
        end = np.zeros(self.n_types, dtype=np.int64)
        done = 0
        for i in np.argsort(budgets, kind="stable"):  # one plan per budget (the advice's grid)
            n_full = int(np.searchsorted(self.cum_cost, budgets[i] - self.base, side="right"))
            if n_full > done:
                taken = self.order[done:n_full]
                np.maximum.at(end, self.seg_row[taken], self.seg_end[taken])
                done = n_full
            _, out[i], _, _, exact, _ = self.solve(int(budgets[i]), end=end)
            inexact[i] = not exact
        # Where the greedy is not certified, :func:`_allocate` solves the budget exactly when the
        # programme is small: so do these totals, all from one programme at the largest such budget
        # (its table holds the optimum within every smaller budget), or they would report a plan
        # worse than the one the allocator returns (and than uniform G, which is feasible).
        if inexact.any() and self.dp_size(int(budgets[inexact].max())) <= _MAX_DP:
            best = self._dp_best(int(budgets[inexact].max()))[0]
            out[inexact] = best[budgets[inexact]]
        return out

    def solve(self, budget, end=None):
        """Per-type groups (type, end column, count), total value, spent, λ, LP bound.

        ``end``: the end column per type of the segments that fit whole (:meth:`totals` passes it)."""
        avail = budget - self.base
        n_full = int(np.searchsorted(self.cum_cost, avail, side="right"))
        if end is None:
            taken = self.order[:n_full]
            end = np.zeros(self.n_types, dtype=np.int64)
            np.maximum.at(end, self.seg_row[taken], self.seg_end[taken])
        spent_items = int(self.cum_cost[n_full - 1]) if n_full else 0
        gained = float(self.cum_gain[n_full - 1]) if n_full else 0.0
        rem = avail - spent_items
        g_type = list(range(self.n_types))
        g_end = end.tolist()
        g_count = self.counts.tolist()
        lp = gained
        lam = 0.0
        if n_full < self.order.size:
            s = self.order[n_full]
            t, cost, gain = int(self.seg_row[s]), int(self.seg_cost[s]), float(self.seg_gain[s])
            lam = float(self.seg_slope[s])
            lp += rem / cost * gain
            q = rem // cost  # < counts[t]: the item did not fit for every prompt of its type
            if q:
                g_count[t] -= q
                g_type.append(t), g_end.append(int(self.seg_end[s])), g_count.append(q)
                rem -= q * cost
                gained += q * gain
        elif n_full:
            lam = float(self.seg_slope[self.order[n_full - 1]])
        # Fix-up: spend the remainder on the best next segment that still fits.
        while rem > 0:
            gt, ge, gc = np.array(g_type), np.array(g_end), np.array(g_count)
            nxt = self.next_seg[gt, ge]
            ok = (nxt >= 0) & (gc > 0)
            ok[ok] &= self.seg_cost[nxt[ok]] <= rem
            if not ok.any():
                break
            cand = np.nonzero(ok)[0]
            best = cand[np.argmax(self.seg_slope[nxt[cand]])]
            s = nxt[best]
            cost, gain = int(self.seg_cost[s]), float(self.seg_gain[s])
            q = min(g_count[best], rem // cost)
            g_count[best] -= q
            g_type.append(g_type[best]), g_end.append(int(self.seg_end[s])), g_count.append(q)
            rem -= q * cost
            gained += q * gain
        groups = (np.array(g_type), np.array(g_end), np.array(g_count))
        base_value = float(self.counts @ self.table_full[:, 0])
        total = base_value + gained
        spent = self.base + (avail - rem)
        lp_total = base_value + lp
        exact = self.equal_costs or lp_total - total <= 1e-12 * max(abs(total), 1e-300)
        gap = 0.0 if exact else max(0.0, lp_total - total)
        return groups, total, spent, lam, exact, gap

    def dp_size(self, budget: int) -> int:
        """Work of :meth:`exact_dp`: prompts × grid points × (budget + 1)."""
        return self.n * self.x.size * (budget + 1)

    def _dp_best(self, budget: int):
        """(best, choice): best[b] the optimum within b rollouts for every b ≤ ``budget`` (-inf
        where no plan fits), choice[i, b] the grid column prompt i takes there."""
        cost = self.x.astype(np.int64)
        rows = self.table_full[self.inverse]
        width = budget + 1
        best = np.zeros(width)
        b = np.arange(width)
        choice = np.empty((self.n, width), dtype=np.int32)
        for i in range(self.n):  # the DP is sequential in prompts; bounded by _MAX_DP
            prev = b[None, :] - cost[:, None]
            cand = np.where(prev >= 0, best[np.maximum(prev, 0)] + rows[i][:, None], -np.inf)
            choice[i] = np.argmax(cand, axis=0)
            best = cand[choice[i], b]
        return best, choice

    def exact_dp(self, budget: int):
        """The optimum over the grid by dynamic programming over prompts × budget (small instances).

        best[b] is the largest total of the prompts so far within b rollouts; each prompt takes
        the best of its choices (every grid point, not only the envelope's), recorded for the
        backtrack.  One vectorised max per prompt, so the cost is prompts × grid × budget.
        """
        cost = self.x.astype(np.int64)
        rows = self.table_full[self.inverse]
        best, choice = self._dp_best(budget)
        col = np.empty(self.n, dtype=np.int64)
        left = int(np.argmax(best))
        for i in range(self.n - 1, -1, -1):
            col[i] = choice[i, left]
            left -= int(cost[col[i]])
        G = cost[col]
        return G.reshape(self.shape), rows[np.arange(self.n), col].reshape(self.shape)

    def per_prompt(self, groups):
        """G and value per prompt: within a type, earlier prompts get the larger G."""
        gt, ge, gc = groups
        order = np.lexsort((-ge, gt))  # by type, then larger G first
        gt, ge, gc = gt[order], ge[order], gc[order]
        type_start = np.concatenate([[0], np.cumsum(self.counts)[:-1]])
        bounds = np.cumsum(gc)  # global positions, types in order
        srt = np.argsort(self.inverse, kind="stable")
        rank = np.empty(self.n, dtype=np.int64)
        rank[srt] = np.arange(self.n) - type_start[self.inverse[srt]]
        key = type_start[self.inverse] + rank
        grp = np.searchsorted(bounds, key, side="right")
        col = ge[grp]
        G = self.x[col].astype(np.int64)
        val = self.table_full[self.inverse, col]
        return G.reshape(self.shape), val.reshape(self.shape)


def _budget_arg(budget):
    if isinstance(budget, bool):
        raise InputError(f"budget must be an integer >= 1, got {budget!r}")
    arr = as_group_size(budget, "budget", minimum=1)
    if arr.ndim:
        raise InputError(f"budget must be one integer, got {_show(arr)}")
    return int(arr)


def allocate_group_sizes(
    p_or_posterior,
    budget,
    *,
    value: str = "update",
    g_min=2,
    g_max=512,
    step=1,
    skip: bool = True,
    ddof: int = 0,
    eps: float = 0.0,
    lr: float | None = None,
    horizon: int | None = None,
) -> Allocation:
    """Group size per prompt maximising the total expected value under a rollout budget.

    Parameters
    ----------
    p_or_posterior : array_like of float in [0, 1], or BetaPosterior
        Solve rates, or posteriors from logged counts (:func:`gsd.posterior_from_counts`).
    budget : int
        Rollouts available, Σ G_i ≤ budget.
    value : {"update", "dr_grpo", "progress", "nonsilent", "knapsack"}
        What a group is worth (:func:`allocation_value`).
    g_min, g_max, step : int
        The allowed sizes g_min, g_min + step, …, g_max (step must divide g_max − g_min; a step
        of 8 matches inference batches of 8).
    skip : bool
        Allow G = 0 (the prompt is not drawn this step).  With ``skip=False`` every prompt gets
        at least g_min and the budget must cover n_prompts·g_min.
    ddof, eps : int, float
        The trainer's std convention for the ``update``, ``progress``, ``gain`` and ``horizon``
        values (:func:`allocation_value`); default the paper's, ddof 0 and eps 0.
    lr, horizon : float, int
        The per-step logit rate and the steps looked ahead, for ``horizon`` and ``dr_horizon``
        only (required there).

    Returns
    -------
    Allocation
        ``group_size`` per prompt, ``value``, ``total``, ``spent``, the multiplier λ, and the
        optimality certificate (``exact``, ``gap_bound``, ``envelope``, ``envelope_sizes``).

    Notes
    -----
    Maximises :math:`\\sum_i V(p_i, G_i)` subject to :math:`\\sum_i G_i \\le B`.  Each distinct
    prompt's values on the grid (with the point (0, 0) when skipping is allowed) are replaced by
    their upper concave envelope in (rollouts, value) space; the envelope's segments are handed
    out by decreasing value per rollout until the budget is spent, which solves the Lagrangian
    relaxation exactly, and the remainder goes greedily to the best next segment that fits.
    When every segment costs the same number of rollouts (concave rows and g_min = step, or
    ``skip=False``) and no grid point below the envelope carries value, this greedy is optimal
    (Gross, 1956).  Otherwise (unequal costs: the entry
    g_min against the step, or an envelope) a plan whose Lagrangian bound is not met is solved
    again exactly by dynamic programming when prompts × grid × budget ≤ 2·10^7, and beyond
    that ``gap_bound`` bounds its distance to the optimum (at most one segment's value).  The values of :data:`ALLOCATION_VALUES`
    are concave on the grid for g_min ≥ 2 (checked by :func:`concavity_violations`); G = 1 is
    worth 0, so g_min = 1 with skipping makes the envelope jump from 0 to 2.  With ``ddof=1`` a
    pair is worth sqrt(1/2) of the paper's value: with skipping, G = 2 lies below the chord from 0
    to 3 for ``update`` and ``progress``, and only a budget too small for 3 serves it (then by
    the exact programme).
    Cost: the table of distinct prompts × grid points (E[σ̂] by a pmf recurrence over G), one
    sort of the segments, then O(n_prompts).  See :ref:`theory-allocation`.

    Examples
    --------
    >>> plan = allocate_group_sizes([0.02, 0.5, 0.98, 0.3], 32, g_max=16)
    >>> plan.group_size.tolist(), plan.spent, plan.exact
    ([6, 9, 6, 11], 32, True)
    >>> allocate_group_sizes([0.02, 0.5, 0.98, 0.3], 32, value="nonsilent", g_max=16).group_size.tolist()
    [8, 6, 9, 9]
    """
    budget = _budget_arg(budget)
    return _allocate(_Problem(p_or_posterior, value, g_min, g_max, step, skip, ddof, eps, lr, horizon), budget)


def _allocate(prob, budget: int) -> Allocation:
    """:func:`allocate_group_sizes` on a built problem (its value table)."""
    if prob.skip and budget < prob.g_min:
        raise InputError(f"budget must be >= g_min ({prob.g_min}) to serve any prompt, got budget={budget}")
    if not prob.skip and budget < prob.base:
        raise InputError(
            f"budget must be >= n_prompts × g_min = {prob.n} × {prob.g_min} = {prob.base} "
            f"when skip=False, got budget={budget}"
        )
    groups, total, spent, lam, exact, gap = prob.solve(budget)
    G, val = prob.per_prompt(groups)
    if not exact and prob.dp_size(budget) <= _MAX_DP:
        # Small enough for the exact dynamic programme over the whole grid (envelope or not).
        G, val = prob.exact_dp(budget)
        exact, gap = True, 0.0
    return Allocation(
        group_size=G,
        value=val,
        total=float(val.sum()),
        budget=budget,
        spent=int(G.sum()),
        multiplier=lam,
        exact=exact,
        gap_bound=gap,
        envelope=prob.envelope,
        envelope_sizes=prob.envelope_sizes,
        value_name=prob.value_name,
        grid=(prob.g_min, prob.g_max, prob.step, prob.skip),
        ddof=prob.ddof,
        eps=prob.eps,
    )


# --------------------------------------------------------------------------- uniform G advice
@dataclass(frozen=True)
class UniformAdvice:
    """Uniform group sizes against the allocated plan at the same budget.

    Attributes
    ----------
    curve : DataFrame
        One row per grid G: ``G``, ``rollouts`` (n_prompts·G), ``uniform_value`` (Σ V(p_i, G)),
        ``value_per_rollout``, ``allocated_value`` (the allocator at the same budget),
        ``gain`` (allocated / uniform) and ``uniform_rollouts_to_match`` (the smallest uniform
        budget on the grid whose value reaches the allocated one; NaN beyond g_max) with
        ``compute_ratio`` = that budget / n_prompts·G.
    best_G : int
        The uniform G with the largest value per rollout.
    budget : int or None
        The budget asked about (None: not given).
    at_budget : dict
        At ``budget``: the largest uniform G it affords, its value, the allocated value and
        their ratio (empty when no budget was given).
    """

    curve: pd.DataFrame
    best_G: int
    budget: int | None
    at_budget: dict


def uniform_group_size_advice(
    p_or_posterior,
    budget=None,
    *,
    value: str = "update",
    g_min=2,
    g_max=512,
    step=1,
    ddof: int = 0,
    eps: float = 0.0,
    lr: float | None = None,
    horizon: int | None = None,
) -> UniformAdvice:
    """Value per rollout of every uniform G, the best one, and the allocated plan beside it.

    The arguments are those of :func:`allocate_group_sizes` (``ddof``, ``eps``: the trainer's std
    convention for the ``update`` and ``progress`` values).

    Examples
    --------
    >>> adv = uniform_group_size_advice([0.05, 0.5, 0.9], value="update", g_max=32, budget=30)
    >>> adv.best_G, adv.at_budget["uniform_G"], round(adv.at_budget["gain"], 4)
    (2, 10, 1.005)
    >>> bool((adv.curve.gain >= 1 - 1e-12).all())  # the allocator never does worse than uniform
    True
    """
    prob = _Problem(p_or_posterior, value, g_min, g_max, step, True, ddof, eps, lr, horizon)
    return _advise(prob, budget)


def allocate_with_advice(
    p_or_posterior,
    budget,
    *,
    value: str = "update",
    g_min=2,
    g_max=512,
    step=1,
    skip: bool = True,
    ddof: int = 0,
    eps: float = 0.0,
    lr: float | None = None,
    horizon: int | None = None,
) -> tuple[Allocation, UniformAdvice]:
    """:func:`allocate_group_sizes` and :func:`uniform_group_size_advice` at one budget, the
    value table computed once (``gsd plan --budget`` prints both).  The same arguments; the
    advice always allows skipping, as :func:`uniform_group_size_advice` does.

    Examples
    --------
    >>> plan, adv = allocate_with_advice([0.05, 0.5, 0.9], 30, g_max=32)
    >>> plan.total == allocate_group_sizes([0.05, 0.5, 0.9], 30, g_max=32).total, adv.at_budget["uniform_G"]
    (True, 10)
    """
    budget = _budget_arg(budget)
    prob = _Problem(p_or_posterior, value, g_min, g_max, step, skip, ddof, eps, lr, horizon)
    adv = prob if prob.skip else _Problem(None, value, g_min, g_max, step, True, ddof, eps, lr, horizon, reuse=prob)
    return _allocate(prob, budget), _advise(adv, budget)


def _advise(prob, budget) -> UniformAdvice:
    """:func:`uniform_group_size_advice` on a built problem that allows skipping."""
    import pandas as pd

    grid = prob.x[1:].astype(np.int64)
    uniform = prob.counts @ prob.table_full[:, 1:]
    rollouts = prob.n * grid
    allocated = prob.totals(rollouts)
    # Smallest uniform budget reaching the allocated value (uniform value is nondecreasing in G).
    reach = np.searchsorted(np.maximum.accumulate(uniform), allocated * (1 - 1e-12), side="left")
    match = np.where(reach < grid.size, rollouts[np.minimum(reach, grid.size - 1)], np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        curve = pd.DataFrame(
            {
                "G": grid,
                "rollouts": rollouts,
                "uniform_value": uniform,
                "value_per_rollout": uniform / rollouts,
                "allocated_value": allocated,
                "gain": np.where(uniform > 0, allocated / uniform, np.nan),
                "uniform_rollouts_to_match": match,
                "compute_ratio": match / rollouts,
            }
        )
    best = int(grid[np.argmax(curve.value_per_rollout.to_numpy())])
    at = {}
    if budget is not None:
        budget = _budget_arg(budget)
        affordable = grid[grid * prob.n <= budget]
        alloc_total = float(prob.totals([budget])[0]) if budget >= prob.g_min else 0.0
        if affordable.size:
            gu = int(affordable[-1])
            uv = float(uniform[grid == gu][0])
            at = {
                "budget": budget,
                "uniform_G": gu,
                "uniform_value": uv,
                "allocated_value": alloc_total,
                "gain": alloc_total / uv if uv > 0 else math.nan,
            }
        else:
            at = {
                "budget": budget,
                "uniform_G": None,
                "uniform_value": math.nan,
                "allocated_value": alloc_total,
                "gain": math.nan,
            }
    return UniformAdvice(curve=curve, best_G=best, budget=budget, at_budget=at)


def uniform_plan(
    p_or_posterior, budget, *, g_min=2, g_max=512, step=1, skip: bool = True, ddof: int = 0, eps: float = 0.0
) -> Allocation:
    """The same group size for every prompt that can carry a gradient: ``gsd plan --budget``'s default.

    Parameters
    ----------
    p_or_posterior, budget, g_min, g_max, step
        The prompts (rates or posteriors), the rollouts per step and the grid, as in
        :func:`allocate_group_sizes`.
    skip : bool
        Skip the prompts that are silent for sure: a known rate of exactly 0 or 1 (a posterior
        never is).  With ``skip=False`` every prompt is served.
    ddof, eps : int, float
        The std convention of the reported ``value``, E[σ̂] at each prompt's G
        (:func:`allocation_value` with ``"update"``).

    Returns
    -------
    Allocation
        ``value_name`` ``"uniform"``: every served prompt gets G = the largest grid size with
        n_served·G ≤ budget (at most g_max); when the budget cannot give every served prompt
        g_min, the first budget // g_min of them (input order) get g_min and the rest 0.  The
        rollouts left over (budget − n_served·G) are not spent.  ``exact`` is True and
        ``multiplier`` NaN: the plan maximises no value.

    Notes
    -----
    Why a uniform default: at equal generations a plan at the budget's rollouts per prompt
    redistributes one step's rollouts by the counts it has, and those go stale as the policy
    moves; in the allocation comparison no such plan beat uniform G, and on a U-shaped population
    the ``update`` plan lost to it (docs/allocation_comparison.md).  What does help is the budget
    per step: ``--advice`` lists the value per rollout of every uniform G.

    Examples
    --------
    >>> plan = uniform_plan([0.02, 0.5, 1.0, 0.3], 32, g_max=16)
    >>> plan.group_size.tolist(), plan.spent
    ([10, 10, 0, 10], 30)
    """
    budget = _budget_arg(budget)
    g_min, g_max, step = _grid_args(g_min, g_max, step)
    if not isinstance(skip, bool | np.bool_):
        raise InputError(f"skip must be True or False, got {skip!r}")
    kind, src = _as_source(p_or_posterior)
    shape = src.shape if kind == "point" else src[0].shape
    if kind == "point":
        surely_silent = (src == 0.0) | (src == 1.0)
    else:
        surely_silent = np.zeros(shape, dtype=bool)
    served = ~surely_silent if skip else np.ones(shape, dtype=bool)
    n = int(served.sum())
    if budget < g_min:
        raise InputError(f"budget must be >= g_min ({g_min}) to serve any prompt, got budget={budget}")
    G = np.zeros(shape, dtype=np.int64)
    if n:
        per = budget // n
        if per >= g_min:
            G[served] = min(g_max, g_min + (per - g_min) // step * step)
        else:
            first = np.flatnonzero(served.ravel())[: budget // g_min]
            G.ravel()[first] = g_min
    value = allocation_value(p_or_posterior, G, "update", ddof=ddof, eps=eps)
    return Allocation(
        group_size=G,
        value=value,
        total=float(value.sum()),
        budget=budget,
        spent=int(G.sum()),
        multiplier=math.nan,
        exact=True,
        gap_bound=0.0,
        envelope=False,
        envelope_sizes=np.empty(0, dtype=np.int64),
        value_name="uniform",
        grid=(g_min, g_max, step, bool(skip)),
        ddof=int(as_ddof(ddof)),
        eps=float(as_eps(eps)),
    )


def budget_plan(p_or_posterior, budget, rule: str = DEFAULT_PLAN, **kwargs) -> Allocation:
    """The plan ``gsd plan --budget`` and ``gsd diagnose --budget`` make by default (one definition for both):
    :func:`uniform_plan` for ``rule="uniform"`` (:data:`DEFAULT_PLAN`), else :func:`allocate_group_sizes` with
    that value.  ``kwargs``: the grid and std options of either.

    Examples
    --------
    >>> budget_plan([0.02, 0.5, 1.0, 0.3], 32, g_max=16).group_size.tolist()
    [10, 10, 0, 10]
    """
    if rule == "uniform":
        return uniform_plan(p_or_posterior, budget, **kwargs)
    if rule not in ALLOCATION_VALUES:
        raise InputError(f"rule must be one of {PLAN_RULES}, got {rule!r}")
    return allocate_group_sizes(p_or_posterior, budget, value=rule, **kwargs)


_log_beta_moment, _beta_sigma = log_beta_moment, beta_sigma  # the former names
