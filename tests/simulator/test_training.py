"""Training behaviour beyond one step: the MLP policy learns; a noisy verifier keeps the
closed forms exact once they account for it."""

from __future__ import annotations

import numpy as np
import pytest

from gsd.core.update import expected_update
from gsd.simulator import SimConfig, read_ledger, run_simulation
from gsd.simulator.ledger import predicted_update
from gsd.simulator.population import initial_solve_rates


def test_mlp_policy_trains(tmp_path):
    cfg = SimConfig(n_prompts=1000, steps=25, policy="mlp", optimizer="adam", lr=0.02, device="cpu", seed=3)
    s = run_simulation(cfg, tmp_path / "mlp", progress=False)
    ledger = read_ledger(tmp_path / "mlp")
    # The offset makes the initial p the population's.
    assert s["initial"]["mean_p"] == pytest.approx(initial_solve_rates(cfg).mean(), abs=1e-12)
    assert s["final"]["mean_p"] > s["initial"]["mean_p"] + 0.05
    assert ledger["mean_p"].iloc[-1] > ledger["mean_p"].iloc[0]
    # Shared parameters: per-prompt logit gradients still match the closed form on average.
    assert s["grad_mass_over_closed_form"] == pytest.approx(1.0, abs=0.02)


@pytest.mark.parametrize("offset", ["frozen", "learned"])
def test_mlp_offset(tmp_path, offset):
    """The per-prompt offset matches the initial p; frozen, it never moves and only the shared
    network learns; learned, it moves too."""
    import torch

    from gsd.simulator.policy import make_policy
    from gsd.simulator.population import STREAM_INIT, sub_seed

    cfg = SimConfig(
        n_prompts=300,
        steps=3,
        policy="mlp",
        mlp_offset=offset,
        optimizer="sgd",
        lr=1e-3,
        device="cpu",
        checkpoint_every=1,
    )
    p0 = initial_solve_rates(cfg)
    init = make_policy(cfg, p0, seed=sub_seed(cfg.seed, STREAM_INIT), dtype=torch.float64, device="cpu")
    np.testing.assert_allclose(torch.sigmoid(init()).detach().numpy(), p0, rtol=1e-13)
    run_simulation(cfg, tmp_path / "r", progress=False)
    state = torch.load(tmp_path / "r" / "checkpoint.pt", weights_only=True)["policy"]
    assert not torch.equal(state["net.2.weight"], init.net[2].weight.detach())
    assert torch.equal(state["offset"], init.offset.detach()) == (offset == "frozen")


@pytest.mark.parametrize("rollouts", ["answers", "counts"])
def test_noisy_verifier_closed_form(tmp_path, rollouts):
    """With rewards flipped at rate ν the update is m(q, G)·(1−2ν)p(1−p)/(q(1−q)); the plain
    m(p, G) would be off by tens of per cent here."""
    cfg = SimConfig(n_prompts=3000, steps=20, verifier_noise=0.2, device="cpu", seed=9, lr=0.3, rollouts=rollouts)
    s = run_simulation(cfg, tmp_path / "noisy", progress=False)
    assert s["grad_mass_over_closed_form"] == pytest.approx(1.0, abs=0.01)
    assert s["silent_rmse"] < 0.02
    p0 = initial_solve_rates(cfg)
    naive = expected_update(p0, 8, "grpo").sum()
    assert abs(predicted_update(p0, cfg).sum() / naive - 1) > 0.2
    ledger = read_ledger(tmp_path / "noisy")
    assert ledger["grad_mass"].iloc[0] / naive < 0.9


def test_grad_mass_tracks_closed_form_for_ddof1_eps(tmp_path):
    cfg = SimConfig(n_prompts=3000, steps=15, ddof=1, eps=1e-2, device="cpu", seed=4)
    s = run_simulation(cfg, tmp_path / "r", progress=False)
    assert s["grad_mass_over_closed_form"] == pytest.approx(1.0, abs=0.01)
    ledger = read_ledger(tmp_path / "r")
    p = initial_solve_rates(cfg)
    m = expected_update(p, 8, "grpo", ddof=1, eps=1e-2)
    assert ledger["grad_pred"].iloc[0] == pytest.approx(m.sum(), rel=1e-12)
    assert ledger["silent_pred"].iloc[0] == pytest.approx(np.mean(p**8 + (1 - p) ** 8), rel=1e-12)


@pytest.mark.parametrize("method", ["grpo", "dapo"])
def test_counts_and_answers_agree_in_distribution(tmp_path, method):
    """The two rollout paths draw the same groups in distribution: their runs track the same
    closed forms (not the same numbers: the random streams differ)."""
    out = {}
    for rollouts in ("answers", "counts"):
        cfg = SimConfig(n_prompts=3000, steps=25, method=method, device="cpu", seed=6, rollouts=rollouts)
        out[rollouts] = run_simulation(cfg, tmp_path / rollouts, progress=False)
    for s in out.values():
        assert s["silent_r2"] > 0.98
        assert s["grad_mass_over_closed_form"] == pytest.approx(1.0, abs=0.01)
        assert s["groups_total"] == pytest.approx(s["groups_pred_total"], rel=0.01)
    assert out["answers"]["final"]["mean_p"] == pytest.approx(out["counts"]["final"]["mean_p"], abs=0.01)
