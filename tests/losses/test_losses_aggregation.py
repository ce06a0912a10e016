"""Loss aggregation modes, length weights and the TRL / verl conventions (gsd.losses.aggregation).

The expected values below are the trainers' formulas restated in plain loops (read from TRL
1.16's ``GRPOTrainer._compute_loss`` and verl 0.9.1's ``core_algos.agg_loss``), so a change of
convention on either side shows up here.
"""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from gsd.losses import (
    AGG_MODES,
    TRL_LOSS_TYPES,
    VERL_AGG_MODES,
    VERL_LEGACY_AGG_MODES,
    aggregate,
    aggregate_as,
    per_token_weight,
    sequence_weights,
    token_weights,
    trainer_table,
)

LOSS = torch.tensor(
    [
        [0.5, -1.0, 7.0, 7.0, 7.0, 7.0],
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        [-2.0, 0.5, 0.25, 1.0, 9.0, 9.0],
        [3.0, 9.0, 9.0, 9.0, 9.0, 9.0],
    ],
    dtype=torch.float64,
)
MASK = torch.tensor(
    [
        [1, 1, 0, 0, 0, 0],
        [1, 1, 1, 1, 1, 1],
        [1, 1, 1, 1, 0, 0],
        [1, 0, 0, 0, 0, 0],
    ]
)
MAX_COMPLETION_LENGTH = 8  # larger than the padded width 6, as happens when no answer hits the limit


def rows_of(loss, mask):
    """(row sum, row count) per row, by plain iteration."""
    out = []
    for lr, mr in zip(loss.tolist(), mask.tolist()):
        s = sum(l for l, m in zip(lr, mr) if m)
        out.append((s, sum(mr)))
    return out


def trl_expected(loss, mask, loss_type, max_completion_length):
    rows = rows_of(loss, mask)
    B = len(rows)
    total = sum(s for s, _ in rows)
    count = sum(n for _, n in rows)
    if loss_type in ("grpo", "sapo"):  # each row's token mean (count floored at 1), then the mean over all rows
        return sum(s / max(n, 1) for s, n in rows) / B
    if loss_type == "bnpo":  # token sum over the local batch / its token count (floored at 1)
        return total / max(count, 1)
    if loss_type == "dr_grpo":  # token sum / (rows × max_completion_length)
        return total / (B * max_completion_length)
    if loss_type in ("dapo", "cispo", "vespo"):
        # token sum / (generation-batch token count / processes · accumulation / steps_per_generation)
        processes, accumulation, steps_per_generation = 1, 1, 1
        return total / (count / processes * accumulation / steps_per_generation)
    if loss_type == "luspo":  # each row's token sum, then the mean over all rows
        return total / B
    raise AssertionError(loss_type)


def verl_expected(loss, mask, mode, loss_scale_factor=None):
    rows = rows_of(loss, mask)
    total = sum(s for s, _ in rows)
    count = sum(n for _, n in rows)
    kept = [(s, n) for s, n in rows if n > 0]  # rows with no active token are left out
    if mode == "token-mean":
        return total / count
    if mode == "token-sum":
        return total
    if mode == "seq-mean-token-sum":
        return sum(s for s, _ in kept) / len(kept)
    if mode == "seq-mean-token-mean":
        return sum(s / (n + 1e-8) for s, n in kept) / len(kept)
    if mode == "seq-mean-token-sum-norm":
        horizon = loss.shape[-1] if loss_scale_factor is None else loss_scale_factor
        return sum(s for s, _ in kept) / len(kept) / horizon
    raise AssertionError(mode)


def verl_legacy_expected(loss, mask, mode):
    rows = rows_of(loss, mask)
    B = len(rows)
    total = sum(s for s, _ in rows)
    if mode == "token-mean":
        return total / sum(n for _, n in rows)
    if mode == "seq-mean-token-sum":  # torch.mean over every row
        return total / B
    if mode == "seq-mean-token-mean":
        return sum(s / n if n else math.nan for s, n in rows) / B
    if mode == "seq-mean-token-sum-norm":  # the whole token sum over the padded length, no 1/B
        return total / loss.shape[-1]
    raise AssertionError(mode)


@pytest.mark.parametrize("loss_type", sorted(TRL_LOSS_TYPES))
def test_trl_loss_types(loss_type):
    expected = trl_expected(LOSS, MASK, loss_type, MAX_COMPLETION_LENGTH)
    got = aggregate_as(LOSS, MASK, "trl", loss_type, norm=MAX_COMPLETION_LENGTH)
    assert float(got) == pytest.approx(expected, rel=1e-14)


@pytest.mark.parametrize("mode", sorted(VERL_AGG_MODES))
def test_verl_loss_agg_modes(mode):
    assert float(aggregate_as(LOSS, MASK, "verl", mode)) == pytest.approx(verl_expected(LOSS, MASK, mode), rel=1e-8)
    if mode == "seq-mean-token-sum-norm":
        got = aggregate_as(LOSS, MASK, "verl", mode, norm=4096)
        assert float(got) == pytest.approx(verl_expected(LOSS, MASK, mode, loss_scale_factor=4096), rel=1e-12)


@pytest.mark.parametrize("mode", sorted(VERL_LEGACY_AGG_MODES))
def test_verl_legacy_loss_agg_modes(mode):
    got = aggregate_as(LOSS, MASK, "verl-legacy", mode)
    assert float(got) == pytest.approx(verl_legacy_expected(LOSS, MASK, mode), rel=1e-14)


def test_numbers_on_the_reference_batch():
    # Row sums −0.5, 21, −0.25, 3 over lengths 2, 6, 4, 1 (13 tokens).
    total = -0.5 + 21 - 0.25 + 3
    assert float(aggregate(LOSS, MASK, "token-mean")) == pytest.approx(total / 13)
    assert float(aggregate(LOSS, MASK, "seq-mean-token-mean")) == pytest.approx((-0.25 + 3.5 - 0.0625 + 3) / 4)
    assert float(aggregate(LOSS, MASK, "seq-mean-token-sum-norm", norm=8)) == pytest.approx(total / 32)
    # on one process TRL's dapo and bnpo coincide with verl's token-mean
    assert float(aggregate_as(LOSS, MASK, "trl", "dapo")) == float(aggregate_as(LOSS, MASK, "verl", "token-mean"))


def test_trl_dapo_denominator_after_mask_truncated_completions():
    # TRL 1.16 zeroes the truncated rows of completion_mask first and sums the token count from
    # the zeroed mask, so their tokens are in neither the numerator nor the denominator.
    truncated = torch.tensor([False, True, False, False])
    masked = MASK * (~truncated).unsqueeze(1)
    kept_rows = [(s, n) for (s, n), t in zip(rows_of(LOSS, MASK), truncated.tolist()) if not t]
    expected = sum(s for s, _ in kept_rows) / sum(n for _, n in kept_rows)  # (−0.5 − 0.25 + 3) / 7
    assert expected == pytest.approx(2.25 / 7)
    for loss_type in ("dapo", "bnpo"):
        assert float(aggregate_as(LOSS, masked, "trl", loss_type)) == pytest.approx(expected, rel=1e-14)


def test_empty_rows_split_the_conventions():
    loss = torch.cat([LOSS, torch.ones(1, 6, dtype=torch.float64)])
    mask = torch.cat([MASK, torch.zeros(1, 6, dtype=MASK.dtype)])  # e.g. a truncated answer masked out
    trl = float(aggregate_as(loss, mask, "trl", "grpo"))
    verl = float(aggregate_as(loss, mask, "verl", "seq-mean-token-mean"))
    assert trl == pytest.approx(trl_expected(loss, mask, "grpo", 8))  # 5 rows in the mean
    assert verl == pytest.approx(verl_expected(loss, mask, "seq-mean-token-mean"), rel=1e-8)  # 4 rows
    assert trl == pytest.approx(verl * 4 / 5)
    # legacy verl divides 0 by 0 on that row; the package counts it as 0 (rows="all")
    assert math.isnan(verl_legacy_expected(loss, mask, "seq-mean-token-mean"))
    assert float(aggregate_as(loss, mask, "verl-legacy", "seq-mean-token-mean")) == pytest.approx(trl)


def test_padding_values_never_leak():
    dirty = LOSS.clone()
    dirty[MASK == 0] = float("inf")
    for mode in AGG_MODES:
        assert float(aggregate(dirty, MASK, mode)) == pytest.approx(float(aggregate(LOSS, MASK, mode)))


masks = st.tuples(st.integers(1, 5), st.integers(1, 7)).flatmap(
    lambda s: arrays(np.int64, s, elements=st.integers(0, 1))
)


@settings(max_examples=60, deadline=None)
@given(
    mask=masks, mode=st.sampled_from(AGG_MODES), rows=st.sampled_from(["all", "nonempty"]), seed=st.integers(0, 1000)
)
def test_token_weights_are_the_gradient(mask, mode, rows, seed):
    m = torch.tensor(mask)
    loss = torch.randn(m.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64, requires_grad=True)
    value = aggregate(loss, m, mode, rows=rows, norm=11.0)
    (grad,) = torch.autograd.grad(value, loss)
    w = token_weights(m, mode, rows=rows, norm=11.0)
    assert torch.allclose(grad, w, atol=1e-15)
    # and the aggregate is Σ w·l
    assert float((w * loss).sum().detach()) == pytest.approx(float(value.detach()), abs=1e-12)


def test_per_token_weight_examples():
    lengths = torch.tensor([10.0, 100.0], dtype=torch.float64)
    assert per_token_weight(lengths, "seq-mean-token-mean").tolist() == pytest.approx([1 / 20, 1 / 200])
    assert per_token_weight(lengths, "token-mean").tolist() == pytest.approx([1 / 110, 1 / 110])
    assert per_token_weight(lengths, "seq-mean-token-sum").tolist() == pytest.approx([1 / 2, 1 / 2])
    assert per_token_weight(lengths, "seq-mean-token-sum-norm", norm=512).tolist() == pytest.approx([1 / 1024] * 2)
    assert per_token_weight(lengths, "token-sum").tolist() == [1.0, 1.0]
    # Under seq-mean-token-mean every answer carries the same total weight, whatever its length.
    assert sequence_weights(MASK, "seq-mean-token-mean").tolist() == pytest.approx([0.25] * 4)
    assert sequence_weights(MASK, "token-mean").tolist() == pytest.approx([2 / 13, 6 / 13, 4 / 13, 1 / 13])


def test_length_bias_direction():
    # Two wrong answers (same negative advantage → same per-token loss +1): short (2 tokens) and long (6).
    loss = torch.ones(2, 6, dtype=torch.float64, requires_grad=True)
    mask = torch.tensor([[1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]])
    (g,) = torch.autograd.grad(aggregate(loss, mask, "seq-mean-token-mean"), loss)
    assert g[0, 0] > g[1, 0]  # each token of the long wrong answer is pushed down less
    (g,) = torch.autograd.grad(aggregate(loss, mask, "token-mean"), loss)
    assert g[0, 0] == g[1, 0]


def test_leading_dims():
    stacked = torch.stack([LOSS, 2 * LOSS])
    masks = torch.stack([MASK, MASK])
    out = aggregate(stacked, masks, "seq-mean-token-mean")
    assert out.shape == (2,)
    assert float(out[1]) == pytest.approx(2 * float(out[0]))


def test_trainer_table():
    df = trainer_table(LOSS, MASK, max_completion_length=MAX_COMPLETION_LENGTH)
    assert len(df) == len(TRL_LOSS_TYPES) + len(VERL_AGG_MODES) + len(VERL_LEGACY_AGG_MODES)
    row = df[(df.framework == "trl") & (df.name == "dr_grpo")].iloc[0]
    assert row["value"] == pytest.approx(trl_expected(LOSS, MASK, "dr_grpo", MAX_COMPLETION_LENGTH))
