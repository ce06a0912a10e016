"""The planner's fresh counts (half-life, forecast), Thompson draws, the GRESO-style skip."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats
from scipy.special import expit, logit

import gsd
from gsd.simulator import SimConfig
from gsd.simulator.engine import setup
from gsd.simulator.population import initial_solve_rates
from gsd.simulator.sampling import plan_batch, sample_groups

from .test_simulator_allocation import assert_resume_identical

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _cfg(**kw):
    base = dict(
        n_prompts=300,
        steps=8,
        device="cpu",
        rollouts="counts",
        allocation="update",
        g_max=32,
        closed_form_every=0,
        checkpoint_every=3,
    )
    return SimConfig(**{**base, **kw})


def _steps(cfg, n):
    """Plan, sample and observe n steps by hand; yields (run, step, batch, groups, p_all) between
    sampling and observing (the last step is observed when the loop ends)."""
    run = setup(cfg, initial_solve_rates(cfg), torch.device("cpu"))
    for step in range(n):
        with torch.no_grad():
            p_all = torch.sigmoid(run.policy())
        batch = run.planner.plan(step, plan_batch(p_all, group_size=cfg.group_size, batch_size=0, gen=run.gen))
        groups = sample_groups(batch, draws=1, noise=0.0, rollouts="counts", gen=run.gen)
        yield run, step, batch, groups, p_all
        run.planner.observe(step, batch, groups)


def test_half_life_counts_are_the_discounted_sums():
    cfg = _cfg(logged_half_life=2.5)
    ks, ns = [], []
    for run, step, batch, groups, _ in _steps(cfg, 6):
        ks.append(groups.k.double().numpy())
        ns.append(groups.G.double().numpy())
    w = 2.0 ** (-np.arange(len(ks))[::-1] / 2.5)  # the latest step weighs 1
    np.testing.assert_allclose(run.planner.k_cum.numpy(), w @ np.array(ks), rtol=1e-12)
    np.testing.assert_allclose(run.planner.n_cum.numpy(), w @ np.array(ns), rtol=1e-12)


def test_half_life_plan_uses_fractional_counts():
    cfg = _cfg(logged_half_life=3.0, budget=300 * 6)
    for run, step, batch, groups, _ in _steps(cfg, 4):
        if step == 3:
            k, n = run.planner.k_cum.numpy(), run.planner.n_cum.numpy()
            assert (np.abs(n - np.rint(n)) > 1e-6).any()  # discounted: not whole numbers
            a0, b0 = gsd.fit_beta_prior(np.rint(k).astype(int), np.rint(n).astype(int))
            post = gsd.BetaPosterior(a0 + k, b0 + n - k, (a0, b0))
            want = gsd.allocate_group_sizes(post, cfg.budget, value="update", g_max=32).group_size
            plan = run.planner
            plan._replan(step, batch)
            np.testing.assert_array_equal(plan.G.numpy(), want)


def test_thompson_plans_on_draws_from_each_posterior():
    """The plan is the allocator's on one draw per prompt, and the draws follow the posterior:
    prompts with identical counts give a sample of Beta(a, b) (Kolmogorov–Smirnov)."""
    cfg = _cfg(allocation="gain", allocation_explore="thompson", budget=2000 * 8, n_prompts=2000)
    captured = {}
    import gsd.allocation as A

    real = A.allocate_group_sizes

    def spy(src, budget, **kw):
        captured["src"] = np.asarray(src)
        return real(src, budget, **kw)

    A.allocate_group_sizes = spy
    try:
        for run, step, batch, groups, _ in _steps(cfg, 2):
            if step == 1:
                draw = captured["src"]
                k, n = run.planner.k_cum.numpy().astype(int), run.planner.n_cum.numpy().astype(int)
                post = gsd.posterior_from_counts(k, n)
                np.testing.assert_array_equal(
                    batch.G.numpy(), real(draw, cfg.budget, value="gain", g_max=32).group_size
                )
                same = (k == 0) & (n == 8)
                assert same.sum() > 100
                a, b = post.a[same][0], post.b[same][0]
                assert stats.kstest(draw[same], stats.beta(a, b).cdf).pvalue > 1e-3
    finally:
        A.allocate_group_sizes = real


def test_forecast_moves_the_oracle_along_the_expected_update():
    """Oracle p, replan every 3 steps: the plan serves steps t, t+1, t+2, so p is moved by one
    step's expected update of the previous plan's G (lr·m(p, G))."""
    cfg = _cfg(allocation_source="oracle", allocation_forecast=True, replan_every=3, budget=300 * 6, lr=0.5)
    for run, step, batch, groups, p_all in _steps(cfg, 4):
        if step == 2:
            G_prev = batch.G.numpy()
        if step == 3:
            p = p_all.numpy()
            m = gsd.allocation_value(p, G_prev, "update")
            pf = expit(logit(p) + 0.5 * m)
            want = gsd.allocate_group_sizes(pf, cfg.budget, value="update", g_max=32).group_size
            np.testing.assert_array_equal(batch.G.numpy(), want)


def test_greso_skips_prompts_silent_in_their_last_visits():
    cfg = _cfg(allocation="greso", greso_visits=2, greso_explore=0.3, replan_every=1, steps=10)
    streak = np.zeros(300, dtype=int)
    skipped_quiet = explored = 0
    for run, step, batch, groups, _ in _steps(cfg, 10):
        np.testing.assert_array_equal(run.planner.streak.numpy(), streak)  # the previous steps' silences
        G = batch.G.numpy()
        quiet = streak >= 2
        assert (G[~quiet] == cfg.group_size).all()  # a prompt not silent lately is always drawn
        assert set(np.unique(G[quiet])) <= {0, cfg.group_size}
        skipped_quiet += int((G[quiet] == 0).sum())
        explored += int((G[quiet] > 0).sum())
        silent = groups.silent_first.numpy()
        visited = G > 0
        streak = np.where(visited, np.where(silent, streak + 1, 0), streak)
    # Quiet prompts are explored at the configured rate (binomial, 4 sd).
    total = skipped_quiet + explored
    assert total > 200 and abs(explored / total - 0.3) < 4 * np.sqrt(0.3 * 0.7 / total)


@pytest.mark.parametrize(
    "kw",
    [
        dict(allocation="greso", replan_every=1),
        dict(allocation="horizon", allocation_explore="thompson", logged_half_life=2.0),
        dict(allocation="gain", allocation_forecast=True, replan_every=2),
    ],
)
def test_resume_is_identical(tmp_path, kw):
    assert_resume_identical(_cfg(steps=7, **kw), tmp_path)


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(allocation_explore="ucb"), "allocation_explore"),
        (dict(allocation_explore="thompson", allocation_source="oracle"), "allocation_explore"),
        (dict(logged_half_life=-1.0), "logged_half_life"),
        (dict(logged_half_life=float("inf")), "logged_half_life"),
        (dict(logged_half_life=2.0, logged_window=3), "logged_half_life"),
        (dict(allocation_forecast=True, method="rloo"), "allocation_forecast"),
        (dict(horizon=-1), "horizon"),
        (dict(allocation_lr=float("nan")), "allocation_lr"),
        (dict(greso_visits=0), "greso_visits"),
        (dict(greso_explore=1.5), "greso_explore"),
    ],
)
def test_new_config_keys_are_checked(kw, match):
    with pytest.raises(ValueError, match=match):
        _cfg(**kw)
