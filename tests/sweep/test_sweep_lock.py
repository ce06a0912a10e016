"""The per-run lock: the kernel's flock, dropped when its holder dies; lock paths that are no file refused."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from gsd.io.lock import read_lock
from gsd.sweep import LockBusy, RunLock


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


def _sigkilled_holder(path) -> int:
    """A process that took the lock and was killed with SIGKILL: its lock file stays behind."""
    code = (
        "import sys; from gsd.io.lock import RunLock; RunLock(sys.argv[1]).acquire(); "
        "print('held', flush=True); sys.stdin.read()"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "held"
    with pytest.raises(LockBusy, match=f"pid {proc.pid}"):
        RunLock(path, timeout=0).acquire()
    proc.kill()
    proc.wait()
    return proc.pid


def test_the_kernel_drops_a_killed_holders_lock(tmp_path):
    path = tmp_path / "run.lock"
    _sigkilled_holder(path)
    assert path.exists()  # the file a killed process leaves ...
    with RunLock(path, timeout=0) as lock:  # ... holds no lock: taken at once, no staleness to judge
        assert read_lock(path)[0]["token"] == lock.token
    assert not path.exists()


def test_a_note_that_names_any_pid_is_no_lock(tmp_path):
    """The owner note is read for messages only: a pid of 2**40, a live pid, garbage, an empty file."""
    path = tmp_path / "run.lock"
    for note in (
        {"pid": 2**40, "host": socket.gethostname()},
        {"pid": os.getpid(), "host": socket.gethostname()},
        {"pid": "x"},
        b"",
        b"\xff\x00garbage",
    ):
        path.write_bytes(note if isinstance(note, bytes) else json.dumps(note).encode())
        RunLock(path, timeout=0).acquire().release()
        assert not path.exists()


def test_clear_unheld_removes_a_killed_holders_file_and_keeps_a_held_one(tmp_path):
    from gsd.io.lock import clear_unheld

    left, held = tmp_path / "a.lock", tmp_path / "b.lock"
    _sigkilled_holder(left)
    with RunLock(held):
        assert clear_unheld([left, held, tmp_path / "none.lock"]) == [left]
        assert held.exists() and not left.exists()


@pytest.mark.parametrize("kind", ["dangling symlink", "symlink to a file", "fifo", "folder"])
def test_a_lock_path_that_is_not_a_regular_file_is_refused_at_once(tmp_path, kind):
    path, target = tmp_path / "run.lock", tmp_path / "precious.txt"
    if kind == "dangling symlink":
        path.symlink_to(tmp_path / "nowhere")
    elif kind == "symlink to a file":
        target.write_text("keep")
        path.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="run.lock"):
        RunLock(path, timeout=None).acquire()  # would wait for ever if it waited at all
    assert time.monotonic() - t0 < 5
    assert not (tmp_path / "nowhere").exists()  # nothing created through the link
    if kind == "symlink to a file":
        assert target.read_text() == "keep"


def test_hold_folder_names_the_folder_when_its_lock_path_is_a_fifo(tmp_path):
    from gsd import InputError
    from gsd.io.lock import hold_folder, lock_path

    os.mkfifo(lock_path(tmp_path / "run"))
    with pytest.raises(InputError, match="out_dir .*run.* FIFO"):
        with hold_folder(tmp_path / "run", option="out_dir"):
            pass


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


def test_only_one_of_many_processes_takes_a_left_lock(tmp_path):
    import gsd.io.lock as lock_module

    path = tmp_path / "run.lock"
    _write(path, pid=_dead_pid())  # a killed holder's file
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
    assert not path.exists()


def test_a_program_of_many_runs_holds_more_locks_than_the_soft_file_limit(tmp_path):
    """One descriptor per held lock: past the soft limit of open files it is raised to the hard one."""
    code = (
        "import os, resource, sys\n"
        "from gsd.io.lock import RunLock\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))\n"
        "n = min(300, hard - 32)\n"
        "locks = [RunLock(os.path.join(sys.argv[1], f'{i}.lock')).acquire() for i in range(n)]\n"
        "[lock.release() for lock in locks]\n"
        "print(n, len(os.listdir(sys.argv[1])))\n"
    )
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    n, left = map(int, res.stdout.split())
    assert n > 64 and left == 0
