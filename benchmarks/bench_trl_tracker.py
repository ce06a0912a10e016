"""Overhead of gsd's GroupTracker inside a TRL run, per generation, against the reward functions' own time.

Run:  .venv/bin/python benchmarks/bench_trl_tracker.py [--generations 200] [--prompts-per-generation 64]
                                                       [--G 16] [--dataset 2048] [--out FILE.json]

TRL calls each reward function once per generation with the rows in group order and the dataset
columns as keyword arguments; this benchmark makes exactly those calls, without TRL or a model:
each generation draws ``--prompts-per-generation`` prompts (about 200 characters) of a
``--dataset``-prompt pool (solve rates from Beta(0.6, 0.9), a quarter of them 0), with ``--G``
completions of about 400 characters each (defaults: 64 × 16 = 1,024 rollouts).  Two reward functions of the usual kind: ``correct`` (the last number
of the completion, found by a regular expression, against the answer column) and ``fmt`` (a
regular-expression format check), weights 1 and 0.5, threshold 1.

Measured per generation (median and 90th percentile over the run, and at its start and end,
since the empirical-Bayes prior is refitted on every prompt seen so far):

* ``reward`` — the two functions unwrapped;
* ``tracked`` — the same calls through ``tracker.wrap`` (recording, grouping, the live
  predictions and metrics);
* ``sampler`` — one skip decision for a generation batch (``skip_above=0.95``, ``max_skips=4``);

and once at the end ``diagnosis`` (:meth:`GroupTracker.diagnosis`) and ``save``.
"""

from __future__ import annotations

import argparse
import platform
import random
import re
import string
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from gsd.io.atomic import write_json  # a benchmark's result file is never half-written
from gsd.live import GroupTracker, SkipSampler

NUMBER = re.compile(r"(-?\d+)(?!.*\d)", re.S)
FORMAT = re.compile(r"<answer>.*</answer>", re.S)


def correct(prompts, completions, answer, **kwargs):
    out = []
    for c, a in zip(completions, answer):
        m = NUMBER.search(c)
        out.append(1.0 if m and m.group(1) == a else 0.0)
    return out


def fmt(prompts, completions, **kwargs):
    return [1.0 if FORMAT.search(c) else 0.0 for c in completions]


class State:
    global_step = 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generations", type=int, default=200)
    ap.add_argument("--prompts-per-generation", type=int, default=64)
    ap.add_argument("--G", type=int, default=16)
    ap.add_argument("--dataset", type=int, default=2048)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    rng = random.Random(0)
    nrng = np.random.default_rng(0)
    words = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 8))) for _ in range(2000)]
    pool = [" ".join(rng.choices(words, k=35))[:200] + f" #{i}" for i in range(args.dataset)]
    answers = [str(rng.randint(0, 99)) for _ in range(args.dataset)]
    solve = nrng.beta(0.6, 0.9, args.dataset)
    solve[nrng.random(args.dataset) < 0.25] = 0.0  # a quarter of the questions out of reach: skipped
    B, G = args.prompts_per_generation, args.G
    tracker = GroupTracker(G, weights=[1.0, 0.5], threshold=1.0)
    tracked = tracker.wrap([correct, fmt])
    sampler = SkipSampler(
        [tracker.key(p) for p in pool],
        tracker,
        batch_size=B,
        repeat_count=1,
        shuffle=True,
        seed=0,
        skip_above=0.95,
        max_skips=4,
    )
    state = State()
    times = {"reward": [], "tracked": [], "sampler": []}
    for gen in range(args.generations):
        t0 = time.perf_counter()
        idx = sampler.next_batch()
        times["sampler"].append(time.perf_counter() - t0)
        rows = np.repeat(idx, G)
        right = nrng.random(rows.size) < solve[rows]
        filler = " ".join(rng.choices(words, k=60))[:380]
        completions = [f"{filler} <answer>{answers[i] if r else '-1'}</answer>" for i, r in zip(rows.tolist(), right)]
        kw = {
            "prompts": [pool[i] for i in rows.tolist()],
            "completions": completions,
            "completion_ids": [[0]] * rows.size,
            "answer": [answers[i] for i in rows.tolist()],
            "trainer_state": state,
        }
        t0 = time.perf_counter()
        for f in (correct, fmt):
            f(**kw)
        times["reward"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for f in tracked:
            f(**kw)
        times["tracked"].append(time.perf_counter() - t0)
        sampler.take_skipped()
        state.global_step += 1
    t0 = time.perf_counter()
    dx = tracker.diagnosis()
    t_dx = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        tracker.save(Path(tmp) / "run.parquet")
        t_save = time.perf_counter() - t0
    r = np.array(times["reward"]) * 1e3
    w = np.array(times["tracked"]) * 1e3
    s = np.array(times["sampler"]) * 1e3
    over = w - r
    q = max(1, args.generations // 10)
    result = {
        "rollouts_per_generation": B * G,
        "generations": args.generations,
        "dataset": args.dataset,
        "prompts_seen": int(dx.summary["prompts"]),
        "rollouts": int(dx.summary["rollouts"]),
        "reward_ms": {"median": float(np.median(r)), "p90": float(np.percentile(r, 90))},
        "tracked_ms": {"median": float(np.median(w)), "p90": float(np.percentile(w, 90))},
        "overhead_ms": {
            "median": float(np.median(over)),
            "p90": float(np.percentile(over, 90)),
            "first_tenth": float(np.median(over[:q])),
            "last_tenth": float(np.median(over[-q:])),
        },
        "overhead_share_of_reward": float(np.median(over) / np.median(r)),
        "sampler_ms": {"median": float(np.median(s)), "p90": float(np.percentile(s, 90))},
        "skipped_prompts": int(sampler.skipped),
        "turns": int(sampler.turns),
        "diagnosis_s": t_dx,
        "save_s": t_save,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
    }
    print(f"{B * G} rollouts per generation, {args.generations} generations, {result['prompts_seen']} prompts seen")
    print(f"reward functions   {result['reward_ms']['median']:8.2f} ms median ({result['reward_ms']['p90']:.2f} p90)")
    print(
        f"tracker overhead   {result['overhead_ms']['median']:8.2f} ms median ({result['overhead_ms']['p90']:.2f} p90;"
        f" {result['overhead_ms']['first_tenth']:.2f} in the first tenth, {result['overhead_ms']['last_tenth']:.2f}"
        f" in the last) = {100 * result['overhead_share_of_reward']:.0f} % of the reward functions' time"
    )
    print(
        f"skip decision      {result['sampler_ms']['median']:8.2f} ms median per batch "
        f"({result['skipped_prompts']} of {result['turns']} turns skipped)"
    )
    print(f"diagnosis {t_dx:.2f} s, save {t_save:.2f} s for {result['rollouts']} rollouts")
    if args.out:
        write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
