"""The expected value V(p, G) of a group of G answers for a prompt, for known p or under a posterior
Beta(a, b), at any (p, G) (:func:`allocation_value`) and as a table over the allocator's grid
(:func:`value_table`); and the probability that a group is silent (:func:`expected_silent_rate`).

The values (see :ref:`theory-allocation`):

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
E[p(1−p)](1 − 1/G) (E[σ̂²]); the sums are those of :mod:`gsd.allocation.expectations`, the
look-ahead values those of :mod:`gsd.allocation.lookahead`.
"""

from __future__ import annotations

import numpy as np

from ..core.binomial import symmetric_expectation
from ..core.posterior import BetaPosterior
from ..core.silent import minor_rate as _minor
from ..core.silent import nonsilent_from_minor as _nonsilent
from ..core.silent import silent_from_minor as _silent
from ..core.update import grpo_term as _grpo_term
from ..errors import InputError
from ..validation import MAX_EXACT_GROUP_SIZE, as_ddof, as_eps, as_group_size, as_probability, broadcast, shown
from .expectations import beta_nonsilent, beta_sigma, log_beta_moment, sigma_costs, sigma_on_grid
from .lookahead import horizon_at_points, horizon_beta, horizon_point, horizon_quadrature, horizon_table

__all__ = [
    "ALLOCATION_VALUES",
    "HORIZON_VALUES",
    "VALUE_FORMS",
    "MAX_POSTERIOR_TERMS",
    "allocation_value",
    "expected_silent_rate",
    "TableLimit",
    "check_table_cost",
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

#: Terms of the dense beta-binomial sums one :func:`allocation_value` call under a posterior may
#: take (Σ (G + 1) over its distinct (posterior, G)): a few seconds, memory in blocks of 2^21 terms.
MAX_POSTERIOR_TERMS = 10**8
# Largest value table (distinct prompts × grid points) the allocator builds: 160 MB of float64 (its
# envelope, segment and index tables take a few times that).
_MAX_TABLE = 20_000_000
# Terms of the E[σ̂] sums one value table may take (prompts × Σ_G (G + 1)): a few seconds.  The
# pmf recurrence pays every G up to g_max whatever the grid, a dense sum only the grid's G: the
# cheaper is used, and a table beyond this is refused before any work.
_MAX_SUM_TERMS = 2_000_000_000


def value_spec(value, ddof, eps, lr=None, horizon=None):
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


def _point_value(p, G, spec):
    """V(p, G) for known p (arrays of one shape, G ≥ 0)."""
    i, j, h, f, look = spec
    out = np.zeros(p.shape)
    on = G >= 2  # a group of 0 or 1 answers is always silent: every value is 0
    if not on.any():
        return out
    pp, GG = p[on], G[on]
    if look is not None:
        out[on] = horizon_point(pp, GG, h, f, look)
        return out
    if h == "sigma":
        base = symmetric_expectation(pp, GG, f)
    elif h == "sigma2":
        base = pp * (1.0 - pp) * (1.0 - 1.0 / GG)
    else:
        base = _nonsilent(_minor(pp), GG)
    out[on] = pp**i * (1.0 - pp) ** j * base
    return out


def _beta_value(a, b, G, spec):
    """E[V(p, G)] under Beta(a, b) (arrays of one shape, G ≥ 0)."""
    i, j, h, f, look = spec
    out = np.zeros(a.shape)
    on = G >= 2
    if not on.any():
        return out
    if look is not None:
        out[on] = horizon_beta(a[on], b[on], G[on], h, f, look)
        return out
    aa, bb, GG = a[on] + i, b[on] + j, G[on]
    scale = np.exp(log_beta_moment(a[on], b[on], i, j)) if (i or j) else 1.0
    if h == "sigma":
        base = beta_sigma(aa, bb, GG, f)
    elif h == "sigma2":
        base = aa * bb / ((aa + bb) * (aa + bb + 1.0)) * (1.0 - 1.0 / GG)
    else:
        base = beta_nonsilent(aa, bb, GG)
    out[on] = scale * base
    return out


def as_source(p_or_posterior):
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
    spec = value_spec(value, ddof, eps, lr, horizon)
    kind, src = as_source(p_or_posterior)
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
                f"G = {shown(G)}: under a posterior, value {value!r} sums the beta-binomial pmf over every "
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
    kind, src = as_source(p_or_posterior)
    G = as_group_size(G)
    if kind == "point":
        p, G = broadcast(p_or_posterior=src, G=G)
        return _silent(_minor(p), G)
    a, G = broadcast(p_or_posterior=src[0], G=G)
    b = np.broadcast_to(src[1], a.shape)
    # The two tails in logs; their sum never exceeds 1 in exact arithmetic, nor here by more
    # than rounding (clipped): a posterior of 2^53 counts must not report a rate of 2.
    return np.minimum(np.exp(log_beta_moment(a, b, G, 0)) + np.exp(log_beta_moment(a, b, 0, G)), 1.0)


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
    terms = min(sigma_costs(kind, n_types, grid))
    if terms > _MAX_SUM_TERMS:
        raise TableLimit(
            f"g_max: the expected updates of {n_types} distinct prompts on the grid g_min={g_min}, g_max={g_max}, "
            f"step={step} take ~{terms:.2g} terms, above the allocator's limit ({_MAX_SUM_TERMS:.0e}); use a "
            "smaller g_max, a larger step or fewer distinct rates"
        )


def value_table(kind, src, grid, spec):
    """Rows × grid table of V for distinct prompts (src: p, or (a, b))."""
    i, j, h, f, look = spec
    Gg = grid[None, :].astype(np.float64)
    on = grid >= 2
    if look is not None:
        tab = horizon_table(grid, h, f, look)
        table = horizon_at_points(src, tab) if kind == "point" else horizon_quadrature(*src, tab)
        return np.where(on[None, :], table, 0.0)
    if kind == "point":
        p = src[:, None]
        if h == "sigma":
            base = sigma_on_grid(kind, grid, f, p=src)
        elif h == "sigma2":
            base = p * (1.0 - p) * (1.0 - 1.0 / Gg)
        else:
            base = _nonsilent(_minor(p), Gg)
        table = p**i * (1.0 - p) ** j * base
    else:
        a, b = src
        aa, bb = a + i, b + j
        if h == "sigma":
            base = sigma_on_grid(kind, grid, f, a=aa, b=bb)
        elif h == "sigma2":
            base = (aa * bb / ((aa + bb) * (aa + bb + 1.0)))[:, None] * (1.0 - 1.0 / Gg)
        else:
            base = beta_nonsilent(aa[:, None], bb[:, None], Gg)
        scale = np.exp(log_beta_moment(a, b, i, j))[:, None] if (i or j) else 1.0
        table = scale * base
    return np.where(on[None, :], table, 0.0)
