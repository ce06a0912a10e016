"""Wall time of one small sweep of real simulator runs on each backend.

Run:  .venv/bin/python benchmarks/bench_sweep.py [--backends serial,local,ray] [--workers 2]
                                                 [--steps 60] [--n-prompts 6000] [--out bench_sweep.json]

The sweep: 3 methods × G ∈ {4, 8, 16, 32} × 2 seeds = 24 tabular runs (paper settings, CPU),
each into a fresh folder, so every backend does the same work from scratch:

* ``serial`` — one run after another in this process (the floor: no start-up, no parallelism);
* ``local``  — a spawn process pool of ``--workers`` processes, one torch thread each;
* ``ray``    — Ray tasks on a local Ray instance started with ``num_cpus = --workers``
  (its start-up is inside the time, as it is for a user; ``ray_init_s`` reports it alone).

A second call on a finished sweep (everything skipped) is timed too: the engine's overhead.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

from gsd.io.atomic import write_json  # a benchmark's result file is never half-written
from gsd.sweep import run_sweep

GRID = """
[sweep]
description = "benchmark: 3 methods x 4 group sizes x 2 seeds"
[base]
policy = "tabular"
n_prompts = {n_prompts}
steps = {steps}
difficulty = "bigmath"
device = "cpu"
checkpoint_every = 1000
[grid]
method = ["grpo", "dr_grpo", "dapo"]
group_size = [4, 8, 16, 32]
seed = [0, 1]
"""


def time_ray_init(workers: int) -> float | None:
    try:
        import ray
    except ImportError:
        return None
    t0 = time.perf_counter()
    ray.init(num_cpus=workers, include_dashboard=False, logging_level="WARNING")
    elapsed = time.perf_counter() - t0
    ray.shutdown()
    return elapsed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", default="serial,local,ray")
    ap.add_argument("--workers", type=int, default=min(os.cpu_count() or 1, 2))
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--n-prompts", type=int, default=6000)
    ap.add_argument("--out", help="also write the results as JSON here")
    args = ap.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix="bench_sweep_"))
    grid = scratch / "grid.toml"
    grid.write_text(GRID.format(n_prompts=args.n_prompts, steps=args.steps))
    rows = []
    try:
        for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
            if backend == "ray":
                try:
                    import ray  # noqa: F401
                except ImportError:
                    print("ray: not installed (pip install 'grpo-gsd[ray]'), skipped")
                    continue
            out = scratch / backend
            workers = None if backend == "serial" else args.workers
            t0 = time.perf_counter()
            res = run_sweep(grid, out, backend=backend, workers=workers, progress=False)
            wall = time.perf_counter() - t0
            t0 = time.perf_counter()
            again = run_sweep(grid, out, backend=backend, workers=workers, progress=False)
            rerun = time.perf_counter() - t0
            assert res.ok and len(res.ran) == len(res.table) and not again.ran
            rows.append(
                {
                    "backend": backend,
                    "workers": res.workers,
                    "runs": len(res.table),
                    "wall_s": round(wall, 2),
                    "runs_per_s": round(len(res.table) / wall, 2),
                    "rerun_all_complete_s": round(rerun, 3),
                }
            )
            print(
                f"{backend:>6}: {len(res.table)} runs in {wall:6.2f} s ({res.workers} workers); "
                f"rerun with everything complete: {rerun:.3f} s"
            )
        ray_init = time_ray_init(args.workers) if "ray" in args.backends else None
        if ray_init is not None:
            print(f"  ray.init(num_cpus={args.workers}) alone: {ray_init:.2f} s")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "grid": {"runs": 24, "steps": args.steps, "n_prompts": args.n_prompts},
        "results": rows,
        "ray_init_s": ray_init,
    }
    if args.out:
        write_json(args.out, report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
