"""Closure with the simulator: its verl/TRL rollout logs, diagnosed, give back what it knows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gsd.diagnose import diagnose
from gsd.diagnose.closure import closure_config, closure_figure, simulate_and_diagnose
from gsd.simulator import SimConfig

CONFIG = closure_config(fast=True)  # 200 prompts, 40 steps, half of them per step


@pytest.fixture(scope="module")
def closures(tmp_path_factory):
    return {
        fmt: simulate_and_diagnose(CONFIG, tmp_path_factory.mktemp(f"sim_{fmt}") / "run", fmt=fmt)
        for fmt in ("verl", "trl")
    }


def test_files_in_each_format(closures):
    run = closures["verl"].run
    assert sorted(p.name for p in (run / "rollouts").iterdir()) == sorted(f"{s}.jsonl" for s in range(1, 41))
    run = closures["trl"].run
    trl = sorted(p.name for p in (run / "rollouts" / "completions").iterdir())
    assert trl == [f"completions_{s:05d}.parquet" for s in range(1, 41)]
    cols = pd.read_parquet(run / "rollouts" / "completions" / "completions_00001.parquet").columns.tolist()
    assert cols == ["step", "prompt", "completion", "correctness", "true_p", "advantage"]


def test_trl_log_holds_the_advantages_the_run_used(closures):
    import gsd

    c = closures["trl"]
    df = pd.read_parquet(c.run / "rollouts" / "completions" / "completions_00007.parquet")
    G = c.diagnosis.summary["group_size"]
    assert G == CONFIG["group_size"]
    rewards = df["correctness"].to_numpy().reshape(-1, G)
    want = gsd.advantages(rewards, "grpo")  # the run's method and convention (paper: ddof 0, eps 0)
    np.testing.assert_allclose(df["advantage"].to_numpy().reshape(-1, G), want, rtol=0, atol=1e-12)
    assert np.abs(want).max() > 0.5  # not all zero


@pytest.mark.parametrize("fmt", ["verl", "trl"])
def test_diagnosis_recovers_the_simulation(closures, fmt):
    c = closures[fmt]
    dx, ledger = c.diagnosis, c.ledger
    # Silent fractions and rollouts: exactly the simulator's own, step by step.
    np.testing.assert_array_equal(dx.steps["step"], ledger["step"] + 1)
    sc = c.silent_check()
    np.testing.assert_allclose(sc["diagnosis"], sc["simulator"], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(dx.steps["rollouts"], ledger["generations"])
    # Recovered solve rates against the truth, for prompts seen at least 64 times.
    rec = c.recovery(64)
    assert rec["prompts"] > 100 and rec["corr"] >= 0.9
    # Calibration: over all groups, and within quantile bins of the predicted probability.
    assert abs(dx.summary["calibration"]["z"]) < 3
    rel = c.reliability(bins=5)
    assert (rel["z"].abs() < 4).all(), rel


def test_both_formats_give_the_same_diagnosis(closures):
    pd.testing.assert_frame_equal(closures["verl"].diagnosis.steps, closures["trl"].diagnosis.steps)
    # Read as a reward: verl's JSON keeps 15 digits, TRL's arithmetic rounds to float32 (2^-24).
    np.testing.assert_allclose(closures["verl"].truth, closures["trl"].truth, rtol=2**-23)


def test_figure_and_cli_on_the_run(closures, tmp_path):
    fig = closure_figure(closures["verl"])
    assert len(fig.axes) == 3
    dx = diagnose(closures["verl"].run / "rollouts", half_life=10, progress=False)
    assert dx.summary["half_life"] == 10 and np.isfinite(dx.summary["calibration"]["z"])


def test_rollout_log_key_is_checked():
    with pytest.raises(ValueError, match="rollout_log"):
        SimConfig(rollout_log="csv")
    assert SimConfig().rollout_log == "none"


class _Stop(Exception):
    pass


def test_resumed_run_logs_the_same_rollouts(tmp_path):
    cfg = {**CONFIG, "steps": 8, "checkpoint_every": 3, "rollout_log": "verl"}
    from gsd.simulator import run_simulation

    run_simulation(cfg, tmp_path / "whole", progress=False)

    def stop_after_step_4(step):
        if step == 4:
            raise _Stop

    with pytest.raises(_Stop):
        run_simulation(cfg, tmp_path / "cut", progress=False, on_step=stop_after_step_4)
    assert (tmp_path / "cut" / "rollouts" / "5.jsonl").is_file() and not (
        tmp_path / "cut" / "rollouts" / "6.jsonl"
    ).exists()
    run_simulation(cfg, tmp_path / "cut", resume=True, progress=False)  # from the checkpoint after step 3
    for step in range(1, 9):
        name = f"{step}.jsonl"
        assert (tmp_path / "cut" / "rollouts" / name).read_bytes() == (
            tmp_path / "whole" / "rollouts" / name
        ).read_bytes()


def test_a_large_verl_log_is_announced(tmp_path):
    from gsd.simulator.rollout_log import LARGE_LOG_BYTES, RolloutLogWriter

    with pytest.warns(UserWarning, match=r"rollout_log=verl will write about .* MB"):
        RolloutLogWriter("verl", tmp_path, rows=LARGE_LOG_BYTES // 50)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RolloutLogWriter("trl", tmp_path, rows=LARGE_LOG_BYTES // 50)  # parquet: 30x smaller, no warning
