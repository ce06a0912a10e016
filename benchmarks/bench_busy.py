"""Per-step cost at 10^5 prompts × G = 64 on an idle machine and beside one CPU-bound process
(a script, not a test): the numpy engine (what ``engine = "auto"`` runs on a CPU), the torch
engine on its chosen thread count and on torch's default, against the numpy loop, each ratio
from this one run.

    .venv/bin/python benchmarks/bench_busy.py --out runs/bench_busy.json [--numpy-only] [--keep-freed-memory]

The issue-29 ratio: ``run_simulation`` on the numpy engine (counts, the full ledger with closed
forms every step) against the *minimal* numpy loop of the same dynamics (:func:`minimal_loop`:
draw k, update the logits, the silent-rate closed form and nothing else), called as a library
caller calls it — no ``gsd.io.heap.keep_freed_memory()`` unless ``--keep-freed-memory`` (what the
``gsd`` command does) — and timed in the same process, interleaved run by run.  Two figures:
per step (the medians of the ledger's ``wall_s`` and of the loop's steps, after a warm-up step;
also the ratio of the fastest steps, and of the median CPU seconds per step, which other users'
processes on a shared machine do not inflate) and per call (the whole ``run_simulation`` call,
folder and files included, over the loop's whole run).

Two conditions, one after the other: ``idle`` (nothing started by this script) and ``busy``
(this script starts one process spinning ``while True: pass`` on a core, and stops it by its
pid after the condition).  In each: the numpy engine (:mod:`gsd.simulator.tabular`, one
thread), the torch engine with its default thread count (chosen by the
probe of :func:`gsd.simulator.engine.choose_threads`; the summary's ``threads``), the engine on
torch's default count forced (what a run used before the choice, ``--threads N``), and
the numpy loop of ``bench_simulator.py`` at its ``ledger`` level (every ledger column with the
core's closed forms).  Engine runs: ``rollouts = "counts"`` with closed forms every step,
float32, the median of the ledger's ``wall_s`` after a warm-up step.  The machine's load
(``uptime``, ``top``) is recorded before each condition: other users' processes count too.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_simulator import numpy_arm  # noqa: E402  (the same numpy loop as the other benchmarks)

from gsd.core.silent import silent_rate  # noqa: E402
from gsd.io.atomic import write_json  # noqa: E402
from gsd.io.heap import keep_freed_memory  # noqa: E402
from gsd.simulator import SimConfig, read_ledger, run_simulation  # noqa: E402
from gsd.simulator.population import initial_solve_rates  # noqa: E402


def minimal_loop(p0: np.ndarray, *, G: int, steps: int, lr: float, seed: int) -> list[float]:
    """The least a simulator of these dynamics does per step: p = sigmoid(z), k ~ Binom(G, p),
    the mean silent rate P_silent(p, G), z += lr·σ (GRPO, σ = sqrt(k(G − k))/G).  Returns the
    seconds of each step."""
    rng = np.random.default_rng(seed)
    z = np.log(p0 / (1.0 - p0))
    times, cpu = [], [time.process_time()]
    for _ in range(steps):
        t0 = time.perf_counter()
        p = 1.0 / (1.0 + np.exp(-z))
        k = rng.binomial(G, p)
        float(silent_rate(p, G).mean())
        z = z + lr * (np.sqrt(k * (G - k)) / G)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time())
    minimal_loop.cpu_s = list(np.diff(cpu))  # the steps' CPU seconds, beside their wall seconds
    return times


def numpy_engine_against_minimal(cfg: SimConfig, folder: Path, p0: np.ndarray, repeats: int) -> dict:
    """The numpy engine's run against :func:`minimal_loop`, interleaved ``repeats`` times."""
    steps, calls, loop_steps, loops, cpu_engine, cpu_loop = [], [], [], [], [], []
    for i in range(repeats):
        t0 = time.perf_counter()
        loop_steps += minimal_loop(p0, G=cfg.group_size, steps=cfg.steps, lr=cfg.lr, seed=i)[1:]
        loops.append(time.perf_counter() - t0)
        cpu_loop += minimal_loop.cpu_s[1:]
        marks = [time.process_time()]
        t0 = time.perf_counter()
        run_simulation(
            cfg, folder / str(i), progress=False, on_step=lambda step, marks=marks: marks.append(time.process_time())
        )
        calls.append(time.perf_counter() - t0)
        cpu_engine += list(np.diff(marks))[1:-1]  # the first (warm-up) and the last (files) step left out
        steps += list(read_ledger(folder / str(i), columns=["wall_s"])["wall_s"][1:])
        shutil.rmtree(folder / str(i))
    step, loop = float(np.median(steps)), float(np.median(loop_steps))
    # The fastest step of each side as well: on a shared machine the medians carry other users'
    # time slices; the minima are each side's step with the least of them.
    return {
        "engine_s_per_step": step,
        "minimal_s_per_step": loop,
        "ratio_per_step": step / loop,
        "engine_s_per_step_min": float(np.min(steps)),
        "minimal_s_per_step_min": float(np.min(loop_steps)),
        "ratio_per_step_min": float(np.min(steps)) / float(np.min(loop_steps)),
        # CPU seconds per step (process time): what each side computes, whatever the other users' share of the cores
        "engine_cpu_s_per_step": float(np.median(cpu_engine)),
        "minimal_cpu_s_per_step": float(np.median(cpu_loop)),
        "ratio_cpu_per_step": float(np.median(cpu_engine)) / float(np.median(cpu_loop)),
        "engine_s_per_call": float(np.median(calls)),
        "minimal_s_per_call": float(np.median(loops)),
        "ratio_per_call": float(np.median(calls)) / float(np.median(loops)),
        "repeats": repeats,
    }


def load_snapshot() -> dict:
    def out(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError) as exc:
            return f"({cmd[0]} failed: {exc})"

    return {"uptime": out(["uptime"]), "top": "\n".join(out(["top", "-bn1"]).splitlines()[:20])}


def engine_step(cfg: SimConfig, folder: Path, threads) -> tuple[float, int]:
    summary = run_simulation(cfg, folder, progress=False, threads=threads)
    wall = read_ledger(folder, columns=["wall_s"])["wall_s"][1:]
    shutil.rmtree(folder)
    return float(np.median(wall)), summary["threads"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="results JSON path")
    ap.add_argument("--prompts", type=int, default=100_000)
    ap.add_argument("--group-size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=6, help="timed steps (after one warm-up step)")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved runs of the engine and the minimal loop")
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    ap.add_argument(
        "--numpy-only", action="store_true", help="only the numpy engine against the minimal loop (no torch runs)"
    )
    ap.add_argument(
        "--keep-freed-memory",
        action="store_true",
        help="call gsd.io.heap.keep_freed_memory() first, as the gsd command does (default: a library caller's process)",
    )
    args = ap.parse_args(argv)
    heap_kept = keep_freed_memory() if args.keep_freed_memory else False
    default_threads = torch.get_num_threads()
    cfg = SimConfig(
        n_prompts=args.prompts,
        group_size=args.group_size,
        steps=args.steps + 1,
        device="cpu",
        dtype=args.dtype,
        replace=args.prompts > 191_501,
        checkpoint_every=10**6,
        rollouts="counts",
        closed_form_every=1,
        engine="torch",
    )
    p0 = initial_solve_rates(cfg)
    work = Path(tempfile.mkdtemp(prefix="gsd-bench-busy-"))
    results = {
        "heap_kept": heap_kept,
        "dtype": args.dtype,
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "platform": platform.platform(),
            "torch_default_threads": default_threads,
        },
        "prompts": args.prompts,
        "group_size": args.group_size,
        "steps_timed": args.steps,
    }
    run_simulation(
        cfg.with_overrides({"n_prompts": 100, "steps": 2}), work / "warm", progress=False
    )  # one-time imports
    try:
        for condition in ("idle", "busy"):
            spinner = None
            if condition == "busy":
                spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
                time.sleep(1.0)
            try:
                row = {"load_before": load_snapshot()}
                row["numpy_vs_minimal"] = numpy_engine_against_minimal(
                    cfg.with_overrides({"engine": "numpy"}), work / f"{condition}-min", p0, args.repeats
                )
                if args.numpy_only:
                    results[condition] = row
                    continue
                t, n = engine_step(cfg.with_overrides({"engine": "numpy"}), work / f"{condition}-numpy", None)
                row["engine_numpy"] = {"s_per_step": t, "threads": n}
                t, n = engine_step(cfg, work / f"{condition}-chosen", None)
                row["engine_chosen"] = {"s_per_step": t, "threads": n}
                t, n = engine_step(cfg, work / f"{condition}-default", default_threads)
                row["engine_torch_default"] = {"s_per_step": t, "threads": n}
                t0 = time.perf_counter()
                numpy_arm(
                    p0, "grpo", G=args.group_size, steps=args.steps, lr=cfg.lr, max_draws=4, seed=0, level="ledger"
                )
                row["numpy_ledger"] = {"s_per_step": (time.perf_counter() - t0) / args.steps}
            finally:
                if spinner is not None:
                    spinner.kill()
                    spinner.wait()
            ref = row["numpy_ledger"]["s_per_step"]
            row["ratio_numpy"] = row["engine_numpy"]["s_per_step"] / ref
            row["ratio_chosen"] = row["engine_chosen"]["s_per_step"] / ref
            row["ratio_torch_default"] = row["engine_torch_default"]["s_per_step"] / ref
            results[condition] = row
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(
        f"{args.prompts:,} prompts x G = {args.group_size}, counts, closed forms every step, {args.dtype}, "
        f"heap {'kept (gsd.io.heap)' if heap_kept else 'as a library caller has it'}"
    )
    print(
        f"{'condition':<6} {'engine s/step':>14} {'minimal s/step':>15} {'ratio':>6} {'(fastest steps)':>16} "
        f"{'(CPU time)':>11} {'engine s/call':>14} {'minimal s/call':>15} {'ratio':>6}"
    )
    for c in ("idle", "busy"):
        r = results[c]["numpy_vs_minimal"]
        print(
            f"{c:<6} {r['engine_s_per_step']:>14.4f} {r['minimal_s_per_step']:>15.4f} {r['ratio_per_step']:>6.2f} "
            f"{r['ratio_per_step_min']:>16.2f} {r['ratio_cpu_per_step']:>11.2f} "
            f"{r['engine_s_per_call']:>14.3f} {r['minimal_s_per_call']:>15.3f} {r['ratio_per_call']:>6.2f}"
        )
    if not args.numpy_only:
        print_engines(results)
    print("load before each condition (uptime):")
    for c in ("idle", "busy"):
        print(f"  {c}: {results[c]['load_before']['uptime']}")
    write_json(Path(args.out), results)
    print(f"wrote {args.out}")
    return 0


def print_engines(results: dict) -> None:
    """The engines' table: numpy, torch on its chosen and its default thread count, the numpy loop."""
    print(
        f"{'condition':<6} {'numpy engine':>13} {'torch chosen':>16} {'torch default':>20} {'numpy loop':>10} "
        f"{'ratio numpy':>12} {'ratio chosen':>13} {'ratio default':>14}"
    )
    for c in ("idle", "busy"):
        r = results[c]
        print(
            f"{c:<6} {r['engine_numpy']['s_per_step']:>13.4f} {r['engine_chosen']['s_per_step']:>9.4f} ({r['engine_chosen']['threads']} thr) "
            f"{r['engine_torch_default']['s_per_step']:>12.4f} ({r['engine_torch_default']['threads']} thr) "
            f"{r['numpy_ledger']['s_per_step']:>10.4f} {r['ratio_numpy']:>12.2f} {r['ratio_chosen']:>13.2f} "
            f"{r['ratio_torch_default']:>14.2f}"
        )


if __name__ == "__main__":
    sys.exit(main())
