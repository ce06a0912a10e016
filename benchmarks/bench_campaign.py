"""Whole-process benchmark: ``gsd simulate --campaign`` against the paper's workload as a plain
numpy + matplotlib script (``benchmarks/paper_workload.py``), timed side by side in one run.

    .venv/bin/python benchmarks/bench_campaign.py --out runs/bench_campaign.json [--repeats 3]

Each side is a fresh Python process (imports, work, files, figure), started the same way, run
alternately ``--repeats`` times; the figure is the best wall time of each and their ratio.  The
campaign is the shipped ``paper_campaign`` (3 arms × 150 steps × 6,000
prompts, G = 8, 200-draw decile measurement, ledger, checkpoints, summary and figure); the
script does the paper's loop (analytic gain, no autograd) with a 400-draw decile measurement and
one figure.  ``--device`` picks the campaign's device (cuda: the CUDA path).  It also times the
same campaign on the torch engine (``--set engine=torch``: what ran before the numpy engine was
the default on a CPU), and the import floor, a process that only imports matplotlib's Agg figure
and pyarrow (and torch, for the torch engine's floor): no campaign that draws its figure and
writes its ledgers can be faster than that.

Where the campaign's time goes (``phases`` in the JSON, from its fastest run): the stages the
campaign times itself (``wall_s`` in its summary: arms, decile measurement, figure with
matplotlib's import) and the rest of the process (interpreter start, imports, config checks,
summary files, interpreter exit).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gsd.io.atomic import write_json  # a benchmark's result file is never half-written

ROOT = Path(__file__).resolve().parents[1]


def timed(cmd, cwd, env=None) -> float:
    """Wall seconds of one process, started in ``cwd`` (not the checkout: ``-m`` puts the cwd
    first on sys.path, which would shadow ``--baseline-root``)."""
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"bench_campaign: {' '.join(map(str, cmd))} failed:\n{proc.stderr[-2000:]}")
    return wall


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="results JSON path")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda", "auto"))
    ap.add_argument(
        "--campaign",
        default=str(ROOT / "simulations" / "paper_campaign.toml"),
        help="campaign file (a path: a --baseline-root checkout may predate shipped names)",
    )
    ap.add_argument(
        "--baseline-root",
        help="also time the campaign of another checkout of gsd (e.g. a git worktree "
        "of an earlier commit), imported from there: before/after in the same run",
    )
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="gsd-bench-campaign-"))
    gsd = [sys.executable, "-m", "gsd.cli"]
    script = [sys.executable, str(ROOT / "benchmarks" / "paper_workload.py")]
    # The floor of any process that runs a torch simulator and draws a matplotlib figure: the
    # interpreter importing the two (and pyarrow, the ledger's writer), then exiting with the
    # collector frozen as the gsd command does.
    floor = [
        sys.executable,
        "-c",
        "import gc, numpy, matplotlib.figure, matplotlib.backends.backend_agg, pyarrow.parquet; gc.freeze()",
    ]
    torch_floor = [
        sys.executable,
        "-c",
        "import gc, torch, matplotlib.figure, matplotlib.backends.backend_agg, pyarrow.parquet; gc.freeze()",
    ]
    times = {
        "gsd_campaign_s": [],
        "paper_script_s": [],
        "import_floor_s": [],
        "torch_engine_campaign_s": [],
        "torch_import_floor_s": [],
    }
    stages = []
    if args.baseline_root:
        times["baseline_campaign_s"] = []
        base_env = {**os.environ, "PYTHONPATH": str(Path(args.baseline_root).resolve())}
    try:
        for i in range(args.repeats):
            times["paper_script_s"].append(timed(script + ["--out", str(work / f"script-{i}")], work))
            times["import_floor_s"].append(timed(floor, work))
            times["torch_import_floor_s"].append(timed(torch_floor, work))
            campaign = ["simulate", "--campaign", args.campaign, "--device", args.device, "--no-progress", "--out"]
            times["gsd_campaign_s"].append(timed(gsd + campaign + [str(work / f"campaign-{i}")], work))
            times["torch_engine_campaign_s"].append(
                timed(gsd + campaign + [str(work / f"torch-{i}"), "--set", "engine=torch"], work)
            )
            stages.append(json.loads((work / f"campaign-{i}" / "campaign_summary.json").read_text()).get("wall_s", {}))
            if args.baseline_root:
                times["baseline_campaign_s"].append(
                    timed(gsd + campaign + [str(work / f"baseline-{i}")], work, env=base_env)
                )
        summary = json.loads((work / "campaign-0" / "campaign_summary.json").read_text())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    best = {k: min(v) for k, v in times.items()}
    fastest = stages[times["gsd_campaign_s"].index(best["gsd_campaign_s"])]
    phases = {k: fastest[k] for k in ("arms", "decile_measurement", "figure") if k in fastest}
    phases["start_imports_exit"] = best["gsd_campaign_s"] - sum(phases.values())
    results = {
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "device": args.device},
        "runs": times,
        "best": best,
        "ratio": best["gsd_campaign_s"] / best["paper_script_s"],
        "baseline_ratio": best["baseline_campaign_s"] / best["paper_script_s"] if args.baseline_root else None,
        "phases": phases,
        "import_floor_ratio": best["import_floor_s"] / best["paper_script_s"],
        "torch_engine_ratio": best["torch_engine_campaign_s"] / best["paper_script_s"],
        "torch_import_floor_ratio": best["torch_import_floor_s"] / best["paper_script_s"],
        "engine": summary["arms"][next(iter(summary["arms"]))].get("engine"),
        "campaign_silent_r2": summary["silent_r2"],
    }
    print(
        f"whole process, best of {args.repeats}: gsd simulate --campaign {best['gsd_campaign_s']:.2f} s, "
        f"plain numpy script {best['paper_script_s']:.2f} s, ratio {results['ratio']:.2f}"
    )
    print("campaign phases (fastest run): " + ", ".join(f"{k} {v:.2f} s" for k, v in phases.items()))
    print(
        f"the same campaign on the torch engine: {best['torch_engine_campaign_s']:.2f} s, ratio {results['torch_engine_ratio']:.2f}"
    )
    print(
        f"import floor (a process importing numpy, matplotlib's Agg figure and pyarrow): {best['import_floor_s']:.2f} s, "
        f"{results['import_floor_ratio']:.2f} x the numpy script; with torch too: {best['torch_import_floor_s']:.2f} s, "
        f"{results['torch_import_floor_ratio']:.2f} x"
    )
    if args.baseline_root:
        print(
            f"baseline checkout {args.baseline_root}: {best['baseline_campaign_s']:.2f} s, ratio {results['baseline_ratio']:.2f}"
        )
    out = Path(args.out)
    write_json(out, results)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
