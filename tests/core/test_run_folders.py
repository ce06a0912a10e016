"""The run-folder facility: a folder lock held by one process, output sets replaced whole,
temporary files cleared under the whole folder, damaged files named in one line."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time

import pytest

import gsd
from gsd.atomic import read_json, remove_temps, replace_set, write_json
from gsd.lock import LockBusy, RunLock, hold_folder, lock_path


def test_a_second_process_on_a_held_folder_gets_one_line_naming_the_owner(tmp_path):
    out = tmp_path / "run"
    code = ("import sys; from gsd.lock import hold_folder\n"
            "try:\n    hold_folder(sys.argv[1]).__enter__()\nexcept ValueError as e:\n    print(e); sys.exit(2)\n")
    with hold_folder(out):
        res = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2
    assert f"pid {os.getpid()}" in res.stdout and repr(str(out)) in res.stdout and res.stdout.count("\n") == 1
    assert not lock_path(out).exists()  # released
    res = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


def test_hold_folder_is_reentrant_in_one_process_but_a_bare_lock_is_not(tmp_path):
    out = tmp_path / "run"
    with RunLock(lock_path(out)):  # a sweep worker holds the run's lock ...
        with hold_folder(out):  # ... and the simulator it calls holds the folder again
            pass
        assert lock_path(out).exists()  # the inner exit did not release the outer lock
        with pytest.raises(LockBusy):
            RunLock(lock_path(out), timeout=0).acquire()
    assert not lock_path(out).exists()


def test_a_failed_set_leaves_the_previous_set_whole(tmp_path):
    out = tmp_path / "dx"
    with replace_set(out, ("a.json", "b.json", "c.png")) as stage:
        write_json(stage / "a.json", {"run": 1})
        write_json(stage / "b.json", {"run": 1})
        (stage / "c.png").write_bytes(b"old figure")
    with pytest.raises(gsd.InputError, match="cannot write .*dx.*No space left"):  # one line, not a traceback
        with replace_set(out, ("a.json", "b.json", "c.png")) as stage:
            write_json(stage / "a.json", {"run": 2})
            write_json(stage / "b.json", {"run": 2})
            raise OSError(errno.ENOSPC, "No space left on device")  # the disk fills at the figure
    assert read_json(out / "a.json") == read_json(out / "b.json") == {"run": 1}
    assert (out / "c.png").read_bytes() == b"old figure"
    assert sorted(p.name for p in out.iterdir()) == ["a.json", "b.json", "c.png"]  # no staging left


def test_a_full_disk_is_one_line_and_a_smaller_set_removes_the_members_it_lacks(tmp_path):
    out = tmp_path / "dx"
    with replace_set(out, ("a.json", "c.png")) as stage:
        write_json(stage / "a.json", 1)
        (stage / "c.png").write_bytes(b"x")
    with replace_set(out, ("a.json", "c.png")) as stage:  # this diagnosis draws no figure
        write_json(stage / "a.json", 2)
    assert sorted(p.name for p in out.iterdir()) == ["a.json"] and read_json(out / "a.json") == 2


def test_a_set_cut_by_a_kill_is_finished_or_dropped_by_the_next_writer(tmp_path):
    out = tmp_path / "dx"
    out.mkdir()
    write_json(out / "a.json", "old")
    write_json(out / "b.json", "old")
    done = out / ".set.1.complete.tmp"  # killed after its manifest, a.json moved already
    done.mkdir()
    write_json(done / "b.json", "new")
    write_json(done / ".set-manifest.json", {"write": ["a.json", "b.json"], "remove": []})
    write_json(out / "a.json", "new")
    cut = out / ".set.2.cut.tmp"  # killed while staging: no manifest
    cut.mkdir()
    write_json(cut / "a.json", "half")
    with replace_set(out, ("a.json", "b.json")) as stage:
        assert read_json(out / "a.json") == read_json(out / "b.json") == "new"  # finished first
        write_json(stage / "a.json", "newest")
        write_json(stage / "b.json", "newest")
    assert sorted(p.name for p in out.iterdir()) == ["a.json", "b.json"]


def test_remove_temps_clears_subfolders(tmp_path):
    (tmp_path / "rollouts" / "deep").mkdir(parents=True)
    temps = [tmp_path / ".checkpoint.pt.9.ab.tmp", tmp_path / "rollouts" / ".3.jsonl.9.cd.tmp",
             tmp_path / "rollouts" / "deep" / ".x.9.ef.tmp"]
    for t in temps:
        t.write_text("half")
    keep = tmp_path / "rollouts" / "3.jsonl"
    keep.write_text("{}")
    removed = remove_temps(tmp_path)
    assert sorted(removed) == sorted(temps) and keep.exists() and not any(t.exists() for t in temps)


@pytest.mark.parametrize("content", [b"{", b"\xff\xfe", b"", b'{"a": 1'])
def test_a_damaged_json_file_is_named(tmp_path, content):
    path = tmp_path / "summary.json"
    path.write_bytes(content)
    with pytest.raises(gsd.InputError, match="summary.json.* is damaged") as err:
        read_json(path)
    assert "\n" not in str(err.value)


def test_the_lock_of_a_killed_holder_does_not_block_the_folder(tmp_path):
    out = tmp_path / "run"
    code = "import sys, time; from gsd.lock import hold_folder\nhold_folder(sys.argv[1]).__enter__()\nprint('held', flush=True)\ntime.sleep(60)\n"
    proc = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(gsd.InputError, match=f"pid {proc.pid}"):
            hold_folder(out).__enter__()
    finally:
        proc.kill()
        proc.wait()
    deadline = time.time() + 30
    while True:  # the dead owner's lock is stale at once (same host, pid gone)
        try:
            with hold_folder(out):
                break
        except gsd.InputError:
            assert time.time() < deadline
            time.sleep(0.1)
