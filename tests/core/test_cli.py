"""The core CLI: tables, JSON, and one-line errors with exit status 2."""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest


def test_identity_json(gsd_cli):
    rc, out, _ = gsd_cli("identity", "--rewards", "0,1,1,0", "--json")
    data = json.loads(out)
    assert rc == 0 and data["adv_grpo"] == [-1, 1, 1, -1]
    assert data["g_grpo"] == pytest.approx(data["identity_grpo"]) and data["sigma"] == 0.5


def test_identity_with_scores_and_ddof(gsd_cli):
    rc, out, _ = gsd_cli(
        "identity", "--rewards", "1,0,0,0", "--scores", "2,1,0,-1", "--ddof", "1", "--eps", "1e-4", "--json"
    )
    d = json.loads(out)
    sigma, sigma1 = 3**0.5 / 4, 3**0.5 / 4 * (4 / 3) ** 0.5
    assert d["g_grpo"] == pytest.approx(sigma**2 / (sigma1 + 1e-4) * (2 - 0))


def test_silent_and_fidelity_lists(gsd_cli):
    rc, out, _ = gsd_cli("silent", "--p", "0.5,0.05", "--G", "8,64", "--json")
    rows = json.loads(out)
    assert rc == 0 and len(rows) == 4 and rows[0]["silent_rate"] == 0.0078125
    rc, out, _ = gsd_cli("fidelity", "--p", "0.05", "--G", "64")
    assert "0.945" in out and "0.9588" in out


def test_plan_file_roundtrip(tmp_path, gsd_cli):
    src = tmp_path / "in.csv"
    pd.DataFrame({"rate": [0.0, 0.05, 0.5, 1.0]}).to_csv(src, index=False)
    out = tmp_path / "plan.parquet"
    rc, text, _ = gsd_cli("plan", "--input", str(src), "--column", "rate", "--epsilon", "0.05", "--output", str(out))
    assert rc == 0 and "unreachable 2" in text
    plan = pd.read_parquet(out)
    assert plan.group_size.tolist() == [-1, 69, 11, -1]
    rc, text, _ = gsd_cli("plan", "--p", "0,0.5", "--delta", "0.01")
    assert "never" in text and rc == 0


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["silent", "--p", "1.5", "--G", "8"], "p must lie in [0, 1]"),
        (["silent", "--p", "0.5", "--G", "0"], "G must be an integer >= 1"),
        (["fidelity", "--p", "x", "--G", "8"], "--p must be a comma-separated list"),
        (["plan", "--p", "0.5", "--epsilon", "2"], "epsilon"),
        (["plan", "--input", "/nonexistent.csv", "--epsilon", "0.1"], "no such file"),
        (["identity", "--rewards", "0,1", "--scores", "1"], "--scores needs one value per reward"),
    ],
)
def test_errors_are_one_line_exit_2(gsd_cli, argv, needle):
    rc, out, err = gsd_cli(*argv)
    assert rc == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_console_script_entry_point():
    res = subprocess.run(
        [sys.executable, "-m", "gsd.cli", "silent", "--p", "2", "--G", "8"], capture_output=True, text=True
    )
    assert res.returncode == 2 and res.stderr.startswith("gsd silent: error:")


def test_conventions_and_tour_print_the_same_trainer_ratio(gsd_cli):
    """The ratio a trainer's row shows first is with that row's own eps (TRL: 1e-4), as the tour's."""
    import re

    import gsd

    rc, table, _ = gsd_cli("conventions", "--G", "8")
    trl = next(line.split() for line in table.splitlines() if line.split()[:1] == ["trl"])
    header = next(line.split() for line in table.splitlines() if line.split()[:1] == ["trainer"])
    assert rc == 0 and header[4] == "ratio(k=1)" and trl[3] == "0.0001"
    rc, tour, _ = gsd_cli("tour")
    in_tour = re.search(r"trl (0\.\d+)", tour).group(1)
    assert trl[4] == in_tour == f"{gsd.convention_gap(8, 'trl').ratio_min.iloc[0]:.5g}"
    # The eps-free ratio is labelled as such, and differs from TRL's own in the printed digits.
    assert header[6] == "ratio(eps=0)" and trl[6] != trl[4]
    rc, out, _ = gsd_cli("conventions", "--G", "8", "--json")
    assert {"ratio_min", "ratio_no_eps", "eps"} <= set(json.loads(out)[0])  # JSON keeps the API's names


def test_the_gsd_command_keeps_freed_memory(monkeypatch, capsys):
    """The console command (its process is gsd's) raises glibc's thresholds; library calls do not."""
    import gsd.cli
    import gsd.io.heap

    calls = []
    monkeypatch.setattr(gsd.io.heap, "keep_freed_memory", lambda: calls.append(1) or True)
    monkeypatch.setattr(sys, "argv", ["gsd", "conventions"])
    assert gsd.cli.run() == 0
    assert calls == [1]
    assert gsd.cli.main(["conventions"]) == 0 and calls == [1]
    capsys.readouterr()
    if sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
        code = "from gsd.io.heap import keep_freed_memory; assert keep_freed_memory() is True"
    else:
        code = "from gsd.io.heap import keep_freed_memory; assert keep_freed_memory() is False"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60).returncode == 0
