"""The half-life's discount at the ends of its range: steps near 2^62, a half-life of 1e-320."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from gsd.diagnose import diagnose, read_rollouts
from gsd.diagnose.tables import group_table


def _log(tmp_path, base, suffix=".csv"):
    rng = np.random.default_rng(3)
    rows = [
        {"prompt": f"q{p}", "step": base + s, "reward": int(rng.random() < 0.5)}
        for s in (0, 1, 2, 5)
        for p in range(3)
        for _ in range(4)
    ]
    path = tmp_path / f"log{base % 1000}{suffix}"
    df = pd.DataFrame(rows)
    df.to_csv(path, index=False) if suffix == ".csv" else df.to_json(path, orient="records", lines=True)
    return path


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_discount_depends_on_step_differences_only(tmp_path, suffix):
    """Steps 2^62 + s are as far apart as steps s: the discounted counts are equal (in float64 the
    steps near 2^62 are 1024 apart and adjacent ones collapse)."""
    small = read_rollouts(_log(tmp_path, 0, suffix), reward="reward")
    big = read_rollouts(_log(tmp_path, 2**62, suffix), reward="reward")
    assert big.step.min() == 2**62 and big.step.max() == 2**62 + 5
    a = group_table(small, small.reward, half_life=1.5)
    b = group_table(big, big.reward, half_life=1.5)
    for col in ("n_eff", "k_eff"):
        np.testing.assert_array_equal(a[col].to_numpy(), b[col].to_numpy())
    # against the definition: Σ 2^(−(t − s)/h)·n_s over the prompt's earlier steps
    first = a[(a["prompt"] == a["prompt"].iloc[0])].sort_values("step")
    t, n = first["step"].to_numpy(), first["n"].to_numpy()
    direct = [sum(2.0 ** (-(t[j] - t[i]) / 1.5) * n[i] for i in range(j)) for j in range(t.size)]
    np.testing.assert_allclose(first["n_eff"].to_numpy(), direct, rtol=1e-15)
    pa_, pb = (
        diagnose(p, reward="reward", half_life=1.5).prompts
        for p in (_log(tmp_path, 0, suffix), _log(tmp_path, 2**62, suffix))
    )
    np.testing.assert_array_equal(pa_["p_mean"].to_numpy(), pb["p_mean"].to_numpy())


def test_tiny_half_life_counts_only_the_last_step_without_a_warning(tmp_path):
    path = _log(tmp_path, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning from numpy (with its file path) would fail here
        dx = diagnose(path, reward="reward", half_life=1e-320)
    log = read_rollouts(path, reward="reward")
    g = group_table(log, log.reward, half_life=1e-320)
    assert (g["n_eff"] == 0).all()  # every earlier step is infinitely many half-lives old
    last = g[g["step"] == g["step"].max()].groupby("prompt")["k"].sum()
    np.testing.assert_allclose(
        dx.prompts["p_mean"].to_numpy(),
        ((dx.summary["prior"]["a"] + last) / (dx.summary["prior"]["a"] + dx.summary["prior"]["b"] + 4)).to_numpy(),
    )
