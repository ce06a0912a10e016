"""``gsd sweep``: run a grid of simulations (locally or on Ray) and collect one results table."""

from __future__ import annotations

import json
from pathlib import Path

from ..cli.support import bounded_float, bounded_int
from ..validation import InputError
from .backends import BACKENDS


def register(sub) -> None:
    p = sub.add_parser(
        "sweep",
        help="run a grid of simulator runs (local process pool or Ray) into one results table",
        description=(
            "Expand a grid file into run folders under OUT/runs, run every run not complete yet "
            "(a killed sweep resumes where it stopped), retry failures, and write OUT/results.parquet."
        ),
    )
    p.add_argument(
        "--grid",
        required=True,
        help="grid file (TOML with [sweep], [base], [grid]) or the name of a shipped grid: law_in_training, methods_mlp_grid",
    )
    p.add_argument("--out", required=True, help="sweep folder, e.g. sweeps/NAME")
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="local",
        help="local: process pool on this machine (default); ray: Ray tasks (pip install ray); "
        "serial: in this process, one run at a time",
    )
    p.add_argument(
        "--address",
        default=None,
        help="ray: join an existing cluster (auto, HOST:PORT or ray://HOST:PORT) instead of starting one",
    )
    p.add_argument(
        "--workers",
        type=bounded_int(1, 1024, "worker processes"),
        default=None,
        help="local: processes (default: one per core); ray without --address: CPUs of the local instance",
    )
    p.add_argument(
        "--max-retries",
        type=bounded_int(0, 1000, "each retry resumes the run"),
        default=2,
        help="retries of a failed run, each resuming it (default 2)",
    )
    p.add_argument(
        "--lock-timeout",
        type=bounded_float(0, 1e9, "seconds; 0 tries once"),
        default=None,
        help="seconds to wait for a run folder another live sweep is writing (default: wait)",
    )
    p.add_argument("--dry-run", action="store_true", help="list the runs and whether each is complete; run nothing")
    p.add_argument(
        "--simulator",
        default="gsd.simulator",
        help="module providing SimConfig, run_simulation and is_complete (default gsd.simulator)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the sweep's outcome (with --dry-run: its runs) as JSON")
    p.set_defaults(func=_sweep)


def _sweep(args) -> int:
    from .engine import plan_sweep, run_sweep

    if args.address and args.backend != "ray":
        raise InputError("--address needs --backend ray")

    if args.dry_run:
        import importlib

        import pandas as pd

        specs = plan_sweep(args.grid, args.out, args.simulator)
        sim = importlib.import_module(args.simulator)
        rows = [{"run": s.name, **s.params, "complete": bool(sim.is_complete(s.run_dir))} for s in specs]
        df = pd.DataFrame(rows)
        if args.json:
            print(df.to_json(orient="records", indent=2))
        else:
            n_done = int(df["complete"].sum())
            print(
                f"{len(df)} runs in {args.grid} ({n_done} complete, {len(df) - n_done} to run) -> {Path(args.out) / 'runs'}"
            )
            with pd.option_context("display.max_rows", 500, "display.width", 200):
                print(df.to_string(index=False))
        return 0

    res = run_sweep(
        args.grid,
        args.out,
        backend=args.backend,
        workers=args.workers,
        address=args.address,
        max_retries=args.max_retries,
        simulator=args.simulator,
        progress=not args.no_progress,
        lock_timeout=args.lock_timeout,
    )
    report = {
        "out": str(res.out),
        "results": str(res.results_path),
        "backend": res.backend,
        "workers": res.workers,
        "runs": len(res.table),
        "ran": len(res.ran),
        "skipped": len(res.skipped),
        "failed": res.failed,
        "wall_s": round(res.wall_s, 3),
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(
            f"sweep {res.out}: {report['runs']} runs — {report['ran']} ran, {report['skipped']} already complete, "
            f"{len(res.failed)} failed — {res.wall_s:.1f} s on {res.backend} ({res.workers} workers)"
        )
        print(f"results: {res.results_path}")
        for name, err in res.failed.items():
            print(f"FAILED {name}: {err}")
        if res.failed:
            print(f"see {res.out / 'events.jsonl'} for tracebacks; run the same command again to retry")
    return 0 if res.ok else 1
