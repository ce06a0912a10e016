"""A sweep of the real simulator runs compatible grid points as one program (gsd.simulator's
run_many): each run's folder and ledger as if run alone; incompatible points run alone."""

from __future__ import annotations

import json

import pandas as pd
from sweep_helpers import write_grid

from gsd.simulator import SimConfig, read_ledger, run_simulation
from gsd.simulator.ledger import WALL_COLUMNS
from gsd.sweep import run_sweep

GRID = """
[base]
n_prompts = 256
steps = 4
checkpoint_every = 2
device = "cpu"
[grid]
method = ["grpo", "dapo"]
seed = [0, 1]
lr = [0.5, 0.3]
"""


def test_compatible_points_share_a_program(tmp_path):
    out = tmp_path / "sweep"
    result = run_sweep(write_grid(tmp_path / "g.toml", GRID), out, backend="serial", progress=False)
    assert not result.failed and len(result.ran) == 8
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert sorted(e["program"] for e in events) == [4] * 8  # one program per lr, of its 4 runs
    manifest = json.loads((out / "sweep.json").read_text())
    for run in manifest["runs"]:
        cfg = SimConfig(n_prompts=256, steps=4, checkpoint_every=2, device="cpu").with_overrides(run["params"])
        alone = tmp_path / "alone" / run["name"]
        run_simulation(cfg, alone, progress=False)
        a = read_ledger(alone).drop(columns=list(WALL_COLUMNS))
        b = read_ledger(out / run["run_dir"]).drop(columns=list(WALL_COLUMNS))
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    again = run_sweep(tmp_path / "g.toml", out, backend="serial", progress=False)
    assert len(again.skipped) == 8 and not again.ran


def test_a_locked_run_folder_fails_only_its_own_run(tmp_path):
    """Another live process holds one run of a program: that run fails (after its retries), the
    program's other runs run; with the holder gone a second sweep finishes it."""
    from gsd.io.lock import RunLock, lock_path
    from gsd.sweep.engine import plan_sweep

    grid = write_grid(
        tmp_path / "g.toml", GRID.replace('method = ["grpo", "dapo"]\n', "").replace("lr = [0.5, 0.3]\n", "")
    )
    out = tmp_path / "sweep"
    specs = plan_sweep(grid, out)
    taken = specs[0].run_dir
    with RunLock(lock_path(taken)):
        result = run_sweep(grid, out, backend="serial", progress=False, lock_timeout=0.2, max_retries=1)
    assert set(result.failed) == {specs[0].name} and "in use by pid" in result.failed[specs[0].name]
    assert set(result.ran) == {s.name for s in specs[1:]}
    again = run_sweep(grid, out, backend="serial", progress=False, lock_timeout=0)
    assert again.ok and again.ran == [specs[0].name]
    assert not list((out / "runs").glob("*.lock"))
