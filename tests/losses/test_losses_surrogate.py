"""Clipped surrogate, dual clip, clip-higher and the GRPO per-token objective (gsd.losses.surrogate)."""

import math

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gsd.losses import (
    CLIP_DUAL,
    CLIP_HIGH,
    CLIP_LOW,
    UNCLIPPED,
    clip_region,
    clipped_surrogate,
    clipped_surrogate_grad,
    flat_regions,
    grpo_objective,
    kl_estimate,
    zero_grad_mask,
)


def test_seed_points():
    # ε = 0.2: A = 1, ρ = 1.5 → terms 1.5 and 1.2 → 1.2;  A = −1, ρ = 0.5 → −0.5 and −0.8 → −0.8.
    assert float(clipped_surrogate(1.5, 1.0, eps_low=0.2)) == pytest.approx(1.2)
    assert float(clipped_surrogate(0.5, -1.0, eps_low=0.2)) == pytest.approx(-0.8)
    # the seed's 0.24 / 0.20 ratio
    assert float(clipped_surrogate(0.24 / 0.20, 1.0)) == pytest.approx(1.2)


def test_dual_clip_and_clip_higher():
    assert float(clipped_surrogate(5.0, -1.0)) == pytest.approx(-5.0)
    assert float(clipped_surrogate(5.0, -1.0, dual_clip=3.0)) == pytest.approx(-3.0)
    assert float(clipped_surrogate(2.0, -1.0, dual_clip=3.0)) == pytest.approx(-2.0)  # below c: untouched
    assert float(clipped_surrogate(5.0, 1.0, dual_clip=3.0)) == pytest.approx(1.2)  # A > 0: untouched
    assert float(clipped_surrogate(1.25, 1.0, eps_low=0.2)) == pytest.approx(1.2)
    assert float(clipped_surrogate(1.25, 1.0, eps_low=0.2, eps_high=0.28)) == pytest.approx(1.25)
    assert float(clipped_surrogate(1.5, 1.0, eps_low=0.2, eps_high=0.28)) == pytest.approx(1.28)
    # ε_high does not move the lower threshold
    assert float(clipped_surrogate(0.5, -1.0, eps_low=0.2, eps_high=0.28)) == pytest.approx(-0.8)


def test_flat_regions_and_codes():
    assert flat_regions(1.0) == [(1.2, float("inf"))]
    assert flat_regions(-2.0, eps_low=0.1, dual_clip=3.0) == [(0.0, 0.9), (3.0, float("inf"))]
    assert flat_regions(0.0) == [(0.0, float("inf"))]
    rho = torch.tensor([0.5, 1.0, 1.5, 4.0], dtype=torch.float64)
    assert clip_region(rho, 1.0).tolist() == [UNCLIPPED, UNCLIPPED, CLIP_HIGH, CLIP_HIGH]
    assert clip_region(rho, -1.0, dual_clip=3.0).tolist() == [CLIP_LOW, UNCLIPPED, UNCLIPPED, CLIP_DUAL]
    assert zero_grad_mask(rho, 0.0).all()
    # Constant on each flat region
    for A, kw in ((1.0, {}), (-1.0, {"dual_clip": 3.0})):
        for a, b in flat_regions(A, **kw):
            pts = torch.linspace(a + 1e-6, min(b, 10.0), 7, dtype=torch.float64)
            c = clipped_surrogate(pts, A, **kw)
            assert torch.allclose(c, c[0].expand_as(c))


ratios = st.floats(0.0, 6.0)
advs = st.floats(-3.0, 3.0)
epsilons = st.floats(0.05, 0.5)


@settings(max_examples=150, deadline=None)
@given(rho=ratios, A=advs, lo=epsilons, hi=epsilons, dual=st.sampled_from([None, 2.0, 3.0]))
def test_gradient_matches_autograd(rho, A, lo, hi, dual):
    # Kinks are measure-zero; stay away from them so both one-sided derivatives agree.
    for kink in (1 - lo, 1 + hi) + ((dual,) if dual else ()):
        assume(abs(rho - kink) > 1e-6)
    assume(abs(A) > 1e-9)
    r = torch.tensor(rho, dtype=torch.float64, requires_grad=True)
    (auto,) = torch.autograd.grad(clipped_surrogate(r, A, eps_low=lo, eps_high=hi, dual_clip=dual), r)
    analytic = clipped_surrogate_grad(rho, A, eps_low=lo, eps_high=hi, dual_clip=dual)
    assert float(auto) == pytest.approx(float(analytic), abs=1e-12)
    zero = bool(zero_grad_mask(rho, A, eps_low=lo, eps_high=hi, dual_clip=dual))
    assert zero == (float(auto) == 0.0)
    # By hand: where the gradient is A the objective is ρA itself.
    if not zero:
        assert float(clipped_surrogate(rho, A, eps_low=lo, eps_high=hi, dual_clip=dual)) == pytest.approx(rho * A)


@settings(max_examples=100, deadline=None)
@given(rho=ratios, A=advs, eps=epsilons, c=st.floats(1.6, 5.0))
def test_trl_delta_cap_equals_dual_clip(rho, A, eps, c):
    # TRL's two-sided clipping caps the unclipped ratio at δ before the min; for δ >= 1 + ε it
    # coincides with verl's dual clip c = δ.
    assume(c >= 1 + eps)
    capped = min(rho, c)
    trl = min(capped * A, min(max(rho, 1 - eps), 1 + eps) * A)
    assert float(clipped_surrogate(rho, A, eps_low=eps, dual_clip=c)) == pytest.approx(trl, abs=1e-12)


def test_verl_dual_clip_loss_form():
    # verl (policy loss = −objective): l1 = −Aρ, l2 = −A clip(ρ), m = max(l1, l2);
    # for A < 0 the loss is min(−A c, m), else m.
    g = torch.Generator().manual_seed(0)
    rho = torch.rand(200, generator=g, dtype=torch.float64) * 5
    A = torch.randn(200, generator=g, dtype=torch.float64)
    c, lo, hi = 3.0, 0.2, 0.28
    l1 = -A * rho
    l2 = -A * torch.clamp(rho, 1 - lo, 1 + hi)
    m = torch.maximum(l1, l2)
    verl = torch.where(A < 0, torch.minimum(-A * c, m), m)
    ours = -clipped_surrogate(rho, A, eps_low=lo, eps_high=hi, dual_clip=c)
    assert torch.allclose(ours, verl, atol=1e-12)


def test_grpo_objective_matches_trl_per_token_loss_without_bias_correction():
    g = torch.Generator().manual_seed(1)
    B, T = 3, 5
    logp = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3
    old = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3
    ref = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3
    adv = torch.tensor([1.0, -1.0, 0.5], dtype=torch.float64)
    beta, lo, hi = 0.04, 0.2, 0.28
    # TRL: per_token_loss = −min(ρA, clamp(ρ, 1−ε_low, 1+ε_high)A) + β (exp(ref−logp) − (ref−logp) − 1)
    rho = torch.exp(logp - old)
    a = adv[:, None]
    trl = -torch.minimum(rho * a, torch.clamp(rho, 1 - lo, 1 + hi) * a) + beta * (
        torch.exp(ref - logp) - (ref - logp) - 1
    )
    obj = grpo_objective(logp, old, adv, ref, eps_low=lo, eps_high=hi, beta=beta)
    assert obj.shape == (B, T)
    assert torch.allclose(-obj, trl, atol=1e-12)
    # per-token advantages (B, T) give the same; β = 0 needs no reference
    assert torch.allclose(grpo_objective(logp, old, a.expand(B, T), ref, eps_low=lo, eps_high=hi, beta=beta), obj)
    assert torch.allclose(
        grpo_objective(logp, old, adv, eps_low=lo, eps_high=hi), obj + beta * (torch.exp(ref - logp) - (ref - logp) - 1)
    )


def test_grpo_objective_trl_preset_weights_k3_by_the_ratio():
    # TRL 1.16, use_bias_correction_kl=True (its default): per_token_kl = k3 · ρ, ρ = exp(logp − old)
    # differentiated as well; the clipped term is unchanged.
    g = torch.Generator().manual_seed(2)
    logp = (-torch.rand(2, 4, generator=g, dtype=torch.float64) * 3).requires_grad_(True)
    old = -torch.rand(2, 4, generator=g, dtype=torch.float64) * 3
    ref = -torch.rand(2, 4, generator=g, dtype=torch.float64) * 3
    adv = torch.tensor([0.8, -1.3], dtype=torch.float64)
    beta, lo, hi = 0.05, 0.2, 0.28
    rho = torch.exp(logp - old)
    a = adv[:, None]
    d = ref - logp
    want = torch.minimum(rho * a, torch.clamp(rho, 1 - lo, 1 + hi) * a) - beta * (torch.exp(d) - d - 1) * rho
    got = grpo_objective(logp, old, adv, ref, eps_low=lo, eps_high=hi, beta=beta, trainer="trl")
    torch.testing.assert_close(got, want, rtol=1e-13, atol=1e-14)
    (g_got,) = torch.autograd.grad(got.sum(), logp)
    (g_want,) = torch.autograd.grad(want.sum(), logp)
    torch.testing.assert_close(g_got, g_want, rtol=1e-12, atol=1e-14)
    # on-policy the value equals the uncorrected one, the gradient does not: ∂(ρ k3)/∂logp = k3 + ∂k3/∂logp
    on = logp.detach().clone().requires_grad_(True)
    v_trl = grpo_objective(on, on.detach(), adv, ref, beta=beta, trainer="trl")
    v_none = grpo_objective(on, on.detach(), adv, ref, beta=beta)
    torch.testing.assert_close(v_trl, v_none)
    (g_trl,) = torch.autograd.grad(v_trl.sum(), on)
    (g_none,) = torch.autograd.grad(v_none.sum(), on)
    dd = ref - on.detach()
    torch.testing.assert_close(g_trl - g_none, -beta * (torch.exp(dd) - dd - 1))


def test_grpo_objective_gradient_on_policy():
    # On-policy (old = logp detached) with β = 0 the gradient w.r.t. logp is A per token.
    logp = torch.tensor([[-1.0, -2.0], [-0.5, -0.7]], dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([2.0, -1.0], dtype=torch.float64)
    obj = grpo_objective(logp, logp.detach(), adv)
    (g,) = torch.autograd.grad(obj.sum(), logp)
    assert torch.allclose(g, adv[:, None].expand(2, 2))


def test_grpo_objective_verl_preset():
    # verl 0.9.1 compute_policy_loss_vanilla, restated per token (loss = −objective):
    # ρ = exp(clamp(logp − old, ±20)); m = max(−Aρ, −A clip(ρ, 1 − lo, 1 + hi));
    # loss = min(−A c, m) for A < 0, else m; c = clip_ratio_c = 3 by default.
    logp = torch.tensor([-30.0, -0.1, -25.0, -0.01, -1.0, -15.0, -0.9, -1.1], dtype=torch.float64)
    old = torch.tensor([-0.2, -40.0, -0.3, -30.0, -1.5, -0.5, -1.0, -1.0], dtype=torch.float64)
    adv = torch.tensor([1.0, -1.0, -1.0, 1.0, 2.0, -2.0, 0.7, -0.4], dtype=torch.float64)
    lo, hi, c = 0.2, 0.28, 3.0
    want = []
    for lp, lo_, a in zip(logp.tolist(), old.tolist(), adv.tolist()):
        rho = math.exp(min(max(lp - lo_, -20.0), 20.0))
        m = max(-a * rho, -a * min(max(rho, 1 - lo), 1 + hi))
        want.append(min(-a * c, m) if a < 0 else m)
    x = logp.clone().requires_grad_(True)
    obj = grpo_objective(x, old, adv, eps_low=lo, eps_high=hi, trainer="verl")
    torch.testing.assert_close(-obj.detach(), torch.tensor(want, dtype=torch.float64), rtol=1e-14, atol=0.0)
    (g,) = torch.autograd.grad(obj.sum(), x)
    # clamped (|log ρ| > 20) or on a flat branch: no gradient; the last two tokens are unclipped
    assert torch.equal(g[:6], torch.zeros(6, dtype=torch.float64))
    torch.testing.assert_close(g[6:], adv[6:] * torch.exp(logp - old)[6:])
    # the only value change against the formula as written: A > 0 with ρ < e^−20 (token 0)
    exact = grpo_objective(logp, old, adv, eps_low=lo, eps_high=hi, dual_clip=c)
    differs = (exact != obj.detach()).nonzero().ravel().tolist()
    assert differs == [0]
    assert float(-obj[0].detach()) == pytest.approx(-math.exp(-20.0), rel=1e-12)
    # with β > 0 the k3 term is verl's clamped one
    ref = torch.tensor([-0.1, -30.0, -0.01, -25.0, -15.0, -1.0, -0.5, -2.0], dtype=torch.float64)
    with_kl = grpo_objective(logp, old, adv, ref, eps_low=lo, eps_high=hi, beta=0.1, trainer="verl")
    k3v = kl_estimate(logp, ref, "k3", trainer="verl")
    torch.testing.assert_close(with_kl, obj.detach() - 0.1 * k3v)
    assert float(k3v.max()) == 10.0
    with pytest.raises(ValueError, match="trainer"):
        grpo_objective(logp, old, adv, trainer="openrlhf")
