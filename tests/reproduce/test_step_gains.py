"""The step-gain knee: Adam's momentum-free step against torch's own AdamW inside real TRL, the
measurement leaving the training unchanged, and the page's table recomputed from the shipped records."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from gsd.reproduce import noise_scale_training as nst
from gsd.reproduce import step_gains as sg

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "docs" / "step_gain_records.jsonl.gz"
HELDOUT_RECORDS = ROOT / "docs" / "noise_scale_heldout_records.jsonl.gz"


def test_adam_step_is_torchs_adamw_step_in_trl():
    """Real TRL with adam_beta1 = 0 (no momentum) and weight decay 0: the step :func:`adam_step` computes
    from the optimizer's state and the step's gradient must be the step AdamW then takes.  float32
    arithmetic on each side: per coordinate the two new weights differ by at most one rounding of the
    weight (1 ulp) and the relative error of torch's float32 chain (sqrt, division, two multiplications,
    three roundings of v and the addition: ≤ 8 units of 2⁻²⁴ of the step, bound 16)."""
    pytest.importorskip("trl")
    import torch
    from transformers import TrainerCallback

    from gsd.live.noise_scale import adam_step
    from gsd.reproduce.transformer import build_task, train_silent

    class Compare(TrainerCallback):
        def __init__(self):
            self.worst, self.steps = [], 0

        def on_pre_optimizer_step(self, args, state, control, model=None, optimizer=None, **kw):
            params = [p for p in model.parameters() if p.requires_grad]
            g = torch.cat([p.grad.detach().reshape(-1).double() for p in params])
            self.before = torch.cat([p.detach().reshape(-1).double() for p in params])
            self.delta = adam_step(model, optimizer, g)

        def on_step_end(self, args, state, control, model=None, **kw):
            after = torch.cat([p.detach().reshape(-1) for p in model.parameters() if p.requires_grad])
            want = (self.before + self.delta).float()
            ulp = torch.nextafter(after.abs(), torch.tensor(math.inf)) - after.abs()
            bound = ulp.double() + 16 * 2.0**-24 * self.delta.abs()
            self.worst.append(float(((after.double() - want.double()).abs() / bound).max()))
            self.steps += 1

    task = build_task(16, max_len=4, seed=0, pretrain_steps=10)
    cmp = Compare()
    train_silent(
        task, "grpo", G=2, steps=4, lr=1e-2, prompts_per_step=8,
        args_kwargs={"per_device_train_batch_size": 16, "adam_beta1": 0.0, "max_grad_norm": 0.0},
        callbacks=[cmp],
    )  # fmt: skip
    assert cmp.steps == 4
    assert max(cmp.worst) <= 1.0, cmp.worst


def test_measuring_the_gains_leaves_the_training_unchanged():
    """The same cell trained with and without the step-gain measurement follows the same trajectory bit for
    bit (the measurement moves the weights and puts them back, draws no random number, and switches the
    model to eval mode and back); every step is measured, and the gains are finite."""
    pytest.importorskip("trl")
    cell = nst.Cell("first_token", 16, 2, 1e-2, 0)
    plain = nst.train_cell(cell, nst.Setting(n_prompts=16, budget=64, pretrain_steps=10))
    measured = nst.train_cell(cell, nst.Setting(n_prompts=16, budget=64, pretrain_steps=10, step_gains=True))
    assert measured["hardest"] == plain["hardest"] and measured["big_sq"] == plain["big_sq"]
    steps = len(measured["generations"])
    assert measured["gain_steps"] == list(range(1, steps + 1))
    assert len(measured["phi_after"]) == len(measured["gain_big"]) == steps
    assert np.isfinite(measured["gain_small"]).all() and np.isfinite(measured["gain_big"]).all()
    # Φ before step t + 1 is Φ after step t: the measurement restored the weights exactly
    assert measured["phi"][1:] == measured["phi_after"][:-1]


def test_grid_is_fixed():
    cells = sg.grid()
    assert len(cells) == 50 and len(set(cells)) == 50
    assert {(c.task, c.lr) for c in cells if c.task != sg.BLIND[0]} == set(sg.CURVES)
    assert {c.B for c in cells if c.task == sg.BLIND[0]} == set(sg.SWEEP)
    assert sg.BLIND[0] not in {**nst.TASKS, **nst.HELDOUT_TASKS} and sg.BLIND[1] not in (1e-3, 2e-3, 3e-3, 5e-3, 1e-2)


@pytest.mark.skipif(not RECORDS.exists(), reason="the step-gain records are not shipped yet")
def test_table_is_recomputed_from_the_shipped_records():
    """Each one-run K from the shipped per-step gains, recomputed here from its definition (ratio of the
    summed gains over the steps to the target, then McCandlish's law through the two batch sizes), and
    the page's table regenerated whole from the records."""
    gains = nst.load_records(RECORDS)
    held = nst.load_records(HELDOUT_RECORDS)
    assert len(gains) == 50
    for r in gains:
        k = max(2, math.ceil(nst.cell_stats(r)["steps_to_target"]))
        keep = [i for i, s in enumerate(r["gain_steps"]) if s <= k]
        ratio = sum(r["gain_big"][i] for i in keep) / sum(r["gain_small"][i] for i in keep)
        bs, bb = r["B"] / 2, r["B"]
        want = 0.0 if ratio <= 1 else math.inf if ratio >= bb / bs else (ratio - 1) / (1 / bs - ratio / bb)
        assert sg.run_knee(r).knee == pytest.approx(want, rel=1e-12)
    page = (ROOT / "docs" / "group_size_training.md").read_text()
    for line in sg.tables(gains, held).splitlines()[2:]:
        assert line in page


def test_four_micro_batches_give_three_levels():
    """Four micro-batches per step: the gains at B/4 (each micro-batch), B/2 (each pair's mean) and B."""
    pytest.importorskip("trl")
    cell = nst.Cell("first_token", 16, 2, 1e-2, 0)
    r = nst.train_cell(cell, nst.Setting(n_prompts=16, budget=64, pretrain_steps=10, step_gains=True, micro=4))
    assert r["micro"] == 4 and r["gain_sizes"] == [4, 8, 16]
    assert all(len(row) == 3 for row in r["gain_levels"]) and len(r["gain_levels"]) == len(r["generations"])
    assert [row[0] for row in r["gain_levels"]] == r["gain_small"]
    assert [row[-1] for row in r["gain_levels"]] == r["gain_big"]
    # the two-level knee of the B/2 and B columns is McCandlish's law through their summed gains, from its
    # definition (ratio of sums over the steps to the target, then K = (r - 1)/(1/b_small - r/b_big))
    to_target = nst.cell_stats(r)["steps_to_target"]
    last = max(2, math.ceil(to_target)) if np.isfinite(to_target) else len(r["gain_steps"])
    keep = [i for i, s in enumerate(r["gain_steps"]) if s <= last]
    mid, big = (sum(r["gain_levels"][i][j] for i in keep) for j in (1, 2))
    if mid > 0:
        ratio = big / mid
        want = 0.0 if ratio <= 1 else math.inf if ratio >= 2 else (ratio - 1) / (1 / 8 - ratio / 16)
        assert sg.run_knee_levels(r, two=True).knee == pytest.approx(want, rel=1e-12)


LEVELS_RECORDS = ROOT / "docs" / "step_gain_levels_records.jsonl.gz"


@pytest.mark.skipif(not LEVELS_RECORDS.exists(), reason="the levels records are not shipped yet")
def test_levels_table_is_recomputed_from_the_shipped_records():
    """The levels test's table regenerated whole from its shipped records and the held-out grid's."""
    records = nst.load_records(LEVELS_RECORDS)
    assert len(records) == 30 and all(r["micro"] == 4 for r in records)
    page = (ROOT / "docs" / "group_size_training.md").read_text()
    for line in sg.levels_tables(records, nst.load_records(HELDOUT_RECORDS)).splitlines()[2:]:
        assert line in page
