"""Many runs as one program against the same runs one by one (a script, not a test).

    .venv/bin/python benchmarks/bench_batched.py --out runs/bench_batched.json [--seeds 10] [--repeats 1]

Both engines (``--engines``): the numpy engine (what ``engine = "auto"`` runs on a CPU) and
the torch engine.  The workload: paper-size runs (the default config: 6,000 Big-Math prompts, G = 8, 150 steps,
SGD lr 0.5, float64, checkpoints every 25 steps), ``--seeds`` seeds × GRPO, Dr.GRPO and DAPO
(≤ 4 draws) — 30 runs by default.  ``separate``: ``run_simulation`` on each run in turn, in this
process (no interpreter start-up counted: the floor of running them apart); ``batched``:
``run_many`` on all of them (one program).  Both write every run's folder (config, checkpoints,
ledger, summary).  After timing, every run's ledger of the two sides is compared, wall times
aside (``identical`` in the JSON).  Both sides run on the thread count the engine chooses
(recorded); the machine's load (``uptime``) is recorded before each side.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_busy import load_snapshot  # noqa: E402  (the machine's load, as the other benchmark records it)

from gsd.io.atomic import write_json  # noqa: E402
from gsd.io.heap import keep_freed_memory  # noqa: E402
from gsd.simulator import (  # noqa: E402
    SimConfig,
    read_ledger,
    run_many,  # noqa: E402
    run_simulation,
)
from gsd.simulator.ledger import WALL_COLUMNS  # noqa: E402

METHODS = ("grpo", "dr_grpo", "dapo")


def uptime() -> str:
    return load_snapshot()["uptime"]


def _ledger_gap(a_dir: Path, b_dir: Path) -> dict:
    """How far two ledgers of one run are apart, wall times aside: bitwise equal, else the largest
    relative gap |a − b| / max(|a|, |b|) and its column, and the first step at which they differ."""
    a = read_ledger(a_dir).drop(columns=list(WALL_COLUMNS))
    b = read_ledger(b_dir).drop(columns=list(WALL_COLUMNS))
    x, y = a.to_numpy(dtype=float), b.to_numpy(dtype=float)
    if np.array_equal(x, y, equal_nan=True):
        return {"identical": True, "max_rel_gap": 0.0, "column": None, "first_step": None}
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.abs(x - y) / np.maximum(np.abs(x), np.abs(y))
    same = (x == y) | (np.isnan(x) & np.isnan(y))
    rel = np.where(same, 0.0, np.nan_to_num(rel, nan=1.0))  # NaN on one side only: as far apart as can be
    row, col = np.unravel_index(int(np.argmax(rel)), rel.shape)
    differs = np.flatnonzero(rel.max(axis=1) > 0)
    return {
        "identical": False,
        "max_rel_gap": float(rel[row, col]),
        "column": str(a.columns[col]),
        "first_step": int(differs[0]),
    }


def _worst(gaps: list[dict]) -> dict:
    worst = max(gaps, key=lambda g: g["max_rel_gap"])
    first = [g["first_step"] for g in gaps if g["first_step"] is not None]
    return {"max_rel_gap": worst["max_rel_gap"], "column": worst["column"], "first_step": min(first) if first else None}


def _time_engine(base: SimConfig, args) -> dict:
    cfgs = [
        base.with_overrides({"seed": s, "method": m, "name": f"{m}-s{s}"}) for s in range(args.seeds) for m in METHODS
    ]
    work = Path(tempfile.mkdtemp(prefix="gsd-bench-batched-"))
    out = {}
    try:
        run_simulation(
            base.with_overrides({"n_prompts": 96, "steps": 2}), work / "warm", progress=False
        )  # one-time imports
        sep, bat = [], []
        for i in range(args.repeats):
            out["uptime_separate"] = uptime()
            t0 = time.perf_counter()
            sums_sep = [run_simulation(c, work / f"sep{i}" / c.name, progress=False) for c in cfgs]
            sep.append(time.perf_counter() - t0)
            out["uptime_batched"] = uptime()
            t0 = time.perf_counter()
            sums_bat = run_many([(c, work / f"bat{i}" / c.name) for c in cfgs], progress=False)
            bat.append(time.perf_counter() - t0)
        out["separate_s"], out["batched_s"] = min(sep), min(bat)
        out["speedup"] = min(sep) / min(bat)
        out["threads"] = {
            "separate": sorted({s["threads"] for s in sums_sep}),
            "batched": sorted({s["threads"] for s in sums_bat}),
        }
        out["engine"] = sorted({s["engine"] for s in sums_sep + sums_bat})
        same = [_ledger_gap(work / "sep0" / c.name, work / "bat0" / c.name) for c in cfgs]
        out["identical"] = all(g["identical"] for g in same)
        out["identical_runs"] = int(sum(g["identical"] for g in same))
        out["batched_vs_separate"] = _worst(same)
        if args.repeats > 1:  # the same run twice apart: is the device itself run-to-run deterministic?
            again = [_ledger_gap(work / "sep0" / c.name, work / "sep1" / c.name) for c in cfgs]
            out["separate_twice_identical_runs"] = int(sum(g["identical"] for g in again))
            out["separate_vs_separate"] = _worst(again)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="results JSON path")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--repeats", type=int, default=1, help="best of this many, each side")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rollouts", default="answers", choices=("answers", "counts"))
    ap.add_argument(
        "--closed-form-every", type=int, default=1, help="0: no exact update sums (the per-run closed forms' share)"
    )
    ap.add_argument("--engines", default="numpy,torch", help="comma-separated: numpy, torch")
    args = ap.parse_args(argv)
    heap_kept = keep_freed_memory()  # as the gsd command does (gsd.io.heap): both sides of every ratio alike
    base = SimConfig(
        device=args.device, steps=args.steps, rollouts=args.rollouts, closed_form_every=args.closed_form_every
    )
    results = {
        "heap_kept": heap_kept,
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "platform": platform.platform(),
            "torch_default_threads": torch.get_num_threads(),
        },
        "runs": 3 * args.seeds,
        "steps": args.steps,
        "n_prompts": base.n_prompts,
        "group_size": base.group_size,
        "rollouts": base.rollouts,
        "closed_form_every": base.closed_form_every,
    }
    for engine in args.engines.split(","):
        results[engine] = _time_engine(base.with_overrides({"engine": engine}), args)
    print(
        f"{results['runs']} paper-size runs ({args.seeds} seeds x {', '.join(METHODS)}; {base.n_prompts} prompts, "
        f"G = {base.group_size}, {args.steps} steps; rollouts {base.rollouts}, closed forms every {base.closed_form_every})"
    )
    for engine in args.engines.split(","):
        r = results[engine]
        print(
            f"  {engine} engine: separate (run_simulation in turn) {r['separate_s']:.2f} s, batched (run_many, one "
            f"program) {r['batched_s']:.2f} s: {r['speedup']:.2f}x; threads {r['threads']}; ledgers identical "
            f"{r['identical_runs']}/{results['runs']} (largest relative gap {r['batched_vs_separate']['max_rel_gap']:.2e} "
            f"in {r['batched_vs_separate']['column']}); load {r['uptime_batched']}"
        )
        if "separate_twice_identical_runs" in r:
            print(
                f"  {engine} engine, the same runs apart twice: identical {r['separate_twice_identical_runs']}/"
                f"{results['runs']} (largest relative gap {r['separate_vs_separate']['max_rel_gap']:.2e})"
            )
    if "numpy" in results and "torch" in results:
        results["torch_separate_over_numpy_batched"] = results["torch"]["separate_s"] / results["numpy"]["batched_s"]
        print(f"  torch engine run by run / numpy engine batched: {results['torch_separate_over_numpy_batched']:.2f}x")
    write_json(Path(args.out), results)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
