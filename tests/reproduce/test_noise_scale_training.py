"""The noise-scale grid in TRL: the live gradient-norm callback against TRL's own grad_norm, the
steps-to-target interpolation, and the shipped summary recomputed from the shipped records."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gsd.reproduce import noise_scale_training as nst

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "docs" / "noise_scale_training_records.jsonl.gz"
SUMMARY = ROOT / "docs" / "noise_scale_training_summary.csv"
HELDOUT_RECORDS = ROOT / "docs" / "noise_scale_heldout_records.jsonl.gz"
HELDOUT_SUMMARY = ROOT / "docs" / "noise_scale_heldout_summary.csv"


def test_callback_in_trl_matches_trls_grad_norm():
    """Real TRL, a tiny model: two micro-batches per step, each its own generation call.  The step's
    squared norm the callback reads equals TRL's logged grad_norm² (float32 gradients: relative error of a
    sum of squares ≲ log2(n)·2⁻²³ ≈ 3e-6; bound 1e-4), and every step is recorded."""
    pytest.importorskip("trl")
    st = nst.Setting(n_prompts=16, budget=64, pretrain_steps=10)
    r = nst.train_cell(nst.Cell("first_token", 16, 2, 1e-2, 0), st)
    steps = len(r["generations"])
    assert steps >= 1 and all(g == 16 for g in r["generations"])
    assert len(r["big_sq"]) == len(r["small_sq"]) == steps
    np.testing.assert_allclose(r["big_sq"], np.square(r["trl_grad_norm"][:steps]), rtol=1e-4)
    # the mean of two micro-batches' squared norms is at least the squared norm of their mean
    assert all(s >= b * (1 - 1e-6) for s, b in zip(r["small_sq"], r["big_sq"]))
    stats = nst.cell_stats(r)
    assert set(stats) >= {"gens_to_target", "steps_to_target", "b_noise", "cpu_total"}


def test_to_target_interpolates_between_logged_points():
    assert nst.to_target([0, 10, 20], [0.5, 0.7, 0.9], 0.8) == pytest.approx(15.0)
    assert nst.to_target([0, 10], [0.85, 0.9], 0.8) == 0.0
    assert math.isnan(nst.to_target([0, 10], [0.1, 0.2], 0.8))


def test_grid_tiers_and_names():
    g = nst.grid()
    assert len(g) == len(set(g)) == 3 * 5 * 11
    assert all(c.B % (nst.MICRO * c.G) == 0 for c in g)
    first = g[: 3 * 5 * 5]
    assert all(c.G == 4 and c.lr == 3e-3 for c in first)  # the batch sweep runs first


@pytest.mark.parametrize(
    "records, csv, same_lr",
    [(RECORDS, SUMMARY, False), (HELDOUT_RECORDS, HELDOUT_SUMMARY, True)],
    ids=["first grid", "held-out grid"],
)
def test_shipped_summary_is_recomputed_from_the_shipped_records(records, csv, same_lr):
    import pandas as pd

    if not records.exists():
        pytest.skip("the shipped records are not in this checkout")
    got = nst.summary(nst.load_records(records), same_lr=same_lr)
    want = pd.read_csv(csv)
    assert list(got.columns) == list(want.columns) and len(got) == len(want)
    for c in got.columns:
        if got[c].dtype.kind in "fi":
            np.testing.assert_allclose(got[c].to_numpy(float), want[c].to_numpy(float), rtol=1e-5, equal_nan=True)
        else:
            assert (got[c].astype(str) == want[c].astype(str)).all()


def test_preconditioned_norms_in_trl_against_the_previous_steps_gradient(tmp_path):
    """Real TRL with adam_beta2 = 0: Adam's second moment before step t is then exactly the previous step's
    squared gradient (bias correction 1 − 0^t = 1), so the preconditioned squared norm the callback reads
    from the optimizer's state must equal Σ g_t²/(|g_{t−1}| + ε) computed from the gradients alone (a second
    callback keeps them), with coordinates where g_{t−1} = 0 left out.  float32 gradients and state:
    relative error ≲ n·2⁻²³ per sum; bound 1e-4."""
    pytest.importorskip("trl")
    import torch
    from transformers import TrainerCallback

    from gsd.live.noise_scale import gradient_noise_callback
    from gsd.reproduce.transformer import build_task, train_silent

    class KeepGrads(TrainerCallback):
        def __init__(self):
            self.grads = []

        def on_pre_optimizer_step(self, args, state, control, model=None, **kw):
            self.grads.append(
                torch.cat([p.grad.detach().reshape(-1) for p in model.parameters() if p.grad is not None]).double()
            )

    task = build_task(16, max_len=4, seed=0, pretrain_steps=10)
    cb, keep = gradient_noise_callback(), KeepGrads()
    train_silent(
        task,
        "grpo",
        G=2,
        steps=4,
        lr=1e-2,
        prompts_per_step=8,
        args_kwargs={
            "per_device_train_batch_size": 8,
            "gradient_accumulation_steps": 2,
            "steps_per_generation": 1,
            "max_grad_norm": 0.0,
            "adam_beta2": 0.0,
            "adam_epsilon": 1e-8,
        },
        callbacks=[cb, keep],
    )
    rec = cb.record
    assert rec.steps_adam == [2, 3, 4] and len(keep.grads) == 4
    want = []
    for t in (1, 2, 3):
        prev, g = keep.grads[t - 1], keep.grads[t]
        w = torch.where(prev != 0, 1.0 / (prev.abs() + 1e-8), 0.0)
        want.append(float((w * g * g).sum()))
    np.testing.assert_allclose(rec.big_sq_adam, want, rtol=1e-4)
    # the mean of two micro-batches' weighted squared norms is at least the weighted squared norm of their mean
    assert all(s >= b * (1 - 1e-6) for s, b in zip(rec.small_sq_adam, rec.big_sq_adam))
    assert np.isfinite(rec.estimate(preconditioned=True).gradient_sq)


def test_heldout_grid_is_fixed():
    g = nst.heldout_grid()
    assert len(g) == len(set(g)) == 135
    assert all(c.B % (nst.MICRO * c.G) == 0 for c in g)
    first = g[:50]
    assert {c.task for c in first} == {"mid_independent"} and {c.lr for c in first} == set(nst.HELDOUT_LRS)
    assert not set(nst.HELDOUT_LRS) & {c.lr for c in nst.grid()}  # never run in the first grid


@settings(max_examples=60)
@given(
    s_min=st.floats(0.5, 100),
    b=st.floats(0.5, 1e4),
    law=st.sampled_from(nst.LAWS),
    t_step=st.floats(1e-3, 10),
    t_rollout=st.floats(1e-5, 1e-1),
)
def test_laws_fit_exactly_and_b_star_is_the_least_time(s_min, b, law, t_step, t_rollout):
    """Each law's steps at five B are fitted back to its (S_min, B_noise) (a linear fit of exact data: the
    error is rounding, ≲ 1e-9 relative at these magnitudes); B* is the least time: no B within 1 ppm of it
    on either side takes less (the objective is smooth and convex in log B there)."""
    B = [16, 32, 64, 128, 256]
    fit = nst.fit_law(law, B, nst.law_steps(law, B, s_min, b))
    assert fit["s_min"] == pytest.approx(s_min, rel=1e-7) and fit["b_noise"] == pytest.approx(b, rel=1e-6)
    star = nst.law_b_star(law, t_step, t_rollout, b)

    def time(x):
        return float(nst.law_steps(law, x, 1.0, b) * (t_step + t_rollout * x))

    assert time(star) <= time(star * (1 + 1e-6)) * (1 + 1e-15)
    assert time(star) <= time(star * (1 - 1e-6)) * (1 + 1e-15)
    from scipy.optimize import minimize_scalar

    res = minimize_scalar(lambda u: time(math.exp(u)), bounds=(-10, 20), method="bounded", options={"xatol": 1e-9})
    assert time(star) <= res.fun * (1 + 1e-12)
