"""Trainer conventions (docs/theory.md, section What trainers compute), written from each trainer's documented formula."""

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
