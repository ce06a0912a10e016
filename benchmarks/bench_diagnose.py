"""Time and peak memory of ``gsd diagnose`` on a 10^6-rollout verl dump.

Run:  .venv/bin/python benchmarks/bench_diagnose.py [--steps 64] [--prompts-per-step 1024] [--G 16]
                                                    [--dataset 8192] [--output-chars 400] [--out bench_diagnose.json]

The dump: ``--steps`` files ``{step}.jsonl`` as verl's ``trainer.rollout_data_dir`` writes them
(keys input, output, gts, score, step, acc), each step drawing ``--prompts-per-step`` prompts of a
``--dataset``-prompt pool (solve rates from Beta(0.6, 0.9)) and answering each ``--G`` times;
answers are ``--output-chars`` characters long, prompts about 200.  Defaults: 64 × 1024 × 16 =
1,048,576 rollouts.

Each measurement runs in a fresh process (so its peak RSS is its own, read from
``resource.getrusage(RUSAGE_CHILDREN)``):

* ``diagnose`` — ``gsd.diagnose.diagnose`` (read, group, predict, both tables), no figure;
* ``baseline`` — plain pandas: ``pd.read_json(lines=True)`` of every file, then a groupby for
  the measured silent fraction per step (no predictions): what one would write by hand.

The ratio baseline / diagnose is reported with both times and memories.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DIAGNOSE = """
import sys, time
from gsd.diagnose import diagnose
t0 = time.perf_counter()
dx = diagnose(sys.argv[1], progress=False)
print(time.perf_counter() - t0, dx.summary["rows"], dx.summary["silent_frac"], dx.summary["silent_pred"])
"""

BASELINE = """
import sys, time, glob
import pandas as pd
from gsd.io.atomic import write_json  # a benchmark's result file is never half-written
t0 = time.perf_counter()
frames = [pd.read_json(f, lines=True) for f in sorted(glob.glob(sys.argv[1] + "/*.jsonl"))]
df = pd.concat(frames, ignore_index=True)
g = df.groupby(["step", "input"])["score"].agg(["size", "sum"])
silent = ((g["sum"] == 0) | (g["sum"] == g["size"])).mean()
print(time.perf_counter() - t0, len(df), float(silent), float("nan"))
"""


def make_dump(folder: Path, steps: int, per_step: int, G: int, dataset: int, output_chars: int, seed: int = 0) -> int:
    import numpy as np

    from gsd.integrations.verl import write_step as write_verl_step

    rng = np.random.default_rng(seed)
    p = rng.beta(0.6, 0.9, dataset)
    words = np.array(["theorem", "therefore", "x", "=", "+", "we", "compute", "the", "sum", "of", "\\frac{1}{2}", "so"])
    texts = np.array([" ".join(rng.choice(words, size=output_chars // 5))[:output_chars] for _ in range(64)])
    prompts = np.array([f"Problem {i}: " + " ".join(rng.choice(words, size=38)) for i in range(dataset)])
    rows = 0
    for step in range(1, steps + 1):
        drawn = rng.choice(dataset, size=per_step, replace=False)
        pid = np.repeat(drawn, G)
        right = (rng.random(pid.size) < p[pid]).astype(np.float64)
        write_verl_step(
            folder,
            step,
            prompts[pid],
            right,
            outputs=texts[rng.integers(0, texts.size, pid.size)],
            extra={"acc": right.astype(bool)},
        )
        rows += pid.size
    return rows


def measure(code: str, folder: Path) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    inner, rows, silent, pred = out.stdout.split()
    # ru_maxrss of the children is the largest child so far: run the smaller process first.
    return {
        "seconds": float(inner),
        "process_seconds": wall,
        "peak_rss_mb": peak_kb / 1024,
        "rss_is_max_so_far": peak_kb == before,
        "rows": int(rows),
        "silent_frac": float(silent),
        "silent_pred": float(pred),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--prompts-per-step", type=int, default=1024)
    ap.add_argument("--G", type=int, default=16)
    ap.add_argument("--dataset", type=int, default=8192)
    ap.add_argument("--output-chars", type=int, default=400)
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--out", help="write the results as JSON here")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "rollout_data"
        t0 = time.perf_counter()
        rows = make_dump(folder, args.steps, args.prompts_per_step, args.G, args.dataset, args.output_chars)
        size_mb = sum(f.stat().st_size for f in folder.iterdir()) / 2**20
        print(
            f"dump: {rows:,} rollouts in {args.steps} files, {size_mb:.0f} MB, written in {time.perf_counter() - t0:.1f} s"
        )
        result = {
            "rows": rows,
            "dump_mb": size_mb,
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        }
        result["diagnose"] = measure(DIAGNOSE, folder)
        d = result["diagnose"]
        print(
            f"gsd diagnose: {d['seconds']:.1f} s ({d['process_seconds']:.1f} s with start-up), peak RSS {d['peak_rss_mb']:.0f} MB, "
            f"silent {d['silent_frac']:.3f} measured / {d['silent_pred']:.3f} predicted"
        )
        if not args.no_baseline:
            result["baseline"] = b = measure(BASELINE, folder)
            print(
                f"pandas baseline: {b['seconds']:.1f} s, peak RSS {b['peak_rss_mb']:.0f} MB (silent {b['silent_frac']:.3f}); "
                f"diagnose is {b['seconds'] / d['seconds']:.1f}x faster, {b['peak_rss_mb'] / d['peak_rss_mb']:.1f}x less memory"
            )
    if args.out:
        from gsd.io.atomic import write_json

        write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
