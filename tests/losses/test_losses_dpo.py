"""DPO loss, gradient and the "preferred answer got rarer" diagnostic (gsd.losses.dpo)."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gsd.losses import dpo_diagnostics, dpo_flags, dpo_gain, dpo_grad, dpo_loss, dpo_loss_from_gains, dpo_margin


def test_seed_two_cases_same_margin_one_flagged():
    # Case A: preferred +2, rejected −1.  Case B: preferred −1, rejected −4.  Both Δ = 3.
    gw = torch.tensor([2.0, -1.0], dtype=torch.float64)
    gl = torch.tensor([-1.0, -4.0], dtype=torch.float64)
    assert (gw - gl).tolist() == [3.0, 3.0]
    loss = dpo_loss_from_gains(gw, gl, beta=1.0)
    assert loss.tolist() == pytest.approx([math.log1p(math.exp(-3.0))] * 2, abs=1e-15)
    assert dpo_flags(gw, gl).tolist() == [False, True]
    table = dpo_diagnostics(gw, gl, beta=1.0)
    assert table["flag"].tolist() == [False, True]
    assert table["both_down"].tolist() == [False, True]
    assert table["margin"].tolist() == [3.0, 3.0]
    assert table["loss"].iloc[0] == table["loss"].iloc[1]


def test_from_log_probabilities():
    # log πθ and log π_ref of both answers; gains +2 / −1 as in the seed.
    pc, pr, rc, rr = -10.0, -21.0, -12.0, -20.0
    assert float(dpo_gain(pc, rc)) == 2.0 and float(dpo_gain(pr, rr)) == -1.0
    assert float(dpo_margin(pc, pr, rc, rr)) == 3.0
    beta = 0.1
    assert float(dpo_loss(pc, pr, rc, rr, beta=beta)) == pytest.approx(-math.log(1 / (1 + math.exp(-0.3))), abs=1e-15)
    # Batched: the loss only depends on Δ.
    out = dpo_loss(
        torch.tensor([pc, -1.0]), torch.tensor([pr, -4.0]), torch.tensor([rc, 0.0]), torch.tensor([rr, 0.0]), beta=beta
    )
    assert out[0] == pytest.approx(out[1])


@settings(max_examples=80, deadline=None)
@given(gw=st.floats(-30, 30), gl=st.floats(-30, 30), beta=st.floats(0.01, 5))
def test_gradient_matches_autograd(gw, gl, beta):
    pc = torch.tensor(gw, dtype=torch.float64, requires_grad=True)
    pr = torch.tensor(gl, dtype=torch.float64, requires_grad=True)
    loss = dpo_loss(pc, pr, 0.0, 0.0, beta=beta)
    dw, dl = torch.autograd.grad(loss, (pc, pr))
    aw, al = dpo_grad(gw, gl, beta=beta)
    assert float(dw) == pytest.approx(float(aw), rel=1e-9, abs=1e-300)
    assert float(dl) == pytest.approx(float(al), rel=1e-9, abs=1e-300)
    # equal and opposite pulls, weight β σ(−βΔ)
    assert float(aw) == -float(al)
    assert float(al) == pytest.approx(beta / (1 + math.exp(beta * (gw - gl))), rel=1e-9, abs=1e-300)


def test_extreme_margins_are_stable():
    big = torch.tensor([-1e4, 1e4], dtype=torch.float64)
    loss = dpo_loss_from_gains(big, torch.zeros(2, dtype=torch.float64), beta=1.0)
    assert torch.isfinite(loss).all()
    assert float(loss[0]) == pytest.approx(1e4)
    assert float(loss[1]) == 0.0


def test_flag_needs_both_conditions():
    gw = torch.tensor([-1.0, -1.0, 1.0, -0.5])
    gl = torch.tensor([-4.0, 0.0, 0.0, -0.5])
    # rarer & improving → flag; rarer & not improving → no flag; likelier → no flag; Δ = 0 → no flag
    assert dpo_flags(gw, gl).tolist() == [True, False, False, False]
