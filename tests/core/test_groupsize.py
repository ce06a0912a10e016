"""Group-size planning against brute force (docs/theory.md, section The group-size law)."""

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gsd


@functools.lru_cache(maxsize=None)
def _brute_force_smallest(p, eps, g_max=4000):
    """The smallest G in [2, g_max] with fidelity(p, G) >= 1 - eps, every G checked in increasing order.
    The scan runs in chunks (2-64, 65-192, 193-448, ... doubling) and stops at the first chunk with a hit:
    the same G, at the cost of the G up to the answer rather than up to g_max; cached, as the property
    tests draw the same (p, eps, cap) again."""
    lo = 2
    while lo <= g_max:
        G = np.arange(lo, min(g_max, 2 * lo + 60) + 1)
        hit = np.nonzero(gsd.fidelity(p, G) >= 1 - eps)[0]
        if hit.size:
            return int(G[hit[0]])
        lo = int(G[-1]) + 1
    return None


def test_fidelity_is_nondecreasing_in_G_on_a_grid():
    # The bisection relies on it (Jensen argument in gsd.core.update.fidelity); check by scanning.
    p = np.concatenate([np.linspace(0.001, 0.999, 41), [1e-6, 1e-3, 0.5]])[:, None]
    G = np.arange(1, 1201)
    phi = gsd.fidelity(p, G)
    assert np.all(np.diff(phi, axis=1) >= -1e-15)
    assert np.all(phi < 1)


@pytest.mark.parametrize("eps", [0.1, 0.05, 0.01])
def test_table_values_match_brute_force(eps):
    p = np.array([0.5, 0.3, 0.1, 0.05, 0.7, 0.9, 0.95])
    got = gsd.required_group_size(p, eps)
    want = [_brute_force_smallest(float(pi), eps) for pi in p]
    assert got.tolist() == want
    # Symmetry p ↔ 1 − p.
    assert got[1] == got[4] and got[2] == got[5] and got[3] == got[6]


@settings(max_examples=40, deadline=None)
@given(st.floats(0.01, 0.99), st.sampled_from([0.2, 0.1, 0.05, 0.02]))
def test_exact_rule_is_smallest_by_brute_force(p, eps):
    want = _brute_force_smallest(p, eps)
    got = int(gsd.required_group_size(p, eps))
    assert got == want
    assert gsd.fidelity(p, got) >= 1 - eps
    if got > 2:
        assert gsd.fidelity(p, got - 1) < 1 - eps


def test_law_rule_and_values():
    # round(1/(8εp(1−p))) at p = 0.5, ε = 0.05 is 10; the rule returns its ceiling, at least 2.
    assert gsd.group_size_law(0.5, 0.05) == pytest.approx(10.0)
    assert gsd.required_group_size(0.5, 0.05, rule="law") == 10
    assert gsd.required_group_size(0.1, 0.05, rule="law") == int(np.ceil(1 / (8 * 0.05 * 0.09)))
    assert gsd.required_group_size(0.5, 0.9, rule="law") == 2


def test_sentinels_for_unreachable_and_capped():
    g = gsd.required_group_size([0.0, 1.0, 1e-7, 0.5], 0.05, max_group_size=10_000)
    assert g.tolist() == [gsd.UNREACHABLE, gsd.UNREACHABLE, gsd.EXCEEDS_MAX, 11]
    plan = gsd.plan_group_sizes([0.0, 0.5, 1e-7], epsilon=0.05, max_group_size=10_000)
    assert plan.status.tolist() == ["unreachable", "ok", "exceeds_max"]
    assert np.isnan(plan.fidelity[0]) and plan.fidelity[1] >= 0.95


def test_large_group_sizes_for_rare_successes():
    # p = 1e-4, ε = 0.05: the law says ~2,500; the exact answer must still satisfy the target.
    g = int(gsd.required_group_size(1e-4, 0.05))
    assert gsd.fidelity(1e-4, g) >= 0.95 > gsd.fidelity(1e-4, g - 1)


@settings(max_examples=60, deadline=None)
@given(st.floats(1e-4, 1 - 1e-4), st.floats(1e-6, 0.9))
def test_silent_rate_group_size_is_smallest(p, delta):
    g = int(gsd.group_size_for_silent_rate(p, delta))
    assert g >= 2
    assert p**g + (1 - p) ** g <= delta * (1 + 1e-12)
    if g > 2:
        assert p ** (g - 1) + (1 - p) ** (g - 1) > delta * (1 - 1e-12)


def test_silent_rate_group_size_examples():
    # p = 0.5: 2·2^−G ≤ 0.01 ⇔ G ≥ 7.64 → 8.
    assert gsd.group_size_for_silent_rate(0.5, 0.01) == 8
    assert gsd.group_size_for_silent_rate(0.0, 0.01) == gsd.UNREACHABLE
    plan = gsd.plan_group_sizes([0.05, 1.0], delta=0.05)
    assert plan.group_size[0] == int(np.ceil(np.log(0.05) / np.log(0.95)))
    assert plan.status[1] == "unreachable"


def test_silent_rate_group_size_at_a_tight_bracket():
    """p = 1/2, δ = 2^−5: the bracket's end G = 6 has P_silent = δ exactly in real numbers and one
    ulp above δ in floating point.  The answer is the smallest G whose computed silent rate is
    ≤ δ — found by hypothesis returning EXCEEDS_MAX (0) before the bracket had slack."""
    g = int(gsd.group_size_for_silent_rate(0.5, 2.0**-5))
    assert g >= 2
    assert gsd.silent_rate(0.5, g) <= 2.0**-5 < gsd.silent_rate(0.5, g - 1)
    many = gsd.group_size_for_silent_rate(0.5, 2.0 ** -np.arange(1, 40, dtype=float))
    assert (many >= 2).all()
    assert (gsd.silent_rate(0.5, many) <= 2.0 ** -np.arange(1, 40)).all()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, 1.0, 1e-4, 0.5])), min_size=1, max_size=30),
    st.sampled_from([0.2, 0.1, 0.05]),
    st.sampled_from([50, 400, 4000]),
)
def test_median_group_size_is_the_lower_median_by_brute_force(p, eps, cap):
    """The lower median of the brute-force smallest G over the prompts with 0 < p < 1, a prompt
    no G ≤ cap serves counting above every G; NaN when there is none or the median is above cap."""
    p = np.array(p)
    need = sorted(g if (g := _brute_force_smallest(float(x), eps, cap)) is not None else np.inf for x in p if 0 < x < 1)
    want = need[(len(need) + 1) // 2 - 1] if need else np.nan
    got = gsd.median_group_size(p, eps, max_group_size=cap)
    assert (np.isnan(got) and not np.isfinite(want)) or got == want


def test_median_group_size_bad_input():
    with pytest.raises(gsd.InputError, match="epsilon"):
        gsd.median_group_size([0.5], [0.1, 0.2])
    with pytest.raises(gsd.InputError, match="p"):
        gsd.median_group_size([0.5, 1.5], 0.1)
