"""gsd's group-size advice against the group sizes that learned fastest in TRL training.

For each task and seed of `gsd group-size-training`'s full size, the model
(:func:`gsd.group_size_advice`) is given the initial exact p of the task's prompts, at the run's
prompts per step (protocol "prompts") or generations per step (protocol "generations"), under
Adam at its default noise-dominated limit (ν = ∞), at ν = 1, and under SGD. Its predicted speed of
each uniform G relative to G = 2 is set beside the measured one: generations to the hardest-quarter
target at G = 2 over those at G (mean over seeds, from the summary the command wrote), so 1 means
"as fast as G = 2" and 0.5 "twice the generations".

    python benchmarks/advice_vs_training.py [--summary docs/group_size_training_summary.csv]

Needs torch and TRL's stack (it builds the tasks); about a minute on 2 cores.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

import gsd
from gsd.reproduce.group_size_training import FULL, TASKS
from gsd.reproduce.transformer import build_task

MODELS = {
    "adam ν=∞ (default)": {"optimizer": "adam"},
    "adam ν=1": {"optimizer": "adam", "score_noise": 1.0},
    "sgd": {"optimizer": "sgd"},
}


def predicted(p0: np.ndarray, protocol: str, **model) -> dict:
    held = (
        {"prompts_per_step": FULL.prompts_per_step}
        if protocol == "prompts"
        else {"generations_per_step": FULL.generations_per_step}
    )
    adv = gsd.group_size_advice(p0, hold=protocol, g_grid=list(FULL.group_sizes), **held, **model)
    per_gen = adv.table.set_index("G")["progress_per_generation"]
    return {"advised": adv.advised_G_per_generation, **{G: float(per_gen[G] / per_gen[2]) for G in FULL.group_sizes}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--summary", default="docs/group_size_training_summary.csv")
    args = ap.parse_args(argv)
    summary = pd.read_csv(args.summary)
    uni = summary[summary.arm == "uniform"]
    p0 = {
        (t, s): build_task(
            FULL.n_prompts,
            variant=FULL.variant,
            max_len=FULL.max_len,
            seed=s,
            pretrain_steps=FULL.pretrain_steps,
            **TASKS[t],
        ).solve_rates()
        for t in FULL.tasks
        for s in FULL.seeds
    }
    rows = []
    for task in FULL.tasks:
        for protocol in ("prompts", "generations"):
            for name, model in MODELS.items():
                preds = [predicted(np.asarray(p0[(task, s)], float), protocol, **model) for s in FULL.seeds]
                row = {
                    "task": task,
                    "protocol": protocol,
                    "source": f"model, {name}",
                    "best G": "/".join(sorted({str(p["advised"]) for p in preds})),
                }
                row.update({f"G={G}": np.mean([p[G] for p in preds]) for G in FULL.group_sizes})
                rows.append(row)
            for lr in FULL.lrs:
                for target in ("0.5", "0.8"):
                    m = uni[(uni.task == task) & (uni.protocol == protocol) & (uni.lr == lr)].set_index("G")
                    full = m[f"reached_{target}"] == m["seeds"]
                    gens = m[f"gens_to_{target}"].where(full)
                    row = {
                        "task": task,
                        "protocol": protocol,
                        "source": f"TRL lr {lr:g}, to {target}",
                        "best G": str(int(gens.idxmin())) if gens.notna().any() else "—",
                    }
                    row.update({f"G={G}": gens[2] / gens[G] if G in gens.index else np.nan for G in FULL.group_sizes})
                    rows.append(row)
    table = pd.DataFrame(rows)
    print(table.to_markdown(index=False, floatfmt=".2f") if _has_tabulate() else table.to_string(index=False))
    return 0


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(main())
