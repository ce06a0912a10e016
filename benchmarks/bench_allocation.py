"""Benchmark of the budget allocator against baselines measured in the same run.

Run:  .venv/bin/python benchmarks/bench_allocation.py [--prompts 1000000] [--repeats 3] [--out FILE]

1. 10^6 prompts with logged counts (n ∈ {8, 16, 64} rollouts each, solve rates from a Beta(0.5, 1)
   population), posteriors by empirical Bayes, budget 16 rollouts per prompt, grid 2…512 step 1,
   for every value.  Baseline: evaluating the uniform plan G = 16 (``allocation_value`` on every
   prompt), i.e. what a user pays just to score the plan they already have.
2. A plain heap greedy (one marginal gain at a time, ``heapq``, values from ``allocation_value``)
   on a 2,000-prompt subset, against the allocator on the same subset: the ratio, and the two
   objectives (the heap greedy is optimal here because the rows are concave with g_min = 2).
3. 6,000 prompts with distinct known p (the simulator's oracle mode) at g_max = 64 and 512.
4. Issue 27's two planner cases, in process as ``gsd plan`` runs them (``allocate_with_advice``:
   one value table for the plan and its uniform advice): 4 known rates at g_max = 20,000 with the
   advice (77 s on the shared machine before the fix), and 10^6 logged (k, n) rows with n uniform
   on 1 … 64 (46 s before).  Baseline in the same run: the plan alone followed by the advice
   alone (``allocate_group_sizes`` + ``uniform_group_size_advice``, the table built twice).
Each figure is the median wall time of ``--repeats`` runs.
"""

from __future__ import annotations

import argparse
import heapq
import json
import platform
import statistics
import time

import numpy as np

import gsd


def median_time(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def heap_greedy(post, budget, value, g_min, g_max):
    """Marginal gains one at a time: skip → g_min (cost g_min), then +1 (cost 1); best gain per rollout first."""
    n = post.a.size
    G = np.zeros(n, dtype=np.int64)
    cur = np.zeros(n)
    nxt = gsd.allocation_value(post, g_min, value)
    heap = [(-v / g_min, i) for i, v in enumerate(nxt)]
    heapq.heapify(heap)
    left = budget
    while heap and left > 0:
        neg, i = heapq.heappop(heap)
        cost = g_min if G[i] == 0 else 1
        if neg >= 0 or cost > left:
            continue
        G[i] = g_min if G[i] == 0 else G[i] + 1
        cur[i] = cur[i] - neg * cost
        left -= cost
        if G[i] < g_max:
            one = gsd.BetaPosterior(post.a[i], post.b[i], post.prior)
            heapq.heappush(heap, (-(float(gsd.allocation_value(one, G[i] + 1, value)) - cur[i]), i))
    return G, float(cur.sum())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument("--only-plan-cli", action="store_true", help="only section 4 (issue 27's two planner cases)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    N = args.prompts
    results = {"machine": platform.processor() or platform.machine(), "prompts": N}
    if not args.only_plan_cli:
        _sections_1_to_3(args, rng, N, results)
    _plan_cli_cases(args, rng, N, results)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=2)


def _sections_1_to_3(args, rng, N, results):
    p = rng.beta(0.5, 1.0, N)
    n = rng.choice([8, 16, 64], N)
    k = rng.binomial(n, p)
    t_post, post = median_time(lambda: gsd.posterior_from_counts(k, n), args.repeats)
    distinct = np.unique(np.stack([post.a, post.b]), axis=1).shape[1]
    print(f"{N:,} prompts, {distinct} distinct posteriors; posterior_from_counts {t_post:.3f} s")
    results.update(distinct=distinct, posterior_s=t_post, values={})
    t_uniform, _ = median_time(lambda: gsd.allocation_value(post, 16, "update"), args.repeats)
    print(f"baseline: score the uniform plan G = 16 (update): {t_uniform:.3f} s")
    for value in gsd.ALLOCATION_VALUES:
        look = {"lr": 0.5, "horizon": 150} if value in gsd.HORIZON_VALUES else {}
        t, plan = median_time(
            lambda value=value, look=look: gsd.allocate_group_sizes(post, 16 * N, value=value, **look), args.repeats
        )
        print(
            f"allocate {value:<9}: {t:.3f} s  (uniform scoring / allocate = {t_uniform / t:.2f}), "
            f"exact={plan.exact}, spent={plan.spent:,}, skipped={int((plan.group_size == 0).sum()):,}"
        )
        results["values"][value] = {"seconds": t, "exact": plan.exact, "ratio_vs_uniform_scoring": t_uniform / t}

    m = 2_000
    sub = gsd.BetaPosterior(post.a[:m], post.b[:m], post.prior)
    t0 = time.perf_counter()
    Gh, vh = heap_greedy(sub, 16 * m, "update", 2, 512)
    t_heap = time.perf_counter() - t0
    t_ours, plan = median_time(lambda: gsd.allocate_group_sizes(sub, 16 * m, value="update"), args.repeats)
    print(
        f"heap greedy on {m:,} prompts: {t_heap:.2f} s, allocator {t_ours:.3f} s: {t_heap / t_ours:.0f}x; "
        f"objectives {vh:.10g} vs {plan.total:.10g} (rel. diff {abs(vh - plan.total) / plan.total:.1e})"
    )
    results["heap"] = {
        "prompts": m,
        "heap_s": t_heap,
        "ours_s": t_ours,
        "ratio": t_heap / t_ours,
        "heap_total": vh,
        "ours_total": plan.total,
    }

    q = rng.beta(0.5, 1.0, 6000)
    for gmax in (64, 512):
        t, plan = median_time(
            lambda gmax=gmax: gsd.allocate_group_sizes(q, 6000 * 16, value="update", g_max=gmax), args.repeats
        )
        print(f"6,000 distinct p, g_max = {gmax}: {t:.3f} s")
        results[f"distinct_p_gmax{gmax}_s"] = t


def _plan_cli_cases(args, rng, N, results):
    rates = np.array([0.05, 0.3, 0.5, 0.9])
    n64 = rng.integers(1, 65, args.prompts)
    post64 = gsd.posterior_from_counts(rng.binomial(n64, rng.beta(0.5, 1.0, n64.size)), n64)
    for name, src, budget, gmax in (("rates_gmax20000", rates, 40_000, 20_000), ("counts_n64", post64, 16 * N, 512)):
        kw = dict(value="update", g_max=gmax)
        t_two, _ = median_time(
            lambda src=src, budget=budget, kw=kw: (
                gsd.allocate_group_sizes(src, budget, **kw),
                gsd.uniform_group_size_advice(src, budget, **kw),
            ),
            args.repeats,
        )
        t_one, _ = median_time(
            lambda src=src, budget=budget, kw=kw: gsd.allocate_with_advice(src, budget, **kw), args.repeats
        )
        print(f"plan + advice, {name}: {t_one:.2f} s shared table, {t_two:.2f} s two tables ({t_two / t_one:.2f}x)")
        results[f"plan_advice_{name}"] = {"shared_s": t_one, "two_tables_s": t_two, "ratio": t_two / t_one}


if __name__ == "__main__":
    main()
