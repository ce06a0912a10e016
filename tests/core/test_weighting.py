"""Implicit objectives, difficulty weight, budget shares and the Big-Math headline figures."""

import numpy as np
import pytest
import torch

import gsd


def test_arcsin_objective_gradient_is_grpo_large_group_update():
    # d/dz 2·arcsin(√σ(z)) = sqrt(p(1−p)): check by autograd.
    z = torch.linspace(-4, 4, 9, dtype=torch.float64, requires_grad=True)
    obj = 2 * torch.arcsin(torch.sqrt(torch.sigmoid(z)))
    (grad,) = torch.autograd.grad(obj.sum(), z)
    p = torch.sigmoid(z).detach().numpy()
    np.testing.assert_allclose(grad.numpy(), np.sqrt(p * (1 - p)), rtol=1e-12)
    np.testing.assert_allclose(gsd.arcsin_objective(p), obj.detach().numpy(), rtol=1e-14)
    assert gsd.arcsin_objective(1.0, normalized=True) == pytest.approx(1.0)


def test_difficulty_weight():
    assert gsd.difficulty_weight(0.5) == 2
    assert np.isinf(gsd.difficulty_weight(0.0))
    p = np.array([0.1, 0.3])
    np.testing.assert_allclose(
        gsd.difficulty_weight(p), gsd.large_group_weight(p, "grpo") / gsd.large_group_weight(p, "dr_grpo")
    )


def test_large_group_limit_of_expected_update():
    p = np.array([0.05, 0.3, 0.5])
    np.testing.assert_allclose(gsd.expected_update(p, 200_000, "grpo"), np.sqrt(p * (1 - p)), rtol=2e-5)


def test_bigmath_headline_figures():
    p, k = gsd.load_bigmath(with_k=True)
    assert p.size == 215_608
    hist = gsd.load_histogram()
    # Independent recomputation from the histogram rows.
    ph, c = hist.p_hat.to_numpy(), hist["count"].to_numpy()
    silent8 = np.sum(c * (ph**8 + (1 - ph) ** 8)) / c.sum()
    assert gsd.silent_rate(p, 8).mean() == pytest.approx(silent8, rel=1e-12)
    ext = ((ph > 0) & (ph < 0.1)) | ((ph > 0.9) & (ph < 1))
    dr = np.sum((c * ph * (1 - ph))[ext]) / np.sum(c * ph * (1 - ph))
    gr = np.sum((c * np.sqrt(ph * (1 - ph)))[ext]) / np.sum(c * np.sqrt(ph * (1 - ph)))
    assert gsd.budget_share(p, gsd.extreme_mask(p), method="dr_grpo") == pytest.approx(dr, rel=1e-12)
    assert gsd.budget_share(p, gsd.extreme_mask(p), method="grpo") == pytest.approx(gr, rel=1e-12)
    # Published (docs/theory.md, section The paper's definitions and reproduction targets): 44.3 %, 13.9 %, 24.7 % — reported to the printed precision.
    assert round(100 * silent8, 1) == 44.3
    assert round(100 * dr, 1) == 13.9 and round(100 * gr, 1) == 24.7


def test_decile_shares_sum_to_one_and_finite_G():
    p = gsd.load_bigmath()
    for method in ("grpo", "dr_grpo"):
        s = gsd.decile_shares(p, method=method)
        assert s.sum() == pytest.approx(1.0) and s.shape == (10,)
        s8 = gsd.decile_shares(p, method=method, G=8)
        assert s8.sum() == pytest.approx(1.0)
    assert gsd.decile_index([0.0, 0.0999, 0.1, 0.95, 1.0]).tolist() == [0, 0, 1, 9, 9]


def test_budget_share_finite_G_uses_expected_update():
    p = np.array([0.05, 0.5, 0.95])
    mask = np.array([True, False, True])
    w = gsd.expected_update(p, 8, "grpo")
    assert gsd.budget_share(p, mask, method="grpo", G=8) == pytest.approx(w[mask].sum() / w.sum())


def test_budget_share_takes_the_trainer_convention():
    # With ddof 1 and eps 0 every GRPO group update shrinks by the same sqrt((G−1)/G): shares unchanged.
    p = np.array([0.05, 0.5, 0.95, 0.3])
    mask = np.array([True, False, True, False])
    paper = gsd.budget_share(p, mask, method="grpo", G=8)
    assert gsd.budget_share(p, mask, method="grpo", G=8, ddof=1) == pytest.approx(paper, rel=1e-12)
    # A large eps damps small-σ groups (mostly extreme prompts) more: their share falls.
    w = gsd.expected_update(p, 8, "grpo", eps=0.5)
    got = gsd.budget_share(p, mask, method="grpo", G=8, eps=0.5)
    assert got == pytest.approx(w[mask].sum() / w.sum()) and got < paper
    np.testing.assert_allclose(gsd.decile_shares(p, G=8, eps=0.5).sum(), 1.0)
