"""`gsd simulate`: runs, campaigns, and exit status 2 on bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gsd.cli import main


@pytest.mark.parametrize(
    "argv, text",
    [
        (["--set", "group_size=1"], "group_size"),
        (["--set", "G=8"], "'G'"),
        (["--set", "lr=0"], "'lr' = 0"),
        (["--set", "method=ppo"], "'method' = 'ppo'"),
        (["--set", "nonsense"], "key=value"),
        (["--config", "does/not/exist.toml"], "does not exist"),
        (["--campaign", "paper_campaign", "--set", "decile_draws=0"], "decile_draws"),
        (["--threads", "0"], "--threads"),
    ],
)
def test_bad_input_exits_2(tmp_path, capsys, argv, text):
    rc = main(["simulate", "--out", str(tmp_path / "r"), "--no-progress", *argv])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("gsd simulate: error:") and text in err
    assert not (tmp_path / "r").exists()


def test_console_exit_status(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "gsd.cli", "simulate", "--out", str(tmp_path / "r"), "--set", "steps=-1"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "'steps' = -1" in proc.stderr and "Traceback" not in proc.stderr


def test_run_and_resume_flags(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text('n_prompts = 300\nsteps = 4\nmethod = "dapo"\ndevice = "cpu"\n')
    out = tmp_path / "run"
    assert main(["simulate", "--config", str(cfg), "--out", str(out), "--no-progress", "--json", "--set", "seed=2"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["method"] == "dapo" and summary["steps"] == 4
    assert json.loads((out / "config.json").read_text())["seed"] == 2
    # Same folder, other config: refused.
    assert main(["simulate", "--config", str(cfg), "--out", str(out), "--no-progress", "--set", "seed=3"]) == 2
    assert "different config" in capsys.readouterr().err
    # Same config again: already complete, printed again.
    assert main(["simulate", "--config", str(cfg), "--out", str(out), "--no-progress", "--set", "seed=2", "--resume"]) == 0


def test_campaign_cli(tmp_path, capsys):
    fig = tmp_path / "fig" / "campaign.png"
    rc = main(["simulate", "--campaign", "paper_campaign", "--out", str(tmp_path / "c"), "--no-progress",
               "--set", "n_prompts=300", "--set", "steps=5", "--set", "decile_draws=5", "--figure", str(fig)])
    assert rc == 0
    out = capsys.readouterr().out
    assert "DAPO generations / GRPO generations" in out and "dr_grpo_measured" in out
    assert fig.stat().st_size > 10_000


def test_console_entry_freezes_the_heap_only_in_its_own_process(tmp_path, monkeypatch, capsys):
    """`gsd` (gsd.cli.run) freezes the objects its imports made, once they are loaded and again
    before exit; main() called from Python never touches the garbage collector."""
    import gc

    import gsd.cli

    calls = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    argv = ["simulate", "--out", str(tmp_path / "r"), "--no-progress", "--set", "n_prompts=50", "--set", "steps=2"]
    assert main(argv) == 0 and calls == []
    monkeypatch.setattr(sys, "argv", ["gsd", *argv[:2], str(tmp_path / "r2"), *argv[3:]])
    assert gsd.cli.run() == 0
    assert calls == ["freeze", "freeze"]
    assert main(argv[:2] + [str(tmp_path / "r3")] + argv[3:]) == 0 and calls == ["freeze", "freeze"]
