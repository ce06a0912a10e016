"""A run killed mid-way and resumed writes the same ledger as an uninterrupted run (CPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from gsd.simulator import SimConfig, is_complete, read_ledger, run_simulation
from gsd.simulator.ledger import WALL_COLUMNS

from .conftest import final_state

# The child dies like SIGKILL (os._exit: no clean-up) right after step KILL_AFTER is done.
_CHILD = """
import json, os, sys
from gsd.simulator import SimConfig, run_simulation
kill_after = int(sys.argv[3])
def die(step):
    if step == kill_after:
        os._exit(86)
run_simulation(SimConfig.from_dict(json.loads(sys.argv[1])), sys.argv[2], progress=False, on_step=die)
"""


def _killed_run(cfg, folder, after_step):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(cfg.to_dict()), str(folder), str(after_step)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 86, proc.stderr  # died by the hook, not by an error


CONFIGS = {
    # The paper's arm, small.
    "tabular-grpo": SimConfig(n_prompts=800, steps=11, checkpoint_every=4, device="cpu", seed=1),
    "tabular-grpo-torch": SimConfig(n_prompts=800, steps=11, checkpoint_every=4, device="cpu", seed=1, engine="torch"),
    # The numpy engine's stateful pieces: Adam moments, batches, DAPO redraws, verifier noise, float32.
    "tabular-numpy-everything": SimConfig(
        n_prompts=600,
        steps=9,
        checkpoint_every=3,
        device="cpu",
        seed=2,
        optimizer="adam",
        lr=0.05,
        method="dapo",
        max_draws=3,
        batch_size=250,
        verifier_noise=0.1,
        dtype="float32",
    ),
    # Every stateful piece at once: network, Adam moments, batches, DAPO redraws, verifier
    # noise, PPO epochs with clipping, KL to the initial policy, float32, binomial counts.
    "mlp-dapo-everything": SimConfig(
        rollouts="counts",
        n_prompts=600,
        steps=9,
        checkpoint_every=3,
        device="cpu",
        seed=2,
        policy="mlp",
        mlp_offset="learned",
        optimizer="adam",
        lr=0.01,
        method="dapo",
        max_draws=3,
        batch_size=250,
        verifier_noise=0.1,
        ppo_epochs=2,
        clip=True,
        clip_low=0.2,
        clip_high=0.28,
        kl_coef=0.05,
        dtype="float32",
    ),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_resume_after_kill_equals_uninterrupted(tmp_path, name):
    cfg = CONFIGS[name]
    whole = tmp_path / "whole"
    run_simulation(cfg, whole, progress=False)

    cut = tmp_path / "cut"
    kill_after = cfg.steps - 5  # dies between two checkpoints, so some finished steps are lost
    _killed_run(cfg, cut, kill_after)
    assert not is_complete(cut)
    ckpt = final_state(cut)
    assert 0 < ckpt["step"] < kill_after + 1
    assert len(read_ledger(cut)) == ckpt["step"]
    with pytest.raises(ValueError, match="resume"):
        run_simulation(cfg, cut, progress=False)  # an unfinished run is not silently restarted
    run_simulation(cfg, cut, resume=True, progress=False)
    assert is_complete(cut)

    a = read_ledger(whole).drop(columns=list(WALL_COLUMNS))
    b = read_ledger(cut).drop(columns=list(WALL_COLUMNS))
    assert len(a) == cfg.steps
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    if (whole / "checkpoint.npz").is_file():  # the numpy engine: every array of the checkpoint
        with np.load(whole / "checkpoint.npz") as fa, np.load(cut / "checkpoint.npz") as fb:
            assert fa.files == fb.files
            for key in fa.files:
                assert np.array_equal(fa[key], fb[key]) or key == "ledger", key  # the ledger differs by wall_s
        return
    pa = torch.load(whole / "checkpoint.pt", weights_only=True)["policy"]
    pb = torch.load(cut / "checkpoint.pt", weights_only=True)["policy"]
    for key in pa:
        assert torch.equal(pa[key], pb[key]), key


def test_ledger_file_is_the_checkpoint_table(tmp_path):
    """The parquet ledger (written by pyarrow straight from the table) reads back as the
    checkpoint's float64 table, integer columns as int64, column order as COLUMNS."""
    import numpy as np

    from gsd.simulator.ledger import COLUMNS, INT_COLUMNS, ledger_frame

    cfg = SimConfig(n_prompts=300, steps=5, checkpoint_every=2, device="cpu", closed_form_every=2, method="dapo")
    run_simulation(cfg, tmp_path / "r", progress=False)
    ledger = read_ledger(tmp_path / "r")
    table = final_state(tmp_path / "r")["ledger"]
    assert list(ledger.columns) == list(COLUMNS) and table.shape == (5, len(COLUMNS))
    pd.testing.assert_frame_equal(ledger, ledger_frame(table), check_exact=True)
    assert all(ledger[c].dtype == np.int64 for c in INT_COLUMNS)
    assert ledger["grad_pred"].isna().tolist() == [False, True, False, True, False]
