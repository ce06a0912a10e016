"""Benchmark of the torch training simulator against a plain numpy loop (a script, not a test).

    .venv/bin/python benchmarks/bench_simulator.py --out runs/bench_simulator.json [--threads 1]
    .venv/bin/python benchmarks/bench_simulator.py --device cuda --prompts 1000000 --out runs/bench_cuda.json

Part 1 — the paper's three-arm campaign (DESIGN §1.5: 6,000 tabular prompts, G = 8, 150 steps,
SGD lr 0.5, DAPO ≤ 4 draws, plus the 200-draw decile measurement), timed two ways:

* ``ledger``: both sides produce the same measurements — per step the silent fraction and its
  prediction, the gradient mass per decile against the closed forms m_method(p, G), the quartile
  means, DAPO's expected cost — with the same core functions (``gsd.silent``, ``gsd.update``);
* ``bare``: the numpy loop only samples k ~ Binom(G, p) and applies z += lr·σ (GRPO, DAPO) or
  lr·σ² (Dr.GRPO) — the paper's analytic-gain approach — while the engine runs with its
  closed-form columns off (``closed_form_every = 0``).

and, for the engine, both rollout paths: ``answers`` (G Bernoulli answers per group, loss per
answer: G times the random numbers of the numpy loop) and ``counts`` (one binomial count per
group, the same loss summed per (answer, reward) cell).  The engine always builds the loss and
backpropagates it; the numpy loop never differentiates.  Both run in this process, after a warm-up
(the first torch optimizer step imports torch._dynamo, a one-time cost reported separately).

Part 2 — per-step throughput of the engine at --prompts × --group-size (default 10^5 × 64),
with and without the closed-form columns, beside the numpy loop at the same size.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from scipy.special import expit, logit

from gsd.silent import dapo_generation_cost, silent_rate
from gsd.simulator import SimConfig, measure_initial_deciles, read_ledger, run_simulation
from gsd.simulator.population import initial_solve_rates
from gsd.update import expected_update
from gsd.weighting import decile_index

ARMS = ("grpo", "dr_grpo", "dapo")


# --------------------------------------------------------------------------- numpy reference
def numpy_arm(p0, method, *, G, steps, lr, max_draws, seed, ledger):
    """The paper's analytic-gain loop: Δz_j = lr·σ_j (GRPO/DAPO) or lr·σ_j² (Dr.GRPO)."""
    rng = np.random.default_rng(seed)
    N = p0.size
    z = logit(p0)
    dec = decile_index(p0)
    order = np.argsort(p0, kind="stable")
    quart = np.empty(N, dtype=np.int64)
    quart[order] = np.arange(N) * 4 // N
    cols = np.arange(N)
    rows = []
    for _ in range(steps):
        p = expit(z)
        if method == "dapo":
            k = rng.binomial(G, p, size=(max_draws, N))
            silent = (k == 0) | (k == G)
            first = np.argmax(~silent, axis=0)
            kept = ~silent.all(axis=0)
            kk = k[first, cols]
            groups = np.where(kept, first + 1, max_draws).sum()
            g = np.where(kept, np.sqrt(kk * (G - kk)) / G, 0.0)
        else:
            k = rng.binomial(G, p)
            silent = ((k == 0) | (k == G))[None]
            groups = N
            sigma = np.sqrt(k * (G - k)) / G
            g = sigma if method == "grpo" else sigma * sigma
        row = {"silent_frac": silent[0].mean(), "groups": groups}
        if ledger:
            s = silent_rate(p, G)
            with np.errstate(divide="ignore", invalid="ignore"):
                m = expected_update(p, G, method, **({"max_draws": max_draws} if method == "dapo" else {}))
            row.update(
                silent_pred=s.mean(),
                grad_mass_d=np.bincount(dec, weights=g, minlength=10),
                grad_pred_d=np.bincount(dec, weights=m, minlength=10),
                mean_p=p.mean(),
                mean_arcsin=(2 * np.arcsin(np.sqrt(p))).mean(),
                quartiles=np.bincount(quart, weights=p, minlength=4) / np.bincount(quart, minlength=4),
                groups_pred=dapo_generation_cost(p, G, max_draws=max_draws).sum() if method == "dapo" else N,
            )
        rows.append(row)
        z = z + lr * g
    return rows


def numpy_deciles(p0, *, G, draws, seed):
    rng = np.random.default_rng(seed)
    dec = decile_index(p0)
    k = rng.binomial(G, p0, size=(draws, p0.size))
    sigma = np.sqrt(k * (G - k)) / G
    out = {}
    for method, g in (("grpo", sigma.mean(0)), ("dr_grpo", (sigma**2).mean(0))):
        measured = np.bincount(dec, weights=g, minlength=10)
        closed = np.bincount(dec, weights=expected_update(p0, G, method), minlength=10)
        out[method] = (measured / measured.sum(), closed / closed.sum())
    return out


# --------------------------------------------------------------------------- timing helpers
def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - t0, out


def engine_campaign(base: SimConfig, work: Path, *, closed_forms: bool, draws: int):
    cfg = base.with_overrides({"closed_form_every": 1 if closed_forms else 0})
    t0 = time.perf_counter()
    summaries = {}
    for arm in ARMS:
        summaries[arm] = run_simulation(cfg.with_overrides({"method": arm, "name": arm}), work / f"{arm}-{closed_forms}", progress=False)
    if closed_forms:
        measure_initial_deciles(cfg, draws=draws)
    return time.perf_counter() - t0, summaries


def numpy_campaign(base: SimConfig, *, ledger: bool, draws: int):
    p0 = initial_solve_rates(base)
    t0 = time.perf_counter()
    for arm in ARMS:
        numpy_arm(p0, arm, G=base.group_size, steps=base.steps, lr=base.lr, max_draws=base.max_draws, seed=base.seed, ledger=ledger)
    if ledger:
        numpy_deciles(p0, G=base.group_size, draws=draws, seed=base.seed)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="results JSON path")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    ap.add_argument("--prompts", type=int, default=None, help="throughput: prompts (default 1e5 on cpu, 1e6 on cuda)")
    ap.add_argument("--group-size", type=int, default=64, help="throughput: G")
    ap.add_argument("--steps", type=int, default=4, help="throughput: timed steps (after one warm-up step)")
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64"), help="throughput dtype")
    ap.add_argument("--repeats", type=int, default=2, help="campaign timings: best of this many")
    ap.add_argument("--skip-campaign", action="store_true")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench_simulator: error: --device cuda but torch sees no CUDA device", file=sys.stderr)
        return 2
    n_tp = args.prompts or (1_000_000 if args.device == "cuda" else 100_000)
    work = Path(tempfile.mkdtemp(prefix="gsd-bench-sim-"))
    results = {
        "machine": {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
                    "platform": platform.platform(), "threads": torch.get_num_threads(), "device": args.device,
                    "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else None},
    }
    try:
        t_first, _ = timed(lambda: run_simulation(SimConfig(n_prompts=100, steps=2, device=args.device), work / "warm", progress=False))
        results["first_run_overhead_s"] = t_first  # torch._dynamo import on the first optimizer step, etc.

        if not args.skip_campaign:
            camp = {}
            for mode, cf in (("ledger", True), ("bare", False)):
                ref = min(numpy_campaign(SimConfig(), ledger=cf, draws=200) for _ in range(args.repeats))
                for rollouts in ("answers", "counts"):
                    base = SimConfig(device=args.device, rollouts=rollouts)  # the paper's campaign (DESIGN §1.5)
                    eng = min(engine_campaign(base, work / f"r{rollouts}{i}", closed_forms=cf, draws=200)[0]
                              for i in range(args.repeats))
                    camp[f"{mode}/{rollouts}"] = {"engine_s": eng, "numpy_s": ref, "ratio": eng / ref}
            results["campaign"] = camp

        tp = {"prompts": n_tp, "group_size": args.group_size, "dtype": args.dtype, "steps_timed": args.steps}
        big = SimConfig(n_prompts=n_tp, group_size=args.group_size, steps=args.steps + 1, device=args.device, dtype=args.dtype,
                        replace=n_tp > 191_501, checkpoint_every=10**6)
        variants = [(f"engine_{r}_{'with' if cf else 'no'}_closed_form", r, cf) for r in ("answers", "counts") for cf in (0, 1)]
        for label, rollouts, cf in variants:
            folder = work / f"tp-{label}"
            run_simulation(big.with_overrides({"closed_form_every": cf, "rollouts": rollouts}), folder, progress=False)
            wall = read_ledger(folder)["wall_s"].to_numpy()[1:]  # step 0 warms caches
            tp[label] = {"s_per_step": float(np.median(wall)), "answers_per_s": n_tp * args.group_size / float(np.median(wall))}
            shutil.rmtree(folder)
        p0 = initial_solve_rates(big)
        t_np, _ = timed(lambda: numpy_arm(p0, "grpo", G=args.group_size, steps=args.steps, lr=0.5, max_draws=4, seed=0, ledger=False))
        tp["numpy_bare"] = {"s_per_step": t_np / args.steps, "answers_per_s": n_tp * args.group_size * args.steps / t_np}
        results["throughput"] = tp
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"torch {torch.__version__}, {results['machine']['threads']} CPU thread(s), device {args.device}")
    print(f"first-run overhead (imports on the first optimizer step): {results['first_run_overhead_s']:.2f} s")
    if "campaign" in results:
        print("\nthree-arm paper campaign (6,000 prompts, G = 8, 150 steps; + 200-draw deciles in 'ledger')")
        print(f"{'mode/rollouts':<16} {'engine s':>10} {'numpy s':>10} {'ratio':>8}")
        for mode, r in results["campaign"].items():
            print(f"{mode:<16} {r['engine_s']:>10.3f} {r['numpy_s']:>10.3f} {r['ratio']:>8.2f}")
    tp = results["throughput"]
    print(f"\nper-step throughput at {tp['prompts']:,} prompts × G = {tp['group_size']} ({tp['dtype']})")
    print(f"{'variant':<36} {'s/step':>10} {'answers/s':>14}")
    for key in [v[0] for v in variants] + ["numpy_bare"]:
        print(f"{key:<36} {tp[key]['s_per_step']:>10.4f} {tp[key]['answers_per_s']:>14,.0f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
