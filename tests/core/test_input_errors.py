"""The package's input-error class, and how the CLI reports it (and nothing else) as one line."""

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import gsd
from gsd.cli import CliError, main
from gsd.io import atomic


def test_input_error_is_a_value_error_exported_at_top_level():
    assert issubclass(gsd.InputError, ValueError) and issubclass(CliError, gsd.InputError)
    with pytest.raises(gsd.InputError, match="p must lie"):
        gsd.silent_rate(2.0, 8)


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_inf_is_refused_wherever_nan_is(bad):
    with pytest.raises(gsd.InputError, match="rewards must be finite"):
        gsd.advantages([0, 1, bad])
    with pytest.raises(gsd.InputError, match="scores must be finite"):
        gsd.group_update([0, 1], np.array([[0.0], [bad]]))
    for call in (
        lambda: gsd.silent_rate(bad, 8),
        lambda: gsd.fidelity(0.5, bad),
        lambda: gsd.required_group_size(0.5, bad),
        lambda: gsd.expected_update(0.5, 8, eps=bad),
    ):
        with pytest.raises(gsd.InputError):
            call()


def test_torch_inputs_refuse_inf_but_logits_may_mask_with_minus_inf():
    torch = pytest.importorskip("torch")
    import gsd.losses as L

    with pytest.raises(gsd.InputError, match="rewards must be finite"):
        gsd.advantages(torch.tensor([0.0, 1.0, float("inf")]))
    with pytest.raises(gsd.InputError, match="advantage"):
        L.clipped_surrogate(1.0, float("inf"))
    with pytest.raises(gsd.InputError, match="logits"):
        L.softmax_t([float("inf"), 0.0])
    probs = L.softmax_t([float("-inf"), 0.0])  # a masked token: probability 0
    assert probs.tolist() == [0.0, 1.0]
    loss, mask = torch.zeros(1, 3), torch.tensor([[1.0, 1.0, 0.0]])
    loss[0, 2] = float("nan")  # padding may hold anything
    assert float(L.aggregate(loss, mask)) == 0.0
    loss[0, 0] = float("inf")
    with pytest.raises(gsd.InputError, match="active token"):
        L.aggregate(loss, mask)


def test_cli_reports_input_errors_as_one_line(gsd_cli):
    rc, _, err = gsd_cli("identity", "--rewards", "0,1,inf")
    assert rc == 2 and err.count("\n") == 1 and "rewards must be finite" in err


@pytest.mark.parametrize("exc", [ValueError("a bug"), RuntimeError("a bug"), ZeroDivisionError()])
def test_cli_lets_a_bug_show_its_traceback(monkeypatch, exc):
    def broken(*args, **kwargs):
        raise exc

    monkeypatch.setattr(gsd.core.silent, "silent_rate", broken)
    with pytest.raises(type(exc)):
        main(["silent", "--p", "0.5", "--G", "8"])


def test_a_bug_exits_1_with_traceback_in_a_subprocess(tmp_path):
    # A plain ValueError from inside a handler is a bug: Python's traceback, exit status 1.
    code = (
        "import sys, gsd.core.silent as s; from gsd.cli import main\n"
        "def bad(*a, **k): raise ValueError('not an input error')\n"
        "s.silent_rate = bad\nsys.exit(main(['silent', '--p', '0.5', '--G', '8']))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 1 and "Traceback" in res.stderr and "not an input error" in res.stderr


def _readonly(monkeypatch, folder):
    """Make ``folder`` unwritable; as root (CI containers) permissions do not bind, so refuse the move."""
    folder.chmod(0o555)
    if not os.access(folder, os.W_OK):
        return
    real = atomic.os.access
    monkeypatch.setattr(atomic.os, "access", lambda p, mode: False if str(p) == str(folder) else real(p, mode))


@pytest.mark.parametrize("case", ["read-only folder", "file in the way", "folder where a file goes", "read-only fs"])
def test_unwritable_output_is_one_line_exit_2(tmp_path, monkeypatch, gsd_cli, case):
    if case == "read-only folder":
        ro = tmp_path / "ro"
        ro.mkdir()
        _readonly(monkeypatch, ro)
        target = ro / "plan.csv"
    elif case == "file in the way":
        (tmp_path / "afile").write_text("x")
        target = tmp_path / "afile" / "sub" / "plan.csv"
    elif case == "folder where a file goes":
        target = tmp_path / "dir.csv"
        target.mkdir()
    else:
        target = "/sys/gsd-cannot-write-here/plan.csv"
    rc, _, err = gsd_cli("plan", "--p", "0.5", "--epsilon", "0.05", "--output", str(target))
    assert rc == 2 and err.count("\n") == 1 and "cannot write" in err and "Traceback" not in err, err


def test_write_through_existing_file_in_a_subprocess(tmp_path):
    (tmp_path / "afile").write_text("x")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "gsd.cli",
            "plan",
            "--p",
            "0.5",
            "--epsilon",
            "0.05",
            "--output",
            str(tmp_path / "afile" / "plan.csv"),
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "a file is in the way" in res.stderr


def test_make_folder_and_write_table(tmp_path):
    assert atomic.make_folder(tmp_path / "a" / "b").is_dir()
    atomic.write_table(tmp_path / "a" / "t.csv", pd.DataFrame({"x": [1]}))
    with pytest.raises(gsd.InputError, match="folder, a file is expected"):
        atomic.write_table(tmp_path / "a" / "b", pd.DataFrame({"x": [1]}))
