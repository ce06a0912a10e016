"""One step through the whole stack (sampling → core advantages → autograd → SGD) moves each
tabular logit by exactly lr·g_j, g_j = σ (GRPO), σ² (Dr.GRPO), σ²/(σ_c + eps) in general
(docs/theory.md, sections The group-standard-deviation identity and Expected update) — with σ recomputed here from a replay of the sampled rewards."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gsd.simulator import SimConfig, read_ledger, run_simulation

from .conftest import expected_update_of_k, final_state, replay_first_step

# Both engines: autograd through the torch policy, and the numpy engine's written-out gradient.
ENGINES = pytest.mark.parametrize("engine", ["numpy", "torch"])


def _one_step(tmp_path, **kw):
    cfg = SimConfig(steps=1, device="cpu", checkpoint_every=1, **kw)
    summary = run_simulation(cfg, tmp_path / "run", progress=False)
    assert summary["engine"] == kw.get("engine", summary["engine"])
    return cfg, summary, final_state(tmp_path / "run"), read_ledger(tmp_path / "run")


@ENGINES
@pytest.mark.parametrize("rollouts", ["answers", "counts"])
@pytest.mark.parametrize(
    "method, ddof, eps, G, lr",
    [
        ("grpo", 0, 0.0, 8, 1.0),  # g = σ
        ("dr_grpo", 0, 0.0, 8, 1.0),  # g = σ²
        ("grpo", 0, 0.0, 5, 0.5),  # the paper's lr: Δz = 0.5·σ
        ("grpo", 1, 0.0, 8, 1.0),  # torch.std convention: σ²/σ_1 = σ·sqrt((G−1)/G)
        ("grpo", 1, 1e-2, 6, 1.0),  # σ²/(σ_1 + eps)
        ("grpo", 0, 0.1, 8, 1.0),  # σ²/(σ + eps)
    ],
)
def test_each_logit_moves_by_the_identity(tmp_path, method, ddof, eps, G, lr, rollouts, engine):
    cfg, summary, ckpt, ledger = _one_step(
        tmp_path,
        n_prompts=3000,
        group_size=G,
        method=method,
        ddof=ddof,
        eps=eps,
        lr=lr,
        seed=11,
        rollouts=rollouts,
        engine=engine,
    )
    idx, p0, k = replay_first_step(cfg)
    k = k[0]
    g = expected_update_of_k(k, G, method, ddof, eps)
    z0 = torch.logit(torch.as_tensor(p0, dtype=torch.float64)).numpy()
    dz = ckpt["z"] - z0
    np.testing.assert_allclose(dz / lr, g, rtol=1e-12, atol=1e-14)
    assert ((k == 0) | (k == G)).any() and (g > 0).any()  # both kinds of group occurred
    # The ledger's autograd gradient mass is the same sum.
    assert ledger["grad_mass"].iloc[0] == pytest.approx(g.sum(), rel=1e-12)
    assert ledger["silent_frac"].iloc[0] == pytest.approx(np.mean((k == 0) | (k == G)), abs=1e-15)
    assert ledger["generations"].iloc[0] == cfg.n_prompts * G


@ENGINES
@pytest.mark.parametrize("rollouts", ["answers", "counts"])
def test_batch_prompts_only(tmp_path, rollouts, engine):
    """With batch_size < n_prompts only the sampled prompts move, each by its own σ."""
    cfg, _, ckpt, ledger = _one_step(
        tmp_path, n_prompts=2000, batch_size=300, seed=5, lr=1.0, rollouts=rollouts, engine=engine
    )
    idx, p0, k = replay_first_step(cfg)
    g = np.zeros(cfg.n_prompts)
    g[idx] = expected_update_of_k(k[0], cfg.group_size, "grpo")
    dz = ckpt["z"] - torch.logit(torch.as_tensor(p0, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(dz, g, rtol=1e-12, atol=1e-14)
    outside = np.setdiff1d(np.arange(cfg.n_prompts), idx)
    assert (dz[outside] == 0).all()
    assert ledger["n_batch"].iloc[0] == 300 and ledger["generations"].iloc[0] == 300 * cfg.group_size


@ENGINES
@pytest.mark.parametrize("rollouts", ["answers", "counts"])
def test_dapo_accounting(tmp_path, rollouts, engine):
    """DAPO: up to D draws per prompt, every draw counted; silent after D draws → no update."""
    G, D = 4, 3
    cfg, summary, ckpt, ledger = _one_step(
        tmp_path,
        n_prompts=2000,
        group_size=G,
        method="dapo",
        max_draws=D,
        seed=2,
        lr=1.0,
        rollouts=rollouts,
        difficulty="beta",
        beta_mixture=[[0.5, 0.3, 3.0], [0.5, 3.0, 0.3]],
        p_min=0.01,
        p_max=0.99,
        engine=engine,
    )
    idx, p0, k = replay_first_step(cfg)  # (D, N)
    silent = (k == 0) | (k == G)
    n_silent_draws = np.cumprod(silent, axis=0)  # 1 while every draw so far was silent
    draws_used = np.minimum(n_silent_draws.sum(0) + 1, D)
    all_silent = silent.all(0)
    first = np.argmax(~silent, axis=0)
    k_kept = k[first, np.arange(cfg.n_prompts)]
    g = np.where(all_silent, 0.0, expected_update_of_k(k_kept, G, "grpo"))
    dz = ckpt["z"] - torch.logit(torch.as_tensor(p0, dtype=torch.float64)).numpy()
    assert all_silent.sum() > 20 and (draws_used == 2).sum() > 20  # the test exercises redraws
    assert (dz[all_silent] == 0).all()
    np.testing.assert_allclose(dz, g, rtol=1e-12, atol=1e-14)
    row = ledger.iloc[0]
    assert row["groups"] == draws_used.sum()
    assert row["generations"] == draws_used.sum() * G
    assert row["zero_update_frac"] == pytest.approx(all_silent.mean(), abs=1e-15)
    assert row["silent_frac"] == pytest.approx(silent[0].mean(), abs=1e-15)
    assert summary["generations_total"] == draws_used.sum() * G


@pytest.mark.parametrize("rollouts", ["answers", "counts"])
def test_mlp_logit_gradient_is_the_identity(tmp_path, rollouts):
    """Through a shared network the per-prompt logit gradient ∂L/∂z_j is still σ_j."""
    cfg, _, _, ledger = _one_step(
        tmp_path, n_prompts=1500, policy="mlp", optimizer="adam", lr=1e-3, seed=4, rollouts=rollouts
    )
    _, _, k = replay_first_step(cfg)
    g = expected_update_of_k(k[0], cfg.group_size, "grpo")
    assert ledger["grad_mass"].iloc[0] == pytest.approx(g.sum(), rel=1e-10)
