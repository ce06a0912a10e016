"""Trainer conventions, each restated here from the trainer's rule as read in TRL 1.16.0, verl 0.9.1
and OpenRLHF 0.11.2 (plain loops and numpy, independent of gsd's implementation)."""

import numpy as np
import pytest
import torch

import gsd


def _rewards():
    g = torch.Generator().manual_seed(0)
    return (torch.rand(16, 8, generator=g) < 0.4).double()


@pytest.mark.parametrize("trainer,eps", [("trl", 1e-4), ("verl", 1e-6), ("openrlhf", 1e-9)])
def test_group_scaling(trainer, eps):
    r = _rewards()
    want = (r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + eps)  # torch.std: ddof 1
    torch.testing.assert_close(gsd.trainer_advantages(r, trainer), want)


def test_trl_batch_and_none():
    r = _rewards()
    centred = r - r.mean(1, keepdim=True)
    torch.testing.assert_close(gsd.trainer_advantages(r, "trl", scale="batch"), centred / (r.std() + 1e-4))
    torch.testing.assert_close(gsd.trainer_advantages(r, "trl", scale="none"), centred)


def test_verl_single_response_groups():
    r = torch.tensor([[1.0], [0.0]])
    torch.testing.assert_close(gsd.trainer_advantages(r, "verl"), r / (1 + 1e-6))


def test_one_response_per_group_as_each_trainer_computes_it():
    r = np.array([[1.0], [0.0], [0.3], [0.7]])
    # TRL: r − mean over a group of one is 0, whatever the scale (its std is taken as 0).
    for scale in ("group", "batch", "none"):
        np.testing.assert_array_equal(gsd.trainer_advantages(r, "trl", scale=scale), np.zeros_like(r))
    # verl GRPO: mean 0 and std 1 for a lone response; without the std, the reward itself.
    np.testing.assert_allclose(gsd.trainer_advantages(r, "verl"), r / (1 + 1e-6), rtol=1e-15)
    np.testing.assert_array_equal(gsd.trainer_advantages(r, "verl", scale="none"), r)
    # verl's two RLOO estimators disagree: the loop version keeps r, the vectorised one zeroes it.
    np.testing.assert_array_equal(gsd.trainer_advantages(r, "verl", scale="rloo"), r)
    np.testing.assert_array_equal(gsd.trainer_advantages(r, "verl", scale="rloo_vectorized"), np.zeros_like(r))
    np.testing.assert_array_equal(gsd.trainer_advantages(r, "paper"), np.zeros_like(r))
    # OpenRLHF refuses n_samples_per_prompt = 1.
    with pytest.raises(gsd.InputError, match="n_samples_per_prompt"):
        gsd.trainer_advantages(r, "openrlhf")
    with pytest.raises(gsd.InputError, match="n_samples_per_prompt"):
        gsd.trainer_advantages(r, "openrlhf", scale="rloo")


@pytest.mark.parametrize("scale", ["rloo", "rloo_vectorized"])
def test_verl_rloo_is_leave_one_out_for_groups_of_two_or_more(scale):
    r = np.random.default_rng(1).normal(size=(5, 6))
    want = np.array([[ri - np.mean(np.delete(row, i)) for i, ri in enumerate(row)] for row in r])
    np.testing.assert_allclose(gsd.trainer_advantages(r, "verl", scale=scale), want, rtol=1e-12, atol=1e-14)


def _float32_rule(r, eps, ddof=1):
    """(r − mean)/(std + eps), every step rounded to float32 (numpy, one group at a time)."""
    out = np.empty(r.shape, dtype=np.float32)
    for idx in np.ndindex(r.shape[:-1]):
        g = r[idx].astype(np.float32)
        m = np.float32(np.sum(g, dtype=np.float32) / np.float32(g.size))
        var = np.float32(np.sum((g - m) ** 2, dtype=np.float32) / np.float32(g.size - ddof))
        out[idx] = (g - m) / (np.sqrt(var) + np.float32(eps))
    return out


@pytest.mark.parametrize("trainer,eps", [("trl", 1e-4), ("verl", 1e-6), ("openrlhf", 1e-9)])
def test_float32_rounding_of_equal_graded_rewards(trainer, eps):
    # Groups of one repeated graded reward carry no signal: exactly 0 by default, but rounding
    # noise magnified by 1/eps when the trainer's float32 formula is evaluated as written.
    values = np.array([0.1, 0.3, 0.7, 1 / 3, 0.9, 0.2, 0.6, 0.45])
    for G in (8, 16, 64):
        r = np.repeat(values[:, None], G, axis=1)
        np.testing.assert_array_equal(gsd.trainer_advantages(r, trainer), np.zeros_like(r))
        a32 = gsd.trainer_advantages(r, trainer, dtype="float32")
        assert a32.dtype == np.float32
        # the mean of G equal float32 numbers is off by at most ~G/2 units in the last place
        ulp = np.spacing(values.astype(np.float32))[:, None]
        assert (np.abs(a32) <= G * ulp / eps).all()
    worst = max(
        np.abs(gsd.trainer_advantages(np.repeat(values[:, None], G, 1), trainer, dtype="float32")).max()
        for G in (8, 16, 64)
    )
    assert worst > 0  # the rounding shows up somewhere (TRL: 6e-4, verl: 0.06 on these values)


@pytest.mark.parametrize("trainer", ["trl", "verl", "openrlhf"])
def test_float32_option_follows_the_formula_on_groups_with_signal(trainer):
    r = np.round(np.random.default_rng(2).random((16, 8)), 3)
    eps = gsd.CONVENTIONS[trainer].eps
    a32 = gsd.trainer_advantages(r, trainer, dtype="float32")
    np.testing.assert_allclose(a32, _float32_rule(r, eps), rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(a32, gsd.trainer_advantages(r, trainer), rtol=2e-6, atol=2e-6)
    a64 = gsd.trainer_advantages(torch.tensor(r), trainer, dtype="float64")
    assert a64.dtype == torch.float64
    want = (r - r.mean(1, keepdims=True)) / (r.std(1, ddof=1, keepdims=True) + eps)
    np.testing.assert_allclose(a64.numpy(), want, rtol=1e-12, atol=1e-14)


def test_float32_option_batch_scale():
    r = np.round(np.random.default_rng(3).random((4, 8)), 2)
    want = (r - r.mean(1, keepdims=True)) / (r.std(ddof=1) + 1e-4)
    np.testing.assert_allclose(
        gsd.trainer_advantages(r, "trl", scale="batch", dtype="float32"), want, rtol=1e-5, atol=1e-6
    )


def test_dtype_option_refusals():
    with pytest.raises(gsd.InputError, match="dtype"):
        gsd.trainer_advantages([[0, 1]], "trl", dtype="float16")
    with pytest.raises(gsd.InputError, match="dtype"):
        gsd.trainer_advantages([[0, 1]], "paper", dtype="float32")
    with pytest.raises(gsd.InputError, match="rloo"):
        gsd.trainer_advantages([[0, 1]], "verl", scale="rloo", dtype="float32")


def _normalize_then_sum(r, w, eps=1e-4):
    """TRL's GDPO aggregation by plain loops: per function and group, then over the batch."""
    B, G, K = r.shape
    s = np.zeros((B, G))
    for b in range(B):
        for k in range(K):
            x = r[b, :, k]
            sd = np.sqrt(sum((v - x.mean()) ** 2 for v in x) / (G - 1)) if G > 1 else 0.0
            s[b] += w[k] * (x - x.mean()) / (sd + eps)
    flat = s.ravel()
    sd = np.sqrt(sum((v - flat.mean()) ** 2 for v in flat) / (flat.size - 1)) if flat.size > 1 else 0.0
    return (s - flat.mean()) / (sd + eps)


def test_multi_reward_normalize_then_sum():
    rng = np.random.default_rng(4)
    r = np.stack([rng.normal(size=(6, 5)), np.round(rng.random((6, 5)), 2), rng.integers(0, 2, (6, 5))], -1).astype(
        float
    )
    r[0, :, 2] = 1.0  # a silent function in one group: it contributes 0 there
    w = np.array([1.0, 0.5, 2.0])
    got = gsd.multi_reward_advantages(r, w, aggregation="normalize_then_sum")
    np.testing.assert_allclose(got, _normalize_then_sum(r, w), rtol=1e-12, atol=1e-12)
    # torch in, torch out, same numbers
    got_t = gsd.multi_reward_advantages(torch.tensor(r), w, aggregation="normalize_then_sum")
    np.testing.assert_allclose(got_t.numpy(), got, rtol=1e-12, atol=1e-12)
    # one generation per group: every per-function advantage is 0, so the sum and the result are 0
    np.testing.assert_array_equal(
        gsd.multi_reward_advantages(r[:, :1], w, aggregation="normalize_then_sum"), np.zeros((6, 1))
    )


def test_multi_reward_sum_then_normalize_is_the_weighted_sum_through_trainer_advantages():
    r = np.random.default_rng(5).normal(size=(3, 4, 2))
    w = [2.0, -1.0]
    s = 2.0 * r[..., 0] - r[..., 1]
    for scale in ("group", "batch", "none"):
        want = gsd.trainer_advantages(s, "trl", scale=scale)
        np.testing.assert_allclose(gsd.multi_reward_advantages(r, w, scale=scale), want, rtol=1e-12)
    np.testing.assert_allclose(gsd.multi_reward_advantages(r), gsd.trainer_advantages(r.sum(-1), "trl"), rtol=1e-12)


def test_multi_reward_refusals():
    r = np.zeros((2, 3, 2))
    with pytest.raises(gsd.InputError, match="scale"):
        gsd.multi_reward_advantages(r, aggregation="normalize_then_sum", scale="batch")
    with pytest.raises(gsd.InputError, match="aggregation"):
        gsd.multi_reward_advantages(r, aggregation="mean")
    with pytest.raises(gsd.InputError, match="weights"):
        gsd.multi_reward_advantages(r, [1.0, 2.0, 3.0])
    with pytest.raises(gsd.InputError, match="weights"):
        gsd.multi_reward_advantages(r, [1.0, float("nan")])
    with pytest.raises(gsd.InputError, match="K"):
        gsd.multi_reward_advantages([1.0, 2.0])


def test_openrlhf_rloo():
    r = _rewards().numpy()
    G = r.shape[1]
    want = r - (r.sum(1, keepdims=True) - r) / (G - 1)
    np.testing.assert_allclose(gsd.trainer_advantages(r, "openrlhf", scale="rloo"), want, rtol=1e-12, atol=1e-15)


def test_paper_preset_is_population_std():
    np.testing.assert_array_equal(gsd.trainer_advantages([[0, 1, 1, 0]], "paper"), [[-1, 1, 1, -1]])


def test_gap_to_paper_at_G8_is_6_5_percent():
    gap = gsd.convention_gap(8, "trl").iloc[0]
    assert gap.ratio_no_eps == pytest.approx(np.sqrt(7 / 8))
    assert round(gap.gap_percent, 1) == 6.5
    # eps bites hardest at k = 1 (smallest σ): TRL's ratio there, by hand.
    s = np.sqrt(7) / 8
    assert gap.ratio_min == pytest.approx(s / (s * np.sqrt(8 / 7) + 1e-4))


def test_trainer_update_matches_gap_table_through_identity():
    # A real group: the trainer's update divided by the paper's equals the tabulated ratio.
    r = np.array([1.0, 0, 0, 0, 0, 0, 0, 0])
    s = np.random.default_rng(0).normal(size=(8, 3))
    A = gsd.trainer_advantages(r, "trl")
    g_trl = (A[:, None] * s).mean(0)
    g_paper = gsd.group_update(r, s)
    np.testing.assert_allclose(g_trl / g_paper, gsd.convention_gap(8, "trl").ratio_min.iloc[0], rtol=1e-12)


def test_bad_trainer_and_scale():
    with pytest.raises(ValueError, match="trainer"):
        gsd.trainer_advantages([[0, 1]], "deepspeed")
    with pytest.raises(ValueError, match="scale"):
        gsd.trainer_advantages([[0, 1]], "verl", scale="batch")
