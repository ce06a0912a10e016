"""Benchmark of the math core against plain numpy evaluations of the same closed forms.

Run:  .venv/bin/python benchmarks/bench_core.py [--repeats 5] [--out bench_core.json]

Each figure is the median wall time over ``--repeats`` runs, measured in the same process as
its baseline, and reported as a ratio (baseline / ours; > 1 means gsd is faster):

1. the exact group-size plan (ε = 0.05) for all 215,608 Big-Math prompts; baseline: fidelity
   by full binomial sums over k = 0…G for every G = 2…G_max and every distinct p, first hit;
2. exact fidelity on 10,000 p × 14 group sizes up to 10,000; baseline: the full sum over
   k = 0…G (timed on a 200-p subset and compared per value, since the full grid takes minutes);
3. the silent rate on 10^7 values; baseline: ``p**G + (1 - p)**G``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import numpy as np
from scipy.stats import binom

import gsd


def median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def naive_fidelity(p, G):
    """φ by the full sum over k = 0…G for each (p, G) pair: the plain-numpy reference."""
    out = np.empty(np.broadcast_shapes(np.shape(p), np.shape(G)))
    pb, Gb = np.broadcast_arrays(p, G)
    for idx in np.ndindex(out.shape):
        g = int(Gb[idx])
        k = np.arange(g + 1)
        out[idx] = np.sum(binom.pmf(k, g, pb[idx]) * np.sqrt(k * (g - k)) / g) / np.sqrt(pb[idx] * (1 - pb[idx]))
    return out


def naive_plan(p, eps):
    """Scan G = 2, 3, … with full sums for each distinct interior p (vectorised over k and p)."""
    uniq = np.unique(p[(p > 0) & (p < 1)])
    found = np.zeros(uniq.shape, dtype=np.int64)
    G = 2
    while (found == 0).any():
        k = np.arange(G + 1)
        todo = found == 0
        pm = binom.pmf(k[None, :], G, uniq[todo][:, None])
        phi = (pm * np.sqrt(k * (G - k)) / G).sum(1) / np.sqrt(uniq[todo] * (1 - uniq[todo]))
        idx = np.nonzero(todo)[0]
        found[idx[phi >= 1 - eps]] = G
        G += 1
    return dict(zip(uniq, found))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", help="write the figures as JSON here")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    results = {"machine": platform.processor() or platform.machine(), "repeats": args.repeats}

    # 1. Big-Math plan.
    p = gsd.load_bigmath()
    ours = median_time(lambda: gsd.required_group_size(p, 0.05), args.repeats)
    base = median_time(lambda: naive_plan(p, 0.05), max(1, args.repeats // 2))
    plan = gsd.required_group_size(p, 0.05)
    ref = naive_plan(p, 0.05)
    interior = (p > 0) & (p < 1)
    agree = all(ref[x] == g for x, g in zip(p[interior][::997], plan[interior][::997]))
    results["bigmath_plan"] = dict(prompts=int(p.size), ours_s=ours, baseline_s=base, ratio=base / ours, agree=agree)

    # 2. Fidelity grid.
    pg = rng.uniform(1e-4, 1 - 1e-4, 10_000)
    Gs = np.unique(np.r_[2 ** np.arange(1, 14), 10_000])
    ours_grid = median_time(lambda: gsd.fidelity(pg[:, None], Gs[None, :]), max(1, args.repeats // 2))
    sub = pg[:200]
    ours_sub = median_time(lambda: gsd.fidelity(sub[:, None], Gs[None, :]), args.repeats)
    base_sub = median_time(lambda: naive_fidelity(sub[:, None], Gs[None, :]), 1)
    err = np.max(np.abs(gsd.fidelity(sub[:, None], Gs[None, :]) / naive_fidelity(sub[:, None], Gs[None, :]) - 1))
    results["fidelity_grid"] = dict(
        values=int(pg.size * Gs.size),
        group_sizes=Gs.tolist(),
        ours_full_grid_s=ours_grid,
        subset_values=int(sub.size * Gs.size),
        ours_subset_s=ours_sub,
        baseline_subset_s=base_sub,
        ratio=base_sub / ours_sub,
        max_rel_diff=float(err),
    )

    # 3. Silent rate.
    ps = rng.uniform(0, 1, 10_000_000)
    Gv = rng.integers(1, 1000, 10_000_000)
    ours_s = median_time(lambda: gsd.silent_rate(ps, Gv), args.repeats)
    base_s = median_time(lambda: ps**Gv + (1 - ps) ** Gv, args.repeats)
    results["silent_rate"] = dict(values=int(ps.size), ours_s=ours_s, baseline_s=base_s, ratio=base_s / ours_s)

    print(f"{'benchmark':<34}{'gsd (s)':>10}{'baseline (s)':>14}{'ratio':>8}")
    r = results["bigmath_plan"]
    print(
        f"{'Big-Math exact plan (215,608)':<34}{r['ours_s']:>10.3f}{r['baseline_s']:>14.3f}{r['ratio']:>8.1f}  agree={r['agree']}"
    )
    r = results["fidelity_grid"]
    print(
        f"{'fidelity, 200 p x 14 G':<34}{r['ours_subset_s']:>10.3f}{r['baseline_subset_s']:>14.3f}{r['ratio']:>8.1f}  max rel diff {r['max_rel_diff']:.1e}"
    )
    print(f"{'fidelity, 10,000 p x 14 G':<34}{r['ours_full_grid_s']:>10.3f}{'-':>14}{'':>8}")
    r = results["silent_rate"]
    print(f"{'silent rate, 1e7 values':<34}{r['ours_s']:>10.3f}{r['baseline_s']:>14.3f}{r['ratio']:>8.2f}")
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
