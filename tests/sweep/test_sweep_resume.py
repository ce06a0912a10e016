"""A killed sweep finishes only what is missing; two sweeps never write the same run folder."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pandas as pd
from sweep_helpers import FAKE, completions, subprocess_env, write_grid

from gsd.io.lock import read_lock
from gsd.sweep import run_sweep

GRID = """
[base]
steps = 5
[grid]
method = ["grpo", "dr_grpo", "dapo"]
seed = [0, 1, 2]
"""


def _sweep_cmd(grid, out, workers=2):
    return [
        sys.executable,
        "-m",
        "gsd.cli",
        "sweep",
        "--grid",
        str(grid),
        "--out",
        str(out),
        "--simulator",
        FAKE,
        "--workers",
        str(workers),
        "--no-progress",
    ]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _comparable(table: pd.DataFrame) -> pd.DataFrame:
    return table.reset_index(drop=True)


def test_sigkilled_sweep_resumes_and_matches_a_clean_sweep(tmp_path, fakesim_log):
    grid = write_grid(tmp_path / "g.toml", GRID)
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        _sweep_cmd(grid, out), env=subprocess_env(FAKESIM_STEP_S=0.1), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.time() + 60
    while len(completions(fakesim_log)) < 2:  # let some runs finish and others start
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.time() < deadline
        time.sleep(0.02)
    time.sleep(0.15)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = set(completions(fakesim_log))
    if sys.platform.startswith("linux"):  # the pool's workers die with their driver (PR_SET_PDEATHSIG)
        holders = [read_lock(p)[0] for p in (out / "runs").glob("*.lock")]
        pids = [h["pid"] for h in holders if h]
        deadline = time.time() + 10
        while any(_alive(pid) for pid in pids):
            assert time.time() < deadline, f"orphaned workers {pids}"
            time.sleep(0.05)
    runs = sorted(p for p in (out / "runs").iterdir() if p.is_dir())
    partial = [p for p in runs if (p / "checkpoint.json").exists() and not (p / "summary.json").exists()]
    assert len(done_before) < 9 and partial, "the kill should land mid-sweep, with a run half done"
    assert not (out / "results.parquet").exists()

    # (the worker processes die with their driver; a lock they leave is stale and broken)
    res = run_sweep(grid, out, simulator=FAKE, backend="serial", progress=False)
    assert res.ok and set(res.skipped) >= done_before and len(res.ran) + len(res.skipped) == 9
    counts = Counter(completions(fakesim_log))
    assert len(counts) == 9 and set(counts.values()) == {1}, counts  # every run completed once
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    resumed = {e["run"] for e in events if e["event"] == "ran" and e["resumed"]}
    assert {p.name for p in partial} <= resumed

    clean = run_sweep(grid, tmp_path / "clean", simulator=FAKE, backend="serial", progress=False)
    pd.testing.assert_frame_equal(_comparable(res.table), _comparable(clean.table))
    pd.testing.assert_frame_equal(pd.read_parquet(out / "results.parquet"), clean.table)


def test_two_sweeps_on_one_folder_share_the_runs(tmp_path, fakesim_log, monkeypatch):
    grid = write_grid(tmp_path / "g.toml", GRID)
    out = tmp_path / "shared"
    other = subprocess.Popen(
        _sweep_cmd(grid, out, workers=1),
        env=subprocess_env(FAKESIM_STEP_S=0.05),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.time() + 60
    while not completions(fakesim_log):  # the other sweep is under way
        assert other.poll() is None and time.time() < deadline
        time.sleep(0.02)
    monkeypatch.setenv("FAKESIM_STEP_S", "0.05")
    try:  # both sweeps walk the same list: they meet on the same runs, and the locks keep them apart
        mine = run_sweep(grid, out, simulator=FAKE, backend="serial", progress=False)
    finally:
        assert other.wait(timeout=120) == 0, other.stderr.read().decode()
    counts = Counter(completions(fakesim_log))
    assert len(counts) == 9 and set(counts.values()) == {1}, counts  # no run written twice
    assert mine.ok and (mine.table["status"] == "complete").all()
    pd.testing.assert_frame_equal(pd.read_parquet(out / "results.parquet"), mine.table)
    assert not list((out / "runs").glob("*.lock"))
    assert os.listdir(out / "runs") and len(list((out / "runs").iterdir())) == 9
