"""The fidelity columns of the ledger: grad_limit = Σ sqrt(p(1−p)) (the large-G GRPO update),
grad_law (the group-size law's update), and the summary's fidelity entries (docs/theory.md, section The group-size law).

For tabular GRPO with ddof 0, eps 0 and an exact verifier, grad_mass / grad_limit is the
mass-weighted fidelity measured by autograd and grad_pred / grad_limit its exact expectation
Σ φ(p_j, G)·sqrt(p_j(1−p_j)) / Σ sqrt(p_j(1−p_j)); they must agree within the sampling noise,
and both must differ from the law where G·p(1−p) is small."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gsd import expected_update, fidelity
from gsd.core.weighting import decile_index
from gsd.simulator import SimConfig, read_ledger, run_simulation
from gsd.simulator.ledger import COLUMNS, N_DECILES

from .conftest import replay_first_step

HARD = [[1.0, 1.5, 20.0]]  # initial p ~ Beta(1.5, 20): mean 0.07, so G·p(1−p) ≈ 0.26 at G = 4
MEDIUM = [[1.0, 10.0, 10.0]]


def _p_before_step0(cfg, p0):
    """The engine's p at step 0: sigmoid(logit(p0)) in the run's dtype."""
    return torch.sigmoid(torch.logit(torch.as_tensor(p0, dtype=torch.float64))).numpy()


def _run(tmp_path, name, **kw):
    cfg = SimConfig(device="cpu", **kw)
    summary = run_simulation(cfg, tmp_path / name, progress=False)
    return cfg, summary, read_ledger(tmp_path / name)


def test_columns_are_documented_and_sum_by_decile(tmp_path):
    for col in ("grad_limit", "grad_law", *(f"grad_limit_d{d}" for d in range(N_DECILES))):
        assert col in COLUMNS and COLUMNS[col]
    cfg, summary, ledger = _run(tmp_path, "r", n_prompts=3000, steps=4, seed=1, group_size=6)
    _, p0, _ = replay_first_step(cfg)
    p = _p_before_step0(cfg, p0)
    lim = np.sqrt(p * (1 - p))
    row = ledger.iloc[0]
    assert row["grad_limit"] == pytest.approx(lim.sum(), rel=1e-12)
    # the ledger sums the law's formula sqrt(p(1−p))·(1 − 1/(8G·p(1−p))) even where fidelity_law
    # reports NaN (G·p(1−p) < 1/8): it is the law's prediction of the summed update
    assert row["grad_law"] == pytest.approx((lim - 1 / (8 * 6 * lim)).sum(), rel=1e-10)
    per_decile = np.bincount(decile_index(p0), weights=lim, minlength=N_DECILES)
    np.testing.assert_allclose(
        row[[f"grad_limit_d{d}" for d in range(N_DECILES)]].to_numpy(float), per_decile, rtol=1e-12
    )
    limits = ledger[[f"grad_limit_d{d}" for d in range(N_DECILES)]].sum(axis=1)
    np.testing.assert_allclose(limits, ledger["grad_limit"], rtol=1e-12)
    # the exact prediction of step 0 is Σ φ(p, G)·sqrt(p(1−p)) (GRPO, ddof 0, eps 0)
    assert row["grad_pred"] == pytest.approx((fidelity(p, 6) * lim).sum(), rel=1e-12)
    # summary entries are the ledger's ratios
    assert summary["fidelity_measured_step0"] == row["grad_mass"] / row["grad_limit"]
    assert summary["fidelity_exact_step0"] == row["grad_pred"] / row["grad_limit"]
    assert summary["fidelity_law_step0"] == row["grad_law"] / row["grad_limit"]
    assert summary["fidelity_measured"] == pytest.approx(
        ledger["grad_mass"].sum() / ledger["grad_limit"].sum(), rel=1e-12
    )
    assert summary["fidelity_exact"] == pytest.approx(ledger["grad_pred"].sum() / ledger["grad_limit"].sum(), rel=1e-12)


@pytest.mark.parametrize("rollouts", ["answers", "counts"])
def test_limit_covers_the_batch_only(tmp_path, rollouts):
    cfg, _, ledger = _run(tmp_path, "b", n_prompts=2000, batch_size=300, steps=1, seed=5, rollouts=rollouts)
    idx, p0, _ = replay_first_step(cfg)
    p = _p_before_step0(cfg, p0)[idx]
    assert ledger["grad_limit"].iloc[0] == pytest.approx(np.sqrt(p * (1 - p)).sum(), rel=1e-12)


def test_no_closed_forms_leaves_exact_nan(tmp_path):
    _, summary, ledger = _run(tmp_path, "n", n_prompts=500, steps=3, closed_form_every=0)
    assert ledger["grad_pred"].isna().all() and ledger["grad_limit"].notna().all()
    assert summary["fidelity_exact"] is None  # NaN, written as JSON null
    assert summary["fidelity_measured"] == pytest.approx(
        ledger["grad_mass"].sum() / ledger["grad_limit"].sum(), rel=1e-12
    )


@pytest.mark.parametrize("rollouts", ["answers", "counts"])
def test_measured_fidelity_is_exact_phi_not_the_law(tmp_path, rollouts):
    """Hard prompts at G = 4: per step, the measured fidelity agrees with the exact one within
    4 standard errors, and the law misses both by many.  The standard error of a step is
    sqrt(Σ Var g_j) / grad_limit with Var g_j = E[σ²] − m_GRPO² = p(1−p)(1 − 1/G) − m², evaluated
    at the initial p (a small lr keeps p within a fraction of a per cent of it over 8 steps)."""
    G = 4
    cfg, summary, ledger = _run(
        tmp_path,
        "hard",
        n_prompts=6000,
        steps=8,
        lr=0.05,
        seed=3,
        group_size=G,
        difficulty="beta",
        beta_mixture=HARD,
        rollouts=rollouts,
    )
    _, p0, _ = replay_first_step(cfg)
    p = _p_before_step0(cfg, p0)
    var = (p * (1 - p) * (1 - 1 / G) - expected_update(p, G) ** 2).sum()
    se = np.sqrt(var) / ledger["grad_limit"].to_numpy()
    measured = (ledger["grad_mass"] / ledger["grad_limit"]).to_numpy()
    exact = (ledger["grad_pred"] / ledger["grad_limit"]).to_numpy()
    law = (ledger["grad_law"] / ledger["grad_limit"]).to_numpy()
    assert np.all(np.abs(measured - exact) < 4 * se), (measured - exact) / se
    assert np.all(np.abs(law - exact) > 5 * se)  # ≈ 0.06 apart, SE ≈ 0.01
    # over the run: the pooled standard error is sqrt(steps·Var) / Σ grad_limit
    se_run = np.sqrt(len(ledger) * var) / ledger["grad_limit"].sum()
    assert abs(summary["fidelity_measured"] - summary["fidelity_exact"]) < 4 * se_run
    assert abs(summary["fidelity_law"] - summary["fidelity_exact"]) > 10 * se_run
    assert abs(summary["fidelity_law_step0"] - summary["fidelity_exact_step0"]) > 0.04


def test_law_converges_where_g_p_q_is_large(tmp_path):
    _, summary, _ = _run(
        tmp_path,
        "medium",
        n_prompts=3000,
        steps=3,
        lr=0.05,
        seed=3,
        group_size=64,
        difficulty="beta",
        beta_mixture=MEDIUM,
    )
    assert summary["fidelity_exact"] > 0.99
    assert abs(summary["fidelity_law"] - summary["fidelity_exact"]) < 5e-4
    assert abs(summary["fidelity_measured"] - summary["fidelity_exact"]) < 3e-3
