"""The ledger's closed forms as torch ops (the run's device; here CPU) against the numpy core's
public functions, in float64, to 1e-12: silent rate, DAPO's expected draws, the exact E[σ̂]
sums of GRPO in the trainers' std conventions, DAPO's conditioned update, Dr.GRPO/RLOO, the
large-group limit and the law, with one G or one per prompt (a budget plan, G = 0 skipped)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gsd.core.silent import dapo_generation_cost, silent_rate
from gsd.core.update import expected_update, fidelity_law, grpo_term
from gsd.core.weighting import large_group_weight
from gsd.simulator import SimConfig
from gsd.simulator.binomial import DEVICE_MAX_G, device_expectation
from gsd.simulator.ledger import large_group_update, predicted_silent, predicted_update

RTOL = 1e-12


def _p(n=4000, seed=0):
    """Solve rates over (0, 1), with the edges a run can reach: 0 and 1 (a saturated logit), and
    within 1e-13 of them."""
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.random(n), rng.beta(0.2, 0.2, n), [0.0, 1.0, 1e-13, 1 - 1e-13, 0.5, 1e-300]])
    return p


def close(got, want, rtol=RTOL):
    got = got.cpu().numpy() if isinstance(got, torch.Tensor) else np.asarray(got)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0)


@pytest.mark.parametrize("G", [2, 8, 64, 128, 200, DEVICE_MAX_G, DEVICE_MAX_G + 1])
@pytest.mark.parametrize("ddof,eps", [(0, 0.0), (1, 0.0), (0, 1e-6), (1, 1e-4)])
def test_grpo_exact_sum(G, ddof, eps):
    p = _p(800)
    want = expected_update(p, G, ddof=ddof, eps=eps)
    close(device_expectation(torch.from_numpy(p), G, grpo_term(ddof, eps), g_max=G), want)


def test_grpo_exact_sum_per_prompt_group_size():
    p = _p(3000)
    G = np.random.default_rng(1).integers(2, 97, p.size)
    for ddof, eps in [(0, 0.0), (1, 1e-6)]:
        got = device_expectation(torch.from_numpy(p), torch.from_numpy(G), grpo_term(ddof, eps), g_max=int(G.max()))
        close(got, expected_update(p, G, ddof=ddof, eps=eps))


@pytest.mark.parametrize("method", ["grpo", "dr_grpo", "dapo", "rloo"])
@pytest.mark.parametrize("noise", [0.0, 0.15])
def test_predicted_columns_match_core(method, noise):
    """Every closed-form column of a ledger row, on tensors, equals the core's numpy value."""
    p = _p(2000, seed=3)
    cfg = SimConfig(
        method=method,
        group_size=16,
        max_draws=4,
        verifier_noise=noise,
        ddof=1 if method == "grpo" else 0,
        eps=1e-6 if method == "dapo" else 0.0,
    )
    t = torch.from_numpy(p)
    dec = np.minimum((p * 10).astype(np.int64), 9)

    # The core's public functions, not the ledger's numpy path: an independent reference.
    q = p * (1 - noise) + (1 - p) * noise
    s = silent_rate(q, 16)
    kw = {"max_draws": 4} if method == "dapo" else {}
    m = expected_update(p, 16, method, ddof=cfg.ddof, eps=cfg.eps, verifier_noise=noise, **kw)
    lim = large_group_weight(p, "grpo")
    with np.errstate(divide="ignore", invalid="ignore"):
        law = np.where(lim > 0, lim * fidelity_law(p, 16, extrapolate=True), -np.inf)

    got = predicted_silent(t, cfg)
    close(got["silent_pred"], s.mean())
    close(got["zero_update_pred"], (s**4 if method == "dapo" else s).mean())
    close(got["groups_pred"], dapo_generation_cost(q, 16, max_draws=4).sum() if method == "dapo" else p.size)
    close(predicted_update(t, cfg), m)
    limit, law_sum, limit_d = large_group_update(t, 16, torch.from_numpy(dec))
    close(limit, lim.sum())
    assert law_sum.item() == -np.inf == law.sum()  # p = 0 and 1 are in the batch
    close(limit_d, np.bincount(dec, weights=lim, minlength=10))
    inner = (p > 0) & (p < 1)
    _, law_inner, _ = large_group_update(t[torch.from_numpy(inner)], 16, torch.from_numpy(dec[inner]))
    close(law_inner, law[inner].sum())


@pytest.mark.parametrize("method", ["grpo", "dr_grpo", "dapo", "rloo"])
def test_skipped_prompts_leave_the_sums(method):
    """A budget plan's G = 0 removes a prompt from every mean and sum, as dropping it would."""
    p = _p(1000, seed=5)[:-2]  # no p = 1e-300 or 0.5 needed here
    G = np.random.default_rng(6).integers(0, 40, p.size)
    G[G == 1] = 2
    keep = G > 0
    cfg = SimConfig(method=method, max_draws=3)
    t, Gt, kt = torch.from_numpy(p), torch.from_numpy(G), torch.from_numpy(keep)
    G_any = torch.where(kt, Gt, 39)
    got = predicted_silent(t, cfg, G_any, kt)
    want = predicted_silent(p[keep], cfg, G[keep])
    for key, value in want.items():
        close(got[key], value)
    m = predicted_update(t, cfg, G_any, g_max=39)
    assert m.dtype == torch.float64
    close(m[kt], predicted_update(p[keep], cfg, G[keep]))


@pytest.mark.parametrize("method", ["grpo", "dapo"])
def test_ledger_columns_device_branch_equals_host_branch(method):
    """The engine's two branches of a row's closed forms: tensors with a mask of skipped prompts
    (a GPU run) against the numpy core on the kept prompts (a CPU run), column by column."""
    from gsd.simulator.ledger import closed_form_columns

    p = _p(1500, seed=7)
    G = np.random.default_rng(8).integers(0, 30, p.size)
    G[G == 1] = 0
    keep = G > 0
    dec = np.minimum((p * 10).astype(np.int64), 9)
    cfg = SimConfig(method=method, max_draws=4, ddof=1, eps=1e-8)
    kt = torch.from_numpy(keep)
    dev = closed_form_columns(
        torch.from_numpy(p), torch.where(kt, torch.from_numpy(G), 29), torch.from_numpy(dec), cfg, keep=kt, g_max=29
    )
    host = closed_form_columns(p[keep], G[keep], dec[keep], cfg)
    assert dev.keys() == host.keys()
    for key, value in host.items():
        if np.isinf(value).any():  # grad_law with p = 0 or 1 among the kept prompts
            assert dev[key].item() == value
        else:
            close(dev[key], value)
