"""The sweep driver on the local process pool, with the stand-in simulator."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from sweep_helpers import FAKE, completions, write_grid

from gsd.cli import main
from gsd.sweep import load_results, plan_sweep, run_sweep

GRID = """
[sweep]
description = "fake"
[base]
steps = 3
[grid]
method = ["grpo", "dapo"]
group_size = [4, 8]
seed = [0, 1]
"""

# One grid that exercises every outcome: fine, fails once then resumes, worker dies once,
# always fails.
FAULTS = """
[base]
steps = 4
fail_at_step = 3
[grid]
case = [
  {label = "ok", seed = 1},
  {label = "flaky", fail_attempts = 1},
  {label = "crash", crash = true},
  {label = "broken", fail_attempts = 99},
]
"""


def test_sweep_runs_every_point_once_and_collects_one_table(tmp_path, fakesim_log):
    grid = write_grid(tmp_path / "g.toml", GRID)
    out = tmp_path / "sw"
    res = run_sweep(grid, out, simulator=FAKE, workers=2, progress=False)
    assert res.ok and len(res.ran) == 8 and not res.skipped and res.workers == 2
    table = load_results(out)
    pd.testing.assert_frame_equal(table, res.table)
    assert list(table.columns[:6]) == ["run", "method", "group_size", "seed", "status", "run_dir"]
    assert table["run"].tolist() == [s.name for s in plan_sweep(grid, out, FAKE)]
    assert (table["status"] == "complete").all()
    # summary scalars, flattened; lists dropped; the summary's name (= the run) not repeated
    assert {"final_value", "steps", "extra.rate"} <= set(table.columns)
    assert "extra.tags" not in table.columns and "name" not in table.columns
    row = table.set_index("run").loc[table["run"][0]]
    assert row["final_value"] == pytest.approx(0 + 3 * 1.0 * 0.5 / 4)
    for rd in table["run_dir"]:
        assert (out / rd / "summary.json").is_file() and (out / rd / "config.json").is_file()
    assert sorted(completions(fakesim_log)) == sorted(table["run"])
    assert (out / "grid.toml").read_text() == GRID
    manifest = json.loads((out / "sweep.json").read_text())
    assert len(manifest["runs"]) == 8 and manifest["failed"] == {}
    assert not list(out.glob(".*tmp")) and not list((out / "runs").glob("*.lock"))

    again = run_sweep(grid, out, simulator=FAKE, workers=2, progress=False)
    assert again.ran == [] and len(again.skipped) == 8
    assert len(completions(fakesim_log)) == 8
    pd.testing.assert_frame_equal(again.table, table)


def test_failures_are_retried_by_resuming_and_bounded(tmp_path, fakesim_log):
    grid = write_grid(tmp_path / "faults.toml", FAULTS)
    out = tmp_path / "sw"
    # One worker: a dying worker breaks the whole pool and charges every run then in flight an
    # attempt (documented), queued ones included; with two workers which runs share the crash
    # depends on timing.  With one, "ok" is done before "crash" starts; "flaky" may be queued
    # (its retry) when the pool breaks, hence 2 or 3.
    res = run_sweep(grid, out, simulator=FAKE, workers=1, max_retries=2, progress=False)
    table = res.table.set_index("case")
    assert table["status"].to_dict() == {"ok": "complete", "flaky": "complete", "crash": "complete", "broken": "failed"}
    names = table["run"].to_dict()
    assert res.attempts[names["ok"]] == 1 and res.attempts[names["flaky"]] in (2, 3)
    assert res.attempts[names["crash"]] == 2
    assert res.attempts[names["broken"]] == 3
    assert list(res.failed) == [names["broken"]]
    assert pd.isna(table.loc["broken", "final_value"])
    # the retried runs resumed from their checkpoint: the same numbers as a run never interrupted
    assert table.loc["flaky", "final_value"] == pytest.approx(4 * 0.5 / 8)
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert any(e["event"] == "retry" and e["run"] == names["flaky"] for e in events)
    assert any(e["event"] == "ran" and e["run"] == names["flaky"] and e["resumed"] for e in events)
    assert any(e["run"] == names["broken"] and "injected failure" in e["error"] for e in events)
    assert any(e["event"] == "failed" and e["run"] == names["broken"] and e["detail"] for e in events)
    assert sorted(completions(fakesim_log)) == sorted(names[c] for c in ("ok", "flaky", "crash"))

    # The CLI reports the failure with exit status 1; a retry does only the broken run.
    assert (
        main(
            [
                "sweep",
                "--grid",
                str(grid),
                "--out",
                str(out),
                "--simulator",
                FAKE,
                "--backend",
                "serial",
                "--max-retries",
                "0",
                "--no-progress",
            ]
        )
        == 1
    )
    assert len(completions(fakesim_log)) == 3


def test_cli_runs_lists_and_reports(tmp_path, fakesim_log, capsys):
    grid = write_grid(tmp_path / "g.toml", GRID)
    out = tmp_path / "sw"
    assert main(["sweep", "--grid", str(grid), "--out", str(out), "--simulator", FAKE, "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert "8 runs" in text and "0 complete" in text and "method=grpo__G=4__seed=0__" in text
    assert (
        main(
            [
                "sweep",
                "--grid",
                str(grid),
                "--out",
                str(out),
                "--simulator",
                FAKE,
                "--backend",
                "serial",
                "--no-progress",
                "--json",
            ]
        )
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["runs"] == 8 and report["ran"] == 8 and report["failed"] == {} and report["backend"] == "serial"
    assert main(["sweep", "--grid", str(grid), "--out", str(out), "--simulator", FAKE, "--no-progress"]) == 0
    assert "0 ran, 8 already complete, 0 failed" in capsys.readouterr().out
    assert main(["sweep", "--grid", str(grid), "--out", str(out), "--simulator", FAKE, "--dry-run", "--json"]) == 0
    assert all(r["complete"] for r in json.loads(capsys.readouterr().out))


@pytest.mark.parametrize(
    "extra, match",
    [
        (["--workers", "0"], "--workers"),
        (["--max-retries", "-1"], "--max-retries"),
        (["--address", "auto"], "--address needs --backend ray"),
        (["--simulator", "no_such_module"], "cannot be imported"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(tmp_path, capsys, extra, match):
    grid = write_grid(tmp_path / "g.toml", GRID)
    assert main(["sweep", "--grid", str(grid), "--out", str(tmp_path / "o"), "--simulator", FAKE, *extra]) == 2
    err = capsys.readouterr().err
    assert match in err and err.count("\n") == 1


def test_cli_bad_grid_exits_2(tmp_path, capsys):
    bad = write_grid(tmp_path / "bad.toml", '[grid]\nmethod = ["sgd"]\n')
    assert main(["sweep", "--grid", str(bad), "--out", str(tmp_path / "o"), "--simulator", FAKE]) == 2
    assert "method" in capsys.readouterr().err
    assert main(["sweep", "--grid", str(tmp_path / "none.toml"), "--out", str(tmp_path / "o")]) == 2


def test_results_table_flattens_and_keeps_parquet_happy(tmp_path):
    from pathlib import Path

    from gsd.sweep import results_table
    from gsd.sweep.grid import RunSpec

    specs = [
        RunSpec(
            name=f"r{i}",
            params={"x": v, "method": "grpo"},
            overrides={},
            config=None,
            config_dict={},
            run_dir=Path("/o/runs") / f"r{i}",
        )
        for i, v in enumerate([1, "a", 2])
    ]
    summaries = {
        "r0": {"v": 1.0, "w": None, "method": "grpo", "deep": {"a": {"b": 2}}, "config": {"lr": 1}},
        "r1": {"v": 2, "w": 3.0, "method": "dapo"},
    }
    table = results_table(specs, summaries, Path("/o"))
    assert table["status"].tolist() == ["complete", "complete", "failed"]
    assert table["x"].tolist() == ["1", "a", "2"]  # mixed kinds become text
    assert "deep.a.b" in table.columns and "config.lr" not in table.columns
    assert table["summary.method"].tolist()[1] == "dapo"  # differs from the grid value: kept, prefixed
    assert table["run_dir"].tolist()[0] == "runs/r0"
    table.to_parquet(tmp_path / "t.parquet")


@pytest.mark.parametrize("timeout", [float("nan"), -5, float("inf"), True, "1"])
def test_a_lock_timeout_that_is_no_number_of_seconds_is_refused(tmp_path, timeout):
    from gsd import InputError

    with pytest.raises(InputError, match="lock_timeout"):
        run_sweep(tmp_path / "no-grid.toml", tmp_path / "out", lock_timeout=timeout)
