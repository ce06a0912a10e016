"""A run folder under faults: damaged files, a second process, SIGKILL at any instant, a full disk.

Whatever happened to the folder, the next command either finishes the run with the ledger an
uninterrupted run writes, or stops with one line naming the file or the process in the way.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gsd
from gsd.simulator import SimConfig, is_complete, read_ledger, run_simulation
from gsd.simulator.ledger import WALL_COLUMNS

CFG = SimConfig(n_prompts=60, steps=6, checkpoint_every=2, device="cpu", rollout_log="verl")


def _ledger(folder):
    return read_ledger(folder).drop(columns=list(WALL_COLUMNS))


def _temps(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob(".*.tmp"))


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    folder = tmp_path_factory.mktemp("whole") / "run"
    run_simulation(CFG, folder, progress=False)
    return folder


def _copy(whole, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(whole, run)
    return run


def test_damaged_checkpoint_is_one_line_naming_it(whole, tmp_path):
    run = _copy(whole, tmp_path)
    (run / "summary.json").unlink()
    raw = (run / "checkpoint.pt").read_bytes()
    (run / "checkpoint.pt").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(gsd.InputError, match=r"checkpoint\.pt' is damaged") as err:
        run_simulation(CFG, run, resume=True, progress=False)
    assert "\n" not in str(err.value) and not is_complete(run)


def test_damaged_ledger_is_rewritten_from_the_checkpoint_before_the_run_is_marked_complete(whole, tmp_path):
    run = _copy(whole, tmp_path)
    (run / "summary.json").unlink()
    (run / "ledger.parquet").write_bytes(b"PAR1 not a ledger")  # the last checkpoint is at the final step
    summary = run_simulation(CFG, run, resume=True, progress=False)
    assert is_complete(run) and summary["steps"] == CFG.steps
    assert _ledger(run).equals(_ledger(whole))


@pytest.mark.parametrize("name", ["summary.json", "config.json"])
def test_damaged_json_of_a_run_is_one_line_naming_it(whole, tmp_path, name):
    run = _copy(whole, tmp_path)
    (run / name).write_text('{"steps": 6, ')
    with pytest.raises(gsd.InputError, match=rf"{name}' is damaged"):
        run_simulation(CFG, run, resume=True, progress=False)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "gsd.cli",
            "simulate",
            "--out",
            str(run),
            "--resume",
            "--no-progress",
            "--set",
            "n_prompts=60",
            "--set",
            "steps=6",
            "--set",
            "checkpoint_every=2",
            "--set",
            "device='cpu'",
            "--set",
            "rollout_log='verl'",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and name in res.stderr, res.stderr


def test_resume_clears_temporary_files_in_subfolders(whole, tmp_path):
    run = _copy(whole, tmp_path)
    (run / "summary.json").unlink()
    litter = [run / "rollouts" / ".5.jsonl.99999.deadbeef.tmp", run / ".checkpoint.pt.99999.deadbeef.tmp"]
    for path in litter:
        path.write_text("half a file")
    run_simulation(CFG, run, resume=True, progress=False)
    assert _temps(run) == [] and is_complete(run)


def test_a_finished_run_run_again_clears_a_killed_writers_temp(whole, tmp_path):
    run = _copy(whole, tmp_path)
    (run / "rollouts" / ".17.jsonl.99999.deadbeef.tmp").write_text("half")
    run_simulation(CFG, run, resume=True, progress=False)
    assert _temps(run) == [] and is_complete(run)


@pytest.mark.parametrize("resume", [True, False])
def test_killed_while_writing_its_first_file(tmp_path, resume):
    """SIGKILL while config.json was being written leaves a folder holding only its temporary
    file: the next run (with or without --resume) removes it and starts fresh, not 'not a run
    folder'.  A folder with anything else in it is still refused."""
    run = tmp_path / "r"
    run.mkdir()
    (run / ".config.json.99999.deadbeef.tmp").write_text('{"steps": ')
    run_simulation(CFG, run, resume=resume, progress=False)
    assert _temps(run) == [] and is_complete(run)
    other = tmp_path / "other"
    other.mkdir()
    (other / ".config.json.99999.deadbeef.tmp").write_text("{")
    (other / "notes.txt").write_text("mine")
    with pytest.raises(gsd.InputError, match="not a run folder"):
        run_simulation(CFG, other, resume=resume, progress=False)
    assert (other / "notes.txt").read_text() == "mine"


_HOLDER = "import sys, time; from gsd.io.lock import hold_folder\nhold_folder(sys.argv[1]).__enter__()\nprint('held', flush=True)\ntime.sleep(60)\n"


def test_a_second_process_on_a_running_folder_is_refused_and_touches_nothing(whole, tmp_path):
    run = _copy(whole, tmp_path)
    (run / "summary.json").unlink()
    before = {p.name: p.stat().st_mtime_ns for p in run.iterdir()}
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(gsd.InputError, match=f"in use by pid {proc.pid} on "):
            run_simulation(CFG, run, resume=True, progress=False)
    finally:
        proc.kill()
        proc.wait()
    assert {p.name: p.stat().st_mtime_ns for p in run.iterdir()} == before


_CHILD = """
import json, sys
from gsd.simulator import SimConfig, run_simulation
print('started', flush=True)
run_simulation(SimConfig.from_dict(json.loads(sys.argv[1])), sys.argv[2], progress=False)
"""


@given(delay=st.floats(0.0, 1.0))
@settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
def test_sigkill_at_any_instant_then_resume_gives_the_uninterrupted_ledger(whole, tmp_path_factory, delay):
    run = tmp_path_factory.mktemp("killed") / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, json.dumps(CFG.to_dict()), str(run)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "started"  # torch imported; the run starts now
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    if not run.exists():
        return  # killed before the folder: nothing to resume
    summary = run_simulation(CFG, run, resume=True, progress=False)
    assert summary["steps"] == CFG.steps and _temps(run) == []
    assert _ledger(run).equals(_ledger(whole))
    logs = sorted(p.name for p in (run / "rollouts").iterdir())
    assert logs == sorted(p.name for p in (whole / "rollouts").iterdir())
    for name in logs:  # every rollout file whole
        for line in (run / "rollouts" / name).read_text().splitlines():
            json.loads(line)


def _small_tmpfs(path):
    """Mount a 256 KB tmpfs at ``path`` (root with mount permitted), else skip."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a full disk needs root to mount a small tmpfs")
    path.mkdir()
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(path)], capture_output=True, text=True
    )
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()[:80]}")


def test_a_full_disk_is_one_line_and_the_run_resumes_elsewhere(tmp_path):
    disk = tmp_path / "disk"
    _small_tmpfs(disk)
    try:
        cfg = CFG.with_overrides({"steps": 40, "checkpoint_every": 1, "n_prompts": 400})
        with pytest.raises(gsd.InputError, match="No space left|cannot write") as err:
            run_simulation(cfg, disk / "run", progress=False)
        assert "\n" not in str(err.value)
        assert _temps(disk / "run") == []  # the failed write removed its temporary file
        moved = tmp_path / "roomy" / "run"
        shutil.copytree(disk / "run", moved)
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)  # lazy: an open handle must not keep it
    summary = run_simulation(cfg, moved, resume=True, progress=False)  # what was written is whole
    assert summary["steps"] == cfg.steps and len(read_ledger(moved)) == cfg.steps
