"""Allocation values: direct sums, numerical Bayes, mpmath at the extremes, the grid tables."""

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate
from scipy.stats import beta as beta_dist
from scipy.stats import binom

import gsd
from gsd.allocation.solver import BudgetProblem

# The one-step values; the horizon values (they need lr and a horizon) have tests/allocation/test_lookahead.py.
VALUES = tuple(v for v in gsd.ALLOCATION_VALUES if v not in gsd.HORIZON_VALUES)


def _grpo_step(k, G, ddof=0, eps=0.0):
    """The logit update of a group with k right of G, written out: σ²/(σ_c + eps), 0 if silent."""
    sigma = np.sqrt(k * (G - k)) / G
    sigma_c = sigma * np.sqrt(G / (G - ddof))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sigma > 0, sigma**2 / (sigma_c + eps), 0.0)


def _direct(p, G, value, ddof=0, eps=0.0):
    """Each value by its definition, with a full binomial sum over k = 0 … G."""
    if G < 2:
        return 0.0
    k = np.arange(G + 1)
    pmf = binom.pmf(k, G, p)
    sigma = float(pmf @ _grpo_step(k, G, ddof, eps))
    nonsilent = 1.0 - p**G - (1.0 - p) ** G
    sigma2 = float(pmf @ (k * (G - k) / G**2))
    return {
        "update": sigma,
        "dr_grpo": sigma2,
        "progress": p * (1 - p) * sigma,
        "nonsilent": nonsilent,
        "knapsack": nonsilent * p * (1 - p) ** 2,
        "gain": np.sqrt(p * (1 - p)) * sigma,
        "dr_gain": p * (1 - p) * sigma2,
    }[value]


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.just(0.0), st.just(1.0), st.floats(1e-6, 1 - 1e-6)), st.integers(0, 300), st.sampled_from(VALUES))
def test_point_values_match_direct_sums(p, G, value):
    got = float(gsd.allocation_value(p, G, value))
    # nonsilent by 1 − p^G − (1−p)^G loses digits when it is small; the abs term allows for that.
    assert got == pytest.approx(_direct(p, G, value), rel=1e-10, abs=1e-15)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(st.just(0.0), st.just(1.0), st.floats(1e-6, 1 - 1e-6)),
    st.integers(0, 300),
    st.sampled_from(VALUES),
    st.sampled_from([0, 1]),
    st.sampled_from([0.0, 1e-6, 1e-4, 0.1]),
)
def test_point_values_match_direct_sums_in_every_std_convention(p, G, value, ddof, eps):
    """ddof and eps as a trainer sets them: the update a group of G actually makes, averaged."""
    got = float(gsd.allocation_value(p, G, value, ddof=ddof, eps=eps))
    assert got == pytest.approx(_direct(p, G, value, ddof, eps), rel=1e-10, abs=1e-15)


@pytest.mark.parametrize("ddof,eps", [(1, 0.0), (0, 1e-4), (1, 1e-6), (1, 0.1)])
def test_posterior_values_in_a_trainer_convention_match_betabinomial_sums(ddof, eps):
    """Under Beta(a, b): Σ_k BetaBinom(k; G, a, b)·σ²/(σ_c + eps), by scipy's pmf."""
    from scipy.stats import betabinom

    for a, b, G in [(0.5, 0.5, 2), (2.0, 7.0, 8), (30.0, 3.0, 64), (0.8, 1.4, 300)]:
        k = np.arange(G + 1)
        want = float(betabinom.pmf(k, G, a, b) @ _grpo_step(k, G, ddof, eps))
        post = gsd.BetaPosterior(a, b, (a, b))
        assert float(gsd.allocation_value(post, G, "update", ddof=ddof, eps=eps)) == pytest.approx(want, rel=1e-11)
        want_progress = (
            a * b / ((a + b) * (a + b + 1)) * float(betabinom.pmf(k, G, a + 1, b + 1) @ _grpo_step(k, G, ddof, eps))
        )  # E[p(1−p)·m] = B-moment × shifted sum
        got = float(gsd.allocation_value(post, G, "progress", ddof=ddof, eps=eps))
        assert got == pytest.approx(want_progress, rel=1e-11)


@settings(max_examples=40, deadline=None)
@given(st.floats(0.2, 20), st.floats(0.2, 20), st.integers(0, 60), st.sampled_from(VALUES))
def test_posterior_values_match_numerical_bayes(a, b, G, value):
    """E[V(p, G)] under Beta(a, b) by quadrature over p of the point value."""
    post = gsd.BetaPosterior(a, b, (a, b))
    got = float(gsd.allocation_value(post, G, value))
    f = lambda p: float(gsd.allocation_value(p, G, value)) * beta_dist.pdf(p, a, b)
    want = integrate.quad(f, 0, 1, epsabs=1e-14, epsrel=1e-10, limit=400, points=[0.5])[0]
    assert got == pytest.approx(want, rel=1e-7, abs=1e-12)


def test_posterior_broadcasts_against_G_and_counts():
    post = gsd.posterior_from_counts([0, 3, 8], 8, prior="uniform")
    v = gsd.allocation_value(post, np.array([[2], [16]]), "update")
    assert v.shape == (2, 3)
    for i, g in enumerate([2, 16]):
        for j in range(3):
            one = gsd.BetaPosterior(post.a[j], post.b[j], post.prior)
            assert v[i, j] == pytest.approx(float(gsd.allocation_value(one, g, "update")), rel=1e-14)
    # Symmetry: 0 of 8 and 8 of 8 (uniform prior) are mirror images for every symmetric value.
    assert v[1, 0] == pytest.approx(v[1, 2], rel=1e-12)


# ---------------------------------------------------------------------------- mpmath oracle
mp.mp.dps = 40


def _mp_point(p, G, value, kmax=None):
    p = mp.mpf(p)
    sigma = mp.mpf(0)
    term = (1 - p) ** G  # k = 0
    for k in range(1, (kmax or G) + 1):
        term = term * (G - k + 1) / k * p / (1 - p)
        sigma += term * mp.sqrt(k * (G - k)) / G
    nonsilent = 1 - p**G - (1 - p) ** G
    dr = p * (1 - p) * (1 - mp.mpf(1) / G)
    return {
        "update": sigma,
        "progress": p * (1 - p) * sigma,
        "dr_grpo": dr,
        "nonsilent": nonsilent,
        "knapsack": nonsilent * p * (1 - p) ** 2,
        "gain": mp.sqrt(p * (1 - p)) * sigma,
        "dr_gain": p * (1 - p) * dr,
    }[value]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("p,G", [(1e-12, 8), (1e-12, 100_000), (1 - 1e-12, 512), (3e-7, 100_000), (0.5, 2000)])
def test_point_values_against_mpmath_at_extremes(value, p, G):
    # Terms beyond k = 80 are below (G p)^80 / 80! for the small p here: negligible at 40 digits.
    kmax = None if p >= 0.5 else min(G, 80)
    if p > 0.5:  # σ̂ and the values are symmetric in k ↔ G − k; weight monomials are not
        want = _mp_point(p, G, value) if G <= 2000 else None
    else:
        want = _mp_point(p, G, value, kmax)
    got = float(gsd.allocation_value(p, G, value))
    assert got == pytest.approx(float(want), rel=1e-11)


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("a,b,G", [(1e-3, 50.0, 512), (0.5, 0.5, 2000), (200.0, 3.0, 64), (2.0, 1e4, 4096)])
def test_posterior_values_against_mpmath(value, a, b, G):
    """Beta-binomial sums in 40 digits: E[p^i (1−p)^j h] with h by its definition."""
    i, j = {"progress": (1, 1), "knapsack": (1, 2), "gain": (mp.mpf(1) / 2, mp.mpf(1) / 2), "dr_gain": (1, 1)}.get(
        value, (0, 0)
    )
    A, B = mp.mpf(a), mp.mpf(b)
    lbeta = lambda x, y: mp.log(mp.beta(x, y))
    scale = mp.e ** (lbeta(A + i, B + j) - lbeta(A, B))
    A, B = A + i, B + j
    if value in ("update", "progress", "gain"):
        s = mp.mpf(0)
        for k in range(1, G):
            s += mp.binomial(G, k) * mp.e ** (lbeta(A + k, B + G - k) - lbeta(A, B)) * mp.sqrt(k * (G - k)) / G
        want = scale * s
    elif value in ("dr_grpo", "dr_gain"):
        want = scale * A * B / ((A + B) * (A + B + 1)) * (1 - mp.mpf(1) / G)
    else:
        want = scale * (1 - mp.e ** (lbeta(A + G, B) - lbeta(A, B)) - mp.e ** (lbeta(A, B + G) - lbeta(A, B)))
    got = float(gsd.allocation_value(gsd.BetaPosterior(a, b, (a, b)), G, value))
    assert got == pytest.approx(float(want), rel=1e-9)


def test_silent_rate_under_posterior():
    post = gsd.posterior_from_counts(0, 8, prior="uniform")  # Beta(1, 9)
    assert float(gsd.expected_silent_rate(post, 16)) == pytest.approx(
        9 / 25 + mp.beta(17, 9) / mp.beta(1, 9), rel=1e-12
    )
    v = gsd.allocation_value(post, 16, "nonsilent")
    assert float(v) == pytest.approx(1 - float(gsd.expected_silent_rate(post, 16)), rel=1e-12)


# ---------------------------------------------------------------------------- the allocator's tables
@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("ddof,eps", [(0, 0.0), (1, 1e-4)])
def test_grid_tables_equal_pairwise_values(value, ddof, eps):
    """The pmf recurrence over G (point p and Beta rows) equals the pairwise exact values."""
    conv = {"ddof": ddof, "eps": eps}
    rng = np.random.default_rng(7)
    p = np.concatenate([[0.0, 1.0, 1e-12, 1 - 1e-9, 0.5], rng.uniform(size=20)])
    grid = np.arange(2, 303, 3)
    prob = BudgetProblem(p, value, 2, 302, 3, False, **conv)
    want = gsd.allocation_value(np.unique(p)[:, None], grid[None, :], value, **conv)
    np.testing.assert_allclose(prob.table_full, want, rtol=1e-11, atol=1e-300)
    post = gsd.posterior_from_counts(rng.integers(0, 9, 30), 8, prior=(0.7, 1.3))
    prob = BudgetProblem(post, value, 2, 200, 2, True, **conv)
    a, b = np.unique(np.stack([post.a, post.b]), axis=1)
    want = gsd.allocation_value(
        gsd.BetaPosterior(a[:, None], b[:, None], post.prior), np.arange(2, 201, 2)[None, :], value, **conv
    )
    order = np.lexsort((b, a))
    got = prob.table_full[:, 1:]
    np.testing.assert_allclose(np.sort(got, axis=0), np.sort(want[order], axis=0), rtol=1e-11, atol=1e-300)


def test_value_errors_name_the_argument():
    with pytest.raises(ValueError, match="value must be one of"):
        gsd.allocation_value(0.5, 8, "grpo")
    with pytest.raises(ValueError, match="p must lie in"):
        gsd.allocation_value(np.nan, 8)
    with pytest.raises(ValueError, match="p must lie in"):
        gsd.allocation_value(np.inf, 8)
    with pytest.raises(ValueError, match="G must be an integer >= 0"):
        gsd.allocation_value(0.5, -1)


@pytest.mark.parametrize("G", [2, 3, 8, 64, 1000])
def test_update_value_is_the_paper_convention_and_ddof1_is_a_constant_factor(G):
    # By default `update` is E[σ̂] with ddof 0; a ddof-1 trainer (eps 0) realises sqrt((G−1)/G)
    # of it, which allocation_value(ddof=1) and the core's expected_update both give.
    p = np.array([1e-6, 0.05, 0.3, 0.5, 0.97])
    paper = gsd.allocation_value(p, G, "update")
    np.testing.assert_allclose(paper, gsd.expected_update(p, G, "grpo"), rtol=1e-12)
    trainer = gsd.allocation_value(p, G, "update", ddof=1)
    np.testing.assert_allclose(trainer, np.sqrt((G - 1) / G) * paper, rtol=1e-12)
    np.testing.assert_allclose(trainer, gsd.expected_update(p, G, "grpo", ddof=1, eps=0.0), rtol=1e-12)
    # The values that do not divide by the std ignore the convention.
    for value in ("dr_grpo", "nonsilent", "knapsack"):
        np.testing.assert_array_equal(
            gsd.allocation_value(p, G, value, ddof=1, eps=0.1), gsd.allocation_value(p, G, value)
        )


def test_convention_arguments_are_checked():
    with pytest.raises(ValueError, match="ddof must be 0"):
        gsd.allocation_value(0.5, 8, ddof=2)
    with pytest.raises(ValueError, match="eps must be a finite number"):
        gsd.allocate_group_sizes([0.5], 8, eps=float("nan"))
    with pytest.raises(ValueError, match="eps must be a finite number"):
        gsd.uniform_group_size_advice([0.5], eps=-1e-3)
