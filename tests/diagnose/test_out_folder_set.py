"""``gsd diagnose --out`` replaces its files as one set: a failure leaves the previous diagnosis
whole, and two processes never write one folder at once."""

from __future__ import annotations

import errno
import subprocess
import sys

from gsd.cli import main

from .conftest import rollouts, write_verl

FILES = ("steps.parquet", "prompts.parquet", "groups.parquet", "summary.json", "diagnose.png")


def _diagnose(capsys, *argv):
    rc = main(["diagnose", "--no-progress", *map(str, argv)])
    return rc, capsys.readouterr().err


def test_a_full_disk_at_the_figure_leaves_the_previous_diagnosis_whole(capsys, tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    write_verl(first, rollouts(seed=1, steps=2, prompts=40)[0])
    write_verl(second, rollouts(seed=2, steps=3, prompts=50)[0])
    dx = tmp_path / "dx"
    rc, err = _diagnose(capsys, first, "--out", dx)
    assert rc == 0, err
    before = {name: (dx / name).read_bytes() for name in FILES}

    import gsd.diagnose.figure as figure

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(figure, "diagnosis_figure", full_disk)
    rc, err = _diagnose(capsys, second, "--out", dx)
    assert rc == 2 and err.count("\n") == 1 and "No space left" in err
    assert {name: (dx / name).read_bytes() for name in FILES} == before
    assert sorted(p.name for p in dx.iterdir()) == sorted(FILES)  # no staging folder left

    monkeypatch.undo()
    rc, err = _diagnose(capsys, second, "--out", dx)
    assert rc == 0 and all((dx / name).read_bytes() != before[name] for name in ("steps.parquet", "summary.json"))


def test_a_second_process_on_the_out_folder_is_refused(capsys, tmp_path):
    log = tmp_path / "log"
    write_verl(log, rollouts(seed=1, steps=2, prompts=40)[0])
    dx = tmp_path / "dx"
    code = "import sys, time; from gsd.io.lock import hold_folder\nhold_folder(sys.argv[1]).__enter__()\nprint('held', flush=True)\ntime.sleep(60)\n"
    proc = subprocess.Popen([sys.executable, "-c", code, str(dx)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        rc, err = _diagnose(capsys, log, "--out", dx)
    finally:
        proc.kill()
        proc.wait()
    assert rc == 2 and f"in use by pid {proc.pid}" in err and err.count("\n") == 1
    assert not dx.exists() or not any(dx.iterdir())
