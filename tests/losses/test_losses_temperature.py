"""Softmax with temperature and Hinton distillation (gsd.losses.temperature)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from gsd.losses import (
    distillation_grad,
    distillation_loss,
    log_softmax_t,
    soft_term,
    soft_term_grad,
    soft_term_grad_limit,
    softmax_t,
    temperature_table,
)

logit_vectors = arrays(np.float64, st.integers(2, 6), elements=st.floats(-5, 5))


def test_seed_temperature_numbers():
    # Seed: logits (2, 0) → (0.88, 0.12) at T = 1 and (0.73, 0.27) at T = 2.
    q1 = softmax_t([2.0, 0.0], 1.0)
    q2 = softmax_t([2.0, 0.0], 2.0)
    assert np.round(q1.numpy(), 2).tolist() == [0.88, 0.12]
    assert np.round(q2.numpy(), 2).tolist() == [0.73, 0.27]
    # Exactly: sigmoid(2) and sigmoid(1).
    assert float(q1[0]) == pytest.approx(1 / (1 + math.exp(-2)), abs=1e-15)
    assert float(q2[0]) == pytest.approx(1 / (1 + math.exp(-1)), abs=1e-15)
    assert float(log_softmax_t([2.0, 0.0], 2.0)[1]) == pytest.approx(math.log(1 / (1 + math.e)), abs=1e-14)


def test_distillation_loss_by_hand():
    z = [1.0, 0.0, -1.0]  # student
    v = [0.0, 2.0, 0.0]  # teacher
    y, T, lam = 1, 2.0, 0.3
    ez = [math.exp(a) for a in z]
    hard = -math.log(ez[y] / sum(ez))
    qT = [math.exp(a / T) for a in z]
    qT = [a / sum(qT) for a in qT]
    pT = [math.exp(a / T) for a in v]
    pT = [a / sum(pT) for a in pT]
    kl = sum(pi * math.log(pi / qi) for pi, qi in zip(pT, qT))
    expected = (1 - lam) * hard + lam * T**2 * kl
    got = distillation_loss(
        torch.tensor([z], dtype=torch.float64), torch.tensor([v], dtype=torch.float64), [y], T=T, lam=lam
    )
    assert got.shape == (1,)
    assert float(got[0]) == pytest.approx(expected, rel=1e-13)
    assert float(soft_term(z, v, T)) == pytest.approx(T**2 * kl, rel=1e-13)
    assert float(soft_term(z, v, T, scaled=False)) == pytest.approx(kl, rel=1e-13)


def test_lambda_endpoints():
    z = torch.tensor([[0.3, -1.2, 2.0]], dtype=torch.float64)
    v = torch.tensor([[1.0, 0.0, -1.0]], dtype=torch.float64)
    ce = torch.nn.functional.cross_entropy(z, torch.tensor([2]), reduction="none")
    assert torch.allclose(distillation_loss(z, v, [2], T=3.0, lam=0.0), ce)
    assert torch.allclose(distillation_loss(z, v, [2], T=3.0, lam=1.0), soft_term(z, v, 3.0))


def test_batched_over_leading_dims():
    g = torch.Generator().manual_seed(1)
    z = torch.randn(2, 3, 5, generator=g, dtype=torch.float64)
    v = torch.randn(2, 3, 5, generator=g, dtype=torch.float64)
    y = torch.randint(0, 5, (2, 3), generator=g)
    full = distillation_loss(z, v, y, T=1.7, lam=0.4)
    assert full.shape == (2, 3)
    for i in range(2):
        for j in range(3):
            one = distillation_loss(z[i, j][None], v[i, j][None], y[i, j][None], T=1.7, lam=0.4)
            assert float(full[i, j]) == pytest.approx(float(one[0]), rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(z=logit_vectors, data=st.data(), T=st.floats(0.3, 20), lam=st.floats(0, 1))
def test_analytic_gradient_matches_autograd(z, data, T, lam):
    n = z.shape[0]
    v = data.draw(arrays(np.float64, n, elements=st.floats(-5, 5)))
    y = data.draw(st.integers(0, n - 1))
    zt = torch.tensor(z, requires_grad=True)
    loss = distillation_loss(zt[None], torch.tensor(v)[None], [y], T=T, lam=lam).sum()
    (auto,) = torch.autograd.grad(loss, zt)
    analytic = distillation_grad(torch.tensor(z)[None], torch.tensor(v)[None], [y], T=T, lam=lam)[0]
    assert torch.allclose(auto, analytic, atol=1e-12, rtol=1e-9)

    zt = torch.tensor(z, requires_grad=True)
    (auto_soft,) = torch.autograd.grad(soft_term(zt, torch.tensor(v), T), zt)
    assert torch.allclose(auto_soft, soft_term_grad(z, v, T), atol=1e-12, rtol=1e-9)
    assert torch.allclose(soft_term_grad(z, v, T, scaled=False) * T**2, soft_term_grad(z, v, T), atol=1e-14)


@settings(max_examples=40, deadline=None)
@given(z=logit_vectors, data=st.data())
def test_t2_times_gradient_tends_to_logit_difference_over_n(z, data):
    # Zero-mean logits: the limit is (z − v) / N. The error of the scaled gradient shrinks like 1/T.
    n = z.shape[0]
    v = data.draw(arrays(np.float64, n, elements=st.floats(-5, 5)))
    z = z - z.mean()
    v = v - v.mean()
    limit = (torch.tensor(z) - torch.tensor(v)) / n
    assert torch.allclose(soft_term_grad_limit(z, v), limit, atol=1e-15)
    if float(limit.norm()) < 1e-3:
        return
    err = [float((soft_term_grad(z, v, T) - limit).norm()) for T in (1e3, 2e3, 1e4)]
    assert err[2] < 0.02 * float(limit.norm()) + 1e-9
    # Below T²·ε ≈ 2e-10 (T = 1e3) the error is the T² scaling's rounding, not the 1/T term: no order to check.
    assert err[1] < err[0] or err[0] < 1e6 * np.finfo(np.float64).eps
    # Without T² the gradient itself vanishes like 1/T².
    g1 = float(soft_term_grad(z, v, 1e3, scaled=False).norm())
    g2 = float(soft_term_grad(z, v, 2e3, scaled=False).norm())
    assert g1 / g2 == pytest.approx(4.0, rel=0.02)


def test_limit_subtracts_means():
    # Shifting all logits by a constant changes nothing, so the limit uses centred logits.
    z = torch.tensor([3.0, 1.0, 2.0], dtype=torch.float64)
    v = torch.tensor([0.0, 0.0, 3.0], dtype=torch.float64)
    assert torch.allclose(soft_term_grad_limit(z + 10, v - 4), soft_term_grad_limit(z, v))
    assert torch.allclose(soft_term_grad(z, v, 5e4), soft_term_grad_limit(z, v), atol=1e-4)


def test_temperature_table_shows_the_scaling():
    df = temperature_table([1.0, -0.5, -0.5], [0.3, 0.2, -0.5], temperatures=(1, 10, 100))
    assert list(df["T"]) == [1.0, 10.0, 100.0]
    assert df["grad_norm"].iloc[1] / df["grad_norm"].iloc[2] == pytest.approx(100, rel=0.05)
    assert df["rel_err_to_limit"].is_monotonic_decreasing
    assert df["rel_err_to_limit"].iloc[-1] < 0.01
    np.testing.assert_allclose(df["scaled_grad_norm"], df["grad_norm"] * df["T"] ** 2)
