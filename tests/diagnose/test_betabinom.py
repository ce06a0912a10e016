"""Beta-binomial expectations: against scipy (hypothesis), the known-p limit and mpmath at extremes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import betabinom

import gsd
from gsd.diagnose.betabinom import betabinom_expectation, expected_scale, expected_sigma, silent_prob

mpmath = pytest.importorskip("mpmath")

shapes = st.floats(min_value=1e-3, max_value=1e3, allow_nan=False)


@settings(max_examples=60, deadline=None)
@given(a=shapes, b=shapes, G=st.integers(min_value=1, max_value=200))
def test_against_scipy_pmf(a, b, G):
    k = np.arange(G + 1)
    pmf = betabinom.pmf(k, G, a, b)
    np.testing.assert_allclose(silent_prob(a, b, G), pmf[0] + pmf[-1] if G > 0 else 1.0, rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(expected_sigma(a, b, G), pmf @ (np.sqrt(k * (G - k)) / G), rtol=1e-9, atol=1e-15)


def test_broadcast_and_mixed_group_sizes():
    a = np.array([0.5, 2.0, 7.0, 0.5])
    b = np.array([3.0, 2.0, 1.0, 3.0])
    G = np.array([4, 16, 4, 64])
    got = expected_sigma(a, b, G)
    want = [expected_sigma(x, y, g) for x, y, g in zip(a, b, G)]
    np.testing.assert_allclose(got, want, rtol=1e-13)
    assert silent_prob(a[:, None], b[:, None], np.array([2, 8])).shape == (4, 2)


@pytest.mark.parametrize("p", [0.02, 0.3, 0.5, 0.9])
@pytest.mark.parametrize("G", [2, 8, 64])
def test_concentrated_posterior_gives_the_known_p_values(p, G):
    # Var p = p(1-p)/s shifts every expectation by O(G²/s) (2e-5 relative at G = 64, s = 1e7);
    # exactness itself is checked against scipy and mpmath above and below.
    s = 1e7
    a, b = p * s, (1 - p) * s
    assert silent_prob(a, b, G) == pytest.approx(gsd.silent_rate(p, G), rel=1e-4)
    assert expected_sigma(a, b, G) == pytest.approx(gsd.expected_update(p, G), rel=1e-4)
    assert expected_scale(a, b) == pytest.approx(np.sqrt(p * (1 - p)), rel=1e-4)
    assert expected_sigma(a, b, G) / expected_scale(a, b) == pytest.approx(gsd.fidelity(p, G), rel=1e-4)


@pytest.mark.parametrize("a, b, G", [(1e-3, 50.0, 1000), (0.02, 0.01, 4096), (300.0, 1e-2, 100), (5.0, 5.0, 20000)])
def test_mpmath_oracle_at_extremes(a, b, G):
    mpmath.mp.dps = 40
    A, B_ = mpmath.mpf(a), mpmath.mpf(b)
    beta = mpmath.beta
    q = (beta(A, B_ + G) + beta(A + G, B_)) / beta(A, B_)
    assert silent_prob(a, b, G) == pytest.approx(float(q), rel=1e-10)
    scale = beta(A + 0.5, B_ + 0.5) / beta(A, B_)
    assert expected_scale(a, b) == pytest.approx(float(scale), rel=1e-10)
    if G <= 1000:  # the exact sum, term by term in mpmath
        es = mpmath.fsum(mpmath.binomial(G, k) * beta(A + k, B_ + G - k) / beta(A, B_) * mpmath.sqrt(k * (G - k)) / G
                         for k in range(G + 1))
        assert expected_sigma(a, b, G) == pytest.approx(float(es), rel=1e-9)


def test_expectation_of_k_is_the_mean():
    a, b = np.array([0.3, 4.0]), np.array([2.0, 0.7])
    got = betabinom_expectation(a, b, 37, lambda k, G: k.astype(float))
    np.testing.assert_allclose(got, 37 * a / (a + b), rtol=1e-12)
