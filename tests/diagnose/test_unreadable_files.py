"""Files a reader cannot take: each refused in one line naming the file, fast, without a big read."""

from __future__ import annotations

import builtins
import errno
import os
import subprocess
import sys
import time

import pytest

from gsd import InputError
from gsd.diagnose import read_rollouts

ROWS = b'{"prompt": "a", "step": 0, "reward": 1}\n{"prompt": "a", "step": 0, "reward": 0}\n'


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_permission_denied_names_the_file(tmp_path, monkeypatch, suffix):
    # The suite runs as root, where mode 000 still reads: the denial is raised by open itself,
    # as the kernel raises it for another user (pyarrow's JSON reader opens through Python's open too).
    path = tmp_path / f"log{suffix}"
    path.write_bytes(ROWS if suffix == ".jsonl" else b"prompt,step,reward\na,0,1\na,0,0\n")
    real_open = builtins.open

    def denied(file, *args, **kwargs):
        if os.fspath(file) == os.fspath(path):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", denied)
    monkeypatch.setattr("io.open", denied)
    with pytest.raises(InputError, match=r"LOG: cannot read .*log\.(csv|jsonl).*Permission denied"):
        read_rollouts(path, reward="reward")


def test_non_utf8_prompt_is_a_bad_row(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(ROWS + b'{"prompt": "b\xff\xfe", "step": 0, "reward": 1}\n' + ROWS.replace(b'"a"', b'"c"'))
    log = read_rollouts(path, reward="reward")
    assert log.rows == 4 and log.bad_count == 1
    assert "line 3" in str(log.bad_rows[0]) or ":3:" in str(log.bad_rows[0])
    assert "not UTF-8" in str(log.bad_rows[0])


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_sparse_file_of_nul_bytes_fails_fast(tmp_path, suffix):
    path = tmp_path / f"zeros{suffix}"
    with open(path, "wb") as fh:
        fh.truncate(2 << 30)  # 2 GB, sparse: no disk used
    t0 = time.perf_counter()
    with pytest.raises(InputError, match=r"NUL byte at byte 0.*sparse"):
        read_rollouts(path, reward="reward")
    assert time.perf_counter() - t0 < 10  # a read of 2 GB is minutes on this file system; this is a sniff


def test_log_cut_short_by_zeros_at_its_end(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(ROWS * 5000 + b"\x00" * 70000)
    with pytest.raises(InputError, match="NUL byte at byte"):
        read_rollouts(path, reward="reward")


def test_fifo_is_refused_not_read(tmp_path):
    fifo = tmp_path / "log.csv"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        read_rollouts(fifo, reward="reward")


def test_recursive_glob_over_a_symlink_loop_returns(tmp_path):
    """Python's recursive glob follows symlinked folders: a loop makes it walk for ever.  Run in
    a child with a time limit, so a regression fails instead of hanging the suite."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "up").symlink_to("../..")
    (tmp_path / "a" / "self").symlink_to(".")
    (tmp_path / "a" / "b" / "x.jsonl").write_bytes(ROWS)
    (tmp_path / "a" / ".hidden").mkdir()
    (tmp_path / "a" / ".hidden" / "y.jsonl").write_bytes(ROWS)
    code = (
        "import sys; from gsd.diagnose.readers import find_log_files; "
        "print([str(p) for p in find_log_files(sys.argv[1], 'table')])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "**" / "*.jsonl")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == repr([str(tmp_path / "a" / "b" / "x.jsonl")])
