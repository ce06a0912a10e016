"""``gsd diagnose``: report, JSON, output folder, and one-line errors with exit status 2."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from gsd.cli import main

from .conftest import direct_steps, rollouts, write_trl, write_verl


def run(capsys, *argv):
    rc = main(["diagnose", "--no-progress", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_steps_and_summary(capsys, verl_log):
    folder, df, (bad_file, bad_line) = verl_log
    rc, out, err = run(capsys, folder, "--json")
    assert rc == 0, err
    data = json.loads(out)
    steps = data["steps"]
    want = direct_steps(df)
    assert [s["step"] for s in steps] == want["step"].tolist()
    for s, (_, w) in zip(steps, want.iterrows()):
        assert set(s) >= {"step", "groups", "rollouts", "silent_frac", "silent_pred", "wasted_rollouts", "fidelity"}
        assert (s["groups"], s["rollouts"], s["wasted_rollouts"]) == (w["groups"], w["rollouts"], w["wasted"])
        assert s["silent_frac"] == pytest.approx(w["silent_frac"], rel=1e-12)
        assert 0 < s["silent_pred"] < 1 and 0 < s["fidelity"] < 1
    summary = data["summary"]
    assert summary["bad_rows"] == 1 and summary["bad_rows_listed"][0].endswith(
        f"{bad_file.name}:{bad_line}: not valid JSON (Expecting value)"
    )


def test_report_and_out_folder(capsys, tmp_path):
    df, _ = rollouts(graded=True)
    write_trl(tmp_path / "trl", df)
    rc, out, err = run(
        capsys,
        tmp_path / "trl",
        "--reward",
        "accuracy_reward",
        "--threshold",
        "0.5",
        "--out",
        tmp_path / "dx",
        "--verbose",  # how the rewards were read, and the docs
    )
    assert rc == 0, err
    assert "silent groups" in out and "reward >= 0.5 counts as right" in out and "docs/theory.md" in out
    for name in ("steps.parquet", "prompts.parquet", "groups.parquet", "summary.json", "diagnose.png"):
        assert (tmp_path / "dx" / name).stat().st_size > 0
    steps = pd.read_parquet(tmp_path / "dx" / "steps.parquet")
    # The trainer's silence is every reward equal, whatever the threshold (which only makes right/wrong).
    np.testing.assert_array_equal(steps["silent_groups"], direct_steps(df, reward="score")["silent"])
    prompts = pd.read_parquet(tmp_path / "dx" / "prompts.parquet")
    assert len(prompts) == df["prompt"].nunique() and prompts["group_size"].min() >= 0


def _bad_case(tmp_path, case):
    df, _ = rollouts(steps=2, prompts=30)
    if case == "empty-folder":
        (tmp_path / "empty").mkdir()
        return [tmp_path / "empty"]
    if case == "wrong-format":
        write_verl(tmp_path / "v", df)
        return [tmp_path / "v", "--format", "trl"]
    if case == "missing-reward-key":
        write_verl(tmp_path / "v", df)
        return [tmp_path / "v", "--reward", "accuracy"]
    if case == "non-numeric-scores":
        write_verl(tmp_path / "v", df)
        for path in (tmp_path / "v").glob("*.jsonl"):
            path.write_text(re.sub(r'"score":[0-9.]+', '"score":"right"', path.read_text()))
        return [tmp_path / "v"]
    if case == "one-rollout-per-prompt":
        write_verl(tmp_path / "v", df.drop_duplicates(["step", "prompt"]))
        return [tmp_path / "v"]
    raise AssertionError(case)


@pytest.mark.parametrize(
    "case, message",
    [
        ("empty-folder", "no rollout log file found"),
        ("wrong-format", "no TRL's completions_{step:05d}.parquet file in"),
        ("missing-reward-key", "reward column 'accuracy' not found"),
        ("non-numeric-scores", "no usable rollout in 2 file(s); first unusable row: "),
        ("one-rollout-per-prompt", "no prompt has two or more rollouts in one step"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, tmp_path, case, message):
    rc, out, err = run(capsys, *_bad_case(tmp_path, case))
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("gsd diagnose: error: ") and message in err


def test_graded_rewards_without_threshold_get_the_measured_figures(capsys, tmp_path):
    df, _ = rollouts(steps=3, prompts=40, graded=True)
    df.loc[df.index[:8], "score"] = 0.5  # one group of equal graded rewards: silent for the trainer
    write_verl(tmp_path / "v", df)
    rc, out, err = run(capsys, tmp_path / "v", "--json")
    assert rc == 0, err
    data = json.loads(out)
    summary = data["summary"]
    assert summary["prior"] is None and summary["silent_pred"] is None
    assert any("--threshold T" in w for w in summary["warnings"])
    direct = direct_steps(df, reward="score")
    assert [s["silent_groups"] for s in data["steps"]] == direct["silent"].tolist()
    assert [s["wasted_rollouts"] for s in data["steps"]] == direct["wasted"].tolist()
    rc, out, err = run(capsys, tmp_path / "v")
    assert rc == 0 and "WARNING: rewards are graded" in out


def test_threshold_sets_the_prediction_beside_the_silence_it_predicts(capsys, tmp_path):
    """Graded rewards under --threshold: the trainer's silence (every reward equal) is measured only;
    the predicted all-right/all-wrong share, and its z, stand beside the measured all-right/all-wrong share."""
    df, _ = rollouts(steps=4, prompts=60, graded=True)
    df[["step", "prompt", "score"]].to_csv(tmp_path / "log.csv", index=False)
    argv = (tmp_path / "log.csv", "--reward", "score", "--threshold", "0.5")
    rc, out, err = run(capsys, *argv)
    assert rc == 0, err
    rc, js, err = run(capsys, *argv, "--json")
    summary = json.loads(js)["summary"]
    groups = df.assign(right=(df["score"] >= 0.5).astype(int)).groupby(["step", "prompt"])["right"].agg(["size", "sum"])
    groups = groups[groups["size"] >= 2]
    binary = ((groups["sum"] == 0) | (groups["sum"] == groups["size"])).mean()
    equal = df.groupby(["step", "prompt"])["score"].agg(["size", "nunique"])
    equal = (equal[equal["size"] >= 2]["nunique"] == 1).mean()
    assert binary > 0.2 and equal < binary  # the two silences differ here, as with any graded reward
    silent = re.search(r"silent groups\s+([\d.]+) % measured \(every reward equal", out)
    line = re.search(r"all right/all wrong\s+([\d.]+) % measured, ([\d.]+) % predicted \(z = ([+-][\d.]+)", out)
    assert silent and line, out
    assert float(silent.group(1)) == pytest.approx(100 * equal, abs=0.05)
    assert float(line.group(1)) == pytest.approx(100 * binary, abs=0.05)
    assert float(line.group(2)) == pytest.approx(100 * summary["silent_pred"], abs=0.05)
    c = summary["calibration"]
    assert c["silent_groups_measured"] == pytest.approx(binary * len(groups))
    assert float(line.group(3)) == pytest.approx(c["z"], abs=0.05)


def test_step_table_says_when_it_shows_some_steps(capsys, tmp_path):
    df, _ = rollouts(steps=20, prompts=30)
    write_verl(tmp_path / "v", df)

    def table_steps(out):
        return [int(m) for m in re.findall(r"^\s+(\d+)\s+\d+\s+\d+\s+[\d.]+ %", out, flags=re.M)]

    rc, out, err = run(capsys, tmp_path / "v")
    assert rc == 0, err
    shown = table_steps(out)
    assert len(shown) == 12 and shown[0] == 1 and shown[-1] == 20
    assert "12 of 20 steps, evenly spaced from the first to the last (--all-steps prints every one" in out
    rc, out, err = run(capsys, tmp_path / "v", "--all-steps")
    assert rc == 0 and table_steps(out) == list(range(1, 21)) and "of 20 steps" not in out


@pytest.mark.parametrize(
    "option, value",
    [
        ("--budget", "-4"),
        ("--budget", "0"),
        ("--epsilon", "7"),
        ("--epsilon", "0"),
        ("--level", "2"),
        ("--level", "nan"),
        ("--half-life", "-1"),
        ("--eps", "inf"),
        ("--group-size", "0"),
    ],
)
def test_an_option_out_of_range_is_one_line_before_any_log_is_read(capsys, tmp_path, option, value):
    """Graded rewards ignore the advice options; an impossible value is still refused, by name."""
    log = tmp_path / "graded.csv"
    log.write_text("prompt,step,reward\na,0,0.5\na,0,0.25\nb,0,1.0\nb,0,0.75\n")
    rc, out, err = run(capsys, log, "--reward", "reward", option, value)
    assert rc == 2 and err.count("\n") == 1 and f"{option} = {value}" in err, err


def test_example_logs_are_copied_whole_and_read(tmp_path, capsys):
    """`gsd example-logs DEST` copies the shipped logs byte for byte, refuses a DEST that exists,
    and each log reads as its trainer's (README's first lines)."""
    import json

    from gsd.cli import main
    from gsd.resources import EXAMPLE_LOGS, example_logs

    dest = tmp_path / "examples"
    assert main(["example-logs", str(dest)]) == 0
    source = example_logs()
    copied = sorted(p.relative_to(dest) for p in dest.rglob("*") if p.is_file())
    shipped = sorted(
        p.relative_to(source)
        for name in EXAMPLE_LOGS
        for p in ([source / name] if (source / name).is_file() else (source / name).rglob("*"))
        if p.is_file()
    )
    assert copied == shipped and len(copied) > 40
    assert all((dest / p).read_bytes() == (source / p).read_bytes() for p in copied)
    assert main(["example-logs", str(dest)]) == 2 and "exists" in capsys.readouterr().err
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no stage left behind
    for log, fmt in (("trl", "trl"), ("verl/rollout_data", "verl"), ("areal", "areal")):
        capsys.readouterr()
        assert main(["diagnose", "--no-progress", "--json", str(dest / log)]) == 0
        s = json.loads(capsys.readouterr().out)["summary"]
        assert (s["format"], s["rollouts"], s["groups"], s["rewards_as"]) == (fmt, 128, 32, "binary rewards (0/1)")
