"""Exact sums against independent references: a full binomial sum, and mpmath at extremes."""

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

import gsd

mp.mp.dps = 40


def _full_sum(p, G, f):
    """Direct evaluation over every k = 0 … G (no window)."""
    k = np.arange(G + 1)
    return float(np.sum(binom.pmf(k, G, p) * f(k, G)))


# scipy's binom.pmf (the reference here) overflows for p below ~1e-307; tiny p is tested below.
probabilities = st.one_of(st.just(0.0), st.just(1.0), st.floats(1e-200, 1))


@settings(max_examples=200, deadline=None)
@given(probabilities, st.integers(1, 400))
def test_grpo_update_matches_full_sum(p, G):
    got = float(gsd.expected_update(p, G, "grpo"))
    want = _full_sum(p, G, lambda k, G: np.sqrt(k * (G - k)) / G)
    assert got == pytest.approx(want, rel=1e-11, abs=1e-300)


@settings(max_examples=100, deadline=None)
@given(probabilities, st.integers(2, 200), st.sampled_from([0, 1]), st.sampled_from([0.0, 1e-4, 0.1]))
def test_grpo_update_with_trainer_convention_matches_full_sum(p, G, ddof, eps):
    def f(k, G):
        s = np.sqrt(k * (G - k)) / G
        sc = s * np.sqrt(G / (G - ddof))
        return np.where(s > 0, s * s / np.where(s > 0, sc + eps, 1), 0.0)

    got = float(gsd.expected_update(p, G, "grpo", ddof=ddof, eps=eps))
    assert got == pytest.approx(_full_sum(p, G, f), rel=1e-11, abs=1e-300)


@settings(max_examples=200, deadline=None)
@given(probabilities, st.integers(1, 2000))
def test_dr_grpo_closed_form_equals_expected_variance(p, G):
    want = _full_sum(p, G, lambda k, G: k * (G - k) / G**2)
    assert float(gsd.expected_update(p, G, "dr_grpo")) == pytest.approx(want, rel=1e-10, abs=1e-300)


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 1), st.integers(1, 5000))
def test_silent_rate_matches_direct(p, G):
    assert float(gsd.silent_rate(p, G)) == pytest.approx(p**G + (1 - p) ** G, rel=1e-11, abs=1e-300)


# ---------------------------------------------------------------------------- mpmath oracle
def _mp_grpo(p, G, window=None):
    """Σ_k C(G,k) p^k (1−p)^(G−k) sqrt(k(G−k))/G in 40-digit arithmetic, by the term ratio."""
    p = mp.mpf(p)
    q = 1 - p
    mu = float(G * p)
    sd = float(mp.sqrt(G * p * q))
    lo = 0 if window is None else max(0, int(mu - 40 * sd - 100))
    hi = G if window is None else min(G, int(mu + 40 * sd + 100))
    term = mp.binomial(G, lo) * p**lo * q ** (G - lo)
    total = mp.mpf(0)
    ratio = p / q
    for k in range(lo, hi + 1):
        total += term * mp.sqrt(k * (G - k)) / G
        term = term * (G - k) / (k + 1) * ratio
    return total


EXTREMES = [
    (1e-12, 2),
    (1e-12, 8),
    (1e-12, 100_000),
    (1 - 1e-12, 100_000),
    (1e-9, 64),
    (1e-6, 100_000),
    (0.5, 100_000),
    (0.3, 100_000),
    (0.999999, 1000),
    (0.05, 64),
    (0.5, 8),
]


@pytest.mark.parametrize("p,G", EXTREMES)
def test_grpo_update_and_fidelity_against_mpmath(p, G):
    # p given as the float it is stored as: the oracle sees the same number.
    ref = _mp_grpo(mp.mpf(p), G, window=None if G <= 5000 else "wide")
    got = float(gsd.expected_update(p, G, "grpo"))
    assert abs(got - float(ref)) <= 1e-12 * float(ref)
    a = mp.mpf(p)
    phi = ref / mp.sqrt(a * (1 - a))
    assert abs(float(gsd.fidelity(p, G)) - float(phi)) <= 1e-12 * float(phi)


@pytest.mark.parametrize("p,G", EXTREMES + [(1e-12, 1), (0.5, 1)])
def test_silent_and_nonsilent_against_mpmath(p, G):
    a = mp.mpf(p)
    S = a**G + (1 - a) ** G
    got = float(gsd.silent_rate(p, G))
    assert abs(got - float(S)) <= 1e-12 * float(S)
    N = 1 - S
    got_n = float(gsd.nonsilent_rate(p, G))
    if N == 0:
        assert got_n == 0
    else:
        assert abs(got_n - float(N)) <= 1e-12 * float(N)


@pytest.mark.parametrize("p,G", [(1e-12, 100_000), (1e-6, 64), (0.3, 8), (1 - 1e-12, 50)])
def test_dapo_update_against_mpmath(p, G):
    a = mp.mpf(p)
    ref = _mp_grpo(a, G, window="wide") / (1 - a**G - (1 - a) ** G)
    got = float(gsd.expected_update(p, G, "dapo"))
    assert abs(got - float(ref)) <= 1e-12 * float(ref)


@pytest.mark.parametrize("p", [1e-260, 2.2250738585072014e-308, 5e-324])
@pytest.mark.parametrize("G", [2, 8, 100_000])
def test_subnormal_probabilities(p, G):
    # Only k = 1 contributes: E[σ] = G·p·(1−p)^(G−1)·sqrt(G−1)/G to far below rounding.
    want = float(mp.mpf(G) * mp.mpf(p) * (1 - mp.mpf(p)) ** (G - 1) * mp.sqrt(G - 1) / G)
    assert float(gsd.expected_update(p, G)) == pytest.approx(want, rel=1e-13)
    assert float(gsd.expected_update(1 - p, G)) == pytest.approx(want if 1 - p != 1 else 0.0, rel=1e-13)


def test_limits_at_p_zero_and_one():
    G = 8
    assert gsd.expected_update(0.0, G, "grpo") == 0
    assert gsd.fidelity(1.0, G) == 0
    # DAPO conditions on one odd answer as p → 0: σ = sqrt(G−1)/G.
    assert float(gsd.expected_update(0.0, G, "dapo")) == pytest.approx(np.sqrt(G - 1) / G)
    assert float(gsd.expected_update(1e-9, G, "dapo")) == pytest.approx(np.sqrt(G - 1) / G, rel=1e-7)
    assert float(gsd.expected_update(0.0, G, "dapo", max_draws=4)) == 0


def test_dapo_with_finite_draws_is_expectation_over_draws():
    p, G, D = 0.07, 8, 4
    s = float(gsd.silent_rate(p, G))
    cond = float(gsd.expected_update(p, G, "dapo"))
    assert float(gsd.expected_update(p, G, "dapo", max_draws=D)) == pytest.approx(cond * (1 - s**D), rel=1e-13)
    assert float(gsd.dapo_generation_cost(p, G, max_draws=D)) == pytest.approx(sum(s**d for d in range(D)), rel=1e-13)
    assert float(gsd.dapo_generation_cost(p, G)) == pytest.approx(1 / (1 - s), rel=1e-13)


def test_dapo_conditional_by_monte_carlo():
    rng = np.random.default_rng(7)
    p, G = 0.1, 8
    k = rng.binomial(G, p, size=2_000_000)
    keep = (k > 0) & (k < G)
    mc = np.mean(np.sqrt(k[keep] * (G - k[keep])) / G)
    se = np.std(np.sqrt(k[keep] * (G - k[keep])) / G) / np.sqrt(keep.sum())
    assert abs(float(gsd.expected_update(p, G, "dapo")) - mc) < 5 * se


def test_rloo_expected_update_is_p_times_one_minus_p():
    p = np.linspace(0, 1, 11)
    for G in (2, 8, 64):
        want = np.array([_full_sum(pi, G, lambda k, G: G / (G - 1) * k * (G - k) / G**2) for pi in p])
        np.testing.assert_allclose(gsd.expected_update(p, G, "rloo"), want, rtol=1e-12, atol=1e-300)


def test_fidelity_published_example_and_law():
    # docs/theory.md, section The group-size law: p = 0.05, G = 64: law 0.959, exact 0.945.
    assert round(float(gsd.fidelity_law(0.05, 64)), 3) == 0.959
    assert round(float(gsd.fidelity(0.05, 64)), 3) == 0.945


def test_broadcasting_shapes():
    p = np.linspace(0.01, 0.99, 5)[:, None]
    G = np.array([2, 8, 64])
    assert gsd.fidelity(p, G).shape == (5, 3)
    assert gsd.expected_update(p, G, "dapo").shape == (5, 3)
    assert gsd.silent_rate(p, G).shape == (5, 3)


@pytest.mark.parametrize("G", [8, 64, 128])
def test_dense_sums_span_several_blocks(G):
    """The dense small-G sum runs in column blocks of a reused buffer: on more prompts than one
    block holds, with repeated and mixed group sizes, every entry matches scipy's full sum."""
    from gsd.core.binomial import _BLOCK_ENTRIES

    n = 3 * _BLOCK_ENTRIES // (G + 1) + 17  # three blocks and a ragged end
    rng = np.random.default_rng(G)
    p = np.concatenate([rng.uniform(0, 1, n), rng.choice([0.05, 0.5, 0.93], n)])  # repeats too
    sizes = np.where(np.arange(p.size) % 3 == 0, G, G // 2)  # two group sizes, interleaved
    k = np.arange(G + 1)[:, None]
    sigma = np.sqrt(np.clip(k * (sizes - k), 0, None)) / sizes  # k > G: pmf 0
    direct = (binom.pmf(k, sizes, p) * sigma).sum(axis=0)
    got = gsd.expected_update(p, sizes)
    np.testing.assert_allclose(got, direct, rtol=1e-12, atol=1e-300)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 10**6), st.floats(0.0, 1.0), st.one_of(st.just(0.0), st.floats(1e-300, 1.0))),
        min_size=1,
        max_size=50,
    )
)
def test_the_pmf_without_scipy_stats_is_binom_pmf_bit_for_bit(cases):
    """The sums call the ufunc behind scipy.stats.binom.pmf (no scipy.stats import): same bits on k in 0 … G
    (p below ~1e-307 overflows in both, as noted above)."""
    from gsd.core.binomial import _binom_pmf

    G, u, p = (np.array(c) for c in zip(*cases))
    k = np.floor(u * G).astype(np.int64)
    np.testing.assert_array_equal(_binom_pmf()(k, G, p), binom.pmf(k, G, p))


@pytest.mark.parametrize(("p", "G"), [(0.9291042207970062, 129), (0.9320596866133782, 129), (0.07, 300), (0.5, 129)])
def test_windowed_sum_anchored_at_k0_is_within_its_bound(p, G):
    """The windowed sum (G > 128) anchors a block of 64 terms at k = 0 when the window starts there;
    scipy's pmf was 2,434 ulp off at k = 0 for the first case (found by hypothesis through the
    Chebyshev tables' test), now exp(G·log1p(−a)): within G·|log1p(−a)| + 2 ulp, plus 5 ulp a term
    of the block's ratios (the module's docstring), plus the sum's G roundings."""
    from gsd.core.binomial import symmetric_expectation

    f = lambda k, n: np.sqrt(k * (n - k)) / n  # noqa: E731 - E[σ], the GRPO update's sum
    got = symmetric_expectation(np.array([p]), np.array([G]), f)[0]
    mp.mp.dps = 60
    a = mp.mpf(min(p, 1 - p))
    want = mp.fsum(mp.binomial(G, k) * a**k * (1 - a) ** (G - k) * mp.sqrt(k * (G - k)) / G for k in range(G + 1))
    u = 2.0**-53
    bound = (G * abs(np.log1p(-min(p, 1 - p))) + 2 + 5 * 63 + G) * u
    assert abs(got - float(want)) <= bound * float(want)
