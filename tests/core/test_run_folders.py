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
from gsd.io.atomic import read_json, remove_temps, replace_set, write_json
from gsd.io.lock import LockBusy, RunLock, hold_folder, lock_path


def test_a_second_process_on_a_held_folder_gets_one_line_naming_the_owner(tmp_path):
    out = tmp_path / "run"
    code = (
        "import sys; from gsd.io.lock import hold_folder\n"
        "try:\n    hold_folder(sys.argv[1]).__enter__()\nexcept ValueError as e:\n    print(e); sys.exit(2)\n"
    )
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
    temps = [
        tmp_path / ".checkpoint.pt.9.ab.tmp",
        tmp_path / "rollouts" / ".3.jsonl.9.cd.tmp",
        tmp_path / "rollouts" / "deep" / ".x.9.ef.tmp",
    ]
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


def test_the_lock_of_a_killed_holder_does_not_block_the_folder(tmp_path):  # the kernel drops it
    out = tmp_path / "run"
    code = "import sys, time; from gsd.io.lock import hold_folder\nhold_folder(sys.argv[1]).__enter__()\nprint('held', flush=True)\ntime.sleep(60)\n"
    proc = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with pytest.raises(gsd.InputError, match=f"pid {proc.pid}"):
            hold_folder(out).__enter__()
    finally:
        proc.kill()
        proc.wait()
    deadline = time.time() + 30
    while True:  # the kernel dropped the dead owner's flock: the folder is free at once
        try:
            with hold_folder(out):
                break
        except gsd.InputError:
            assert time.time() < deadline
            time.sleep(0.1)


@pytest.mark.parametrize("entry", ["../precious.txt", "/abs/precious.txt", "..", "sub/x", "", 7])
def test_a_left_set_whose_manifest_names_outside_the_folder_moves_and_removes_nothing(tmp_path, entry):
    out = tmp_path / "dx"
    out.mkdir()
    precious = tmp_path / "precious.txt"
    precious.write_text("keep")
    write_json(out / "a.json", "old")
    left = out / ".set.1.forged.tmp"
    left.mkdir()
    write_json(left / "a.json", "forged")
    for manifest in ({"write": ["a.json"], "remove": [entry]}, {"write": [entry], "remove": []}):
        left.mkdir(exist_ok=True)
        write_json(left / ".set-manifest.json", manifest)
        with replace_set(out, ("a.json",)) as stage:
            write_json(stage / "a.json", "new")
        assert precious.read_text() == "keep" and read_json(out / "a.json") == "new"
        assert not left.exists()


def test_a_staging_name_that_is_a_link_is_removed_not_followed(tmp_path):
    out, elsewhere = tmp_path / "dx", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (elsewhere / "precious.txt").write_text("keep")
    write_json(elsewhere / ".set-manifest.json", {"write": ["precious.txt"], "remove": []})
    (out / ".set.1.link.tmp").symlink_to(elsewhere)
    with replace_set(out, ()) as stage:
        write_json(stage / "a.json", "new")
    assert (elsewhere / "precious.txt").read_text() == "keep" and not (out / "precious.txt").exists()
    assert not (out / ".set.1.link.tmp").exists()


@pytest.mark.parametrize("name", ["../../escape", "..", ".", "", "a/b", "x\x00y", "a\\b"])
def test_entry_path_refuses_a_name_that_leaves_its_folder(tmp_path, name):
    from gsd.io.atomic import entry_path

    with pytest.raises(gsd.InputError, match="campaign arm"):
        entry_path(tmp_path, name, what="campaign arm")
    assert entry_path(tmp_path, "grpo-G8", what="campaign arm") == tmp_path / "grpo-G8"


def test_a_campaign_arm_named_to_escape_is_refused_before_any_folder(tmp_path):
    from gsd.simulator.campaign import run_paper_campaign

    cfg = tmp_path / "c.toml"
    cfg.write_text('[base]\nn_prompts = 10\nsteps = 1\ndevice = "cpu"\n[arms."../../escape"]\nmethod = "grpo"\n')
    out = tmp_path / "a" / "b" / "camp"
    with pytest.raises(gsd.InputError, match=r"campaign arm '\.\./\.\./escape'"):
        run_paper_campaign(out, config_path=cfg, progress=False)
    assert not (tmp_path / "a" / "escape").exists() and not out.exists()


@pytest.mark.parametrize(
    "body, words",
    [
        ("[campaign]\nseeds = [0]\n", "seeds"),
        ("[campaign]\nseeds = 5\n", "seeds"),
        ("[campaign]\nseeds = [1, 1]\n", "seeds"),
        ("[variants]\n", "[variants]"),
        ("NOARMS", "[arms]"),
        ('[arms."../x"]\nmethod = "grpo"\n', "campaign arm"),
        ('[variants."../v"]\n', "variant"),
    ],
)
def test_a_comparison_config_that_cannot_run_is_one_line_before_any_run(tmp_path, body, words):
    from gsd.reproduce.allocation_comparison import run_comparison

    arms = "[arms.fixed_g8]\ngroup_size = 8\n[arms.fixed_g4]\ngroup_size = 4\n[arms.fixed_g16]\ngroup_size = 16\n"
    text = '[base]\nn_prompts = 10\nsteps = 1\ndevice = "cpu"\n' + ("" if body == "NOARMS" else arms)
    cfg = tmp_path / "c.toml"
    cfg.write_text(text + ("" if body == "NOARMS" else body))
    with pytest.raises(gsd.InputError, match=words.replace("[", r"\[").replace("]", r"\]")) as err:
        run_comparison(tmp_path / "out", config=cfg)
    assert "\n" not in str(err.value) and not (tmp_path / "out").exists()
