"""The simulator with a budget plan: the plan is the allocator's, the budget holds, counts add up."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

import gsd
from gsd.simulator import SimConfig, read_ledger, run_simulation
from gsd.simulator.engine import setup
from gsd.simulator.ledger import WALL_COLUMNS, generations_to_target
from gsd.simulator.population import initial_solve_rates
from gsd.simulator.sampling import plan_batch, sample_groups

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


@pytest.mark.parametrize("source", ["oracle", "logged"])
def test_the_plan_is_the_allocators(source):
    cfg = _cfg(allocation_source=source, allocation="knapsack", budget=300 * 6, logged_window=2)
    p0 = initial_solve_rates(cfg)
    run = setup(cfg, p0, torch.device("cpu"))
    planner = run.planner
    for step in range(4):
        with torch.no_grad():
            p_all = torch.sigmoid(run.policy())
        batch = planner.plan(step, plan_batch(p_all, group_size=cfg.group_size, batch_size=0, gen=run.gen))
        if source == "oracle":
            want = gsd.allocate_group_sizes(p_all.numpy(), cfg.budget, value="knapsack", g_max=32).group_size
        elif step == 0:
            want = np.full(300, 6)  # nothing logged yet: the uniform plan the budget affords
        else:
            k, n = planner.k_cum.numpy().astype(int), planner.n_cum.numpy().astype(int)
            want = gsd.allocate_group_sizes(
                gsd.posterior_from_counts(k, n), cfg.budget, value="knapsack", g_max=32
            ).group_size
        np.testing.assert_array_equal(batch.G.numpy(), want)
        assert batch.G.sum() <= cfg.budget
        before = planner.n_cum.clone(), planner.k_cum.clone()
        groups = sample_groups(batch, draws=1, noise=0.0, rollouts="counts", gen=run.gen)
        planner.observe(step, batch, groups)
        # Counts of the last logged_window = 2 steps only.
        if step == 0:
            first = groups.k.double(), groups.G.double()
        if step == 2:
            np.testing.assert_allclose(planner.n_cum - before[0], groups.G.double() - first[1])


def test_the_plan_uses_the_runs_std_convention():
    """A run with ddof 1 and eps plans with them, and grad_planned is its own GRPO update
    E[σ̂²/(σ̂_c + eps)], the quantity grad_mass measures for that run."""
    cfg = _cfg(allocation_source="oracle", budget=300 * 6, ddof=1, eps=1e-4)
    run = setup(cfg, initial_solve_rates(cfg), torch.device("cpu"))
    with torch.no_grad():
        p_all = torch.sigmoid(run.policy())
    batch = run.planner.plan(0, plan_batch(p_all, group_size=cfg.group_size, batch_size=0, gen=run.gen))
    p = p_all.numpy()
    want = gsd.allocate_group_sizes(p, cfg.budget, value="update", g_max=32, ddof=1, eps=1e-4).group_size
    np.testing.assert_array_equal(batch.G.numpy(), want)
    assert (want != gsd.allocate_group_sizes(p, cfg.budget, value="update", g_max=32).group_size).any()
    grpo = gsd.expected_update(p[want > 0], want[want > 0], "grpo", ddof=1, eps=1e-4).sum()
    assert run.planner.grad_planned == pytest.approx(grpo, rel=1e-12)


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_run_respects_the_budget_and_logs_the_plan(tmp_path, engine):
    cfg = _cfg(budget=300 * 5, g_step=3, g_min=2, g_max=32, allocation_source="oracle", replan_every=2, engine=engine)
    summary = run_simulation(cfg, tmp_path / "run", progress=False)
    led = read_ledger(tmp_path / "run")
    assert (led.generations <= cfg.budget).all()
    assert led.value_planned.notna().all() and led.grad_planned.notna().all()
    # A plan is kept between replans: its planned value repeats on the odd steps.
    np.testing.assert_array_equal(led.value_planned[1::2].to_numpy(), led.value_planned[0::2].to_numpy())
    np.testing.assert_allclose(led.effective_ratio, 1 - led.silent_frac, rtol=1e-12)
    assert summary["effective_ratio"] == pytest.approx(
        (led.n_batch * (1 - led.zero_update_frac)).sum() / led.groups.sum(), rel=1e-12
    )
    assert 0.5 < summary["grad_mass_over_planned"] < 1.5


def test_fixed_allocation_has_no_plan_columns(tmp_path):
    led = read_ledger_of(tmp_path, _cfg(allocation="fixed"))
    assert led.value_planned.isna().all() and led.grad_planned.isna().all()


def read_ledger_of(tmp_path, cfg):
    run_simulation(cfg, tmp_path / "r", progress=False)
    return read_ledger(tmp_path / "r")


@pytest.mark.parametrize("engine", ["torch", "numpy"])
def test_resume_of_an_allocated_run_is_identical(tmp_path, engine):
    assert_resume_identical(_cfg(allocation_source="logged", logged_window=3, steps=7, engine=engine), tmp_path)


def assert_resume_identical(cfg, tmp_path, stop_at=4):
    """A run stopped after step ``stop_at`` and resumed writes the uninterrupted run's ledger."""
    whole = read_ledger_of(tmp_path / "a", cfg)

    class Stop(Exception):
        pass

    def die(step):
        if step == stop_at:
            raise Stop

    with pytest.raises(Stop):
        run_simulation(cfg, tmp_path / "b", progress=False, on_step=die)
    run_simulation(cfg, tmp_path / "b", progress=False, resume=True)
    again = read_ledger(tmp_path / "b")
    cols = [c for c in whole.columns if c not in WALL_COLUMNS]
    pd.testing.assert_frame_equal(whole[cols], again[cols])


def test_generations_to_target_by_direct_scan():
    led = pd.DataFrame({"mean_p": [0.5, 0.7, 0.89, 0.91, 0.95], "generations_cum": [10, 20, 30, 40, 50]})
    assert generations_to_target(led, "mean_p", 0.9, 0.97) == 30  # reached before step 3: steps 0-2 spent
    assert generations_to_target(led, "mean_p", 0.96, 0.97) == 50  # reached only after the last step
    assert math.isnan(generations_to_target(led, "mean_p", 0.99, 0.97))
    assert generations_to_target(led, "mean_p", 0.4, 0.97) == 0


@pytest.mark.parametrize(
    "kw,match",
    [
        (dict(allocation="best"), "allocation"),
        (dict(allocation_source="peek"), "allocation_source"),
        (dict(g_min=4, g_max=3), "g_max"),
        (dict(g_min=2, g_max=9, g_step=2), "g_step"),
        (dict(budget=-1), "budget"),
        (dict(method="dapo"), "DAPO"),
        (dict(replan_every=2, batch_size=100), "replan_every"),
        (dict(logged_window=-1), "logged_window"),
    ],
)
def test_config_errors_name_the_key(kw, match):
    with pytest.raises(ValueError, match=match):
        _cfg(**kw)
