"""Time and peak memory of the streaming counts (silent fraction per step) at 10^6 … 10^8 rollouts,
against plain pandas and DuckDB on the same parquet files and the same query.

Run:  .venv/bin/python benchmarks/bench_counts.py [--rollouts 1e6 1e7 1e8] [--pandas-max 1e7] [--whole-max 1e7]
                                                  [--dir runs/bench_counts] [--out bench_counts.json] [--keep]

The log: a table split into parquet part files of 2^20 rows (``prompt``, ``step``, ``score``; as a
verl run's step files or a sharded export look), each step drawing 1024 prompts of an
8192-prompt pool (solve rates from Beta(0.6, 0.9)) and answering each 16 times (0/1 scores):
``rollouts / 16384`` steps.  Generated in streaming (one part file at a time), deleted afterwards
unless ``--keep``.

The query, the same for the three: per step, the share of groups (rows of one step and one
prompt, two or more of them) whose scores are all equal.

* ``gsd`` — :func:`gsd.diagnose.counts.count_rollouts` (``fmt="table"``, ``groups=False``):
  each part file read batch by batch, reduced to per-group counts and dropped; every step-table
  column and the per-prompt totals, not only the silent fraction (the group table is made one run
  of steps at a time and dropped, as ``gsd count`` does without ``--out``);
* ``duckdb`` — one SQL query over ``read_parquet('dir/*.parquet')`` (DuckDB's own threads);
* ``pandas`` — ``pd.read_parquet`` of every file, ``groupby(["step", "prompt"])``, then per step
  (skipped above ``--pandas-max``: the whole table in memory);
* ``gsd_shards2`` — ``gsd``'s counts in two Ray tasks on a local Ray instance
  (:func:`gsd.diagnose.shards.count_sharded`, its start and shutdown timed too), against ``gsd``
  in one process in the same run;
* ``diagnose`` — the full diagnosis (report, predictions, prompt table, advice), streamed as
  ``gsd diagnose`` now reads such a log by default (its group table made run by run and dropped);
  ``diagnose_whole`` — the same with every rollout read first (``--whole-log``; up to ``--whole-max``).

Each measurement runs in a fresh process; its peak RSS is the child's own (``os.wait4``).  The
three answers are checked equal.  Other processes share the machine: the load average before and
after each run is recorded, and only ratios within one run mean anything.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

PART_ROWS = 1 << 20
PER_STEP, G, POOL = 1024, 16, 8192

GSD = """
import sys, time, json
from gsd.diagnose.counts import count_rollouts
t0 = time.perf_counter()
c = count_rollouts(sys.argv[1], fmt="table", reward="score", progress=False, groups=False)
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "rows": int(c.steps["rollouts"].sum()), "silent_frac": c.steps["silent_frac"].tolist()}))
"""

DUCKDB = """
import sys, time, json
import duckdb
duckdb.sql("SET enable_progress_bar = false")
t0 = time.perf_counter()
rows = duckdb.sql(f'''
    WITH g AS (SELECT step, count(*) AS n, min(score) = max(score) AS silent
               FROM read_parquet('{sys.argv[1]}/*.parquet') GROUP BY step, prompt)
    SELECT step, sum(n) AS rows, avg(CASE WHEN silent THEN 1.0 ELSE 0.0 END) FILTER (WHERE n >= 2) AS frac
    FROM g GROUP BY step ORDER BY step''').fetchall()
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "rows": int(sum(r[1] for r in rows)), "silent_frac": [r[2] for r in rows]}))
"""

GSD_SHARDS = """
import sys, time, json
from gsd.diagnose.shards import count_sharded
t0 = time.perf_counter()  # Ray's start and shutdown included
c = count_sharded(sys.argv[1], shards=int(sys.argv[2]), fmt="table", reward="score", groups=False)
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "rows": int(c.steps["rollouts"].sum()), "silent_frac": c.steps["silent_frac"].tolist()}))
"""

DIAGNOSE = """
import sys, time, json
from gsd.diagnose import diagnose
t0 = time.perf_counter()
streaming = sys.argv[2] == "streaming"  # as gsd diagnose without --out: the group table not kept
dx = diagnose(sys.argv[1], fmt="table", reward="score", progress=False, streaming=streaming,
              groups=None if streaming else True)
dt = time.perf_counter() - t0
s = dx.columns("steps")
print(json.dumps({"seconds": dt, "rows": int(s["rollouts"].sum()), "silent_frac": s["silent_frac"].tolist()}))
"""

PANDAS = """
import sys, time, json, glob
import pandas as pd
t0 = time.perf_counter()
df = pd.concat([pd.read_parquet(f) for f in sorted(glob.glob(sys.argv[1] + "/*.parquet"))], ignore_index=True)
g = df.groupby(["step", "prompt"])["score"].agg(["size", "min", "max"]).reset_index()
g = g[g["size"] >= 2]
frac = (g["min"] == g["max"]).groupby(g["step"]).mean()
dt = time.perf_counter() - t0
print(json.dumps({"seconds": dt, "rows": int(len(df)), "silent_frac": frac.tolist()}))
"""


def make_log(folder: Path, rollouts: int, seed: int = 0) -> int:
    """Part files of ``rollouts`` rows (rounded down to whole steps), written one at a time."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    p = rng.beta(0.6, 0.9, POOL)
    names = pa.array([f"prompt {i}: what is {i} + {i}?" for i in range(POOL)])
    steps = rollouts // (PER_STEP * G)
    per_part = PART_ROWS // (PER_STEP * G)
    written = 0
    for first in range(1, steps + 1, per_part):
        block = np.arange(first, min(first + per_part, steps + 1))
        drawn = np.stack([rng.choice(POOL, PER_STEP, replace=False) for _ in block])
        pid = np.repeat(drawn.ravel(), G)
        step = np.repeat(block, PER_STEP * G)
        score = (rng.random(pid.size) < p[pid]).astype(np.float64)
        prompt = pa.DictionaryArray.from_arrays(pa.array(pid.astype(np.int32)), names)
        table = pa.table({"prompt": prompt, "step": step, "score": score})
        pq.write_table(table, folder / f"part-{first:07d}.parquet")
        written += pid.size
    return written


def measure(script: str, folder: Path, *extra: str) -> dict:
    """Run ``script`` on ``folder`` in a fresh process: its answer, wall time and peak RSS."""
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    command = [sys.executable, "-c", script, str(folder), *extra]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        return {"error": proc.returncode}
    got = json.loads(out.strip().splitlines()[-1])
    got.update(
        wall_s=time.perf_counter() - t0,
        peak_rss_mb=usage.ru_maxrss / 1024,
        load_before=load,
        load_after=os.getloadavg()[0],
    )
    return got


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rollouts", type=float, nargs="+", default=[1e6, 1e7, 1e8])
    ap.add_argument("--pandas-max", type=float, default=1e7)
    ap.add_argument("--whole-max", type=float, default=1e7, help="gsd diagnose --whole-log up to here")
    ap.add_argument("--only-diagnose", action="store_true", help="time gsd diagnose alone (and DuckDB)")
    ap.add_argument("--dir", type=Path, default=Path("runs/bench_counts"))
    ap.add_argument("--out", type=Path, default=Path("bench_counts.json"))
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    from gsd.io.atomic import write_json

    results = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()}, "runs": []}
    for n in args.rollouts:
        folder = args.dir / f"{int(n):d}"
        t0 = time.perf_counter()
        rows = make_log(folder, int(n)) if not folder.exists() else None
        size = sum(f.stat().st_size for f in folder.glob("*.parquet"))
        run = {"rollouts": rows, "generate_s": time.perf_counter() - t0, "disk_mb": size / 2**20}
        for name, script, extra in (
            ("gsd", GSD, ()),
            ("gsd_shards2", GSD_SHARDS, ("2",)),
            ("duckdb", DUCKDB, ()),
            ("pandas", PANDAS, ()),
            ("diagnose_whole", DIAGNOSE, ("whole",)),
            ("diagnose", DIAGNOSE, ("streaming",)),
        ):
            if (name == "pandas" and n > args.pandas_max) or (name == "diagnose_whole" and n > args.whole_max):
                continue
            if args.only_diagnose and not name.startswith("diagnose") and name != "duckdb":
                continue
            run[name] = measure(script, folder, *extra)
            print(int(n), name, {k: v for k, v in run[name].items() if k != "silent_frac"}, flush=True)
        run["rollouts"] = run["rollouts"] or run["duckdb"].get("rows")  # a folder kept from an earlier run
        ref = run["duckdb"].get("silent_frac")
        for name in ("gsd", "gsd_shards2", "pandas", "diagnose_whole", "diagnose"):
            if name in run and "silent_frac" in run[name]:
                import numpy as np

                run[name]["same_answer"] = bool(np.allclose(run[name].pop("silent_frac"), ref, rtol=1e-12, atol=0))
        run["duckdb"].pop("silent_frac", None)
        results["runs"].append(run)
        write_json(args.out, results)
        if not args.keep:
            shutil.rmtree(folder)
    runs = results["runs"]
    for a, b in zip(runs, runs[1:]):  # memory per extra rollout between sizes
        for name in ("gsd", "gsd_shards2", "duckdb", "pandas", "diagnose_whole", "diagnose"):
            if name in a and name in b and "peak_rss_mb" in a[name] and "peak_rss_mb" in b[name] and b["rollouts"]:
                per = (b[name]["peak_rss_mb"] - a[name]["peak_rss_mb"]) * 2**20 / (b["rollouts"] - a["rollouts"])
                b[name]["bytes_per_extra_rollout"] = per
    write_json(args.out, results)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
