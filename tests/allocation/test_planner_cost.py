"""The planner's fast paths against direct computations: anchored binomial sums against mpmath,
the shared value table of plan + advice against the two separate calls, the advice's one-sweep
plans against one solve per budget."""

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gsd
from gsd.allocation.solver import MAX_DP, BudgetProblem
from gsd.core.binomial import symmetric_expectation
from gsd.core.update import grpo_term


def _mp_expectation(p, G, ddof, eps):
    """Σ_k C(G,k) a^k (1−a)^(G−k) f(k) at 40 digits over a 40-sd window, f the GRPO term."""
    with mp.workdps(40):
        a = mp.mpf(min(p, 1 - p))
        q = 1 - a
        mu, sd = float(G * a), float(mp.sqrt(G * a * q))
        lo, hi = max(0, int(mu - 40 * sd - 100)), min(G, int(mu + 40 * sd + 100))
        term = mp.binomial(G, lo) * a**lo * q ** (G - lo)
        total = mp.mpf(0)
        for k in range(lo, hi + 1):
            s = mp.sqrt(k * (G - k)) / G
            if s > 0:
                sc = s * mp.sqrt(mp.mpf(G) / (G - ddof)) if ddof else s
                total += term * s * s / (sc + eps)
            term = term * (G - k) / (k + 1) * a / q
        return float(total)


@settings(max_examples=40, deadline=None)
@given(
    st.one_of(st.floats(1e-12, 1 - 1e-12), st.sampled_from([1e-12, 1e-6, 0.5, 1 - 1e-9])),
    st.integers(129, 20_000),
    st.sampled_from([(0, 0.0), (1, 0.0), (1, 1e-4)]),
)
def test_anchored_sums_match_mpmath(p, G, conv):
    """G > 128: the window summed in blocks of 64 terms from a scipy anchor (bound ~3.5e-14 + the
    anchor's few ulp); 1e-12 relative is the tolerance the module states for the exact sums."""
    got = float(symmetric_expectation(np.array([p]), np.array([G]), grpo_term(*conv))[0])
    assert got == pytest.approx(_mp_expectation(p, G, *conv), rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("p, G", [(1e-12, 100_000), (0.5, 100_000), (0.3, 54_321), (1 - 1e-7, 30_000), (2e-5, 4096)])
def test_anchored_sums_at_extremes(p, G):
    got = float(gsd.expected_update(p, G, "grpo"))
    assert got == pytest.approx(_mp_expectation(p, G, 0, 0.0), rel=1e-12)


def _posterior():
    rng = np.random.default_rng(3)
    n = rng.integers(1, 65, 3000)
    return gsd.posterior_from_counts(rng.binomial(n, rng.beta(0.5, 1.0, n.size)), n)


@pytest.mark.parametrize("skip", [True, False])
@pytest.mark.parametrize("source", ["rates", "posterior"])
def test_plan_with_advice_equals_the_two_calls(skip, source):
    src = np.random.default_rng(4).beta(0.5, 1.0, 300) if source == "rates" else _posterior()
    n = 300 if source == "rates" else 3000
    budget, kw = 12 * n, dict(value="update", g_min=2, g_max=64, step=1, ddof=1, eps=1e-4)
    plan, adv = gsd.allocate_with_advice(src, budget, skip=skip, **kw)
    alone = gsd.allocate_group_sizes(src, budget, skip=skip, **kw)
    advice = gsd.uniform_group_size_advice(src, budget, **kw)
    assert np.array_equal(plan.group_size, alone.group_size) and plan.total == alone.total
    assert plan.summary() == alone.summary()
    assert adv.curve.equals(advice.curve) and adv.best_G == advice.best_G and adv.at_budget == advice.at_budget


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 4000), min_size=1, max_size=30), st.sampled_from([1, 3]), st.sampled_from([2, 5]))
def test_one_sweep_totals_equal_one_solve_per_budget(budgets, step, g_min):
    p = np.random.default_rng(5).beta(0.5, 1.0, 100)
    prob = BudgetProblem(p, "update", g_min, g_min + 30 * step, step, True, 0, 0.0)
    # The greedy's total where it is certified; else the exact programme's, as the allocator returns
    # (one programme at the largest budget holds the optimum within every smaller one: the same floats).
    want = [
        prob.solve(b)[1] if prob.solve(b)[4] or prob.dp_size(b) > MAX_DP else prob._dp_best(b)[0][b] for b in budgets
    ]
    assert prob.totals(budgets).tolist() == want
