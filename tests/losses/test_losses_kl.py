"""Forward/reverse KL, on-policy d_t and the sampled estimators k1, k2, k3 (gsd.losses.kl)."""

import math

import numpy as np
import pytest
import scipy.stats
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from gsd.losses import (
    estimator_moments,
    estimator_sweep,
    estimator_table,
    forward_kl_terms,
    k1,
    k2,
    k3,
    kl_divergence,
    kl_estimate,
    reverse_kl_per_token,
    reverse_kl_terms,
    sample_estimator,
    sampled_log_ratio,
    sequence_reverse_kl,
)

STUDENT = [0.5, 0.2, 0.3]  # q, seed's "cat, dog, fox"
TEACHER = [0.6, 0.3, 0.1]  # p


def distributions(n):
    return arrays(np.float64, n, elements=st.floats(0.02, 1.0)).map(lambda a: a / a.sum())


pairs = st.integers(2, 6).flatmap(lambda n: st.tuples(distributions(n), distributions(n)))


def test_seed_full_vocabulary_d_t():
    by_hand = 0.5 * math.log(0.5 / 0.6) + 0.2 * math.log(0.2 / 0.3) + 0.3 * math.log(0.3 / 0.1)
    d = reverse_kl_per_token(STUDENT, TEACHER)
    assert float(d) == pytest.approx(by_hand, abs=1e-15)
    assert round(float(d), 3) == 0.157


def test_seed_sampled_token_is_cat():
    q = torch.tensor([STUDENT] * 3, dtype=torch.float64)
    p = torch.tensor([TEACHER] * 3, dtype=torch.float64)
    r = sampled_log_ratio(q, p, torch.tensor([0, 1, 2]))
    # Only "cat" (index 0) gives the seed's −0.182; dog gives −0.405, fox +1.099.
    assert round(float(r[0]), 3) == -0.182
    assert float(r[0]) == pytest.approx(math.log(5 / 6), abs=1e-15)
    assert round(float(r[1]), 3) == -0.405 and round(float(r[2]), 3) == 1.099
    assert [round(float(x), 3) == -0.182 for x in r] == [True, False, False]
    # A single sample can be negative although d_t > 0; its q-average is d_t.
    avg = sum(qv * float(rv) for qv, rv in zip(STUDENT, r))
    assert avg == pytest.approx(float(reverse_kl_per_token(STUDENT, TEACHER)), abs=1e-15)


def test_seed_forward_and_reverse_weights():
    fwd = forward_kl_terms([0.8, 0.2], [0.4, 0.6])
    rev = reverse_kl_terms([0.8, 0.2], [0.4, 0.6])
    assert fwd.weight.tolist() == pytest.approx([0.8, 0.2])
    assert rev.weight.tolist() == pytest.approx([0.4, 0.6])
    assert fwd.log_ratio.tolist() == pytest.approx([math.log(2), math.log(1 / 3)])
    assert rev.log_ratio.tolist() == pytest.approx([math.log(0.5), math.log(3)])
    assert float(fwd.contribution.sum()) == pytest.approx(0.8 * math.log(2) + 0.2 * math.log(1 / 3))
    assert float(rev.contribution.sum()) == pytest.approx(0.4 * math.log(0.5) + 0.6 * math.log(3))


def test_sequence_reverse_kl_with_mask():
    q = torch.tensor([[STUDENT, [0.2, 0.3, 0.5], [1 / 3] * 3]], dtype=torch.float64)  # (1, T=3, V=3)
    p = torch.tensor([[TEACHER, [0.2, 0.3, 0.5], [0.5, 0.25, 0.25]]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0]])
    d = reverse_kl_per_token(q, p, mask)
    assert d.shape == (1, 3)
    assert float(d[0, 1]) == 0.0 and float(d[0, 2]) == 0.0
    assert float(sequence_reverse_kl(q, p, mask)[0]) == pytest.approx(float(reverse_kl_per_token(STUDENT, TEACHER)))
    unmasked = sequence_reverse_kl(q, p)
    assert float(unmasked[0]) == pytest.approx(float(d[0, 0]) + scipy.stats.entropy([1 / 3] * 3, [0.5, 0.25, 0.25]))


@settings(max_examples=60, deadline=None)
@given(pq=pairs)
def test_kl_matches_scipy_and_is_nonnegative(pq):
    p, q = pq
    assert float(kl_divergence(p, q)) == pytest.approx(scipy.stats.entropy(p, q), abs=1e-12)
    assert float(kl_divergence(p, q)) >= -1e-15
    assert float(kl_divergence(p, p)) == pytest.approx(0.0, abs=1e-15)


def test_zero_probabilities():
    assert float(kl_divergence([0.5, 0.5, 0.0], [0.25, 0.25, 0.5])) == pytest.approx(math.log(2))
    assert math.isinf(float(kl_divergence([0.5, 0.5], [1.0, 0.0])))


def exact_moments_by_loop(q, p, kind):
    f = {
        "k1": lambda a, b: math.log(a / b),
        "k2": lambda a, b: 0.5 * math.log(a / b) ** 2,
        "k3": lambda a, b: b / a - 1 - math.log(b / a),
    }[kind]
    m = sum(a * f(a, b) for a, b in zip(q, p))
    m2 = sum(a * f(a, b) ** 2 for a, b in zip(q, p))
    return m, m2 - m * m


@settings(max_examples=60, deadline=None)
@given(pq=pairs)
def test_estimator_moments_by_enumeration(pq):
    q, p = pq
    kl_qp = scipy.stats.entropy(q, p)
    for kind in ("k1", "k2", "k3"):
        mean, var = estimator_moments(q, p, kind)
        m, v = exact_moments_by_loop(q, p, kind)
        assert float(mean) == pytest.approx(m, abs=1e-12)
        assert float(var) == pytest.approx(v, abs=1e-10)
    # k1 and k3 are unbiased for KL(q ‖ p) when tokens come from q.
    assert float(estimator_moments(q, p, "k1")[0]) == pytest.approx(kl_qp, abs=1e-12)
    assert float(estimator_moments(q, p, "k3")[0]) == pytest.approx(kl_qp, abs=1e-12)


def test_k2_is_biased_k1_can_be_negative_k3_is_not():
    mean2, _ = estimator_moments(STUDENT, TEACHER, "k2")
    kl_qp = scipy.stats.entropy(STUDENT, TEACHER)
    assert float(mean2) - kl_qp > 0.04  # 0.2058 vs 0.1573
    logq = torch.log(torch.tensor(STUDENT, dtype=torch.float64))
    logp = torch.log(torch.tensor(TEACHER, dtype=torch.float64))
    assert (k1(logq, logp) < 0).any()
    assert (k3(logq, logp) >= 0).all() and (k2(logq, logp) >= 0).all()
    # Neither is unbiased for the other direction KL(p ‖ q).
    assert float(estimator_moments(STUDENT, TEACHER, "k1")[0]) != pytest.approx(
        scipy.stats.entropy(TEACHER, STUDENT), abs=1e-3
    )


def test_close_distributions_all_three_agree_to_second_order():
    q = torch.tensor([0.3, 0.3, 0.4], dtype=torch.float64)
    p = torch.softmax(torch.log(q) + 0.01 * torch.tensor([1.0, -1.0, 0.0], dtype=torch.float64), -1)
    kl_qp = float(kl_divergence(q, p))
    for kind in ("k1", "k2", "k3"):
        assert float(estimator_moments(q, p, kind)[0]) == pytest.approx(kl_qp, rel=0.05)
    # and k3 has a far smaller variance than k1 there
    assert float(estimator_moments(q, p, "k3")[1]) < 1e-3 * float(estimator_moments(q, p, "k1")[1])


def test_monte_carlo_agrees_with_exact():
    table = estimator_table(STUDENT, TEACHER, n=40_000, seed=3)
    for kind in ("k1", "k2", "k3"):
        row = table.loc[kind]
        assert abs(row["mc_mean"] - row["exact_mean"]) < 4 * row["mc_se"]
    assert table.loc["k1", "bias_for_kl_qp"] == pytest.approx(0, abs=1e-12)
    assert table.loc["k3", "bias_for_kl_qp"] == pytest.approx(0, abs=1e-12)
    assert table.loc["k2", "bias_for_kl_qp"] == pytest.approx(0.0485, abs=1e-3)
    assert table.loc["k1", "min_value"] < 0 <= table.loc["k3", "min_value"]
    assert table.loc["k3", "exact_std"] < table.loc["k1", "exact_std"]
    draws = sample_estimator(STUDENT, TEACHER, "k1", 500, generator=torch.Generator().manual_seed(0))
    assert draws.shape == (500,)
    assert set(np.round(draws.numpy(), 6)) <= {round(math.log(q / p), 6) for q, p in zip(STUDENT, TEACHER)}


def test_k3_is_the_trainers_low_variance_form():
    # TRL: exp(ref − logp) − (ref − logp) − 1;  verl "low_var_kl": same with ratio = exp(ref − logp).
    g = torch.Generator().manual_seed(0)
    logp = -torch.rand(50, generator=g, dtype=torch.float64) * 5
    ref = -torch.rand(50, generator=g, dtype=torch.float64) * 5
    trl = torch.exp(ref - logp) - (ref - logp) - 1
    assert torch.allclose(k3(logp, ref), trl, atol=1e-12)
    assert torch.allclose(k1(logp, ref), logp - ref)
    assert torch.allclose(k2(logp, ref), 0.5 * (logp - ref) ** 2)
    assert torch.equal(kl_estimate(logp, ref, "k2"), k2(logp, ref))


def test_estimator_sweep():
    df = estimator_sweep(STUDENT, [1.0, 0.0, -1.0], scales=[0.0, 1.0, 2.0])
    assert df["kl_qp"].iloc[0] == pytest.approx(0.0, abs=1e-15)
    np.testing.assert_allclose(df["mean_k1"], df["kl_qp"], atol=1e-12)
    np.testing.assert_allclose(df["mean_k3"], df["kl_qp"], atol=1e-12)
    assert (df["mean_k2"].iloc[1:] != df["kl_qp"].iloc[1:]).all()


def _verl_k3(logq, logp):
    """verl 0.9.1 low_var_kl, restated: log(p/q) clamped to ±20, then k3 clamped to [−10, 10]."""
    d = min(max(logp - logq, -20.0), 20.0)
    return min(max(math.exp(d) - d - 1.0, -10.0), 10.0)


def test_verl_k3_clamps():
    logq = torch.tensor([-30.0, -0.1, -25.0, -0.01, -1.0, -15.0, -2.0, -0.5], dtype=torch.float64)
    logp = torch.tensor([-0.1, -30.0, -0.01, -25.0, -15.0, -1.0, -0.5, -2.0], dtype=torch.float64)
    got = kl_estimate(logq, logp, "k3", trainer="verl")
    want = torch.tensor([_verl_k3(a, b) for a, b in zip(logq.tolist(), logp.tolist())], dtype=torch.float64)
    torch.testing.assert_close(got, want, rtol=1e-14, atol=1e-14)
    assert float(got.max()) == 10.0 and float(k3(logq, logp).max()) > 1e12  # the exact k3 is unbounded
    # the same numbers through k3's own arguments; k1 and k2 are not clamped by verl
    torch.testing.assert_close(k3(logq, logp, log_ratio_clip=20, max_value=10), got)
    assert torch.equal(kl_estimate(logq, logp, "k1", trainer="verl"), k1(logq, logp))
    assert torch.equal(kl_estimate(logq, logp, "k3", trainer="trl"), k3(logq, logp))
    # where a clamp is active the gradient is 0; the first six points are all clamped (k3 > 10)
    lq = logq.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(kl_estimate(lq, logp, "k3", trainer="verl").sum(), lq)
    assert torch.equal(g[:6], torch.zeros(6, dtype=torch.float64))
    d = (logp - logq)[6:]
    torch.testing.assert_close(g[6:], 1 - torch.exp(d))  # ∂/∂log q of e^d − d − 1, d = log p − log q


def test_kl_estimate_trainer_refused():
    with pytest.raises(ValueError, match="trainer"):
        kl_estimate(-1.0, -2.0, "k3", trainer="openrlhf")
    with pytest.raises(ValueError, match="log_ratio_clip"):
        k3(-1.0, -2.0, log_ratio_clip=-1)
