"""The per-run lock: O_EXCL creation, owner pid, stale-lock detection and safe breaking."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from gsd.sweep import LockBusy, RunLock
from gsd.lock import lock_is_stale, read_lock


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _write(path, **info):
    path.write_text(json.dumps({"host": socket.gethostname(), "token": "t", **info}))


def test_acquire_writes_owner_and_excludes_others(tmp_path):
    path = tmp_path / "run.lock"
    with RunLock(path) as lock:
        info, _ = read_lock(path)
        assert info["pid"] == os.getpid() and info["host"] == socket.gethostname() and info["token"] == lock.token
        with pytest.raises(LockBusy, match=f"pid {os.getpid()}"):
            RunLock(path, timeout=0).acquire()
        with pytest.raises(LockBusy):
            RunLock(path, timeout=0.3, poll=0.05).acquire()
    assert not path.exists()
    RunLock(path, timeout=0).acquire().release()  # free again


def test_lock_of_a_dead_process_is_broken(tmp_path):
    path = tmp_path / "run.lock"
    _write(path, pid=_dead_pid())
    assert lock_is_stale(path, read_lock(path)[0])
    with RunLock(path, timeout=0) as lock:
        assert read_lock(path)[0]["token"] == lock.token


def test_recycled_pid_is_detected_by_its_start_time(tmp_path):
    path = tmp_path / "run.lock"
    _write(path, pid=os.getpid(), start="1")  # our pid, but a process that started at tick 1
    if sys.platform.startswith("linux"):
        assert lock_is_stale(path, read_lock(path)[0])
    _write(path, pid=os.getpid())  # no start time recorded: a live pid holds it
    assert not lock_is_stale(path, read_lock(path)[0])


def test_foreign_host_lock_is_stale_only_when_its_heartbeat_stopped(tmp_path):
    path = tmp_path / "run.lock"
    _write(path, pid=1, host="some-other-node")
    assert not lock_is_stale(path, read_lock(path)[0], stale_after=60)
    old = time.time() - 120
    os.utime(path, (old, old))
    assert lock_is_stale(path, read_lock(path)[0], stale_after=60)


def test_unreadable_lock_is_busy_while_young_and_stale_when_old(tmp_path):
    path = tmp_path / "run.lock"
    path.write_bytes(b"")  # a writer died between O_EXCL and writing its pid
    with pytest.raises(LockBusy, match="unknown owner"):
        RunLock(path, timeout=0, grace=10).acquire()
    old = time.time() - 60
    os.utime(path, (old, old))
    RunLock(path, timeout=0, grace=10).acquire().release()


def test_heartbeat_keeps_the_lock_fresh(tmp_path):
    path = tmp_path / "run.lock"
    with RunLock(path, heartbeat=0.05):
        old = time.time() - 100
        os.utime(path, (old, old))
        time.sleep(0.3)
        assert time.time() - path.stat().st_mtime < 5


def test_release_never_removes_someone_elses_lock(tmp_path):
    path = tmp_path / "run.lock"
    lock = RunLock(path).acquire()
    path.unlink()
    _write(path, pid=os.getpid(), token="someone-else")
    lock.release()
    assert path.exists() and read_lock(path)[0]["token"] == "someone-else"


# A contender loads lock.py on its own (stdlib only), so that starting it is cheap.
_CONTENDER = r"""
import importlib.util, sys, time
from pathlib import Path
spec = importlib.util.spec_from_file_location("sweep_lock", sys.argv[1])
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
lock_path, folder, me = sys.argv[2], Path(sys.argv[3]), sys.argv[4]
def wait_for(name):
    while not (folder / name).exists():
        time.sleep(0.005)
(folder / f"ready-{me}").touch()
wait_for("go")
try:
    lock = mod.RunLock(lock_path, timeout=0).acquire()
except mod.LockBusy:
    lock = None
(folder / f"tried-{me}").write_text("1" if lock else "0")
wait_for("release")
if lock:
    lock.release()
"""


def test_only_one_of_many_processes_takes_a_stale_lock(tmp_path):
    import gsd.lock as lock_module

    path = tmp_path / "run.lock"
    _write(path, pid=_dead_pid())
    sync = tmp_path / "sync"
    sync.mkdir()
    n = 6
    procs = [
        subprocess.Popen([sys.executable, "-c", _CONTENDER, lock_module.__file__, str(path), str(sync), str(i)])
        for i in range(n)
    ]

    def wait_all(prefix):
        deadline = time.time() + 60
        while len(list(sync.glob(prefix + "-*"))) < n:
            assert time.time() < deadline and all(p.poll() is None for p in procs)
            time.sleep(0.01)

    wait_all("ready")
    (sync / "go").touch()
    wait_all("tried")
    winners = [int((sync / f"tried-{i}").read_text()) for i in range(n)]
    (sync / "release").touch()
    assert all(p.wait(timeout=30) == 0 for p in procs)
    assert sum(winners) == 1
    assert not path.exists() and not (tmp_path / "run.lock.break").exists()
