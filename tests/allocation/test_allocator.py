"""The allocator against a brute-force dynamic programme, its constraints, concavity, errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit

import gsd

# The one-step values; the horizon values (they need lr and a horizon) have tests/allocation/test_lookahead.py.
VALUES = tuple(v for v in gsd.ALLOCATION_VALUES if v not in gsd.HORIZON_VALUES)


def _dp_optimum(values, choices, budget):
    """max Σ_i values[i][c_i] s.t. Σ_i choices[c_i] ≤ budget, by DP over prompts × budget."""
    best = np.zeros(budget + 1)  # best[b]: optimum of the prompts so far with exactly ≤ b rollouts
    for row in values:
        new = np.full(budget + 1, -np.inf)
        for g, v in zip(choices, row):
            if g <= budget:
                cand = np.full(budget + 1, -np.inf)
                cand[g:] = best[: budget + 1 - g] + v
                new = np.maximum(new, cand)
        best = new
    return float(best.max())


def _table(src, choices, value, **conv):
    """Value of every prompt at every choice (prompts × choices), pairwise."""
    G = np.array(choices)[None, :]
    if isinstance(src, gsd.BetaPosterior):
        return gsd.allocation_value(gsd.BetaPosterior(src.a[:, None], src.b[:, None], src.prior), G, value, **conv)
    return gsd.allocation_value(np.asarray(src)[:, None], G, value, **conv)


def _instance(draw_seed, n, value, posterior):
    rng = np.random.default_rng(draw_seed)
    if posterior:
        src = gsd.posterior_from_counts(rng.integers(0, 9, n), 8, prior=(rng.uniform(0.3, 2), rng.uniform(0.3, 2)))
    else:
        src = rng.choice([0.0, 1.0, 0.5, 1e-3, 0.999], size=n) if rng.uniform() < 0.2 else rng.uniform(size=n)
        src = np.where(rng.uniform(size=n) < 0.3, np.round(src, 1), src)  # repeated rates: prompts of one type
    return src


@settings(max_examples=120, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 5),
    value=st.sampled_from(VALUES),
    posterior=st.booleans(),
    g_min=st.integers(1, 4),
    step=st.integers(1, 3),
    m=st.integers(0, 5),
    skip=st.booleans(),
    frac=st.floats(0, 1),
    conv=st.sampled_from([(0, 0.0), (1, 0.0), (1, 1e-4)]),
)
def test_allocator_matches_brute_force_dp(seed, n, value, posterior, g_min, step, m, skip, frac, conv):
    g_max = g_min + m * step
    src = _instance(seed, n, value, posterior)
    lo = g_min if skip else n * g_min
    budget = int(lo + frac * (n * g_max + 3 - lo))
    conv = {"ddof": conv[0], "eps": conv[1]}
    plan = gsd.allocate_group_sizes(src, budget, value=value, g_min=g_min, g_max=g_max, step=step, skip=skip, **conv)
    G = plan.group_size
    # Constraints: budget, grid, skip.
    assert G.sum() <= budget and plan.spent == G.sum()
    on = G > 0
    assert np.all((G[on] >= g_min) & (G[on] <= g_max) & ((G[on] - g_min) % step == 0))
    if not skip:
        assert on.all()
    np.testing.assert_allclose(plan.value, gsd.allocation_value(src, G, value, **conv), rtol=1e-11, atol=1e-300)
    # Optimality against the oracle.
    choices = ([0] if skip else []) + list(range(g_min, g_max + 1, step))
    table = _table(src, choices, value, **conv)
    best = _dp_optimum(table, choices, budget)
    tol = 1e-9 * max(abs(best), 1e-300)
    assert plan.total <= best + tol
    assert plan.exact  # tiny instances: certified by the greedy or solved by the exact DP
    if plan.exact:
        assert plan.total == pytest.approx(best, rel=1e-9, abs=1e-300)
    else:
        assert best <= plan.total + plan.gap_bound + tol
    divides_by_std = value in ("update", "progress", "gain")
    if (g_min >= 2 or not skip) and not (conv["ddof"] == 1 and divides_by_std and skip and g_min == 2):
        assert not plan.envelope  # every value is concave on these grids


@pytest.mark.parametrize("value", ["update", "progress", "gain"])
def test_sample_std_puts_a_pair_below_the_envelope(value):
    """ddof 1: a group of 2 is worth sqrt(1/2) of the paper's, below the chord from 0 to 3 for
    every p, so with skipping the plan never serves 2; from 2 on the rows are concave."""
    p = np.concatenate([np.logspace(-12, -1, 12), np.linspace(0.1, 0.9, 17), 1 - np.logspace(-12, -1, 12)])
    v0, v2, v3 = (gsd.allocation_value(p, g, value, ddof=1) for g in (0, 2, 3))
    assert (v2 / 2 < (v3 - v0) / 3).all()  # below the chord, by the values themselves
    bad = gsd.concavity_violations(p, value=value, g_max=128, ddof=1)
    assert set(bad.G) == {2} and len(bad) == np.unique(p).size  # one row per distinct prompt
    assert len(gsd.concavity_violations(p, value=value, g_max=128, ddof=1, skip=False)) == 0
    plan = gsd.allocate_group_sizes(np.linspace(0.05, 0.95, 19), 19 * 8, value=value, g_max=64, ddof=1)
    assert plan.envelope and plan.envelope_sizes.tolist() == [2] and not (plan.group_size == 2).any()
    assert plan.summary()["ddof"] == 1


@pytest.mark.parametrize("value", VALUES)
def test_equal_cost_grids_are_always_exact(value):
    """g_min = step (batches) or skip=False: equal-cost concave increments, greedy optimal."""
    rng = np.random.default_rng(3)
    for trial in range(30):
        n = rng.integers(1, 6)
        p = rng.uniform(size=n)
        step = int(rng.integers(1, 4))
        m = int(rng.integers(0, 5))
        cases = [(int(rng.integers(2, 5)), False)] + ([(step, True)] if step >= 2 else [])
        for g_min, skip in cases:
            g_max = g_min + m * step
            budget = int(rng.integers(g_min if skip else n * g_min, n * g_max + 4))
            plan = gsd.allocate_group_sizes(p, budget, value=value, g_min=g_min, g_max=g_max, step=step, skip=skip)
            assert plan.exact and plan.gap_bound == 0.0
            choices = ([0] if skip else []) + list(range(g_min, g_max + 1, step))
            table = gsd.allocation_value(p[:, None], np.array(choices)[None, :], value)
            assert plan.total == pytest.approx(_dp_optimum(table, choices, budget), rel=1e-9, abs=1e-300)


# ---------------------------------------------------------------------------- concavity
@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("g_min,step,skip", [(2, 1, True), (2, 1, False), (8, 8, True), (3, 2, True), (4, 4, False)])
def test_values_are_concave_on_the_grid(value, g_min, step, skip):
    """Checked numerically over p from 1e-12 to 1 − 1e-12 (logit grid) and G up to ~512."""
    p = expit(np.linspace(-27.6, 27.6, 241))
    g_max = g_min + step * ((512 - g_min) // step)
    assert len(gsd.concavity_violations(p, value=value, g_min=g_min, g_max=g_max, step=step, skip=skip)) == 0
    post = gsd.posterior_from_counts(np.arange(0, 17), 16, prior="jeffreys")
    assert len(gsd.concavity_violations(post, value=value, g_min=g_min, g_max=g_max, step=step, skip=skip)) == 0


def test_dr_grpo_entry_step_is_concave_by_hand():
    """V = c(1 − 1/G): V(g)/g ≥ (V(g+s) − V(g))/s ⇔ (g − 1)(g + s) ≥ g, true for g ≥ 2."""
    for g in range(2, 40):
        for s in range(1, 9):
            assert (1 - 1 / g) / g >= ((1 - 1 / (g + s)) - (1 - 1 / g)) / s


@pytest.mark.parametrize("value", VALUES)
def test_group_of_one_needs_the_envelope(value):
    """V(1) = 0: with g_min = 1 and skipping, G = 1 lies below the envelope and is never chosen."""
    p = np.array([0.1, 0.5, 0.7])
    viol = gsd.concavity_violations(p, value=value, g_min=1, g_max=8)
    assert viol.G.unique().tolist() == [1]
    plan = gsd.allocate_group_sizes(p, 5, value=value, g_min=1, g_max=8)
    assert plan.envelope and plan.envelope_sizes.tolist() == [1]
    assert not (plan.group_size == 1).any()


# ---------------------------------------------------------------------------- behaviour
def test_skipped_prompts_are_the_silent_ones():
    p = np.array([0.0, 1.0, 0.5, 0.3])
    plan = gsd.allocate_group_sizes(p, 20, value="update", g_max=10)
    assert plan.group_size[:2].tolist() == [0, 0] and plan.group_size[2:].sum() == 20


def test_large_instance_by_types_matches_scattered_input():
    """Prompts of one type are interchangeable: shuffling the input permutes the plan's multiset."""
    rng = np.random.default_rng(5)
    p = rng.choice(np.linspace(0.01, 0.99, 30), size=5000)
    plan = gsd.allocate_group_sizes(p, 40_000, value="progress", g_max=64)
    perm = rng.permutation(p.size)
    plan2 = gsd.allocate_group_sizes(p[perm], 40_000, value="progress", g_max=64)
    assert plan.total == pytest.approx(plan2.total, rel=1e-12)
    assert plan.spent == plan2.spent <= 40_000
    assert plan.exact
    # Within a rate, G differs by at most one envelope step.
    for v in np.unique(p):
        g = plan.group_size[p == v]
        assert g.max() - g.min() <= 1


def test_uniform_advice_never_beats_the_allocator():
    rng = np.random.default_rng(6)
    post = gsd.posterior_from_counts(rng.binomial(8, rng.beta(0.5, 1.0, 400)), 8)
    adv = gsd.uniform_group_size_advice(post, 400 * 16, value="update", g_max=64)
    c = adv.curve
    assert (c.gain >= 1 - 1e-12).all()
    assert adv.best_G == int(c.G[c.value_per_rollout.idxmax()])
    assert adv.at_budget["uniform_G"] == 16 and adv.at_budget["gain"] >= 1
    ok = c.compute_ratio.notna()
    assert (c.compute_ratio[ok] >= 1).all()


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(budget=1), "budget must be >= g_min"),
        (dict(budget=5, skip=False), "budget must be >= n_prompts"),
        (dict(budget=100, g_min=9, g_max=8), "g_min must be <= g_max"),
        (dict(budget=100, g_min=2, g_max=9, step=2), "step must divide"),
        (dict(budget=0), "budget must be an integer >= 1"),
        (dict(budget=float("nan")), "budget must be an integer"),
        (dict(budget=100, value="dapo"), "value must be one of"),
        (dict(budget=100, g_min=0), "g_min must be an integer >= 1"),
        (dict(budget=100, skip="yes"), "skip must be True or False"),
    ],
)
def test_allocator_errors_name_the_argument(kwargs, match):
    budget = kwargs.pop("budget")
    with pytest.raises(ValueError, match=match):
        gsd.allocate_group_sizes([0.2, 0.5, 0.7], budget, **kwargs)


def test_bad_rates_and_counts_are_refused():
    with pytest.raises(ValueError, match="p must lie in"):
        gsd.allocate_group_sizes([0.2, np.nan], 10)
    with pytest.raises(ValueError, match="k must be an integer >= 0"):
        gsd.posterior_from_counts([-1, 2], 8)
    with pytest.raises(ValueError, match="k must be <= n"):
        gsd.posterior_from_counts([9, 2], 8)


def test_too_many_distinct_prompts_for_the_grid_is_an_input_error():
    """10^5 distinct rates × 511 grid points: refused before any work, naming g_max."""
    p = np.linspace(0.001, 0.999, 100_000)
    with pytest.raises(gsd.InputError, match="g_max: 100000 distinct prompts × 511 grid points"):
        gsd.allocate_group_sizes(p, 800_000)
    assert gsd.allocate_group_sizes(np.round(p, 3), 800_000, g_max=64).spent == 800_000  # 999 distinct: fine


def test_uncertified_large_plans_report_a_small_gap():
    """Beyond the exact DP's size, an uncertified plan says how far it can be from the optimum."""
    rng = np.random.default_rng(12)
    found = 0
    for trial in range(80):
        n = int(rng.integers(300, 1000))
        p = rng.beta(0.5, 1.0, n)
        budget = int(rng.integers(2 * n, 10 * n))
        plan = gsd.allocate_group_sizes(p, budget, value=VALUES[trial % 5], g_max=64)
        assert plan.spent <= budget
        if not plan.exact:
            found += 1
            assert 0 < plan.gap_bound <= 1e-5 * plan.total
    assert found >= 1  # (trials 38, 45, 47, 63, 69 of this stream are such plans)
