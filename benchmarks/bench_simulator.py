"""Benchmark of the torch training simulator against a plain numpy loop (a script, not a test).

    .venv/bin/python benchmarks/bench_simulator.py --out runs/bench_simulator.json [--threads 1]
    .venv/bin/python benchmarks/bench_simulator.py --device cuda --prompts 1000000 --out runs/bench_cuda.json

Both sides run in this process, one after the other, after a warm-up (the first torch optimizer
step imports torch._dynamo, a one-time cost reported separately); every figure is the best of
``--repeats`` runs.

What the numpy side is.  The paper's own approach (see docs/theory.md, section The paper's definitions and
reproduction targets): a loop over steps, vectorised
over prompts, that applies the analytic gain instead of differentiating anything — per step
p = expit(z); k ~ Binom(G, p) per prompt (``Generator.binomial``; DAPO draws ``max_draws`` groups
at once and keeps the first non-silent one, a prompt silent in every draw gets no update, every
draw counts); σ = sqrt(k(G−k))/G; z += lr·σ (GRPO, DAPO) or lr·σ² (Dr.GRPO).  Same population
(``initial_solve_rates`` of the same config, loaded inside the timer as the engine loads it),
same G, steps, lr and draws.  Three levels of bookkeeping on top of that loop:

* ``bare``: nothing but the loop (and the silent fraction and groups drawn): the floor of the
  analytic-gain approach, no measurement at all;
* ``paper``: what the paper measures and reports — per step the silent fraction against the
  mean of P_silent(p, G) (a), the zero-update fraction, groups drawn and DAPO's expected groups
  (``dapo_generation_cost``), the mean p of each initial-p quartile (c); and, once, measurement
  (b): the gradient mass per decile of initial p from 200 independent draws at the initial p,
  against the closed forms m_GRPO and m_Dr (``expected_update``);
* ``ledger``: every column of the engine's ledger (``gsd.simulator.COLUMNS``): the above plus
  the gradient mass per decile, the closed forms Σ m_method(p, G) per decile, the large-G
  update Σ sqrt(p(1−p)) per decile and the law's, mean p and mean 2·arcsin√p — with the same
  core functions (``gsd.core.silent``, ``gsd.core.update``) — and measurement (b).

What the engine side is.  ``run_simulation`` on the same config (the paper's campaign: 6,000 tabular
prompts, G = 8, 150 steps, SGD lr 0.5, DAPO ≤ 4 draws, float64, a checkpoint every 25 steps),
one run folder per arm.  It always samples the groups, builds the loss −Σ mean_group(A·log π)
from the core's advantages, backpropagates it through autograd, steps a torch SGD optimizer,
writes its full ledger row (autograd gradient mass per decile, silent and DAPO predictions,
quartile means, …) and its files (config, checkpoints with every random state and the ledger so
far, ledger parquet, summary).  Against ``bare`` and ``paper`` it runs with its per-step closed
forms off (``closed_form_every = 0``), against ``ledger`` with them on; with ``paper`` and
``ledger`` it also runs measurement (b) (``measure_initial_deciles``, autograd over 200 draws).
So the engine never does less than the numpy side: at ``paper`` it still writes its whole ledger
and its files.  ``engine_steps_s`` is the part of the engine's time spent inside its steps (the
ledger's ``wall_s``), i.e. without set-up, checkpoints and summary.

Both rollout paths of the engine are timed: ``answers`` (G Bernoulli answers per group and a
loss term per answer: G times the random numbers of the numpy loop) and ``counts`` (one binomial
count per group, the loss summed per (answer, reward) cell: the numpy loop's random numbers).

``torch_floor``: the three arms as the barest torch autograd loop (``torch_floor_campaign``:
sample, advantages from the core's table, loss, backward, SGD; no ledger, closed forms or files)
against the ``bare`` numpy loop — how close any torch engine could come at this size.

Part 2 — per-step cost against the prompt count: the GRPO arm at ``paper`` level, G = 8, for
N = 100 … 10^5 prompts, engine (both paths) and numpy; the ratio at each N, and a fit
t(N) = t_fixed + N·t_prompt per side, which says how much of the gap is per-step fixed cost.

Part 3 — per-step throughput of the engine at --prompts × --group-size (default 10^5 × 64),
with and without the closed-form columns, beside the numpy loop at the same size (``bare`` and
``ledger`` levels).
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
from scipy.special import expit, logit

from gsd.core.silent import dapo_generation_cost, silent_rate
from gsd.core.update import expected_update
from gsd.core.weighting import decile_index
from gsd.io.atomic import write_json  # a benchmark's result file is never half-written
from gsd.io.heap import keep_freed_memory
from gsd.simulator import SimConfig, measure_initial_deciles, read_ledger, run_simulation
from gsd.simulator.population import initial_solve_rates

ARMS = ("grpo", "dr_grpo", "dapo")
LEVELS = ("bare", "paper", "ledger")
DRAWS = 200  # measurement (b)


# --------------------------------------------------------------------------- numpy reference
def numpy_arm(p0, method, *, G, steps, lr, max_draws, seed, level):
    """The paper's analytic-gain loop: Δz_j = lr·σ_j (GRPO/DAPO) or lr·σ_j² (Dr.GRPO).

    ``level``: ``"bare"``, ``"paper"`` or ``"ledger"`` (see the module docstring).  Returns the
    per-step rows (dicts of numbers and arrays)."""
    rng = np.random.default_rng(seed)
    N = p0.size
    D = max_draws if method == "dapo" else 1
    z = logit(p0)
    dec = decile_index(p0)
    order = np.argsort(p0, kind="stable")
    quart = np.empty(N, dtype=np.int64)
    quart[order] = np.arange(N) * 4 // N
    quart_n = np.bincount(quart, minlength=4)
    cols = np.arange(N)
    kw = {"max_draws": D} if method == "dapo" else {}
    rows = []
    generations = 0
    for _ in range(steps):
        p = expit(z)
        if D > 1:
            k = rng.binomial(G, p, size=(D, N))
            silent = (k == 0) | (k == G)
            first = np.argmax(~silent, axis=0)
            kept = ~silent.all(axis=0)
            kk = k[first, cols]
            groups = int(np.where(kept, first + 1, D).sum())
            g = np.where(kept, np.sqrt(kk * (G - kk)) / G, 0.0)
            zero = ~kept
        else:
            k = rng.binomial(G, p)
            silent = ((k == 0) | (k == G))[None]
            groups = N
            sigma = np.sqrt(k * (G - k)) / G
            g = sigma if method == "grpo" else sigma * sigma
            zero = silent[0]
        generations += groups * G
        row = {"silent_frac": silent[0].mean(), "groups": groups}
        if level != "bare":
            s = silent_rate(p, G)
            row.update(
                silent_pred=s.mean(),
                zero_update_frac=zero.mean(),
                zero_update_pred=(s**D).mean(),
                groups_pred=dapo_generation_cost(p, G, max_draws=D).sum() if D > 1 else N,
                generations_cum=generations,
                quartile_mean_p=np.bincount(quart, weights=p, minlength=4) / quart_n,
            )
        if level == "ledger":
            with np.errstate(divide="ignore", invalid="ignore"):
                m = expected_update(p, G, method, **kw)
            lim = np.sqrt(p * (1.0 - p))
            row.update(
                grad_mass=g.sum(),
                grad_mass_d=np.bincount(dec, weights=g, minlength=10),
                grad_pred=m.sum(),
                grad_pred_d=np.bincount(dec, weights=m, minlength=10),
                grad_limit=lim.sum(),
                grad_law=(lim - 1.0 / (8.0 * G * lim)).sum(),
                grad_limit_d=np.bincount(dec, weights=lim, minlength=10),
                mean_p=p.mean(),
                mean_arcsin=(2 * np.arcsin(np.sqrt(p))).mean(),
            )
        rows.append(row)
        z = z + lr * g
    return rows


def numpy_deciles(p0, *, G, draws, seed):
    """Measurement (b): mean update per prompt over ``draws`` groups at p0, per decile, against
    the closed forms, as shares."""
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


def numpy_campaign(base: SimConfig, *, level: str) -> float:
    t0 = time.perf_counter()
    p0 = initial_solve_rates(base)
    for arm in ARMS:
        numpy_arm(
            p0,
            arm,
            G=base.group_size,
            steps=base.steps,
            lr=base.lr,
            max_draws=base.max_draws,
            seed=base.seed,
            level=level,
        )
    if level != "bare":
        numpy_deciles(p0, G=base.group_size, draws=DRAWS, seed=base.seed)
    return time.perf_counter() - t0


# --------------------------------------------------------------------------- torch floor
def torch_floor_campaign(base: SimConfig) -> float:
    """The least a torch autograd loop can do per step at the paper's size: sample G answers per
    prompt (DAPO: ``max_draws`` groups, keep the first non-silent), look the advantages up in
    the core's table, −Σ mean_group(A·log π) through autograd, one SGD step.  No ledger, no
    closed forms, no files — what the engine would cost with every measurement removed, so the
    gap between it and the numpy loop is the price of torch's per-operation dispatch alone."""
    import torch.nn.functional as F

    from gsd.core.methods import method_spec
    from gsd.simulator.loss import AdvantageTable

    t0 = time.perf_counter()
    p0 = initial_solve_rates(base)
    G = base.group_size
    for arm in ARMS:
        D = base.max_draws if arm == "dapo" else 1
        gen = torch.Generator().manual_seed(base.seed)
        z = torch.logit(torch.as_tensor(p0, dtype=torch.float64)).requires_grad_(True)
        table = AdvantageTable(
            [G], method_spec(arm).advantage, ddof=base.ddof, eps=base.eps, dtype=torch.float64, device=z.device
        )
        rows = torch.arange(z.numel())
        for _ in range(base.steps):
            with torch.no_grad():
                p = torch.sigmoid(z)
            k = (torch.rand((D, z.numel(), G), generator=gen, dtype=torch.float64) < p[:, None]).sum(-1)
            if D > 1:
                silent = (k == 0) | (k == G)
                k = k[torch.clamp(silent.long().cumprod(0).sum(0), max=D - 1), rows]
            else:
                k = k[0]
            adv = table.lookup(torch.full_like(k, G), k)
            c_right, c_wrong = k * adv[:, 0] / G, (G - k) * adv[:, 1] / G
            loss = -(F.logsigmoid(z) * c_right + F.logsigmoid(-z) * c_wrong).sum()
            z.grad = None
            loss.backward()
            with torch.no_grad():
                z.add_(z.grad, alpha=-base.lr)
    return time.perf_counter() - t0


# --------------------------------------------------------------------------- engine side
def engine_campaign(base: SimConfig, work: Path, *, level: str):
    """The three arms through ``run_simulation`` (+ measurement (b) unless ``bare``); returns
    (total seconds, seconds inside the steps)."""
    cfg = base.with_overrides({"closed_form_every": 1 if level == "ledger" else 0})
    shutil.rmtree(work, ignore_errors=True)
    t0 = time.perf_counter()
    for arm in ARMS:
        run_simulation(cfg.with_overrides({"method": arm, "name": arm}), work / arm, progress=False)
    if level != "bare":
        measure_initial_deciles(cfg, draws=DRAWS)
    total = time.perf_counter() - t0
    steps = sum(float(read_ledger(work / arm)["wall_s"].sum()) for arm in ARMS)
    return total, steps


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def fit_line(n, t):
    """Least-squares t = a + b·n; returns (a, b)."""
    b, a = np.polyfit(np.asarray(n, dtype=np.float64), np.asarray(t, dtype=np.float64), 1)
    return float(a), float(b)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="results JSON path")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    ap.add_argument("--prompts", type=int, default=None, help="throughput: prompts (default 1e5 on cpu, 1e6 on cuda)")
    ap.add_argument("--group-size", type=int, default=64, help="throughput: G")
    ap.add_argument("--steps", type=int, default=4, help="throughput: timed steps (after one warm-up step)")
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64"), help="throughput dtype")
    ap.add_argument("--repeats", type=int, default=3, help="campaign and scaling timings: best of this many")
    ap.add_argument(
        "--scaling-prompts", default="100,1000,6000,30000,100000", help="part 2: prompt counts ('' to skip)"
    )
    ap.add_argument("--scaling-steps", type=int, default=30, help="part 2: steps per run")
    ap.add_argument("--skip-campaign", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    args = ap.parse_args(argv)
    heap_kept = keep_freed_memory()  # as the gsd command does (gsd.io.heap): both sides of every ratio alike
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("bench_simulator: error: --device cuda but torch sees no CUDA device", file=sys.stderr)
        return 2
    n_tp = args.prompts or (1_000_000 if args.device == "cuda" else 100_000)
    work = Path(tempfile.mkdtemp(prefix="gsd-bench-sim-"))
    results = {
        "heap_kept": heap_kept,
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "numpy": np.__version__,
            "platform": platform.platform(),
            "threads": torch.get_num_threads(),
            "device": args.device,
            "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else None,
        },
    }
    try:
        t0 = time.perf_counter()
        run_simulation(SimConfig(n_prompts=100, steps=2, device=args.device), work / "warm", progress=False)
        sync(args.device)
        results["first_run_overhead_s"] = (
            time.perf_counter() - t0
        )  # torch._dynamo import on the first optimizer step, etc.

        # --- part 1: the campaign --------------------------------------------------------------
        if not args.skip_campaign:
            camp = {}
            for level in LEVELS:
                ref = min(numpy_campaign(SimConfig(), level=level) for _ in range(args.repeats))
                for rollouts in ("answers", "counts"):
                    base = SimConfig(device=args.device, rollouts=rollouts)  # the paper's campaign
                    runs = [
                        engine_campaign(base, work / f"c-{level}-{rollouts}", level=level) for _ in range(args.repeats)
                    ]
                    eng, eng_steps = min(runs)
                    camp[f"{level}/{rollouts}"] = {
                        "engine_s": eng,
                        "engine_steps_s": eng_steps,
                        "numpy_s": ref,
                        "ratio": eng / ref,
                    }
            floor = min(torch_floor_campaign(SimConfig()) for _ in range(args.repeats))
            bare = camp["bare/answers"]["numpy_s"]
            camp["torch_floor"] = {"engine_s": floor, "engine_steps_s": floor, "numpy_s": bare, "ratio": floor / bare}
            results["campaign"] = camp

        # --- part 2: per-step cost against N (GRPO arm, paper level, G = 8) ----------------------
        ns = [int(x) for x in args.scaling_prompts.split(",") if x.strip()]
        if ns:
            scal = {"group_size": 8, "steps": args.scaling_steps, "rows": []}
            for n in ns:
                cfg = SimConfig(
                    n_prompts=n,
                    steps=args.scaling_steps,
                    device=args.device,
                    replace=True,
                    closed_form_every=0,
                    checkpoint_every=10**6,
                )
                p0 = initial_solve_rates(cfg)
                t_np = []
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    numpy_arm(p0, "grpo", G=8, steps=args.scaling_steps, lr=cfg.lr, max_draws=4, seed=0, level="paper")
                    t_np.append((time.perf_counter() - t0) / args.scaling_steps)
                row = {"n_prompts": n, "numpy_s_per_step": min(t_np)}
                for rollouts in ("answers", "counts"):
                    best = []
                    for i in range(args.repeats):
                        folder = work / f"s-{n}-{rollouts}-{i}"
                        run_simulation(cfg.with_overrides({"rollouts": rollouts}), folder, progress=False)
                        best.append(float(np.median(read_ledger(folder)["wall_s"].to_numpy()[1:])))
                        shutil.rmtree(folder)
                    row[f"engine_{rollouts}_s_per_step"] = min(best)
                    row[f"ratio_{rollouts}"] = min(best) / row["numpy_s_per_step"]
                scal["rows"].append(row)
            n_arr = [r["n_prompts"] for r in scal["rows"]]
            for key in ("numpy", "engine_answers", "engine_counts"):
                a, b = fit_line(n_arr, [r[f"{key}_s_per_step"] for r in scal["rows"]])
                scal[f"fit_{key}"] = {"fixed_us": a * 1e6, "per_prompt_ns": b * 1e9}
            results["scaling"] = scal

        # --- part 3: throughput at n_tp × G ----------------------------------------------------
        if not args.skip_throughput:
            tp = {"prompts": n_tp, "group_size": args.group_size, "dtype": args.dtype, "steps_timed": args.steps}
            big = SimConfig(
                n_prompts=n_tp,
                group_size=args.group_size,
                steps=args.steps + 1,
                device=args.device,
                dtype=args.dtype,
                replace=n_tp > 191_501,
                checkpoint_every=10**6,
            )
            variants = [
                (f"engine_{r}_{'with' if cf else 'no'}_closed_form", r, cf)
                for r in ("answers", "counts")
                for cf in (0, 1)
            ]
            for label, rollouts, cf in variants:
                folder = work / f"tp-{label}"
                run_simulation(
                    big.with_overrides({"closed_form_every": cf, "rollouts": rollouts}), folder, progress=False
                )
                wall = read_ledger(folder)["wall_s"].to_numpy()[1:]  # step 0 warms caches
                tp[label] = {
                    "s_per_step": float(np.median(wall)),
                    "answers_per_s": n_tp * args.group_size / float(np.median(wall)),
                }
                shutil.rmtree(folder)
            p0 = initial_solve_rates(big)
            for level in ("bare", "ledger"):
                t0 = time.perf_counter()
                numpy_arm(p0, "grpo", G=args.group_size, steps=args.steps, lr=0.5, max_draws=4, seed=0, level=level)
                t_np = time.perf_counter() - t0
                tp[f"numpy_{level}"] = {
                    "s_per_step": t_np / args.steps,
                    "answers_per_s": n_tp * args.group_size * args.steps / t_np,
                }
            results["throughput"] = tp
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"torch {torch.__version__}, {results['machine']['threads']} CPU thread(s), device {args.device}")
    print(f"first-run overhead (imports on the first optimizer step): {results['first_run_overhead_s']:.2f} s")
    if "campaign" in results:
        print(
            f"\nthree-arm paper campaign (6,000 prompts, G = 8, 150 steps; + {DRAWS}-draw deciles at 'paper' and 'ledger')"
        )
        print(f"{'level/rollouts':<16} {'engine s':>9} {'(steps)':>9} {'numpy s':>9} {'ratio':>7}")
        for mode, r in results["campaign"].items():
            print(
                f"{mode:<16} {r['engine_s']:>9.3f} {r['engine_steps_s']:>9.3f} {r['numpy_s']:>9.3f} {r['ratio']:>7.2f}"
            )
        print(
            "  (torch_floor: a bare torch autograd loop — sample, advantages, loss, backward, SGD; no ledger —\n"
            "   against the bare numpy loop: the cost of torch's per-operation dispatch alone)"
        )
    if "scaling" in results:
        sc = results["scaling"]
        print(f"\nper-step cost against N (GRPO, G = 8, 'paper' level, {sc['steps']} steps, best of {args.repeats})")
        print(f"{'N':>8} {'numpy ms':>9} {'answers ms':>11} {'ratio':>6} {'counts ms':>10} {'ratio':>6}")
        for r in sc["rows"]:
            print(
                f"{r['n_prompts']:>8,} {r['numpy_s_per_step'] * 1e3:>9.3f} {r['engine_answers_s_per_step'] * 1e3:>11.3f} "
                f"{r['ratio_answers']:>6.2f} {r['engine_counts_s_per_step'] * 1e3:>10.3f} {r['ratio_counts']:>6.2f}"
            )
        for key in ("numpy", "engine_answers", "engine_counts"):
            f = sc[f"fit_{key}"]
            print(f"  fit {key:<15} t = {f['fixed_us']:7.0f} µs + N × {f['per_prompt_ns']:6.1f} ns")
    if "throughput" in results:
        tp = results["throughput"]
        print(f"\nper-step throughput at {tp['prompts']:,} prompts × G = {tp['group_size']} ({tp['dtype']})")
        print(f"{'variant':<36} {'s/step':>10} {'answers/s':>14}")
        for key in [k for k in tp if k.startswith(("engine_", "numpy_"))]:
            print(f"{key:<36} {tp[key]['s_per_step']:>10.4f} {tp[key]['answers_per_s']:>14,.0f}")
    goals = {}
    if "campaign" in results:
        for r in ("answers", "counts"):  # goal: ≤ 1.5
            goals[f"paper size, full ledger, {r}: engine / numpy loop"] = results["campaign"][f"ledger/{r}"]["ratio"]
    if "throughput" in results:
        tp = results["throughput"]
        for r in ("answers", "counts"):  # goal: ≤ 1.0
            goals[f"{tp['prompts']:,} x {tp['group_size']}, per-step closed forms, {r}: engine / numpy loop"] = (
                tp[f"engine_{r}_with_closed_form"]["s_per_step"] / tp["numpy_ledger"]["s_per_step"]
            )
    if goals:
        results["goals"] = goals
        print("\nthe issue's ratios (same run)")
        for key, value in goals.items():
            print(f"  {key:<62} {value:6.2f}")
    out = Path(args.out)
    write_json(out, results)
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
