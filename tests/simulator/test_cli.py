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
    proc = subprocess.run(
        [sys.executable, "-m", "gsd.cli", "simulate", "--out", str(tmp_path / "r"), "--set", "steps=-1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and "'steps' = -1" in proc.stderr and "Traceback" not in proc.stderr


def test_run_and_resume_flags(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text('n_prompts = 300\nsteps = 4\nmethod = "dapo"\ndevice = "cpu"\n')
    out = tmp_path / "run"
    assert (
        main(["simulate", "--config", str(cfg), "--out", str(out), "--no-progress", "--json", "--set", "seed=2"]) == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["method"] == "dapo" and summary["steps"] == 4
    assert json.loads((out / "config.json").read_text())["seed"] == 2
    # Same folder, other config: refused, and the message says which --set makes it the same run.
    assert main(["simulate", "--config", str(cfg), "--out", str(out), "--no-progress", "--set", "seed=3"]) == 2
    err = capsys.readouterr().err
    assert "different config (seed: 2 → 3)" in err and "gsd simulate: --set seed=2)" in err
    # Without the --set at all: the same suggestion.
    assert main(["simulate", "--config", str(cfg), "--out", str(out), "--no-progress", "--resume"]) == 2
    assert "--set seed=2" in capsys.readouterr().err
    # Same config again: already complete, says so, printed again.
    assert (
        main(["simulate", "--config", str(cfg), "--out", str(out), "--no-progress", "--set", "seed=2", "--resume"]) == 0
    )
    assert "finished earlier (4 steps" in capsys.readouterr().err


@pytest.fixture
def ctrl_c_at(monkeypatch):
    """``ctrl_c_at(n)``: the next runs get a KeyboardInterrupt when step ``n`` (0-based) starts;
    ``ctrl_c_at(None)`` lets them run.  Both engines' steps are armed."""
    from gsd.simulator import engine, tabular

    real_step, real_program_step = engine.train_step, tabular.Program.step

    def arm(at):
        def step_or_interrupt(run, step):
            if step == at:
                raise KeyboardInterrupt
            return real_step(run, step)

        def program_step_or_interrupt(prog, step):
            if step == at:
                raise KeyboardInterrupt
            return real_program_step(prog, step)

        monkeypatch.setattr(engine, "train_step", real_step if at is None else step_or_interrupt)
        monkeypatch.setattr(tabular.Program, "step", real_program_step if at is None else program_step_or_interrupt)

    return arm


def test_ctrl_c_says_where_it_stopped_and_how_to_resume(tmp_path, capsys, ctrl_c_at):
    import shlex

    cfg = tmp_path / "c.toml"
    cfg.write_text('n_prompts = 200\nsteps = 10\ncheckpoint_every = 4\ndevice = "cpu"\n')
    out = tmp_path / "run dir"  # a space: the printed command must quote it
    ctrl_c_at(7)
    argv = [
        "simulate",
        "--config",
        str(cfg),
        "--out",
        str(out),
        "--no-progress",
        "--set",
        "lr=0.25",
        "--set",
        'name="my run"',
    ]
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert "stopped at step 7 of 10" in err and "last checkpoint is at step 4, where a resume continues" in err
    command = err.split("resume with: ", 1)[1].strip()
    assert command.startswith("gsd simulate ") and command.endswith(" --resume")
    ctrl_c_at(None)
    # The printed command, run as it is, continues the same run at its checkpoint.
    assert main(shlex.split(command)[1:] + ["--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "my run: resuming at step 4 of 10" in err
    assert json.loads((out / "config.json").read_text())["lr"] == 0.25
    assert main(shlex.split(command)[1:]) == 0
    assert "finished earlier" in capsys.readouterr().err


def test_resume_without_a_checkpoint_says_it_starts_over(tmp_path, capsys, ctrl_c_at):
    ctrl_c_at(1)
    argv = ["simulate", "--out", str(tmp_path / "r"), "--no-progress", "--set", "n_prompts=100", "--set", "steps=6"]
    assert main(argv) == 130
    assert "no checkpoint yet, a resume starts at step 0" in capsys.readouterr().err
    ctrl_c_at(None)
    assert main([*argv, "--resume"]) == 0
    assert "no checkpoint in" in (err := capsys.readouterr().err) and "starting at step 0 of 6" in err


def test_campaign_cli(tmp_path, capsys):
    fig = tmp_path / "fig" / "campaign.png"
    rc = main(
        [
            "simulate",
            "--campaign",
            "paper_campaign",
            "--out",
            str(tmp_path / "c"),
            "--no-progress",
            "--set",
            "n_prompts=300",
            "--set",
            "steps=5",
            "--set",
            "decile_draws=5",
            "--figure",
            str(fig),
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "DAPO generations / GRPO generations" in out and "dr_grpo_measured" in out
    assert fig.stat().st_size > 10_000
    # A finished campaign says so; another --set is refused with the --set that continues it.
    argv = [
        "simulate",
        "--campaign",
        "paper_campaign",
        "--out",
        str(tmp_path / "c"),
        "--no-progress",
        "--set",
        "n_prompts=300",
        "--set",
        "steps=5",
        "--set",
        "decile_draws=5",
    ]
    assert main(argv) == 0
    assert "campaign finished earlier" in capsys.readouterr().err
    assert main([*argv[:-2], "--set", "decile_draws=6"]) == 2
    assert "give it the same settings (gsd simulate: --set decile_draws=5)" in capsys.readouterr().err


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
