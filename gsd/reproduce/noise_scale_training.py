r"""Does the run's own noise scale predict how the batch size trades steps for generations?  TRL 1.16.0's
``GRPOTrainer`` on tiny tasks with exact solve rates, over generations per step B, G and learning rate.

McCandlish et al. (2018, arXiv 1812.06162): with the learning rate tuned at each B, the optimizer steps S
and the generations E = S·B to a target follow

.. math::  S = S_{min}\,(1 + B_{noise}/B), \qquad E = E_{min}\,(1 + B/B_{noise}),

with B_noise = tr(Σ)/‖G‖² the batch at which a step is half noise.  Every training here records the
gradient norms of its two micro-batches and of the step (``gradient_accumulation_steps=2``, each
micro-batch its own generation call: :mod:`gsd.live.noise_scale`), so B_noise is measured inside each
run (:func:`gsd.core.noise_scale.noise_scale_from_norms`) and can be set against the steps-to-target
the other runs took.

Every per-training record is kept (:func:`pack` writes them to one gzip'd JSON-lines file) and the
summary is recomputed from it (:func:`summary`, ``python -m gsd.reproduce.noise_scale_training summary
RECORDS CSV``).  The trainings run interleaved in one process pool (a fixed shuffle of the cells), so the
machine's load falls on every arm alike; each record holds TRL's ``step_time``, the wall time and the
process's CPU time.
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError
from .group_size_training import TASKS as BASE_TASKS
from .group_size_training import hardest_quarter, paired_interval

#: The tasks: the two of the group-size page and ``hard_own``, every prompt its own token with a teacher's
#: solve rate in [0, 0.4] (a population with no easy prompts; its hardest quarter starts near 0).
TASKS: dict[str, dict[str, Any]] = {**BASE_TASKS, "hard_own": {"structure": "own", "p_range": (0.0, 0.4)}}
#: The held-out task of the second grid (:func:`heldout_grid`), designed and fixed before it ran: every
#: prompt its own token, the teacher's solve rates in [0.1, 0.6], and answer length independent of
#: correctness (``variant="independent"``; the other tasks' right answers are short).
HELDOUT_TASKS: dict[str, dict[str, Any]] = {
    "mid_independent": {"structure": "own", "p_range": (0.1, 0.6), "variant": "independent"}
}
#: The task of the step-gain test's blind curve (:mod:`gsd.reproduce.step_gains`), fixed before it ran:
#: prompts of shared features (learning one moves others) with answer length independent of correctness.
BLIND_TASKS: dict[str, dict[str, Any]] = {
    "shared_independent": {"structure": "shared", "variant": "independent"},
    # the levels test's blind curve (:data:`gsd.reproduce.step_gains.LEVELS_BLIND`): hard prompts, answer
    # length independent of correctness
    "hard_independent": {"structure": "own", "p_range": (0.0, 0.3), "variant": "independent"},
}
#: Learning rates of the second grid: never run or quoted before it.
HELDOUT_LRS = (2e-3, 5e-3)
#: Hardest-quarter target of the steps-to-target curves.
TARGET = 0.8
#: The reference cell every other is paired against (same task and seed).
REFERENCE = {"B": 64, "G": 4, "lr": 3e-3}
#: A training stops once its hardest quarter reaches this (above :data:`TARGET`, so the crossing of the
#: target is always between two logged steps) or at its budget.
STOP = 0.9
#: Micro-batches per step (each its own generation call): the two batch sizes of the noise estimate.
MICRO = 2


@dataclass(frozen=True)
class Setting:
    """The size of every training of a grid."""

    n_prompts: int = 64
    budget: int = 4096  # generations per training
    max_len: int = 4
    pretrain_steps: int = 150
    step_gains: bool = False  # measure each step's gain in the hardest quarter at B/micro … B
    micro: int = MICRO  # micro-batches per step, each its own generation call


@dataclass(frozen=True)
class Cell:
    task: str
    B: int
    G: int
    lr: float
    seed: int

    @property
    def name(self) -> str:
        return f"{self.task}__B{self.B}__G{self.G}__lr{self.lr:g}__seed{self.seed}.json"


def heldout_grid(seeds=range(5)) -> list:
    """The second grid, fixed before it ran (docs/group_size_training.md says what it tests): the
    held-out task ``mid_independent`` at B ∈ {16, 32, 64, 128, 256}, G = 4, at both held-out learning
    rates (2e-3, 5e-3); the three first tasks at the same five B, G = 4, lr 5e-3; then G = 2 and 8 at
    B = 64 on the held-out task at lr 2e-3.  Every training records Adam's preconditioned gradient norms
    beside the plain ones.  Tiers in a fixed shuffle, as :func:`grid`."""
    held = next(iter(HELDOUT_TASKS))
    Bs = (16, 32, 64, 128, 256)
    tiers = [
        lambda s: [Cell(held, B, 4, lr, s) for B in Bs for lr in HELDOUT_LRS],
        lambda s: [Cell(t, B, 4, 5e-3, s) for t in TASKS for B in Bs],
        lambda s: [Cell(held, 64, G, 2e-3, s) for G in (2, 8)],
    ]
    rng = np.random.default_rng(20261207)
    out = []
    for tier in tiers:
        cells = sorted({c for s in seeds for c in tier(s)}, key=lambda c: c.name)
        out += [cells[i] for i in rng.permutation(len(cells))]
    return out


def grid(seeds=range(5), tasks=tuple(TASKS)) -> list:
    """The cells run for docs/group_size_training.md, in the order they run: first the batch sweep (per
    task and seed, B ∈ {16, 32, 64, 128, 256} at G = 4, lr 3e-3), then lr scaled as √B from the reference
    (1.5e-3 at B = 16, 6e-3 at B = 256), then G = 2 and 8 at B = 64, then lr 1e-3 and 1e-2 at B = 64; within
    each tier a fixed shuffle, so a run cut short holds whole tiers and the machine's load falls on every
    arm of a tier alike."""
    tiers = [
        lambda t, s: [Cell(t, B, 4, 3e-3, s) for B in (16, 32, 64, 128, 256)],
        lambda t, s: [Cell(t, 16, 4, 1.5e-3, s), Cell(t, 256, 4, 6e-3, s)],
        lambda t, s: [Cell(t, 64, G, 3e-3, s) for G in (2, 8)],
        lambda t, s: [Cell(t, 64, 4, lr, s) for lr in (1e-3, 1e-2)],
    ]
    rng = np.random.default_rng(20261206)
    out = []
    for tier in tiers:
        cells = sorted({c for t in tasks for s in seeds for c in tier(t, s)}, key=lambda c: c.name)
        out += [cells[i] for i in rng.permutation(len(cells))]
    return out


_TASKS: dict = {}


def _task(name, seed, st: Setting, cache=None):
    """The task of (name, seed), built once per process, and once per run folder when ``cache`` (a
    folder) is given: built tasks are pickled there and read back by the other workers."""
    import pickle

    from .transformer import build_task

    key = (name, seed, st)
    path = None if cache is None else Path(cache) / f"{name}__seed{seed}__{st.n_prompts}_{st.pretrain_steps}.pkl"
    if key not in _TASKS and path is not None and path.exists():
        _TASKS[key] = pickle.loads(path.read_bytes())
    if key not in _TASKS:
        kw = {"variant": "correlated", **{**TASKS, **HELDOUT_TASKS, **BLIND_TASKS}[name]}
        _TASKS[key] = build_task(st.n_prompts, max_len=st.max_len, seed=seed, pretrain_steps=st.pretrain_steps, **kw)
        if path is not None:
            from ..io.atomic import write_atomic

            write_atomic(path, pickle.dumps(_TASKS[key]))
    return _TASKS[key]


def train_cell(cell: Cell, st: Setting = Setting(), cache=None) -> dict:
    """One training of ``cell``: up to ``st.budget`` generations (stopped at :data:`STOP`) at B per step (``st.micro`` generation calls of
    B/st.micro each, gradient clipping off so the step is the micro-batches' mean), TRL's GRPO loss."""
    import copy
    import time

    from ..live.noise_scale import gradient_noise_callback
    from .transformer import train_silent

    if cell.B % (st.micro * cell.G) or st.budget % cell.B:
        raise InputError(f"B = {cell.B} must be a multiple of {st.micro}·G and divide the budget {st.budget}")
    task = copy.deepcopy(_task(cell.task, cell.seed, st, cache))
    p0 = task.solve_rates()
    hard = hardest_quarter(p0)
    cb = gradient_noise_callback(_hardest_objective(task, hard) if st.step_gains else None)
    stop = _stop_callback(task, hard)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    t = train_silent(
        task,
        "grpo",
        G=cell.G,
        steps=st.budget // cell.B,
        lr=cell.lr,
        seed=cell.seed,
        prompts_per_step=cell.B // cell.G,
        args_kwargs={
            "per_device_train_batch_size": cell.B // st.micro,
            "gradient_accumulation_steps": st.micro,
            "steps_per_generation": 1,
            "max_grad_norm": 0.0,
        },
        callbacks=[cb, stop],
    )
    P = np.array([s["p"] for s in t["steps"]] + [t["p_final"]])
    rec = cb.record
    return {
        **asdict(cell),
        **asdict(st),
        "micro": st.micro,
        "p0": p0.tolist(),
        "hardest": P[:, hard].mean(1).tolist(),
        "arcsin": (2 * np.arcsin(np.sqrt(np.clip(P, 0, 1)))).mean(1).tolist(),
        "generations": [s["generations"] for s in t["steps"]],
        "step_time": [s["step_time"] for s in t["steps"]],
        "wall_total": time.perf_counter() - wall0,
        "cpu_total": time.process_time() - cpu0,
        "trl_grad_norm": t["grad_norm"],
        "small_sq": rec.small_sq,
        "big_sq": rec.big_sq,
        "norm_steps": rec.steps,
        "small_sq_adam": rec.small_sq_adam,
        "big_sq_adam": rec.big_sq_adam,
        "norm_steps_adam": rec.steps_adam,
        **(
            {
                "phi": rec.phi,
                "gain_small": rec.gain_small,
                "gain_big": rec.gain_big,
                "gain_levels": rec.gain_levels,
                "gain_sizes": rec.gain_sizes,
                "phi_after": rec.phi_after,
                "gain_steps": rec.steps_gain,
            }
            if st.step_gains
            else {}
        ),
    }


def _hardest_objective(task, hard):
    """Φ = the hardest quarter's mean exact solve rate, the quantity whose crossing of :data:`TARGET` is
    counted: the objective of the step-gain measurement (the model passed is the task's own)."""
    import torch

    index = torch.as_tensor(hard)

    def phi(model):
        if model is not task.model:
            raise InputError("the objective measures the task's own model")
        return task.solve_rates(with_grad=True)[index].mean()

    return phi


def _stop_callback(task, hard):
    """Stops the training once the hardest quarter's mean exact p reaches :data:`STOP`."""
    from transformers import TrainerCallback

    class Stop(TrainerCallback):
        def on_step_end(self, args, state, control, **kw):
            if task.solve_rates()[hard].mean() >= STOP:
                control.should_training_stop = True

    return Stop()


def _worker(args):
    import torch

    torch.set_num_threads(1)
    cell, st, folder = args
    from ..io.atomic import write_json

    r = train_cell(cell, st, Path(folder) / "tasks")
    write_json(Path(folder) / cell.name, r)
    return cell.name


def run(out, cells=None, st: Setting = Setting(), *, workers: int = 2, progress: bool = True) -> list:
    """Every cell not yet in the folder ``out`` (locked while in use), ``workers`` processes taking
    them in ``cells``' order; returns every record there."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from tqdm.auto import tqdm

    from ..io.atomic import make_folder
    from ..io.lock import hold_folder

    cells = grid() if cells is None else list(cells)
    folder = make_folder(out)
    with hold_folder(folder):
        todo = [c for c in cells if not (folder / c.name).exists()]
        with ProcessPoolExecutor(workers) as pool, tqdm(total=len(todo), disable=not progress) as bar:
            for f in as_completed([pool.submit(_worker, (c, st, str(folder))) for c in todo]):
                f.result()
                bar.update(1)
    return load_folder(folder)


def load_folder(out) -> list:
    from ..io.atomic import read_json

    return [read_json(p) for p in sorted(Path(out).glob("*__B*__G*__lr*__seed*.json"))]


def pack(records: list, path) -> Path:
    """Every record into one gzip'd JSON-lines file, sorted by cell (written whole)."""
    from ..io.atomic import atomic_path

    path = Path(path)
    rows = sorted(records, key=lambda r: (r["task"], r["B"], r["G"], r["lr"], r["seed"]))
    text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows)
    with atomic_path(path) as tmp:
        tmp.write_bytes(gzip.compress(text.encode(), mtime=0))  # mtime 0: the same records, the same bytes
    return path


def load_records(path) -> list:
    with gzip.open(path, "rt") as fh:
        return [json.loads(line) for line in fh if line.strip()]


# ----------------------------------------------------------------------------------------------
# Statistics


def to_target(cost, trajectory, target: float = TARGET) -> float:
    """The ``cost`` at which ``trajectory`` first reaches ``target``, linear between the two logged points
    around the crossing (the value before the first step is at cost 0); NaN if never reached."""
    c, y = np.asarray(cost, float), np.asarray(trajectory, float)
    hit = np.flatnonzero(y >= target)
    if not hit.size:
        return math.nan
    i = hit[0]
    if i == 0:
        return float(c[0])
    return float(c[i - 1] + (target - y[i - 1]) / (y[i] - y[i - 1]) * (c[i] - c[i - 1]))


def cell_stats(r: dict) -> dict:
    """Generations, steps, TRL seconds to the target, and the run's own noise scale."""

    gens = np.concatenate([[0.0], np.cumsum(r["generations"])])
    secs = np.concatenate([[0.0], np.cumsum(r["step_time"])])
    g = to_target(gens, r["hardest"])
    out = {
        "gens_to_target": g,
        "steps_to_target": g / r["B"],
        "secs_to_target": float(np.interp(g, gens, secs)) if np.isfinite(g) else math.nan,
        "final_hardest": r["hardest"][-1],
        "wall_total": r["wall_total"],
        "cpu_total": r["cpu_total"],
    }
    ns = _noise_scale(r, g / r["B"])
    out.update({"b_noise": ns.b_noise, "b_noise_lo": ns.b_noise_lo, "b_noise_hi": ns.b_noise_hi})
    if r.get("big_sq_adam"):
        na = _noise_scale(r, g / r["B"], preconditioned=True)
        out.update({"b_noise_adam": na.b_noise, "b_noise_adam_lo": na.b_noise_lo, "b_noise_adam_hi": na.b_noise_hi})
    return out


def _noise_scale(r: dict, steps_to_target: float, *, preconditioned: bool = False):
    """The run's gradient-norm noise scale over its steps up to the crossing of the target (after it ‖G‖²
    falls as the hardest quarter saturates, and the estimate no longer describes the climb); every
    recorded step where the target was not reached.  ``preconditioned``: from the norms weighted by Adam's
    preconditioner (recorded from the second step), over the same steps; NaN with fewer than 2."""
    from ..core.noise_scale import noise_scale_from_norms

    k = len(r["big_sq"]) if not np.isfinite(steps_to_target) else max(2, int(math.ceil(steps_to_target)))
    if not preconditioned:
        return noise_scale_from_norms(r["small_sq"][:k], r["big_sq"][:k], r["B"] // r["micro"], r["B"])
    keep = [i for i, step in enumerate(r["norm_steps_adam"]) if step <= max(k, 3)]
    if len(keep) < 2:
        from ..core.noise_scale import NoiseScale

        nan = math.nan
        return NoiseScale(nan, nan, nan, nan, nan, nan, nan, r["B"] // r["micro"], r["B"], len(keep), 0.95)
    small = [r["small_sq_adam"][i] for i in keep]
    big = [r["big_sq_adam"][i] for i in keep]
    return noise_scale_from_norms(small, big, r["B"] // r["micro"], r["B"])


def summary(records: list, level: float = 0.95, *, same_lr: bool = False):
    """One row per (task, B, G, lr): seeds, how many reached the target, means over seeds of generations,
    steps and TRL seconds to it (NaN unless every seed reached it), the final hardest quarter, wall and CPU
    seconds, the measured B_noise (median over seeds of each run's estimate over its steps up to the target), and the paired difference
    in generations to the target against :data:`REFERENCE` of the same task, seed by seed (Student t);
    with ``same_lr`` (the held-out grid) against B = 64, G = 4 of the same task and learning rate.
    Records holding Adam's preconditioned norms add ``b_noise_adam`` (median over seeds)."""
    import pandas as pd

    stats = [(r, cell_stats(r)) for r in records]

    def pair_key(r):
        return (r["task"], r["seed"], r["lr"]) if same_lr else (r["task"], r["seed"])

    ref_of = {"B": REFERENCE["B"], "G": REFERENCE["G"]} if same_lr else REFERENCE
    ref = {pair_key(r): s for r, s in stats if all(r[k] == v for k, v in ref_of.items())}
    keys = sorted({(r["task"], r["B"], r["G"], r["lr"]) for r in records})
    rows = []
    for key in keys:
        cur = [(r, s) for r, s in stats if (r["task"], r["B"], r["G"], r["lr"]) == key]
        row = dict(zip(("task", "B", "G", "lr"), key))
        row["seeds"] = len(cur)
        g = np.array([s["gens_to_target"] for _, s in cur])
        row["reached"] = int(np.isfinite(g).sum())
        for k in ("gens_to_target", "steps_to_target", "secs_to_target"):
            x = np.array([s[k] for _, s in cur])
            row[k] = float(x.mean()) if np.isfinite(x).all() else math.nan
        for k in ("final_hardest", "wall_total", "cpu_total"):
            row[k] = float(np.mean([s[k] for _, s in cur]))
        row["b_noise"] = float(np.median([s["b_noise"] for _, s in cur]))
        if all("b_noise_adam" in s for _, s in cur):
            row["b_noise_adam"] = float(np.median([s["b_noise_adam"] for _, s in cur]))
        d = [s["gens_to_target"] - ref[pair_key(r)]["gens_to_target"] for r, s in cur if pair_key(r) in ref]
        m, lo, hi, _ = paired_interval(d, level) if d else (math.nan,) * 4
        row.update({"d_gens": m, "d_gens_lo": lo, "d_gens_hi": hi})
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    """``python -m gsd.reproduce.noise_scale_training run OUT [WORKERS]`` runs the grid (resumable), ``run-heldout
    OUT [WORKERS]`` the held-out grid; ``summary-heldout RECORDS CSV`` and ``tables-heldout RECORDS`` its summary
    (paired against B = 64, G = 4 at the same lr) and its page tables;
    ``pack OUT RECORDS`` gzips its records; ``summary RECORDS CSV`` recomputes the summary from them."""
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"] and len(argv) in (2, 3):
        run(argv[1], workers=int(argv[2]) if len(argv) == 3 else 2)
    elif argv[:1] == ["run-heldout"] and len(argv) in (2, 3):
        run(argv[1], heldout_grid(), workers=int(argv[2]) if len(argv) == 3 else 2)
    elif argv[:1] == ["pack"] and len(argv) == 3:
        pack(load_folder(argv[1]), argv[2])
    elif argv[:1] == ["summary"] and len(argv) == 3:
        summary(load_records(argv[1])).to_csv(argv[2], index=False, float_format="%.6g")
    elif argv[:1] == ["summary-heldout"] and len(argv) == 3:
        summary(load_records(argv[1]), same_lr=True).to_csv(argv[2], index=False, float_format="%.6g")
    elif argv[:1] == ["tables-heldout"] and len(argv) == 2:
        print(heldout_tables(load_records(argv[1])), end="")
    else:
        raise SystemExit(main.__doc__)
    return 0


# ----------------------------------------------------------------------------------------------
# The noise scale against the steps-to-target curve


def fit_steps_curve(B, steps) -> tuple:
    """Least squares of steps = S_min·(1 + B_noise/B), linear in 1/B (steps = a + b/B, S_min = a,
    B_noise = b/a); returns (S_min, B_noise) — B_noise ≤ 0 or inf where the steps do not fall with B."""
    x = 1.0 / np.asarray(B, float)
    y = np.asarray(steps, float)
    ok = np.isfinite(y)
    if ok.sum() < 2:
        return (math.nan, math.nan)
    b, a = np.polyfit(x[ok], y[ok], 1)
    return (float(a), float(b / a) if a > 0 else math.inf)


def curve_check(records, task: str, *, lr: float = 3e-3, G: int = 4, one=(64, 0)) -> dict:
    """For one task at (lr, G): the steps to the target at each B (mean over seeds), the B_noise fitted to
    that whole curve, and the prediction from ONE run, ``one`` = (B, seed): its gradient-norm B_noise
    (:func:`cell_stats`, over the steps it took to reach the target) with S_min set by its own steps,
    steps(B) = steps_one·(1 + B_noise/B)/(1 + B_noise/B_one).  Returns the table and both B_noise."""
    rs = [r for r in records if r["task"] == task and r["lr"] == lr and r["G"] == G]
    Bs = sorted({r["B"] for r in rs})
    steps = {B: np.array([cell_stats(r)["steps_to_target"] for r in rs if r["B"] == B]) for B in Bs}
    mean = np.array([s.mean() if np.isfinite(s).all() else math.nan for s in steps.values()])
    s_min, bn_curve = fit_steps_curve(Bs, mean)
    ref = [r for r in rs if (r["B"], r["seed"]) == tuple(one)]
    out = {"task": task, "B": Bs, "steps": mean.tolist(), "seeds": [int(s.size) for s in steps.values()]}
    out.update({"s_min_curve": s_min, "b_noise_curve": bn_curve})
    # per second: t(B) = t_step + t_rollout·B fitted to every step's TRL step_time of these runs
    x = np.concatenate([np.full(len(r["step_time"]), float(r["B"])) for r in rs])
    y = np.concatenate([np.asarray(r["step_time"], float) for r in rs])
    t_rollout, t_step = np.polyfit(x, y, 1)
    secs = [np.mean([cell_stats(r)["secs_to_target"] for r in rs if r["B"] == B]) for B in Bs]
    out.update({"t_step": float(t_step), "t_rollout": float(t_rollout), "secs": [float(v) for v in secs]})
    out["fastest_B_measured"] = Bs[int(np.nanargmin(secs))] if np.isfinite(secs).any() else None
    for name, bn in (("curve", bn_curve), ("one_run", None)):
        out[f"b_star_{name}"] = math.nan if bn is None else _b_star(t_step, t_rollout, bn)
    if ref:
        st = early_noise_scale(ref[0])
        b0, s0 = one[0], cell_stats(ref[0])["steps_to_target"]
        pred = [s0 * (1 + st.b_noise / B) / (1 + st.b_noise / b0) for B in Bs]
        out["b_star_one_run"] = _b_star(t_step, t_rollout, st.b_noise)
        out.update(
            {
                "b_noise_one_run": st.b_noise,
                "b_noise_one_run_interval": (st.b_noise_lo, st.b_noise_hi),
                "predicted_steps": pred,
            }
        )
    return out


def _b_star(t_step, t_rollout, b_noise) -> float:
    """√(t_step·B_noise/t_rollout), the batch of the least time to a target (NaN where a term is ≤ 0)."""
    if not (t_step > 0 and t_rollout > 0 and np.isfinite(b_noise) and b_noise > 0):
        return math.nan
    return math.sqrt(t_step * b_noise / t_rollout)


def early_noise_scale(r: dict):
    """:func:`cell_stats`'s noise scale of one run, as a :class:`~gsd.core.noise_scale.NoiseScale`."""
    return _noise_scale(r, cell_stats(r)["steps_to_target"])


def page_tables(records: list) -> str:
    """The docs page's tables (markdown): per task every (B, G, lr) cell with its seeds, steps and
    generations to the target (paired Δ against :data:`REFERENCE`), TRL and CPU seconds; then per task
    the B_noise fitted to the steps-to-target curve beside the one from one run's gradient norms, and
    the steps that run predicts at every B against the measured ones."""
    df = summary(records)

    def num(x, fmt):
        return "—" if not np.isfinite(x) else format(x, fmt)

    L = [
        "| task | B | G | lr | reached | steps to 0.8 | generations to 0.8 | Δ generations vs B 64, G 4, lr 3e-3 [95 %] "
        "| TRL s to 0.8 | CPU s (training) | wall s (training) |",
        "|---" * 11 + "|",
    ]
    for _, r in df.iterrows():
        d = (r["d_gens"], r["d_gens_lo"], r["d_gens_hi"])
        ref = r["B"] == REFERENCE["B"] and r["G"] == REFERENCE["G"] and r["lr"] == REFERENCE["lr"]
        dtxt = (
            "(reference)"
            if ref
            else ("—" if not np.isfinite(d[0]) else f"{d[0]:.0f} [{num(d[1], '.0f')}, {num(d[2], '.0f')}]")
        )
        L.append(
            f"| {r['task']} | {r['B']} | {r['G']} | {r['lr']:g} | {r['reached']}/{r['seeds']} | "
            f"{num(r['steps_to_target'], '.1f')} | {num(r['gens_to_target'], '.0f')} | {dtxt} | "
            f"{num(r['secs_to_target'], '.1f')} | {r['cpu_total']:.1f} | {r['wall_total']:.1f} |"
        )
    L += [
        "",
        "| task | B_noise, fitted to the curve | B_noise, one run (B 64, seed 0) [95 %] | B | measured steps | predicted from the one run |",
        "|---" * 6 + "|",
    ]
    for task in sorted({r["task"] for r in records}):
        c = curve_check(records, task)
        one = c.get("b_noise_one_run", math.nan)
        iv = c.get("b_noise_one_run_interval", (math.nan, math.nan))
        pred = c.get("predicted_steps", [math.nan] * len(c["B"]))
        for i, B in enumerate(c["B"]):
            head = (
                f"| {task} | {num(c['b_noise_curve'], '.1f')} | {num(one, '.0f')} [{num(iv[0], '.0f')}, {num(iv[1], '.0f')}]"
                if i == 0
                else "| | |"
            )
            L.append(f"{head} | {B} | {num(c['steps'][i], '.1f')} | {num(pred[i], '.1f')} |")
    L += [
        "",
        "| task | t(B) = t_step + t_rollout·B (TRL step_time) | TRL s to 0.8 at B = 16, 32, 64, 128, 256 | fastest B measured "
        "| B* from the curve's B_noise | B* from the one run's |",
        "|---" * 6 + "|",
    ]
    for task in sorted({r["task"] for r in records}):
        c = curve_check(records, task)
        L.append(
            f"| {task} | {c['t_step']:.3f} s + {1e3 * c['t_rollout']:.2f} ms·B | "
            + ", ".join(num(v, ".1f") for v in c["secs"])
            + f" | {c['fastest_B_measured']} | {num(c['b_star_curve'], '.0f')} | {num(c['b_star_one_run'], '.0f')} |"
        )
    return "\n".join(L) + "\n"


# ----------------------------------------------------------------------------------------------
# The held-out grid: McCandlish's law against Adam's, fixed before the grid ran

#: The laws of steps to a target against B (docs/group_size_training.md, "A held-out grid").
LAWS = ("mccandlish", "adam")


def law_steps(law: str, B, s_min: float, b_noise: float) -> np.ndarray:
    """Steps to a target at B: S_min·(1 + B_noise/B) (``"mccandlish"``, lr retuned at each B) or
    S_min·√(1 + B_noise/B) (``"adam"``, Adam at a fixed lr)."""
    x = 1.0 + b_noise / np.asarray(B, float)
    if law == "mccandlish":
        return s_min * x
    if law == "adam":
        return s_min * np.sqrt(x)
    raise InputError(f"law must be one of {LAWS}, got {law!r}")


def fit_law(law: str, B, steps) -> dict:
    """The law fitted to the steps at each B by linear least squares on 1/B: steps (``mccandlish``) or
    steps² (``adam``) = a + c/B, S_min = a (√a for Adam), B_noise = c/a; with the relative root mean
    square residual of the fitted steps."""
    B, y = np.asarray(B, float), np.asarray(steps, float)
    ok = np.isfinite(y)
    if ok.sum() < 2:
        return {"s_min": math.nan, "b_noise": math.nan, "rel_rms": math.nan}
    target = y[ok] if law == "mccandlish" else y[ok] ** 2
    c, a = np.polyfit(1.0 / B[ok], target, 1)
    if not a > 0:
        return {"s_min": math.nan, "b_noise": math.inf, "rel_rms": math.nan}
    s_min, bn = (float(a) if law == "mccandlish" else math.sqrt(a)), float(c / a)
    fitted = law_steps(law, B[ok], s_min, bn)
    return {"s_min": s_min, "b_noise": bn, "rel_rms": float(np.sqrt(np.mean((fitted / y[ok] - 1) ** 2)))}


def law_b_star(law: str, t_step: float, t_rollout: float, b_noise: float) -> float:
    """The B of the least time steps(B)·(t_step + t_rollout·B): √(t_step·b/t_rollout) (McCandlish) or
    (√(b² + 8·b·t_step/t_rollout) − b)/4 (Adam's law; the root of 2·t_rollout·B² + t_rollout·b·B − b·t_step);
    NaN where a term is not > 0 and finite."""
    if not (t_step > 0 and t_rollout > 0 and np.isfinite(b_noise) and b_noise > 0):
        return math.nan
    if law == "mccandlish":
        return math.sqrt(t_step * b_noise / t_rollout)
    b, r = b_noise, t_step / t_rollout
    return (math.sqrt(b * b + 8 * b * r) - b) / 4


def heldout_check(records, task: str, lr: float, *, G: int = 4, one=(64, 0)) -> dict:
    """For one (task, lr) B-sweep: the mean steps to the target at each B, both laws fitted to them, one
    run's (``one`` = (B, seed)) plain and preconditioned noise scale, each one's ratio to each law's
    fitted knee, the steps it predicts at every B under each law (S_min from its own steps), and per
    second the measured fastest B against each law's B* from the one run's noise scale."""
    rs = [r for r in records if r["task"] == task and r["lr"] == lr and r["G"] == G]
    Bs = sorted({r["B"] for r in rs})
    st = {id(r): cell_stats(r) for r in rs}
    per_B = {B: [st[id(r)] for r in rs if r["B"] == B] for B in Bs}
    steps = np.array([np.mean([s["steps_to_target"] for s in v]) for v in per_B.values()])
    secs = np.array([np.mean([s["secs_to_target"] for s in v]) for v in per_B.values()])
    out: dict = {"task": task, "lr": lr, "B": Bs, "seeds": [len(v) for v in per_B.values()], "steps": steps.tolist()}
    out["fits"] = {law: fit_law(law, Bs, steps) for law in LAWS}
    x = np.concatenate([np.full(len(r["step_time"]), float(r["B"])) for r in rs])
    y = np.concatenate([np.asarray(r["step_time"], float) for r in rs])
    t_rollout, t_step = (float(v) for v in np.polyfit(x, y, 1))
    out.update({"t_step": t_step, "t_rollout": t_rollout, "secs": secs.tolist()})
    out["fastest_B"] = Bs[int(np.nanargmin(secs))] if np.isfinite(secs).any() else None
    out["b_star_curve"] = law_b_star("mccandlish", t_step, t_rollout, out["fits"]["mccandlish"]["b_noise"])
    ref = [r for r in rs if (r["B"], r["seed"]) == tuple(one)]
    if not ref:
        return out
    s0 = st[id(ref[0])]
    for kind, key in (("plain", "b_noise"), ("adam", "b_noise_adam")):
        bn = s0.get(key, math.nan)
        out[f"one_{kind}"] = (bn, s0.get(f"{key}_lo", math.nan), s0.get(f"{key}_hi", math.nan))
        for law in LAWS:
            knee = out["fits"][law]["b_noise"]
            out[f"ratio_{kind}_{law}"] = bn / knee if knee > 0 and np.isfinite(knee) else math.nan
            ok = np.isfinite(bn) and bn > 0
            base = law_steps(law, one[0], 1.0, bn) if ok else math.nan
            pred = law_steps(law, Bs, s0["steps_to_target"] / base, bn) if ok else np.full(len(Bs), math.nan)
            out[f"pred_{kind}_{law}"] = np.asarray(pred, float).tolist()
            out[f"b_star_{kind}_{law}"] = law_b_star(law, t_step, t_rollout, bn)
    return out


def heldout_tables(records: list) -> str:
    """The held-out section's tables (markdown), from :func:`heldout_check` on every (task, lr) B-sweep of
    :func:`heldout_grid`: the laws' fits, one run's noise scales against the knees, the predicted steps,
    and per second."""

    def num(x, fmt=".1f"):
        return "—" if x is None or not np.isfinite(x) else format(x, fmt)

    sweeps = sorted({(r["task"], r["lr"]) for r in records if r["G"] == 4 and r["lr"] in (*HELDOUT_LRS, 5e-3)})
    checks = [heldout_check(records, t, lr) for t, lr in sweeps]
    L = [
        "| task | lr | steps to 0.8 at B = 16, 32, 64, 128, 256 | McCandlish: knee, rel. rms | Adam's law: knee, rel. rms "
        "| one run: plain B_noise [95 %] | one run: preconditioned [95 %] |",
        "|---" * 7 + "|",
    ]
    for c in checks:
        f = c["fits"]
        pl, ad = c.get("one_plain", (math.nan,) * 3), c.get("one_adam", (math.nan,) * 3)
        L.append(
            f"| {c['task']} | {c['lr']:g} | {', '.join(num(v) for v in c['steps'])} | "
            f"{num(f['mccandlish']['b_noise'], '.0f')}, {num(f['mccandlish']['rel_rms'], '.3f')} | "
            f"{num(f['adam']['b_noise'], '.0f')}, {num(f['adam']['rel_rms'], '.3f')} | "
            f"{num(pl[0], '.0f')} [{num(pl[1], '.0f')}, {num(pl[2], '.0f')}] | "
            f"{num(ad[0], '.0f')} [{num(ad[1], '.0f')}, {num(ad[2], '.0f')}] |"
        )
    L += [
        "",
        "| task | lr | one run's plain B_noise ÷ knee (McCandlish, Adam's law) | predicted steps at B = 16 … 256, "
        "Adam's law | the same, McCandlish | t(B) | TRL s to 0.8 at B = 16 … 256 | fastest B measured "
        "| B* Adam's law | B* McCandlish | B* McCandlish, the curve's knee |",
        "|---" * 11 + "|",
    ]
    for c in checks:
        L.append(
            f"| {c['task']} | {c['lr']:g} | {num(c.get('ratio_plain_mccandlish'), '.2f')}, "
            f"{num(c.get('ratio_plain_adam'), '.2f')} | "
            f"{', '.join(num(v) for v in c.get('pred_plain_adam', []))} | "
            f"{', '.join(num(v) for v in c.get('pred_plain_mccandlish', []))} | "
            f"{c['t_step']:.3f} s + {1e3 * c['t_rollout']:.2f} ms·B | {', '.join(num(v, '.2f') for v in c['secs'])} | "
            f"{c['fastest_B']} | {num(c.get('b_star_plain_adam'), '.0f')} | "
            f"{num(c.get('b_star_plain_mccandlish'), '.0f')} | {num(c['b_star_curve'], '.0f')} |"
        )
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
