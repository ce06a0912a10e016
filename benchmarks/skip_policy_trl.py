"""The live value policy against plain GRPO inside TRL 1.16.0's own GRPOTrainer, at equal generations.

gsd's tiny first-token task (:func:`gsd.reproduce.transformer.build_task`: exact p per prompt),
G fixed, every step the same number of groups (``copies`` per prompt on average).  Arms:

- ``grpo``: ``GRPOTrainer``, the dataset is every prompt ``copies`` times and each step generates
  for all of it (as ``gsd.reproduce.transformer.train_silent``);
- ``value``: ``GSDGRPOTrainer(gsd_tracker=GroupTracker(G, half_life="auto"), skip_policy="value")``,
  the dataset every prompt ``2·copies`` times, each step the same number of groups as ``grpo``
  chosen from twice as many candidates; ``value-mean``, ``value-c1.5``, ``value-update`` … the same
  with ``SkipPolicy(thompson=False)``, ``candidates=1.5``, ``value="update"`` (see ``_policy``).

Per step the exact p of every prompt is read from the model before the generation (the truth);
the hardest quarter is the quarter of prompts with the lowest initial p.  Prints one JSON line per
run and a summary; ``--out`` writes every run's record as JSON.

    PYTHONPATH=. python benchmarks/skip_policy_trl.py --seeds 0 1 2 --steps 30 --copies 2 --out runs/skip_policy.json
"""

from __future__ import annotations

import argparse
import copy
import json
import tempfile
import time

import numpy as np


def train(task, arm: str, *, G: int, copies: int, steps: int, lr: float, seed: int) -> dict:
    from datasets import Dataset
    from transformers import PrinterCallback, ProgressCallback, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from gsd.live import GroupTracker, GSDGRPOTrainer
    from gsd.reproduce.transformer import torch_threads, trl_settings

    right = {p: set(r) for p, r in zip(task.prompts, task.right)}
    index = {p: i for i, p in enumerate(task.prompts)}
    before, groups = [], []

    def first_token(prompts, completions, completion_ids, **kw):
        r = [float(len(c) > 0 and c[0] in right[p]) for p, c in zip(prompts, completion_ids)]
        groups.append([index[p] for p in prompts[::G]])
        return r

    class Exact(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            before.append(task.solve_rates())

    with torch_threads(1), tempfile.TemporaryDirectory() as out_dir:
        settings = trl_settings(
            task, G=G, rows=len(task.prompts) * copies * G, lr=lr, steps=steps, seed=seed, out_dir=out_dir
        )
        args = GRPOConfig(**settings)
        if arm == "grpo":
            kind, extra, rows = GRPOTrainer, {}, list(task.prompts) * copies
        else:
            kind, rows = GSDGRPOTrainer, list(task.prompts) * (2 * copies)
            policy = _policy(arm)
            extra = {"gsd_tracker": GroupTracker(G, half_life="auto"), "skip_policy": policy}
        tr = kind(
            model=task.model,
            reward_funcs=[first_token],
            args=args,
            callbacks=[Exact()],
            train_dataset=Dataset.from_dict({"prompt": rows}),
            processing_class=task.tokenizer,
            **extra,
        )
        for cb in (PrinterCallback, ProgressCallback):
            tr.remove_callback(cb)
        t0 = time.perf_counter()
        tr.train()
        seconds = time.perf_counter() - t0
    task.model.eval()
    out = {
        "arm": arm,
        "seconds": seconds,
        "p": [b.tolist() for b in before] + [task.solve_rates().tolist()],
        "groups": groups,
    }
    if arm != "grpo":
        out["skipped"] = [int(m["skipped"]) for m in tr.gsd_tracker.metrics]
        out["half_life"] = tr.gsd_tracker.half_life_choice
        s = tr.gsd_sampler
        out["decisions"] = [(rows_.tolist(), skip.tolist()) for rows_, skip in s.decisions]
        out["keys"] = s.keys
    return out


def _policy(arm: str):
    """``value`` (SkipPolicy's defaults) or ``value-<part>+<part>…``: ``mean`` (thompson=False),
    ``c<x>`` (candidates=x), else a value name."""
    from gsd.live import SkipPolicy

    if arm == "value":
        return "value"
    kw = {}
    for part in arm.split("-", 1)[1].split("+"):
        if part == "mean":
            kw["thompson"] = False
        elif part[0] == "c" and part[1:].replace(".", "").isdigit():
            kw["candidates"] = float(part[1:])
        else:
            kw["value"] = part
    return SkipPolicy(**kw)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--G", type=int, default=8)
    ap.add_argument("--copies", type=int, default=2)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--arms", nargs="+", default=["grpo", "value"])
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    from gsd.reproduce.transformer import build_task

    records = []
    for seed in a.seeds:
        task = build_task(a.prompts, seed=seed)
        p0 = task.solve_rates()
        hard = np.argsort(p0, kind="stable")[: a.prompts // 4]
        for arm in a.arms:
            r = train(copy.deepcopy(task), arm, G=a.G, copies=a.copies, steps=a.steps, lr=a.lr, seed=seed)
            p = np.asarray(r["p"])
            r.update(
                seed=seed,
                hard=hard.tolist(),
                p0=p0.tolist(),
                quartile=p[:, hard].mean(1).tolist(),
                arcsin=(2 * np.arcsin(np.sqrt(p))).mean(1).tolist(),
            )
            line = {k: r[k] for k in ("seed", "arm", "seconds")}
            line["hardest_quarter"] = [round(x, 3) for x in r["quartile"][:: max(1, a.steps // 6)]] + [
                round(r["quartile"][-1], 3)
            ]
            line["final_mean_arcsin"] = round(r["arcsin"][-1], 4)
            if "skipped" in r:
                line["skipped_total"] = sum(r["skipped"])
                line["half_life_end"] = r["half_life"]["half_life"]
                # Which prompts it skipped: by initial-p quartile (0 = hardest).
                quart = np.argsort(np.argsort(p0, kind="stable"), kind="stable") * 4 // a.prompts
                key_prompt = {k: task.prompts.index(k) for k in set(r["keys"])}
                turns = np.array([key_prompt[r["keys"][i]] for rows, _ in r["decisions"] for i in rows])
                skip = np.array([s for _, sk in r["decisions"] for s in sk], bool)
                line["skip_share_by_quartile"] = [round(float(skip[quart[turns] == q].mean()), 3) for q in range(4)]
            print(json.dumps(line), flush=True)
            records.append(r)
    for arm in a.arms:
        q = np.array([r["quartile"] for r in records if r["arm"] == arm])
        f = np.array([r["arcsin"][-1] for r in records if r["arm"] == arm])
        print(
            f"{arm}: hardest quarter by step (mean over {len(q)} seeds): "
            + " ".join(f"{x:.3f}" for x in q.mean(0)[:: max(1, a.steps // 6)])
            + f" final {q.mean(0)[-1]:.3f}; "
            f"final mean 2·arcsin√p {f.mean():.4f}"
        )
    gens = a.prompts * a.copies * a.G
    for target in (0.5, 0.8, 0.9):
        cells = []
        for arm in a.arms:
            # generations before the first step whose hardest-quarter mean reaches the target (None: not in the run)
            hit = [
                next((i * gens for i, x in enumerate(r["quartile"]) if x >= target), None)
                for r in records
                if r["arm"] == arm
            ]
            cells.append(f"{arm} {hit}")
        print(f"generations to hardest quarter {target}: " + "; ".join(cells))
    base = [r for r in records if r["arm"] == a.arms[0]]
    for arm in a.arms[1:]:
        mine = [r for r in records if r["arm"] == arm]
        for at in (a.steps // 3, 2 * a.steps // 3, a.steps):
            d = np.array([r2["quartile"][at] - r1["quartile"][at] for r1, r2 in zip(base, mine)])
            print(
                f"paired hardest-quarter difference {arm} − {a.arms[0]} after {at * gens} generations: "
                f"{d.round(3).tolist()}, mean {d.mean():.3f}"
            )
    if a.out:
        with open(a.out, "w") as fh:
            json.dump(records, fh)


if __name__ == "__main__":
    main()
