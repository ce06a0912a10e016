"""The paper's campaign workload as a plain numpy + matplotlib script (the speed reference of
``benchmarks/bench_campaign.py``; it imports nothing from gsd).

    python benchmarks/paper_workload.py --out runs/paper_workload [--draws 400]

What the paper's own loop does (see docs/theory.md, section "The paper's definitions"): 6,000
tabular prompts from the interior Big-Math solve rates clipped to [0.02, 0.98], G = 8, 150
steps, the analytic gain Δz = 0.5·σ (GRPO, DAPO with ≤ 4 draws) or 0.5·σ² (Dr.GRPO) per step;
per step the silent fraction against the mean of p^G + (1−p)^G, the mean p of each initial
quartile and the groups drawn; once, the mean update per decile of initial p over ``--draws``
independent groups against the closed forms Σ_k Binom(k; G, p)·σ(k) and p(1−p)(1 − 1/G);
one three-panel figure.  It writes ``summary.json`` and ``figure.png`` to ``--out``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from gsd.io.atomic import write_json  # a benchmark's result file is never half-written

HISTOGRAM = Path(__file__).resolve().parents[1] / "data" / "bigmath_solve_rate_histogram.csv"


def population(n, seed):
    k, _, count = np.loadtxt(HISTOGRAM, delimiter=",", skiprows=1, unpack=True)
    p = np.repeat(k / k.max(), count.astype(np.int64))
    p = p[(p > 0) & (p < 1)]
    return np.clip(np.random.default_rng(seed).choice(p, size=n, replace=False), 0.02, 0.98)


def arm(p0, method, G, steps, lr, draws_max, rng):
    z = np.log(p0 / (1 - p0))
    quart = np.empty(p0.size, dtype=np.int64)
    quart[np.argsort(p0, kind="stable")] = np.arange(p0.size) * 4 // p0.size
    D = draws_max if method == "dapo" else 1
    silent_obs, silent_pred, hard_q, groups = [], [], [], 0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-z))
        k = rng.binomial(G, p, size=(D, p.size))
        silent = (k == 0) | (k == G)
        first = np.argmax(~silent, axis=0)
        kept = ~silent.all(axis=0)
        kk = k[first, np.arange(p.size)]
        groups += int(np.where(kept, first + 1, D).sum())
        sigma = np.where(kept, np.sqrt(kk * (G - kk)) / G, 0.0)
        silent_obs.append(silent[0].mean())
        silent_pred.append(np.mean(p**G + (1 - p) ** G))
        hard_q.append(np.bincount(quart, weights=p, minlength=4)[0] / (quart == 0).sum())
        z = z + lr * (sigma**2 if method == "dr_grpo" else sigma)
    obs, pred = np.array(silent_obs), np.array(silent_pred)
    r2 = 1 - ((obs - pred) ** 2).sum() / ((obs - obs.mean()) ** 2).sum()
    return {"silent_obs": obs, "silent_pred": pred, "hard_q": hard_q, "groups": groups, "r2": float(r2)}


def deciles(p0, G, draws, rng):
    dec = np.minimum((p0 * 10).astype(np.int64), 9)
    k = rng.binomial(G, p0, size=(draws, p0.size))
    sigma = np.sqrt(k * (G - k)) / G
    kk = np.arange(G + 1)
    comb = np.array([float(np.prod(np.arange(G - j + 1, G + 1)) / np.prod(np.arange(1, j + 1))) for j in kk])
    pmf = comb * p0[:, None] ** kk * (1 - p0[:, None]) ** (G - kk)
    closed = {"grpo": pmf @ (np.sqrt(kk * (G - kk)) / G), "dr_grpo": p0 * (1 - p0) * (1 - 1 / G)}
    out = {}
    for method, g in (("grpo", sigma.mean(0)), ("dr_grpo", (sigma**2).mean(0))):
        m = np.bincount(dec, weights=g, minlength=10)
        c = np.bincount(dec, weights=closed[method], minlength=10)
        out[method] = (m / m.sum(), c / c.sum())
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--draws", type=int, default=400)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    p0 = population(6000, 0)
    arms = {m: arm(p0, m, 8, 150, 0.5, 4, rng) for m in ("grpo", "dr_grpo", "dapo")}
    dec = deciles(p0, 8, args.draws, rng)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b, c) = plt.subplots(1, 3, figsize=(15, 4.6))
    for name, r in arms.items():
        a.plot(r["silent_obs"], ".", ms=3)
        a.plot(r["silent_pred"], "-", label=f"{name} R² = {r['r2']:.4f}")
        c.plot(r["hard_q"], label=name)
    for i, (name, (m, cf)) in enumerate(dec.items()):
        b.bar(np.arange(10) + 0.4 * i - 0.2, m, width=0.4, label=name)
        b.plot(np.arange(10) + 0.4 * i - 0.2, cf, "k_")
    for ax in (a, b, c):
        ax.legend(fontsize=8)
    fig.savefig(out / "figure.png", dpi=150)
    summary = {
        name: {"r2": r["r2"], "groups": r["groups"], "hard_q_final": r["hard_q"][-1]} for name, r in arms.items()
    }
    summary["dapo_cost"] = arms["dapo"]["groups"] / arms["grpo"]["groups"]
    write_json(out / "summary.json", summary)


if __name__ == "__main__":
    main()
