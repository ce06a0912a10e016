"""The noise-scale grid in TRL: the live gradient-norm callback against TRL's own grad_norm, the
steps-to-target interpolation, and the shipped summary recomputed from the shipped records."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from gsd.reproduce import noise_scale_training as nst

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "docs" / "noise_scale_training_records.jsonl.gz"
SUMMARY = ROOT / "docs" / "noise_scale_training_summary.csv"


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


@pytest.mark.skipif(not RECORDS.exists(), reason="the shipped records are not in this checkout")
def test_shipped_summary_is_recomputed_from_the_shipped_records():
    import pandas as pd

    got = nst.summary(nst.load_records(RECORDS))
    want = pd.read_csv(SUMMARY)
    assert list(got.columns) == list(want.columns) and len(got) == len(want)
    for c in got.columns:
        if got[c].dtype.kind in "fi":
            np.testing.assert_allclose(got[c].to_numpy(float), want[c].to_numpy(float), rtol=1e-5, equal_nan=True)
        else:
            assert (got[c].astype(str) == want[c].astype(str)).all()
