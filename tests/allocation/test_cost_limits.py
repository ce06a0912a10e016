"""The allocator's cost is bounded by its inputs before any work, and its posterior sums stay
stable at any count."""

from __future__ import annotations

import time

import numpy as np
import pytest
from scipy.special import betaln
from scipy.stats import betabinom

import gsd
from gsd.allocation import allocation_value, expected_silent_rate, log_beta_moment


@pytest.mark.parametrize("posterior", [False, True])
def test_a_sparse_grid_up_to_a_million_costs_its_points_not_g_max_squared(posterior):
    src = gsd.posterior_from_counts([3, 5], [10, 10]) if posterior else [0.3, 0.6]
    start = time.perf_counter()
    plan = gsd.allocate_group_sizes(src, 2_000_004, g_min=2, g_max=1_000_002, step=1_000_000)
    assert time.perf_counter() - start < 20  # the pmf recurrence alone: ~5e11 terms, hours
    assert plan.group_size.tolist() == [1_000_002, 1_000_002]
    # the dense sums at the grid's G agree with the recurrence where both are cheap
    dense = gsd.allocate_group_sizes(src, 200, g_min=2, g_max=102, step=100)
    assert np.allclose(dense.value, allocation_value(src, dense.group_size), rtol=1e-12)


@pytest.mark.parametrize(
    "kwargs, text",
    [
        ({"g_max": 10**10}, "9,999,999,999 grid points"),
        ({"g_max": 10**9, "step": 1}, "grid points"),
        ({"g_max": 200_001, "step": 1}, "terms, above the allocator's limit"),
    ],
)
def test_a_grid_beyond_the_limits_is_refused_before_any_work(kwargs, text):
    p = np.linspace(0.01, 0.99, 60)
    start = time.perf_counter()
    with pytest.raises(gsd.InputError, match=text):
        gsd.allocate_group_sizes(p, 10**6, **kwargs)
    assert time.perf_counter() - start < 2


def test_allocation_value_keeps_the_exact_sums_limit():
    with pytest.raises(gsd.InputError, match=r"G must be <= 1,000,000,000"):
        allocation_value(0.5, 2**53)
    assert 0 < float(allocation_value(0.5, 10**9)) < 0.5


@pytest.mark.parametrize("fn", [allocation_value, expected_silent_rate])
def test_shapes_that_do_not_broadcast_name_the_arguments(fn):
    with pytest.raises(gsd.InputError, match=r"p_or_posterior \(2,\), G \(3,\)"):
        fn([0.1, 0.2], [2, 3, 4])
    post = gsd.posterior_from_counts([1, 2], [3, 4])
    with pytest.raises(gsd.InputError, match=r"p_or_posterior \(2,\), G \(3,\)"):
        fn(post, [2, 3, 4])


@pytest.mark.parametrize("k, n", [(2**52, 2**53), (2**40, 2**41), (10**12, 10**12 + 5), (0, 2**53)])
def test_posterior_silent_rate_stays_a_probability_at_any_count(k, n):
    post = gsd.posterior_from_counts(k, n, prior="uniform")
    mean = float(post.mean)
    got = float(expected_silent_rate(post, 8))
    assert 0 <= got <= 1
    assert got == pytest.approx(mean**8 + (1 - mean) ** 8, rel=1e-9, abs=1e-300)
    v = float(allocation_value(post, 8))
    assert v == pytest.approx(float(allocation_value(mean, 8)), rel=1e-9)


def test_beta_moments_match_scipy_where_its_log_beta_is_exact():
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.1, 5e5, 200), rng.uniform(0.1, 5e5, 200)
    i, j = rng.integers(0, 300, 200), rng.integers(0, 300, 200)
    ref = betaln(a + i, b + j) - betaln(a, b)
    assert np.allclose(log_beta_moment(a, b, i, j), ref, rtol=1e-9, atol=1e-9)
    a2, b2 = a + 2e6, b + 3e6  # past the switch to Stirling's differences
    assert np.allclose(log_beta_moment(a2, b2, i, j), betaln(a2 + i, b2 + j) - betaln(a2, b2), rtol=1e-7, atol=1e-7)
    pmf = betabinom.pmf(np.arange(9), 8, 3.5, 7.25)
    mine = np.exp([log_beta_moment(3.5, 7.25, k, 8 - k) for k in range(9)]) * [1, 8, 28, 56, 70, 56, 28, 8, 1]
    assert np.allclose(mine, pmf, rtol=1e-12)


@pytest.mark.parametrize("kind", ["point", "beta"])
def test_dense_sums_on_a_sparse_grid_equal_the_pmf_recurrence(kind):
    from gsd.allocation.expectations import sigma_table
    from gsd.allocation.values import value_spec

    f = value_spec("update", 0, 0.0)[3]  # the paper convention, as allocation_value below defaults to
    grid = np.array([2, 3, 40, 97, 300])
    rng = np.random.default_rng(1)
    if kind == "point":
        args = {"p": rng.uniform(0, 1, 7)}
        dense = gsd.allocation_value(args["p"][:, None], grid[None, :])
    else:
        args = {"a": rng.uniform(0.2, 30, 7), "b": rng.uniform(0.2, 30, 7)}
        post = gsd.BetaPosterior(args["a"][:, None], args["b"][:, None], prior=(1.0, 1.0))
        dense = gsd.allocation_value(post, grid[None, :])
    assert np.allclose(sigma_table(grid, f, **args), dense, rtol=1e-10, atol=1e-14)


def test_a_posterior_value_at_a_huge_group_is_refused_before_any_memory_is_asked_for():
    post = gsd.posterior_from_counts(3, 8, prior="uniform")
    start = time.perf_counter()
    with pytest.raises(gsd.InputError, match="G = 1000000000: under a posterior.*1,000,000,001 terms"):
        allocation_value(post, 10**9)
    assert time.perf_counter() - start < 2


def test_a_posterior_sum_in_blocks_of_k_equals_the_sum_in_one_block(monkeypatch):
    # The blocks are cut where the sums live (gsd.allocation.expectations), not in gsd.allocation.
    import gsd.allocation.expectations as expectations

    post = gsd.posterior_from_counts([3, 0, 7], [8, 5, 9], prior="uniform")
    whole = allocation_value(post, 1000)
    monkeypatch.setattr(expectations, "BLOCK_TERMS", 64)  # 1001 terms: 16 blocks of k per posterior
    assert np.allclose(allocation_value(post, 1000), whole, rtol=1e-13, atol=0)
