"""Closure with the simulator: its verl/TRL rollout logs, diagnosed, give back what it knows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gsd.diagnose import diagnose
from gsd.simulator import SimConfig, run_simulation

CONFIG = {"n_prompts": 200, "steps": 40, "batch_size": 100, "group_size": 8, "difficulty": "beta", "lr": 0.05,
          "rollouts": "counts", "device": "cpu", "checkpoint_every": 1000, "closed_form_every": 0}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = {}
    for fmt in ("verl", "trl"):
        folder = tmp_path_factory.mktemp(f"sim_{fmt}")
        run_simulation({**CONFIG, "rollout_log": fmt}, folder / "run", progress=False)
        out[fmt] = folder / "run"
    return out


def _truth(run, fmt):
    """Per prompt, its mean true solve rate over the rollouts logged (the extra key p)."""
    if fmt == "verl":
        df = pd.concat(pd.read_json(f, lines=True) for f in sorted((run / "rollouts").glob("*.jsonl")))
        return df.groupby("input")["p"].mean()
    df = pd.read_parquet(run / "rollouts" / "completions")
    return df.groupby("prompt")["p"].mean()


def test_files_in_each_format(runs):
    assert sorted(p.name for p in (runs["verl"] / "rollouts").iterdir()) == sorted(f"{s}.jsonl" for s in range(1, 41))
    trl = sorted(p.name for p in (runs["trl"] / "rollouts" / "completions").iterdir())
    assert trl == [f"completions_{s:05d}.parquet" for s in range(1, 41)]
    cols = pd.read_parquet(runs["trl"] / "rollouts" / "completions" / "completions_00001.parquet").columns.tolist()
    assert cols == ["step", "prompt", "completion", "correctness", "p", "advantage"]


@pytest.mark.parametrize("fmt", ["verl", "trl"])
def test_diagnosis_recovers_the_simulation(runs, fmt):
    run = runs[fmt]
    dx = diagnose(run / "rollouts", reward="correctness" if fmt == "trl" else None, progress=False)
    ledger = pd.read_parquet(run / "ledger.parquet")
    # Silent fractions: exactly the simulator's own count, step by step.
    np.testing.assert_array_equal(dx.steps["step"], ledger["step"] + 1)
    np.testing.assert_allclose(dx.steps["silent_frac"], ledger["silent_frac"], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(dx.steps["rollouts"], ledger["generations"])
    # Recovered solve rates against the truth, for prompts seen at least 64 times.
    truth = _truth(run, fmt)
    pr = dx.prompts.set_index("prompt").loc[truth.index]
    seen = pr["rollouts"] >= 64
    assert seen.sum() > 100
    assert np.corrcoef(pr["p_mean"][seen], truth[seen])[0, 1] >= 0.9
    # Calibration: over all groups, and within deciles of the predicted probability.
    cal = dx.summary["calibration"]
    assert abs(cal["z"]) < 3
    g = dx.groups[dx.groups["G"] >= 2]
    bins = pd.qcut(g["silent_pred"], 5, duplicates="drop")
    rel = g.groupby(bins, observed=True).agg(measured=("silent", "mean"), predicted=("silent_pred", "mean"),
                                             var=("silent_pred", lambda q: (q * (1 - q)).sum()), n=("silent", "size"))
    sd = np.sqrt(rel["var"]) / rel["n"]
    assert (np.abs(rel["measured"] - rel["predicted"]) < 4 * sd + 0.01).all(), rel


def test_both_formats_give_the_same_diagnosis(runs):
    a = diagnose(runs["verl"] / "rollouts", progress=False)
    b = diagnose(runs["trl"] / "rollouts", reward="correctness", progress=False)
    pd.testing.assert_frame_equal(a.steps, b.steps)


def test_rollout_log_key_is_checked():
    with pytest.raises(ValueError, match="rollout_log"):
        SimConfig(rollout_log="csv")
    assert SimConfig().rollout_log == "none"
