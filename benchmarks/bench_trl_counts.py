"""Peak memory and time of `gsd diagnose` on a TRL completions log, streamed (the default) and with
``--whole-log``, at two sizes: the memory per extra rollout.

Run:  .venv/bin/python benchmarks/bench_trl_counts.py [--rollouts 1e6 1e7] [--whole-max 1e7]
                                                      [--dir runs/bench_trl] [--out bench_trl_counts.json] [--keep]

The log: TRL's layout, ``completions/completions_{step:05d}.parquet``, one file per step with the
columns and types of a real TRL 1.16 run's file (``data/example_logs/trl``: ``step`` int64,
``prompt`` and ``completion`` text, one reward column ``correct`` float64, ``advantage`` float64),
written here with pyarrow rather than by TRL (a real run of 10^7 rollouts is out of reach on a
CPU).  Each step draws 512 prompts of a 4096-prompt pool (solve rates from Beta(0.6, 0.9)) and
answers each 16 times in consecutive rows (TRL's blocks of ``num_generations``), 0/1 rewards; the
advantages are TRL's group scaling in float32, (r − mean)/(std + 1e-4).  Generated one file at a
time, deleted afterwards unless ``--keep``.

Each measurement runs in a fresh process (:func:`bench_counts.measure`: the child's own peak RSS,
the load average before and after); the two diagnoses' step tables are checked equal.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import time
from pathlib import Path

from bench_counts import measure

PER_STEP, G, POOL = 512, 16, 4096

DIAGNOSE = """
import sys, time, json
from gsd.diagnose import diagnose
t0 = time.perf_counter()
streaming = sys.argv[2] == "streaming"  # as gsd diagnose without --out: the group table not kept
dx = diagnose(sys.argv[1], progress=False, streaming=streaming, groups=None if streaming else True)
dt = time.perf_counter() - t0
s = dx.columns("steps")
print(json.dumps({"seconds": dt, "rows": int(s["rollouts"].sum()), "silent_frac": s["silent_frac"].tolist()}))
"""


def make_log(folder: Path, rollouts: int, seed: int = 0) -> int:
    """TRL completions files holding ``rollouts`` rows (rounded down to whole steps)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = folder / "completions"
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    p = rng.beta(0.6, 0.9, POOL)
    names = np.array([f"prompt {i}: what is {i} + {i}?" for i in range(POOL)], dtype=object)
    steps = rollouts // (PER_STEP * G)
    for step in range(1, steps + 1):
        pid = np.repeat(rng.choice(POOL, PER_STEP, replace=False), G)
        r = (rng.random(pid.size) < p[pid]).astype(np.float32).reshape(-1, G)
        std = r.std(axis=1, ddof=1, keepdims=True, dtype=np.float32)
        adv = ((r - r.mean(axis=1, keepdims=True, dtype=np.float32)) / (std + np.float32(1e-4))).ravel()
        table = pa.table(
            {
                "step": pa.array(np.full(pid.size, step, np.int64)),
                "prompt": pa.array(names[pid], pa.large_string()),
                "completion": pa.array(np.where(r.ravel() > 0, "the answer is 4", "it is 5"), pa.large_string()),
                "correct": pa.array(r.ravel().astype(np.float64)),
                "advantage": pa.array(adv.astype(np.float64)),
            }
        )
        pq.write_table(table, out / f"completions_{step:05d}.parquet")
    return steps * PER_STEP * G


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rollouts", type=float, nargs="+", default=[1e6, 1e7])
    ap.add_argument("--whole-max", type=float, default=1e7, help="gsd diagnose --whole-log up to here")
    ap.add_argument("--dir", type=Path, default=Path("runs/bench_trl"))
    ap.add_argument("--out", type=Path, default=Path("bench_trl_counts.json"))
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    from gsd.io.atomic import write_json

    results = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()}, "runs": []}
    for n in args.rollouts:
        folder = args.dir / f"{int(n):d}"
        t0 = time.perf_counter()
        rows = make_log(folder, int(n)) if not folder.exists() else None
        size = sum(f.stat().st_size for f in (folder / "completions").glob("*.parquet"))
        run = {"rollouts": rows, "generate_s": time.perf_counter() - t0, "disk_mb": size / 2**20}
        for name, mode in (("diagnose", "streaming"), ("diagnose_whole", "whole")):
            if name == "diagnose_whole" and n > args.whole_max:
                continue
            run[name] = measure(DIAGNOSE, folder, mode)
            print(int(n), name, {k: v for k, v in run[name].items() if k != "silent_frac"}, flush=True)
        run["rollouts"] = run["rollouts"] or run["diagnose"].get("rows")
        if "diagnose_whole" in run:
            same = run["diagnose"].get("silent_frac") == run["diagnose_whole"].get("silent_frac")
            run["same_answer"] = bool(same)
        for name in ("diagnose", "diagnose_whole"):
            run.get(name, {}).pop("silent_frac", None)
        results["runs"].append(run)
        write_json(args.out, results)
        if not args.keep:
            shutil.rmtree(folder)
    runs = results["runs"]
    for a, b in zip(runs, runs[1:]):  # memory per extra rollout between sizes
        for name in ("diagnose", "diagnose_whole"):
            if "peak_rss_mb" in a.get(name, {}) and "peak_rss_mb" in b.get(name, {}):
                per = (b[name]["peak_rss_mb"] - a[name]["peak_rss_mb"]) * 2**20 / (b["rollouts"] - a["rollouts"])
                b[f"{name}_bytes_per_extra_rollout"] = per
                print(f"{name}: {per:.1f} B per extra rollout ({a['rollouts']:,} -> {b['rollouts']:,})")
    write_json(args.out, results)


if __name__ == "__main__":
    main()
