"""Theory checks: the identity on random groups, the objective Monte Carlo, curve tables."""

import numpy as np
import pytest

import gsd
from gsd.reproduce import theory


def test_identity_monte_carlo_matches_sigma_for_every_baseline():
    mc = theory.identity_monte_carlo(G=8, baselines=(0.0, 1.0, 5.0), n_draws=200, seed=3)
    assert len(mc) == 3 * 9
    assert mc.max_dev_grpo.max() < 1e-12 and mc.max_dev_dr_grpo.max() < 1e-12
    live = mc[(mc.k > 0) & (mc.k < 8)]
    assert np.allclose(live.coef_grpo, live.sigma, atol=1e-12)
    assert np.allclose(live.coef_dr_grpo, live.sigma**2, atol=1e-12)
    # the offset b moves the scores but not the update: same numbers per k for every b
    by_b = live.pivot(index="k", columns="baseline", values="coef_grpo")
    assert np.allclose(by_b.to_numpy(), by_b.to_numpy()[:, :1])
    silent = mc[mc.k.isin([0, 8])]
    assert (silent.mean_norm_g == 0).all()


def test_objective_monte_carlo_agrees_with_the_exact_expectation():
    om = theory.objective_monte_carlo(G=64, n_groups=500, seed=5)
    # 17 points × 2 methods: |z| > 4.5 would be a ~1e-4 event
    assert np.abs(om.z_grpo).max() < 4.5 and np.abs(om.z_dr_grpo).max() < 4.5
    assert np.allclose(om.exact_dr_grpo, om.p * (1 - om.p) * (1 - 1 / 64))
    # finite G sits just below the large-G limit
    assert (om.exact_grpo <= om.large_G_grpo).all()


def test_curve_tables():
    f = theory.fidelity_curves((0.5, 0.2), max_G=64)
    assert set(f.p) == {0.5, 0.2} and f.G.max() == 64
    assert (f.exact <= 1).all() and (np.diff(f[f.p == 0.5].exact) >= -1e-15).all()
    s = theory.silent_rate_curves((4, 8))
    assert s["G=8"].iloc[0] == 1.0 and s["G=8"].iloc[-1] == 1.0
    o = theory.objective_curves()
    assert o.objective_grpo.iloc[-1] == pytest.approx(1.0)
    mid = o.p == 0.5
    assert o.weight[mid].item() == pytest.approx(2.0)


def test_silent_cost_table():
    t = theory.silent_cost_table(probabilities=(0.5, 0.05), group_sizes=(8,))
    assert t.silent.iloc[0] == pytest.approx(2 * 0.5**8)
    assert t.dapo_groups.iloc[1] == pytest.approx(1 / (1 - 0.05**8 - 0.95**8))
    assert (t.dapo_groups_capped <= 4).all()
    assert t.G_for_delta.iloc[1] == int(gsd.group_size_for_silent_rate(0.05, 0.05))
