"""Many runs as one program (gsd.simulator.batched for the torch engine, gsd.simulator.tabular
for the numpy one): each run's ledger, checkpoint and summary equal the same run made alone, bit
for bit on CPU; a killed program resumes to the same ledgers; runs that cannot share a program
run alone."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from gsd.simulator import SimConfig, batch_key, read_ledger, run_many, run_simulation
from gsd.simulator.config import resolve_engine
from gsd.simulator.ledger import WALL_COLUMNS

from .conftest import final_state

PAPER = SimConfig(n_prompts=512, steps=7, checkpoint_every=3, device="cpu", engine="torch")
EVERYTHING = SimConfig(
    n_prompts=448,
    steps=6,
    checkpoint_every=4,
    device="cpu",
    engine="torch",
    rollouts="counts",
    optimizer="adam",
    lr=0.02,
    batch_size=160,
    verifier_noise=0.1,
    ppo_epochs=2,
    clip=True,
    clip_low=0.2,
    clip_high=0.28,
    kl_coef=0.05,
    dtype="float32",
)
# The numpy engine: no vector-step condition (501 prompts), every option it runs.
PAPER_NUMPY = SimConfig(n_prompts=501, steps=7, checkpoint_every=3, device="cpu")
EVERYTHING_NUMPY = SimConfig(
    n_prompts=450,
    steps=6,
    checkpoint_every=4,
    device="cpu",
    rollouts="counts",
    optimizer="adam",
    lr=0.02,
    batch_size=161,
    verifier_noise=0.1,
    dtype="float32",
)
# Seeds, methods, group sizes and std conventions mixed in one program.
VARIANTS = [
    dict(seed=1, method="grpo"),
    dict(seed=2, method="dapo", max_draws=3),
    dict(seed=1, method="dr_grpo", group_size=6),
    dict(seed=3, method="rloo"),
    dict(seed=2, method="grpo", ddof=1, eps=1e-6, group_size=5),
    dict(seed=4, method="dapo", group_size=12),
]


def _same_run(folder_a, folder_b, summary_a, summary_b):
    a = read_ledger(folder_a).drop(columns=list(WALL_COLUMNS))
    b = read_ledger(folder_b).drop(columns=list(WALL_COLUMNS))
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    if (folder_a / "checkpoint.npz").is_file():  # the numpy engine: every array of the checkpoint
        with np.load(folder_a / "checkpoint.npz") as ca, np.load(folder_b / "checkpoint.npz") as cb:
            assert ca.files == cb.files
            for key in ca.files:
                if key != "ledger":  # its wall_s column differs
                    assert np.array_equal(ca[key], cb[key]), key
    else:
        ca = torch.load(folder_a / "checkpoint.pt", weights_only=True)
        cb = torch.load(folder_b / "checkpoint.pt", weights_only=True)
        assert torch.equal(ca["policy"]["z"], cb["policy"]["z"])
        assert torch.equal(ca["rng_rollouts"], cb["rng_rollouts"])
        for key in ca["optimizer"]:
            for x, y in zip(ca["optimizer"][key], cb["optimizer"][key]):
                assert torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y, key
    drop = lambda s: {k: v for k, v in s.items() if k != "wall_s_total"}  # noqa: E731
    assert drop(summary_a) == drop(summary_b)


@pytest.mark.parametrize(
    "base",
    [PAPER, EVERYTHING, PAPER_NUMPY, EVERYTHING_NUMPY],
    ids=["paper-torch", "everything-torch", "paper-numpy", "everything-numpy"],
)
def test_each_run_equals_the_run_alone(tmp_path, base):
    cfgs = [base.with_overrides({**v, "name": f"r{i}"}) for i, v in enumerate(VARIANTS)]
    engine = resolve_engine(base)
    assert {resolve_engine(c) for c in cfgs} == {engine} and len({batch_key(c) for c in cfgs}) == 1
    together = run_many([(c, tmp_path / "many" / c.name) for c in cfgs], progress=False, max_runs=len(cfgs))
    for c, s in zip(cfgs, together):
        assert s["engine"] == engine
        alone = run_simulation(c, tmp_path / "alone" / c.name, progress=False)
        _same_run(tmp_path / "alone" / c.name, tmp_path / "many" / c.name, alone, s)


@pytest.mark.parametrize("base", [PAPER, PAPER_NUMPY], ids=["torch", "numpy"])
def test_killed_program_resumes_to_the_same_ledgers(tmp_path, base):
    cfgs = [base.with_overrides({**v, "name": f"r{i}"}) for i, v in enumerate(VARIANTS[:3])]
    runs = [(c, tmp_path / "cut" / c.name) for c in cfgs]

    class Killed(Exception):
        pass

    def die(step):
        if step == 4:  # after the checkpoint at 3, before the one at 6
            raise Killed

    with pytest.raises(Killed):
        run_many(runs, progress=False, on_step=die)
    assert all(final_state(o)["step"] == 3 for _, o in runs)
    with pytest.raises(ValueError, match="resume"):
        run_many(runs, progress=False)  # an unfinished run is not silently restarted
    # One run resumed alone, the other two as a program: the same ledgers as uninterrupted runs.
    resumed = [run_simulation(*runs[0], resume=True, progress=False), *run_many(runs[1:], resume=True, progress=False)]
    for c, s in zip(cfgs, resumed):
        alone = run_simulation(c, tmp_path / "alone" / c.name, progress=False)
        _same_run(tmp_path / "alone" / c.name, tmp_path / "cut" / c.name, alone, s)
    again = run_many(runs, progress=False)  # finished: the summaries, nothing rerun
    assert again == resumed


def test_incompatible_runs_fall_back(tmp_path, monkeypatch):
    import gsd.simulator.batched as batched  # the torch engine's programs

    programs = []
    real = batched.run_program
    monkeypatch.setattr(
        batched, "run_program", lambda members, **kw: programs.append(len(members)) or real(members, **kw)
    )
    cfgs = [
        PAPER.with_overrides({"name": "a", "seed": 1}),
        PAPER.with_overrides({"name": "b", "seed": 2}),
        PAPER.with_overrides({"name": "lr", "lr": 0.1}),  # another lr: its own run
        PAPER.with_overrides({"name": "mlp", "policy": "mlp"}),  # not tabular: alone
        PAPER.with_overrides({"name": "plan", "allocation": "update"}),  # a budget plan: alone
        PAPER.with_overrides({"name": "odd", "n_prompts": 500}),
    ]  # not whole vector steps: alone
    assert batch_key(cfgs[3]) is None and batch_key(cfgs[4]) is None and batch_key(cfgs[5]) is None
    assert batch_key(cfgs[2]) != batch_key(cfgs[0])
    summaries = run_many([(c, tmp_path / c.name) for c in cfgs], progress=False)
    assert programs == [2]
    assert [s["name"] for s in summaries] == [c.name for c in cfgs]
    alone = run_simulation(cfgs[2], tmp_path / "lr-alone", progress=False)
    _same_run(tmp_path / "lr-alone", tmp_path / "lr", alone, summaries[2])
