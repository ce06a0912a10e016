"""Budget plans on the numpy engine: the torch planner's plans from the same counts, bit for bit,
and the same arm on both engines statistically alike; a program of runs is each run alone."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from gsd.simulator import SimConfig, read_ledger, run_simulation
from gsd.simulator.config import numpy_blockers, resolve_engine
from gsd.simulator.engine import setup
from gsd.simulator.ledger import WALL_COLUMNS
from gsd.simulator.planning import CountPlanner
from gsd.simulator.population import initial_solve_rates
from gsd.simulator.sampling import plan_batch, sample_groups
from gsd.simulator.tabular import run_programs

pytestmark = pytest.mark.usefixtures("one_torch_thread")

BASE = dict(
    n_prompts=200,
    steps=12,
    device="cpu",
    rollouts="counts",
    allocation="update",
    g_min=2,
    g_max=32,
    closed_form_every=0,
    checkpoint_every=5,
    replan_every=2,
    logged_window=3,
    lr=0.5,
)

ARMS = {
    "update": {},
    "gain": dict(allocation="gain"),
    "knapsack": dict(allocation="knapsack"),
    "horizon_thompson": dict(allocation="horizon", horizon=0, allocation_explore="thompson"),
    "update_halflife": dict(logged_window=0, logged_half_life=2.0),
    "update_forecast": dict(allocation_forecast=True),
    "oracle_gain": dict(allocation="gain", allocation_source="oracle"),
    "greso": dict(allocation="greso", replan_every=1, greso_visits=2, greso_explore=0.25),
    "batch_subset": dict(batch_size=120, replan_every=1),
}


@pytest.mark.parametrize("arm", list(ARMS))
def test_numpy_planner_plans_as_the_torch_planner(arm):
    """Fed the same groups, step after step, the numpy engine's CountPlanner keeps the torch
    BudgetPlanner's counts and makes its plans: G, value_planned and grad_planned identical."""
    cfg = SimConfig(**{**BASE, **ARMS[arm]})
    run = setup(cfg, initial_solve_rates(cfg), torch.device("cpu"))
    ours = CountPlanner(cfg, cfg.n_prompts)
    for step in range(8):
        with torch.no_grad():
            p_all = torch.sigmoid(run.policy())
        batch = run.planner.plan(
            step, plan_batch(p_all, group_size=cfg.group_size, batch_size=cfg.batch_size, gen=run.gen)
        )
        idx = None if batch.idx is None else batch.idx.numpy()
        G = ours.plan(step, idx, batch.p.to(torch.float64).numpy())
        np.testing.assert_array_equal(G, batch.G.numpy())
        assert (ours.value_planned, ours.grad_planned) == pytest.approx(
            (run.planner.value_planned, run.planner.grad_planned), rel=0, abs=0, nan_ok=True
        )
        groups = sample_groups(batch, draws=1, noise=0.0, rollouts="counts", gen=run.gen)
        run.planner.observe(step, batch, groups)
        ours.observe(step, idx, groups.k.numpy(), groups.G.numpy(), groups.silent_first.numpy())
        np.testing.assert_array_equal(ours.k_cum, run.planner.k_cum.numpy())
        np.testing.assert_array_equal(ours.n_cum, run.planner.n_cum.numpy())
        np.testing.assert_array_equal(ours.streak, run.planner.streak.numpy())
        # a tabular SGD step on the kept groups moves the policy (so later plans differ from the first)
        with torch.no_grad():
            run.policy.z += 0.05 * torch.randn(
                cfg.n_prompts, generator=torch.Generator().manual_seed(step), dtype=torch.float64
            )


def test_engine_choice_for_a_budget_plan():
    cfg = SimConfig(**BASE)
    assert numpy_blockers(cfg) == [] and resolve_engine(cfg) == "numpy"
    answers = SimConfig(**{**BASE, "rollouts": "answers"})
    assert resolve_engine(answers) == "torch"
    assert numpy_blockers(answers) == ["allocation = 'update' with rollouts = 'answers'"]


SEEDS = range(6)


@pytest.fixture(scope="module")
def both_engines(tmp_path_factory):
    """The update arm (logged counts, window 3, replanned every 2 steps) on both engines, 6 seeds each."""
    root = tmp_path_factory.mktemp("engines")
    out = {}
    for engine in ("numpy", "torch"):
        cfgs = [SimConfig(**{**BASE, "steps": 30, "n_prompts": 400, "seed": s, "engine": engine}) for s in SEEDS]
        if engine == "numpy":
            sums = run_programs([(c, root / f"{engine}{c.seed}") for c in cfgs], progress=False)
        else:
            sums = [run_simulation(c, root / f"{engine}{c.seed}", progress=False) for c in cfgs]
        out[engine] = (sums, [read_ledger(root / f"{engine}{c.seed}") for c in cfgs])
    return out


@pytest.mark.parametrize("metric", ["mean_p", "silent_frac", "grad_mass"])
def test_the_arm_is_alike_on_both_engines(both_engines, metric):
    """Per seed, a metric of the run (final mean p; mean silent fraction and gradient mass per step
    over the run): the engines' means over 6 seeds differ by less than 4 standard errors of the
    difference (the engines draw from other streams, so only their distributions are equal)."""

    def per_seed(engine):
        sums, leds = both_engines[engine]
        if metric == "mean_p":
            return np.array([s["final"]["mean_p"] for s in sums])
        return np.array([led[metric].mean() for led in leds])

    a, b = per_seed("numpy"), per_seed("torch")
    se = math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    assert se > 0
    assert abs(a.mean() - b.mean()) < 4 * se, (a, b)


def test_the_budget_holds_on_the_numpy_engine(both_engines):
    sums, leds = both_engines["numpy"]
    budget, first = 400 * 8, BASE["replan_every"]  # nothing logged before the first replan: a uniform plan
    for led in leds:
        assert (led.generations <= budget).all() and (led.generations > budget * 0.9).all()
        assert (led.n_batch[first:] < 400).any()  # the plans skip prompts
        assert led.value_planned[:first].isna().all() and led.value_planned[first:].notna().all()
        assert led.grad_planned[first:].notna().all()


def test_a_program_of_planned_runs_is_each_run_alone(tmp_path):
    """Seeds of one planned arm stepped as one program write each run's ledger bit for bit."""
    cfgs = [SimConfig(**{**BASE, **ARMS["update_forecast"], "seed": s, "engine": "numpy"}) for s in range(3)]
    run_programs([(c, tmp_path / f"p{c.seed}") for c in cfgs], progress=False)
    run_programs([(cfgs[1], tmp_path / "alone")], progress=False)
    cols = [c for c in read_ledger(tmp_path / "alone").columns if c not in WALL_COLUMNS]
    pd.testing.assert_frame_equal(read_ledger(tmp_path / "p1")[cols], read_ledger(tmp_path / "alone")[cols])


@pytest.mark.parametrize("arm", ["update", "greso"])
def test_resume_of_a_planned_numpy_run_is_identical(tmp_path, arm):
    cfg = SimConfig(**{**BASE, **ARMS[arm], "engine": "numpy", "steps": 9, "checkpoint_every": 3})
    run_simulation(cfg, tmp_path / "a", progress=False)

    class Stop(Exception):
        pass

    def die(step):
        if step == 4:
            raise Stop

    with pytest.raises(Stop):
        run_simulation(cfg, tmp_path / "b", progress=False, on_step=die)
    run_simulation(cfg, tmp_path / "b", progress=False, resume=True)
    cols = [c for c in read_ledger(tmp_path / "a").columns if c not in WALL_COLUMNS]
    pd.testing.assert_frame_equal(read_ledger(tmp_path / "a")[cols], read_ledger(tmp_path / "b")[cols])
