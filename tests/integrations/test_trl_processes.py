"""The tracker in a real 2-process TRL 1.16.0 run (torchrun, gloo, CPU): every process records
the whole generation in TRL's order, so its silent fraction is TRL's frac_reward_zero_std and the
truth the reward functions saw, even when a group is cut between the processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("trl", reason="the tests against the real TRL need trl==1.16.0 (make install)")

SCRIPT = Path(__file__).with_name("trl_two_processes.py")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """One 2-process run (about 20 s): what each process wrote."""
    out = tmp_path_factory.mktemp("two")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(SCRIPT), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=out,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


def _truth(ranks):
    """Per step: each group's rewards, the two processes' rows joined in process order (TRL's
    gather), and its silence (every reward equal: 0/1 rewards, no None)."""
    out = {}
    for (step, p0, r0), (step1, p1, r1) in zip(ranks[0]["calls"], ranks[1]["calls"], strict=True):
        assert step == step1
        groups = np.array(r0 + r1, float).reshape(-1, 4)
        prompts = np.array(p0 + p1, object).reshape(-1, 4)
        assert (prompts == prompts[:, :1]).all()  # TRL's order: each block of 4 rows is one prompt
        out[step + 1] = (groups.max(axis=1) == groups.min(axis=1)).mean()
    return out


def test_every_process_records_the_whole_generation(ranks):
    assert ranks[0]["world"] == 2
    assert all(len(c[2]) == 6 for r in ranks for c in r["calls"])  # each process scores 6 rows: one group is cut
    assert ranks[0]["metrics"] == ranks[1]["metrics"] and not ranks[0]["warnings"]
    truth = _truth(ranks)
    assert {m["step"]: m["silent_frac"] for m in ranks[0]["metrics"]} == truth
    assert len(truth) == 4 and 0 < np.mean(list(truth.values())) < 1  # silent and speaking groups both occur


def test_silent_fraction_is_trls(ranks):
    logged = [e for e in ranks[0]["log_history"] if "frac_reward_zero_std" in e]
    truth = _truth(ranks)
    assert [e["step"] for e in logged] == sorted(truth)
    for e in logged:  # TRL logs a float32 mean
        assert np.float32(e["gsd/silent_frac"]) == np.float32(e["frac_reward_zero_std"]) == np.float32(truth[e["step"]])


def test_skipping_is_refused_with_several_processes(ranks):
    assert all(r["skip_refused"].startswith("skip_above works in one process (this run has 2)") for r in ranks)


@pytest.fixture(scope="module")
def failed_ranks(tmp_path_factory):
    """A 2-process run where process 1's tracker cannot record the second generation (about 20 s).

    Before the failing process joined the gather with a failure marker, process 0 waited in the
    gather for ever: the timeout is the hang."""
    out = tmp_path_factory.mktemp("fail")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            "2",
            str(SCRIPT),
            str(out),
            "fail",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=out,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


def _weighted_truth(rank):
    """Per step: the silent fraction of the weighted total correct + fmt over both processes' rows
    (0/1 rewards, no None: silent when every total of the group is equal)."""
    out = {}
    calls = [r["calls"][name] for r in rank for name in ("correct", "fmt")]  # process 0's two, then process 1's
    for (step, _, c0), (_, _, f0), (_, _, c1), (_, _, f1) in zip(*calls, strict=True):
        total = (np.array(c0 + c1, float) + np.array(f0 + f1, float)).reshape(-1, 4)
        out[step + 1] = (total.max(axis=1) == total.min(axis=1)).mean()
    return out


def test_a_failure_on_one_process_is_recorded_by_every_process_and_training_goes_on(failed_ranks):
    r0, r1 = failed_ranks
    assert r0["unscorable"] == r1["unscorable"]  # the failure crossed to the process that did not fail
    [entry] = r0["unscorable"]
    assert entry["step"] == 2
    assert entry["reason"].startswith("process 1: reward function 'correct' returned Decimal(")
    assert entry["reason"].endswith("(every process leaves the generation out)")
    assert all(
        len(r["runtime_warnings"]) == 1 and "step 2 not scored by gsd (process 1:" in r["runtime_warnings"][0]
        for r in failed_ranks
    )
    # The generations before and after are recorded, alike on both processes, as TRL counted them.
    assert r0["metrics"] == r1["metrics"]
    truth = _weighted_truth(failed_ranks)
    assert sorted(truth) == [1, 2, 3, 4]
    assert {m["step"]: m["silent_frac"] for m in r0["metrics"]} == {s: truth[s] for s in (1, 3, 4)}
    logged = {e["step"]: e for e in r0["log_history"] if "frac_reward_zero_std" in e}
    assert sorted(logged) == [1, 2, 3, 4]  # TRL trained every step
    assert "gsd/silent_frac" not in logged[2]
    for s in (1, 3, 4):
        assert np.float32(logged[s]["gsd/silent_frac"]) == np.float32(logged[s]["frac_reward_zero_std"])
