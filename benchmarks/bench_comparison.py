"""The allocation comparison's wall time: estimated at the paper's scale from per-arm step times,
and measured on the shipped small comparison at 1 and at ``--jobs`` worker processes (a script,
not a test).

    .venv/bin/python benchmarks/bench_comparison.py --out runs/bench_comparison.json [--sample-steps 25] [--jobs 2]

1. Estimate: every (variant, arm) of ``--config`` (default ``allocation_comparison``, the paper's
   scale) runs ``--sample-steps`` steps for one seed; the mean of the ledger's ``wall_s`` after
   the first step, times the arm's steps, is the run's estimated time, and the sum over arms
   times the seeds the comparison's time in one process.  With ``--jobs`` workers the estimate is
   the makespan of the runs dealt longest first to the first free worker (what
   :func:`gsd.reproduce.allocation_campaign.execute_runs` does), which assumes one free core per
   worker.  The budget plans come every ``replan_every`` steps, so a sample of a few plan periods
   carries their cost; it does not see the counts of later steps.
2. Measured: ``gsd allocation-comparison --config allocation_comparison_small`` as one process,
   with ``--jobs 1`` and with ``--jobs``, one after the other in this run, the outputs compared.

The machine's load (``uptime``) is recorded before each part: other users' processes count too.
"""

from __future__ import annotations

import argparse
import heapq
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from gsd.io.atomic import write_json
from gsd.reproduce.allocation_campaign import campaign_runs, run_cost
from gsd.reproduce.allocation_comparison import load_comparison, variant_campaign
from gsd.simulator import read_ledger
from gsd.simulator.config import SimConfig
from gsd.simulator.dispatch import run_simulation


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"(uptime failed: {exc})"


def makespan(times: list[float], workers: int) -> float:
    """Runs dealt longest first to the first free of ``workers``: when the last one ends."""
    free = [0.0] * workers
    for t in sorted(times, reverse=True):
        heapq.heappush(free, heapq.heappop(free) + t)
    return max(free)


def estimate(config: str, sample_steps: int, work: Path) -> dict:
    comp = load_comparison(config)
    rows = []
    for variant in comp["variants"]:
        camp = variant_campaign(comp, variant)
        for name, seed, cfg, _ in campaign_runs(camp, work, comp["seeds"][:1]):
            full = cfg["steps"]
            folder = work / variant / name
            t0 = time.perf_counter()
            run_simulation(SimConfig.from_dict({**cfg, "steps": min(full, sample_steps)}), folder, progress=False)
            call = time.perf_counter() - t0
            wall = read_ledger(folder, columns=["wall_s"])["wall_s"]
            per_step = float(np.mean(wall[1:])) if wall.size > 1 else float(wall[0])
            rows.append(
                {
                    "variant": variant,
                    "arm": name,
                    "steps": full,
                    "s_per_step": per_step,
                    "sample_call_s": call,
                    "run_s": per_step * full,
                    "cost_rank": run_cost(cfg),
                }
            )
            shutil.rmtree(folder)
            print(
                f"{variant:8s} {name:18s} {per_step * 1e3:8.2f} ms/step × {full} steps = {per_step * full:6.1f} s",
                flush=True,
            )
    seeds = len(comp["seeds"])
    return {
        "config": config,
        "seeds": seeds,
        "sample_steps": sample_steps,
        "arms": rows,
        "one_process_s": seeds * sum(r["run_s"] for r in rows),
        "run_times_s": [r["run_s"] for r in rows for _ in range(seeds)],
    }


def measured_small(jobs: int, work: Path) -> dict:
    out = {}
    for j in sorted({1, jobs}):
        folder = work / f"small_jobs{j}"
        t0 = time.perf_counter()
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "gsd.cli",
                "allocation-comparison",
                "--config",
                "allocation_comparison_small",
                "--out",
                str(folder),
                "--jobs",
                str(j),
                "--quiet",
            ],
            capture_output=True,
            text=True,
        )
        out[f"jobs{j}"] = {"wall_s": time.perf_counter() - t0, "returncode": res.returncode, "markdown": res.stdout}
    out["same_output"] = len({v["markdown"] for v in out.values()}) == 1
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="results JSON path")
    ap.add_argument("--config", default="allocation_comparison")
    ap.add_argument("--sample-steps", type=int, default=25, help="steps timed per arm (one seed)")
    ap.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2)
    ap.add_argument("--skip-small", action="store_true")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="gsd-bench-comparison-"))
    results = {"cpus": os.cpu_count(), "jobs": args.jobs}
    try:
        results["load_before_estimate"] = uptime()
        est = estimate(args.config, args.sample_steps, work)
        est["jobs_s"] = makespan(est.pop("run_times_s"), args.jobs)
        results["estimate"] = est
        if not args.skip_small:
            results["load_before_small"] = uptime()
            results["small"] = measured_small(args.jobs, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    est = results["estimate"]
    print(
        f"\n{args.config}: estimated {est['one_process_s'] / 60:.1f} min in one process, "
        f"{est['jobs_s'] / 60:.1f} min with {args.jobs} worker processes ({est['seeds']} seeds, "
        f"from {args.sample_steps}-step samples)"
    )
    if "small" in results:
        sm = results["small"]
        print(
            "allocation_comparison_small, measured: "
            + ", ".join(f"{k} {v['wall_s']:.1f} s" for k, v in sm.items() if k != "same_output")
            + f"; same output: {sm['same_output']}"
        )
    print(f"load before the estimate: {results['load_before_estimate']}")
    if "load_before_small" in results:
        print(f"load before the small comparison: {results['load_before_small']}")
    write_json(Path(args.out), results)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
