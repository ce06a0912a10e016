"""What logged answers say about a prompt's solve rate: Beta posteriors from counts.

A prompt answered right k times out of n logged rollouts has, under a Beta(a, b) prior on its
solve rate p, the posterior

    p | k, n  ~  Beta(a + k, b + n − k).

The prior is either given, or fitted to the whole dataset by maximising the beta-binomial
marginal likelihood (empirical Bayes):

    log L(a, b) = Σ_i [ log C(n_i, k_i) + log B(a + k_i, b + n_i − k_i) − log B(a, b) ].

This is what turns "0 right out of 8" into "probably hard" rather than "never solvable": the
posterior keeps mass above 0, pulled towards the dataset's typical difficulty.  Expectations of
a group-size value under the posterior are exact sums over the beta-binomial distribution of
the group's number of right answers (see :ref:`theory-allocation`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..validation import InputError, as_group_size, shown
from .binomial import unique_pairs

__all__ = [
    "BetaPosterior",
    "fit_beta_prior",
    "posterior_from_counts",
    "PRIORS",
    "one_step_log_score",
    "expected_scale",
]

#: Named fixed priors accepted by :func:`posterior_from_counts` besides ``"empirical-bayes"``.
PRIORS = {"uniform": (1.0, 1.0), "jeffreys": (0.5, 0.5)}

# The fit works in (logit m, log s), m = a/(a+b) the mean solve rate and s = a+b the prior's
# concentration: the likelihood is smooth in m, while in s it can be flat for a long way (counts
# from one or two rollouts barely see over-dispersion), which in (log a, log b) sent L-BFGS to a
# corner.  A dataset with no over-dispersion (every prompt equally hard) pushes s to infinity;
# the bound keeps the fit finite and ``fit_beta_prior(..., full_output=True)`` reports it.
_LOG_S_BOUNDS = (np.log(2e-3), np.log(2e6))
_LOGIT_M_BOUNDS = (-30.0, 30.0)


@dataclass(frozen=True)
class BetaPosterior:
    """Per-prompt Beta(a, b) distributions of the solve rate (arrays of one shape).

    Attributes
    ----------
    a, b : ndarray
        The posterior parameters, a = a₀ + k, b = b₀ + n − k.
    prior : tuple of float
        The prior (a₀, b₀) they were built from.
    """

    a: np.ndarray
    b: np.ndarray
    prior: tuple

    def __post_init__(self):
        a = np.asarray(self.a, dtype=np.float64)
        b = np.asarray(self.b, dtype=np.float64)
        for name, v in (("a", a), ("b", b)):
            bad = ~(np.isfinite(v) & (v > 0))
            if bad.any():
                raise InputError(f"{name} must be finite and > 0, got {shown(v[bad])}")
        a, b = np.broadcast_arrays(a, b)
        object.__setattr__(self, "a", a)
        object.__setattr__(self, "b", b)

    @property
    def shape(self):
        return self.a.shape

    @property
    def mean(self) -> np.ndarray:
        """Posterior mean a / (a + b)."""
        return self.a / (self.a + self.b)

    def interval(self, level: float = 0.9):
        """Equal-tailed credible interval (lo, hi) of the given level, per prompt: the inverse of
        the regularised incomplete beta function at the tail (1 − level)/2 from below and from
        above (``scipy.special.betaincinv`` / ``betainccinv``, what ``scipy.stats.beta.ppf`` and
        ``isf`` compute, bit for bit, without importing scipy.stats)."""
        from scipy.special import betainccinv, betaincinv

        if not (isinstance(level, float | int) and 0.0 < level < 1.0):
            raise InputError(f"level must be a number in (0, 1), got {level!r}")
        tail = (1.0 - level) / 2.0
        return betaincinv(self.a, self.b, tail), betainccinv(self.a, self.b, tail)


def _counts(k: ArrayLike, n: ArrayLike) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """k and n as int64 arrays of one broadcast shape with 0 ≤ k ≤ n."""
    k = as_group_size(k, "k", minimum=0)
    n = as_group_size(n, "n", minimum=0)
    try:
        k, n = np.broadcast_arrays(k, n)
    except ValueError:
        raise InputError(f"k and n must broadcast together, got shapes {np.shape(k)} and {np.shape(n)}") from None
    bad = k > n
    if bad.any():
        raise InputError(f"k must be <= n, got k = {shown(k[bad])} with n = {shown(n[bad])}")
    return k, n


def prior_neg_loglik(
    x: NDArray[np.float64],
    k: NDArray[np.float64],
    n: NDArray[np.float64],
    w: NDArray[np.float64],
    hessian: bool = False,
):
    """−log L, its gradient and (with ``hessian``) its Hessian in x = (logit m, log s), up to the
    constant Σ log C(n, k), with a = m·s, b = (1 − m)·s."""
    from scipy.special import betaln, digamma, expit, polygamma

    m, s = expit(x[0]), np.exp(x[1])
    a, b = m * s, (1.0 - m) * s
    ll = w @ (betaln(a + k, b + n - k) - betaln(a, b))
    # ∂/∂a [log B(a + k, b + n − k) − log B(a, b)] = ψ(a+k) − ψ(a) − [ψ(a+b+n) − ψ(a+b)]
    dab = digamma(s + n) - digamma(s)
    ga = w @ (digamma(a + k) - digamma(a) - dab)
    gb = w @ (digamma(b + n - k) - digamma(b) - dab)
    q = m * (1.0 - m)
    grad = np.array([s * q * (ga - gb), a * ga + b * gb])  # chain rule: ∂a/∂u = s·q, ∂a/∂v = a; b likewise
    if not hessian:
        return -ll, -grad
    t = polygamma(1, s + n) - polygamma(1, s)
    haa = w @ (polygamma(1, a + k) - polygamma(1, a) - t)
    hbb = w @ (polygamma(1, b + n - k) - polygamma(1, b) - t)
    hab = -(w @ t)
    J = np.array([[s * q, a], [-s * q, b]])  # rows: a, b; columns: u = logit m, v = log s
    H = J.T @ np.array([[haa, hab], [hab, hbb]]) @ J
    d = s * q * (1.0 - 2.0 * m)  # ∂²a/∂u² (∂²b/∂u² = −d); ∂²a/∂u∂v = s·q; ∂²a/∂v² = a
    H += ga * np.array([[d, s * q], [s * q, a]]) + gb * np.array([[-d, -s * q], [-s * q, b]])
    return -ll, -grad, -H


def _box_newton(x, k, n, w, lo, hi, *, gtol: float, max_iter: int = 200):
    """Minimise :func:`prior_neg_loglik` over the box [lo, hi] by projected Newton steps (a gradient step
    where the Hessian is not positive definite; coordinates at a bound that the step would cross held
    there), each with a backtracking line search.  Returns (x, f, iterations)."""
    f, g, H = prior_neg_loglik(x, k, n, w, hessian=True)
    for it in range(max_iter):
        held = ((x <= lo) & (g > 0)) | ((x >= hi) & (g < 0))  # the bound is active: the step would leave the box
        free = ~held
        if np.all(np.abs(g[free]) <= gtol):
            return x, f, it
        d = np.zeros(2)
        Hf = H[np.ix_(free, free)]
        try:
            c = np.linalg.cholesky(Hf)
            d[free] = -np.linalg.solve(c.T, np.linalg.solve(c, g[free]))
        except np.linalg.LinAlgError:
            d[free] = -g[free] / max(1.0, float(np.abs(g[free]).max()))
        step, moved = 1.0, False
        while step > 1e-12:
            x_new = np.clip(x + step * d, lo, hi)
            f_new = prior_neg_loglik(x_new, k, n, w)[0]
            if np.isfinite(f_new) and f_new <= f + 1e-4 * (g @ (x_new - x)):  # −inf: an overflow, not an optimum
                moved = True
                break
            step *= 0.5
        if not moved or np.array_equal(x_new, x):
            return x, f, it  # no descent left at floating-point resolution
        x = x_new
        f, g, H = prior_neg_loglik(x, k, n, w, hessian=True)
    return x, f, max_iter


def fit_beta_prior(k: ArrayLike, n: ArrayLike, *, full_output: bool = False):
    """Empirical-Bayes Beta prior: the (a, b) maximising the beta-binomial marginal likelihood.

    Parameters
    ----------
    k, n : array_like of int
        Right answers and logged rollouts per prompt (0 ≤ k ≤ n).  Prompts with n = 0 carry no
        information and are ignored by the fit.
    full_output : bool
        Also return a dict with the maximised log-likelihood, the number of prompts used and
        whether the concentration a + b hit a bound (2e-3 or 2e6).

    Returns
    -------
    (a, b) : tuple of float
        The fitted prior (and the dict when ``full_output``).

    Notes
    -----
    Maximises :math:`\\sum_i \\log B(a + k_i, b + n_i - k_i) - \\log B(a, b)` over the mean
    :math:`m = a/(a+b)` (logit scale) and the concentration :math:`s = a + b` (log scale,
    bounded to [2e-3, 2e6]) by projected Newton steps with the analytic (digamma and trigamma)
    gradient and Hessian and a backtracking line search, started at the pooled rate and the best s
    of a coarse grid (scipy.special only: scipy.optimize alone costs ~25 MB of start-up memory, and
    the tests hold this optimum against L-BFGS-B's and Nelder–Mead's).  Identical (k, n) pairs are summed once, so the cost depends
    on the number of distinct pairs, not of prompts.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> p = rng.beta(2.0, 5.0, size=20000)
    >>> a, b = fit_beta_prior(rng.binomial(16, p), 16)
    >>> round(a, 1), round(b, 1)
    (2.0, 4.9)
    """
    k, n = _counts(k, n)
    k, n = k.ravel(), n.ravel()
    keep = n > 0
    if not keep.any():
        raise InputError("n: no prompt has a logged rollout (every n is 0); a prior cannot be fitted")
    k, n = k[keep], n[keep]
    first, inverse = unique_pairs(k, n)  # a lexsort: ~30x faster than np.unique(axis=1) at 10^6
    kk, nn = k[first].astype(np.float64), n[first].astype(np.float64)
    w = np.bincount(inverse, minlength=first.size).astype(np.float64)

    # Start at the pooled mean rate and the best concentration on a coarse log grid (cheap: the
    # cost is per distinct (k, n) pair), then polish both by Newton's method in the box.
    m0 = float(np.clip(w @ kk / (w @ nn), 1e-6, 1 - 1e-6))
    logit_m0 = np.log(m0 / (1.0 - m0))
    grid = np.linspace(*_LOG_S_BOUNDS, 41)
    start = min(grid, key=lambda ls: prior_neg_loglik(np.array([logit_m0, ls]), kk, nn, w)[0])
    lo, hi = np.array([_LOGIT_M_BOUNDS[0], _LOG_S_BOUNDS[0]]), np.array([_LOGIT_M_BOUNDS[1], _LOG_S_BOUNDS[1]])
    tol = 1e-6 * w.sum()
    x, fun, _ = _box_newton(np.array([logit_m0, start]), kk, nn, w, lo, hi, gtol=1e-3 * tol)
    m, s = 1.0 / (1.0 + np.exp(-x[0])), float(np.exp(x[1]))
    a, b = float(m * s), float((1.0 - m) * s)
    if not full_output:
        return a, b
    at_bound = bool(np.isclose(x[1], _LOG_S_BOUNDS[0]) or np.isclose(x[1], _LOG_S_BOUNDS[1]))
    # Converged: the gradient, relative to the number of prompts, vanishes on the free coordinates.
    grad = prior_neg_loglik(x, kk, nn, w)[1]
    free = np.array([True, not at_bound])
    converged = bool(np.all(np.abs(grad[free]) <= tol))
    return (a, b), {"loglik": float(-fun), "prompts": int(w.sum()), "at_bound": at_bound, "converged": converged}


def posterior_from_counts(k: ArrayLike, n: ArrayLike, prior="empirical-bayes") -> BetaPosterior:
    """Per-prompt Beta posterior of the solve rate from k right answers out of n.

    Parameters
    ----------
    k, n : array_like of int
        Counts per prompt, broadcast together, 0 ≤ k ≤ n (n = 0: the posterior is the prior).
    prior : ``"empirical-bayes"``, ``"uniform"``, ``"jeffreys"`` or (a, b)
        The Beta prior: fitted to these counts by :func:`fit_beta_prior` (default), Beta(1, 1),
        Beta(½, ½), or a given pair of finite positive numbers.

    Returns
    -------
    BetaPosterior
        a = a₀ + k, b = b₀ + n − k, with ``mean`` and ``interval(level)``.

    Examples
    --------
    >>> post = posterior_from_counts([0, 4, 8], 8, prior="uniform")
    >>> post.mean.tolist()
    [0.1, 0.5, 0.9]
    """
    k, n = _counts(k, n)
    if isinstance(prior, str):
        if prior == "empirical-bayes":
            a0, b0 = fit_beta_prior(k, n)
        elif prior in PRIORS:
            a0, b0 = PRIORS[prior]
        else:
            raise InputError(
                f"prior must be 'empirical-bayes', {', '.join(map(repr, PRIORS))} or (a, b), got {prior!r}"
            )
    else:
        try:
            a0, b0 = (float(x) for x in prior)
        except (TypeError, ValueError):
            raise InputError(
                f"prior must be 'empirical-bayes', {', '.join(map(repr, PRIORS))} or (a, b), got {prior!r}"
            ) from None
        if not (np.isfinite(a0) and np.isfinite(b0) and a0 > 0 and b0 > 0):
            raise InputError(f"prior must be two finite numbers > 0, got {prior!r}")
    return BetaPosterior(a0 + k, b0 + (n - k), (a0, b0))


def one_step_log_score(
    k: ArrayLike, n: ArrayLike, k_eff: ArrayLike, n_eff: ArrayLike, prior: tuple[float, float]
) -> NDArray[np.float64]:
    r"""The log-probability a prompt's posterior before a group gave to the group's right answers:
    the beta-binomial :math:`\log P(k \mid n, a_0 + k_\mathrm{eff}, b_0 + n_\mathrm{eff} - k_\mathrm{eff})`,
    elementwise over broadcast arrays: :math:`-\log(n + 1) - \log B(n - k + 1, k + 1) + \log B(k + a, n - k + b)
    - \log B(a, b)`, the formula of ``scipy.stats.betabinom.logpmf`` written with
    ``scipy.special.betaln`` (scipy.stats alone costs ~50 MB of start-up memory).

    ``k`` right of ``n`` scored rollouts; ``k_eff`` and ``n_eff`` the prompt's (discounted)
    counts at earlier steps; ``prior`` (a₀, b₀).  :func:`gsd.diagnose.posteriors.choose_half_life` sums it over the
    groups of prompts seen before; the live :class:`gsd.live.tracker.GroupTracker`
    sums it generation by generation.

    Examples
    --------
    >>> round(float(one_step_log_score(1, 2, 0.0, 0.0, (1.0, 1.0))), 12)  # uniform: P(k = 1 | n = 2) = 1/3
    -1.098612288668
    """
    from scipy.special import betaln

    a0, b0 = prior
    k_eff = np.asarray(k_eff, np.float64)
    a, b = a0 + k_eff, b0 + (np.asarray(n_eff, np.float64) - k_eff)
    k, n = np.floor(np.asarray(k, np.float64)), np.asarray(n, np.float64)
    return -np.log(n + 1) - betaln(n - k + 1, k + 1) + betaln(k + a, n - k + b) - betaln(a, b)


def expected_scale(a: ArrayLike, b: ArrayLike) -> NDArray[np.float64]:
    """E[sqrt(p(1 − p))] for p ~ Beta(a, b): B(a + ½, b + ½)/B(a, b), the expected large-group
    GRPO update (the denominator of the step's fidelity).

    Examples
    --------
    >>> round(float(expected_scale(1.0, 1.0)), 12)   # uniform p: π/8
    0.392699081699
    """
    from scipy.special import betaln

    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return np.exp(betaln(a + 0.5, b + 0.5) - betaln(a, b))
