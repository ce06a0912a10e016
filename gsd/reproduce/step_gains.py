r"""Does what one run's steps gain at two batch sizes predict the knee of its steps-to-target curve?

The held-out grid (:func:`gsd.reproduce.noise_scale_training.heldout_grid`) found the gradient-norm noise
scale 1.8–13.4× above the knee of every curve at a fixed learning rate.  This test measures instead what
the knee is made of at the run's own learning rate: at every step, the exact gain in the hardest quarter's
mean solve rate Φ of the step Adam would take from its present state with a micro-batch's gradient
(B/2 generations) and with the step's (B), by forward passes at the moved weights
(:func:`gsd.live.noise_scale.gradient_noise_callback` with an objective).  Their ratio r of means over the
steps to the target gives K = (r − 1)/(1/b_small − r/b_big), the knee of McCandlish's law through the two
batch sizes (:func:`gsd.core.noise_scale.knee_from_step_gains`).

Fixed before it ran (the page "Group size in real training", section "The knee from what a step gains"):
the one run is B = 64, G = 4; a curve's prediction is the median of its five seeds' K; it is compared with
McCandlish's knee fitted to the curve's mean steps at B = 16 … 256 (within 2×), and per second B* from it
with the fastest B measured (within 1.5×).  Five curves are the held-out grid's (their knees were known
before this estimator existed; nothing in it is fitted to them, and the five B = 64 runs are the grid's own,
re-run with the measurement: the test checks their trajectories are the shipped ones), and one is a blind
curve, a task and a learning rate never run before (:data:`BLIND`), its B sweep run with this test.
"""

from __future__ import annotations

import math

import numpy as np

from .noise_scale_training import (
    BLIND_TASKS,
    Cell,
    Setting,
    cell_stats,
    heldout_check,
    law_b_star,
    law_steps,
)

#: The held-out grid's curves (task, lr), all at G = 4.
CURVES = (
    ("first_token", 5e-3),
    ("hard_own", 5e-3),
    ("mid_independent", 2e-3),
    ("mid_independent", 5e-3),
    ("shared", 5e-3),
)
#: The blind curve: a task (:data:`~gsd.reproduce.noise_scale_training.BLIND_TASKS`) and a learning rate
#: never run before this test.
BLIND = (next(iter(BLIND_TASKS)), 4e-3)
#: Generations per step of the one run.
ONE_B = 64
#: The B sweep of the blind curve.
SWEEP = (16, 32, 64, 128, 256)
#: Every training of the test measures the step gains.
SETTING = Setting(step_gains=True)

#: The levels test (fixed after the first test's miss on ``hard_own``, before it ran): four micro-batches
#: per step give the gains at B/4, B/2 and B, fitted together (:func:`gsd.core.noise_scale.knee_from_gain_levels`).
LEVELS_SETTING = Setting(step_gains=True, micro=4)
#: Its blind curve: a hard task and a learning rate never run before it.
LEVELS_BLIND = ("hard_independent", 6e-3)
#: The curve the first test missed, measured again at B = 64 with four micro-batches (not blind).
LEVELS_AGAIN = ("hard_own", 5e-3)


def grid(seeds=range(5)) -> list:
    """The test's trainings: B = 64 of the five held-out curves and the blind curve's B sweep, G = 4, in
    a fixed shuffle (machine load falls on every arm alike)."""
    cells = [Cell(t, ONE_B, 4, lr, s) for t, lr in CURVES for s in seeds]
    cells += [Cell(BLIND[0], B, 4, BLIND[1], s) for B in SWEEP for s in seeds]
    order = np.random.default_rng(0).permutation(len(cells))
    return [cells[i] for i in order]


def levels_grid(seeds=range(5)) -> list:
    """The levels test's trainings: the blind curve's B sweep and B = 64 of :data:`LEVELS_AGAIN`, G = 4, in
    a fixed shuffle."""
    cells = [Cell(LEVELS_BLIND[0], B, 4, LEVELS_BLIND[1], s) for B in SWEEP for s in seeds]
    cells += [Cell(LEVELS_AGAIN[0], ONE_B, 4, LEVELS_AGAIN[1], s) for s in seeds]
    order = np.random.default_rng(1).permutation(len(cells))
    return [cells[i] for i in order]


def _window(r: dict) -> list:
    """Indices of the measured steps up to the crossing of the target (every step when it never crosses;
    at least two)."""
    steps = cell_stats(r)["steps_to_target"]
    k = len(r["gain_big"]) if not np.isfinite(steps) else max(2, int(math.ceil(steps)))
    return [i for i, step in enumerate(r["gain_steps"]) if step <= k]


def run_knee_levels(r: dict, two: bool = False):
    """The run's knee from every level of a step of four micro-batches (B/4, B/2, B), or with ``two`` from
    B/2 and B only (the first test's estimator on the same runs)."""
    from ..core.noise_scale import knee_from_gain_levels, knee_from_step_gains

    rows = np.array([r["gain_levels"][i] for i in _window(r)])
    if two:
        return knee_from_step_gains(rows[:, -2], rows[:, -1], r["gain_sizes"][-2], r["gain_sizes"][-1])
    return knee_from_gain_levels(rows, r["gain_sizes"])


def run_knee(r: dict):
    """The run's :class:`~gsd.core.noise_scale.StepKnee` over its steps up to the crossing of the target
    (every step when it never crosses; at least two)."""
    from ..core.noise_scale import knee_from_step_gains

    keep = _window(r)
    return knee_from_step_gains(
        [r["gain_small"][i] for i in keep], [r["gain_big"][i] for i in keep], r["B"] // r["micro"], r["B"]
    )


def check(gain_records: list, sweep_records: list, task: str, lr: float, knee_of=None) -> dict:
    """One curve: its fitted knee and fastest B (:func:`heldout_check` on ``sweep_records``), each seed's K
    from its B = 64 run in ``gain_records``, the median, their ratios to the knee, B* from the median with
    the curve's t(B), the steps the median predicts at every B (S_min from the runs' own mean steps), and
    whether each re-run followed the sweep's run of the same cell step for step.  ``knee_of``: a run's
    knee (default :func:`run_knee`)."""
    h = heldout_check(sweep_records, task, lr)
    knee = h["fits"]["mccandlish"]["b_noise"]
    runs = sorted(
        (r for r in gain_records if (r["task"], r["lr"], r["B"], r["G"]) == (task, lr, ONE_B, 4)),
        key=lambda r: r["seed"],
    )
    ks = [(knee_of or run_knee)(r).knee for r in runs]
    med = float(np.median(ks)) if ks else math.nan
    same = {
        (r["seed"]): r["hardest"] for r in sweep_records if (r["task"], r["lr"], r["B"], r["G"]) == (task, lr, ONE_B, 4)
    }
    s64 = float(np.mean([cell_stats(r)["steps_to_target"] for r in runs])) if runs else math.nan
    ok = np.isfinite(med) and med > 0
    pred = law_steps("mccandlish", h["B"], s64 / (1 + med / ONE_B), med) if ok else np.full(len(h["B"]), math.nan)
    b_star = law_b_star("mccandlish", h["t_step"], h["t_rollout"], med)
    return {
        "task": task,
        "lr": lr,
        "knee": knee,
        "B": h["B"],
        "steps": h["steps"],
        "one_run_knees": ks,
        "median_knee": med,
        "ratio": med / knee if knee > 0 and np.isfinite(knee) else math.nan,
        "seeds_within_2x": int(sum(0.5 <= k / knee <= 2 for k in ks)) if knee > 0 else 0,
        "predicted_steps": np.asarray(pred, float).tolist(),
        "b_star": b_star,
        "b_star_curve": h["b_star_curve"],
        "fastest_B": h["fastest_B"],
        "same_trajectories": all(same.get(r["seed"]) == r["hardest"] for r in runs) if runs else False,
        "real_gain_ratio": _real_gain_ratio(runs),
    }


def _real_gain_ratio(runs) -> float:
    """Mean over steps of Φ's real change under Adam's step (momentum in) over the measured gain of the
    momentum-free step at B: how far the measured step is from the one taken."""
    real = [a - b for r in runs for a, b in zip(r["phi_after"], r["phi"], strict=False)]
    big = [g for r in runs for g in r["gain_big"][: len(r["phi_after"])]]
    return float(np.sum(real) / np.sum(big)) if big and np.sum(big) != 0 else math.nan


def tables(gain_records: list, sweep_records: list) -> str:
    """The page's table (markdown): every curve's knee, the one-run knees and their median, the ratio, the
    predicted steps and per second."""

    def num(x, fmt=".0f"):
        return "—" if x is None or not np.isfinite(x) else format(x, fmt)

    rows = [check(gain_records, sweep_records, t, lr) for t, lr in CURVES]
    rows.append(check(gain_records, gain_records, *BLIND))
    L = [
        "| task | lr | knee (fitted) | one run's K, seeds 0–4 | median | median ÷ knee | seeds within 2× "
        "| steps at B = 16 … 256 | predicted from the median | fastest B | B* from the median | same runs |",
        "|---" * 12 + "|",
    ]
    for c in rows:
        L.append(
            f"| {c['task']} | {c['lr']:g} | {num(c['knee'])} | {', '.join(num(k) for k in c['one_run_knees'])} | "
            f"{num(c['median_knee'])} | {num(c['ratio'], '.2f')} | {c['seeds_within_2x']} of {len(c['one_run_knees'])} | "
            f"{', '.join(num(v, '.1f') for v in c['steps'])} | {', '.join(num(v, '.1f') for v in c['predicted_steps'])} | "
            f"{c['fastest_B']} | {num(c['b_star'])} | {'yes' if c['same_trajectories'] else 'no'} |"
        )
    return "\n".join(L) + "\n"


def levels_tables(records: list, heldout_records: list) -> str:
    """The levels test's table (markdown): per curve, the knee fitted to its B sweep, each seed's K from the
    three levels and from B/2 and B only, their medians over the knee, and per second."""

    def num(x, fmt=".0f"):
        return "—" if x is None or not np.isfinite(x) else format(x, fmt)

    L = [
        "| task | lr | knee (fitted) | K from B/4, B/2, B: seeds 0–4 | median ÷ knee | K from B/2, B: seeds 0–4 "
        "| median ÷ knee | fastest B | B* from the three-level median |",
        "|---" * 9 + "|",
    ]
    for (task, lr), sweep in ((LEVELS_BLIND, records), (LEVELS_AGAIN, heldout_records)):
        c3 = check(records, sweep, task, lr, run_knee_levels)
        c2 = check(records, sweep, task, lr, lambda r: run_knee_levels(r, two=True))
        L.append(
            f"| {task} | {lr:g} | {num(c3['knee'])} | {', '.join(num(k) for k in c3['one_run_knees'])} | "
            f"{num(c3['ratio'], '.2f')} | {', '.join(num(k) for k in c2['one_run_knees'])} | {num(c2['ratio'], '.2f')} | "
            f"{c3['fastest_B']} | {num(c3['b_star'])} |"
        )
    return "\n".join(L) + "\n"


def main(argv=None) -> int:
    """``run OUT [WORKERS]`` (resumable), ``pack OUT RECORDS``, ``tables RECORDS SWEEP_RECORDS``; the levels
    test: ``run-levels OUT [WORKERS]``, ``tables-levels RECORDS HELDOUT_RECORDS``."""
    import sys

    from . import noise_scale_training as nst

    a = list(sys.argv[1:] if argv is None else argv)
    if a[:1] == ["run"] and len(a) in (2, 3):
        nst.run(a[1], grid(), SETTING, workers=int(a[2]) if len(a) == 3 else 2)
        return 0
    if a[:1] == ["run-levels"] and len(a) in (2, 3):
        nst.run(a[1], levels_grid(), LEVELS_SETTING, workers=int(a[2]) if len(a) == 3 else 2)
        return 0
    if a[:1] == ["tables-levels"] and len(a) == 3:
        print(levels_tables(nst.load_records(a[1]), nst.load_records(a[2])), end="")
        return 0
    if a[:1] == ["pack"] and len(a) == 3:
        nst.pack(nst.load_folder(a[1]), a[2])
        return 0
    if a[:1] == ["tables"] and len(a) == 3:
        print(tables(nst.load_records(a[1]), nst.load_records(a[2])), end="")
        return 0
    print(
        "usage: python -m gsd.reproduce.step_gains run OUT [WORKERS] | pack OUT RECORDS | tables RECORDS SWEEP_RECORDS"
    )
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
