"""Budget allocation in training: fixed G, DAPO and the allocator's values at equal generations.

The campaign (shipped config ``allocation_campaign``) trains the tabular Bernoulli-logit policy
on the Big-Math population once per arm and seed: fixed G = 8 and G = 16, DAPO (≤ 4 draws) and
budget plans of 8 rollouts per prompt per step under the values ``knapsack`` (Knapsack RL's),
``update`` and ``progress`` from the run's own logged counts, and ``update``/``knapsack`` with
the true p (the oracle).  Every arm is read at the total generations of the reference arm
(fixed G = 8, all its steps):

* effective-gradient ratio: non-silent groups / groups drawn, over the steps within the budget;
* generations spent to reach mean p ≥ 0.9 and hardest-quartile mean p ≥ 0.8 (NaN: not within
  the budget), and the reference arm's generations over the arm's (the compute ratio);
* mean p, mean 2·arcsin√p and the hardest-quartile mean p after the last step within the budget;
* for the allocated arms, the measured gradient mass over the E[σ̂] the plans expected.

Seeds give a mean and a 95 % Student-t interval.  See :ref:`theory-allocation`.  The campaign is
a folder: ``runs/<arm>/seed<S>/`` (ordinary, resumable run folders), ``allocation_summary.json``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..io.atomic import entry_path, read_json, write_json

__all__ = [
    "load_allocation_campaign",
    "run_allocation_campaign",
    "arm_metrics",
    "allocation_figure",
    "CONFIG_NAME",
    "summary_table",
]

#: Name of the shipped campaign config (``simulations/allocation_campaign.toml``).
CONFIG_NAME = "allocation_campaign"
SUMMARY_FILE = "allocation_summary.json"


def checked_seeds(seeds, what: str = "seeds", *, least: int = 1) -> list:
    """``seeds`` as a list of at least ``least`` distinct integer seeds, each in the config's range;
    else an InputError naming ``what``.  A campaign's 95 % intervals need two (with one they are
    NaN); the comparison, whose winners are read from them, asks for two."""
    from ..simulator.config import SimConfig

    if isinstance(seeds, tuple):
        seeds = list(seeds)
    if (
        not isinstance(seeds, list)
        or len(seeds) < least
        or len(set(map(repr, seeds))) != len(seeds)
        or any(isinstance(s, bool) or not isinstance(s, int) for s in seeds)
    ):
        why = " (a winner is read from the 95 % intervals over the seeds)" if least > 1 else ""
        raise InputError(
            f"{what} = {seeds!r}: must be a list of at least {least} distinct integer seed"
            f"{'s' if least > 1 else ''}{why}"
        )
    for s in seeds:
        SimConfig(seed=s)  # its range, as the config checks it
    return list(seeds)


def campaign_tables(data: dict, where: str, default_seeds: list, *, least_seeds: int = 1) -> dict:
    """A campaign file's ``[campaign]`` table, ``seeds``, ``[base]`` and ``[arms]``, checked before
    any run: ``seeds`` a list of at least ``least_seeds`` distinct integers (:func:`checked_seeds`),
    ``[base]`` a table, ``[arms]`` a non-empty table of tables whose names are folder names
    (:func:`gsd.io.atomic.entry_path`).  Also the comparison's check (:mod:`.allocation_comparison`)."""
    camp = data.get("campaign", {})
    if not isinstance(camp, dict):
        raise InputError(f"{where}: [campaign] must be a table, got {camp!r}")
    seeds = checked_seeds(camp.get("seeds", default_seeds), f"{where}: campaign key 'seeds'", least=least_seeds)
    for table in ("base", "arms"):
        if not isinstance(data.get(table), dict):
            raise InputError(f"{where} needs a [{table}] table" + (" of [arms.NAME] tables" if table == "arms" else ""))
    if not data["arms"]:
        raise InputError(f"{where}: [arms] holds no arm; add an [arms.NAME] table")
    for name, arm in data["arms"].items():
        entry_path(Path("runs"), name, what=f"{where}: campaign arm")
        if not isinstance(arm, dict):
            raise InputError(f"{where}: campaign arm {name!r} must be a table of config keys, got {arm!r}")
    return {"campaign": camp, "seeds": list(seeds)}


def load_allocation_campaign(path=None) -> dict:
    """The campaign: ``{"seeds", "reference_arm", "targets", "base", "arms"}``, every arm config checked."""
    from ..resources import config_file
    from ..simulator.config import SimConfig, read_config_file

    where = f"campaign file {str(path or CONFIG_NAME)!r}"
    data = read_config_file(config_file(path or CONFIG_NAME, what="campaign file"))
    checked = campaign_tables(data, where, [0, 1, 2])
    camp = checked["campaign"]
    out = {
        "seeds": checked["seeds"],
        "reference_arm": camp.get("reference_arm", "fixed_g8"),
        "targets": dict(camp.get("targets", {"mean_p": 0.9, "hard_quartile_p": 0.8})),
        "base": data["base"],
        "arms": data["arms"],
    }
    if out["reference_arm"] not in out["arms"]:
        raise InputError(f"reference_arm {out['reference_arm']!r} is not an arm ({', '.join(out['arms'])})")
    for name, arm in out["arms"].items():
        SimConfig.from_dict({**out["base"], **arm, "name": name})
    return out


def _state_after(led, t: int, final: dict, column: str) -> float:
    """A state column after step t: the next row's 'before' value, or the run's final state."""
    if t + 1 < len(led):
        return float(led[column].iloc[t + 1])
    key = {"mean_p": "mean_p", "mean_arcsin": "mean_arcsin"}.get(column)
    return float(final[key]) if key else float(final["quartile_mean_p"][0])


def arm_metrics(run_dir, budget: float, targets: dict) -> dict:
    """One run read at ``budget`` total generations (see the module docstring)."""
    from ..simulator.ledger import generations_to_target, read_ledger

    led = read_ledger(run_dir)
    summary = read_json(Path(run_dir) / "summary.json")
    final = summary["final"]
    within = led["generations_cum"].to_numpy() <= budget * (1 + 1e-12)
    t = int(np.nonzero(within)[0][-1]) if within.any() else -1
    rows = led.iloc[: t + 1]
    kept = float((rows["n_batch"] * (1 - rows["zero_update_frac"])).sum())
    groups = float(rows["groups"].sum())
    cols = {"mean_p": "mean_p", "hard_quartile_p": "mean_p_q1", "mean_arcsin": "mean_arcsin"}
    ends = {
        "mean_p": final["mean_p"],
        "hard_quartile_p": final["quartile_mean_p"][0],
        "mean_arcsin": final["mean_arcsin"],
    }
    gens = {}
    for name, thr in targets.items():
        g = generations_to_target(led, cols[name], thr, ends[name])
        gens[name] = g if g <= budget * (1 + 1e-12) else math.nan
    return {
        "generations": float(rows["generations"].sum()),
        "steps": t + 1,
        "effective_ratio": kept / groups if groups else math.nan,
        "generations_to": gens,
        "mean_p": _state_after(led, t, final, "mean_p"),
        "mean_arcsin": _state_after(led, t, final, "mean_arcsin"),
        "hard_quartile_p": _state_after(led, t, final, "mean_p_q1"),
        "grad_mass_over_planned": summary.get("grad_mass_over_planned"),
    }


#: Ranges of the quantities whose seed intervals :func:`seed_interval` keeps inside them.
PROBABILITY = (0.0, 1.0)
POSITIVE = (0.0, math.inf)
OBJECTIVE = (0.0, math.pi)  # mean 2·arcsin√p
#: How the report marks an interval taken on the logit / log scale, and what the mark means.
TRANSFORMED_MARK = "†"
INTERVAL_NOTE = (
    "Mean over seeds [95 % Student-t interval]; † where that interval leaves the quantity's range "
    "(a probability outside [0, 1], generations or a ratio below 0): the Student-t interval of the "
    "logit (of the log for a quantity ≥ 0) over seeds, mapped back, which stays inside."
)


def seed_interval(values, bounds=(-math.inf, math.inf)) -> dict:
    """Mean and 95 % Student-t interval over seeds (NaN-aware: counts the seeds with a value),
    kept inside ``bounds`` = (a, b), the quantity's range.

    The interval is m ± t₀.₉₇₅,ₙ₋₁ · s / √n (s: ddof 1).  Where it leaves [a, b] (two seeds:
    t = 12.7), the same interval of z = logit((x − a)/(b − a)) (z = log(x − a) when b = ∞) is mapped back,
    and ``scale`` says so ("logit" or "log"); a seed on the edge itself has no such z: the
    interval is then cut at the edge (``scale`` "cut").  The mean stays the plain mean.
    """
    from scipy.special import expit, logit
    from scipy.stats import t as student

    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=np.float64)
    n_all = len(values)
    if v.size == 0:
        return {"mean": math.nan, "lo": math.nan, "hi": math.nan, "n": 0, "of": n_all, "scale": "natural"}
    m = float(v.mean())
    if v.size == 1:
        return {"mean": m, "lo": math.nan, "hi": math.nan, "n": 1, "of": n_all, "scale": "natural"}
    q = float(student.ppf(0.975, v.size - 1)) / math.sqrt(v.size)
    h = q * float(v.std(ddof=1))
    lo, hi, scale = m - h, m + h, "natural"
    a, b = bounds
    if lo < a or hi > b:
        if np.all((v > a) & (v < b)):
            if math.isfinite(b):
                z = logit((v - a) / (b - a))
                lo, hi = (a + (b - a) * float(expit(z.mean() + sign * q * z.std(ddof=1))) for sign in (-1, 1))
                scale = "logit"
            else:
                z = np.log(v - a)
                with np.errstate(over="ignore"):  # seeds decades apart: the upper end is unbounded
                    lo, hi = (a + float(np.exp(z.mean() + sign * q * z.std(ddof=1))) for sign in (-1, 1))
                scale = "log"
        else:
            lo, hi, scale = max(lo, a), min(hi, b), "cut"
    return {"mean": m, "lo": lo, "hi": hi, "n": int(v.size), "of": n_all, "scale": scale}


_interval = seed_interval  # the former name


def campaign_runs(camp: dict, out, seeds, steps_scale: float = 1.0) -> list[tuple]:
    """Every run of a campaign: ``(name, seed, config dict, folder)``, arm by arm, seed by seed."""
    runs = []
    for name, arm in camp["arms"].items():
        for seed in seeds:
            cfg = {**camp["base"], **arm, "name": name, "seed": seed}
            cfg["steps"] = max(1, int(round(cfg.get("steps", 150) * steps_scale)))
            runs.append(
                (name, seed, cfg, entry_path(Path(out) / "runs", name, what="campaign arm") / f"seed{int(seed)}")
            )
    return runs


def _run_one(cfg: dict, folder, progress: bool = False) -> None:
    """Run (or resume, or read back) one campaign run: what a worker process does."""
    from ..simulator.config import SimConfig
    from ..simulator.dispatch import run_simulation

    run_simulation(SimConfig.from_dict(cfg), folder, resume=True, progress=progress)


def run_cost(cfg: dict) -> float:
    """A rough relative cost of a run, to start the long ones first: steps, ×4 with a budget plan
    (the planner dominates those steps), ×3 for a network policy."""
    planned = cfg.get("allocation", "fixed") not in ("fixed", "greso")
    return cfg.get("steps", 150) * (4 if planned else 1) * (3 if cfg.get("policy", "tabular") == "mlp" else 1)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the platform says, else the count)."""
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def execute_runs(runs: list[tuple], *, jobs: int = 1, progress: bool = False, on_run=None) -> None:
    """Run every ``(name, seed, config dict, folder)`` of ``runs``: one after the other with
    ``jobs = 1``, else in ``jobs`` worker processes (the long runs first).

    Each run is one process's work either way, on the thread count its engine chooses (one, at
    the campaigns' sizes; the summary records it), so its ledger and summary do not depend on
    ``jobs``: a campaign's runs share nothing but the machine.  ``on_run(name, seed)``: called
    as each finishes.  The first run to fail stops the others (not yet started) and raises.
    """
    from ..validation import as_group_size

    jobs = int(as_group_size(jobs, "jobs"))
    if jobs == 1 or len(runs) <= 1:
        for name, seed, cfg, folder in runs:
            _run_one(cfg, folder, progress)
            if on_run is not None:
                on_run(name, seed)
        return
    import multiprocessing
    from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait

    order = sorted(runs, key=lambda r: -run_cost(r[2]))
    # spawn, not fork: a forked child of a process that has started torch's or BLAS's threads can hang
    with ProcessPoolExecutor(max_workers=min(jobs, len(runs)), mp_context=multiprocessing.get_context("spawn")) as pool:
        pending = {pool.submit(_run_one, cfg, folder): (name, seed) for name, seed, cfg, folder in order}
        try:
            while pending:
                done, _ = wait(pending, return_when=FIRST_EXCEPTION)
                for fut in done:
                    name, seed = pending.pop(fut)
                    fut.result()  # a worker's error, raised here
                    if on_run is not None:
                        on_run(name, seed)
        except BaseException:
            for fut in pending:
                fut.cancel()
            raise


def run_allocation_campaign(
    out,
    *,
    config=None,
    seeds=None,
    steps_scale: float = 1.0,
    progress: bool = True,
    campaign: dict | None = None,
    on_run=None,
    jobs: int = 1,
) -> dict:
    """Run (or resume) every arm × seed under ``out`` and write the summary; returns it.

    ``seeds``: override the campaign's seeds; ``steps_scale``: multiply every arm's steps (the
    notebook's fast mode uses a fraction; the comparison stays at equal generations);
    ``campaign``: an already loaded campaign dict instead of ``config``; ``on_run(name, seed)``:
    called after each run (progress logs); ``jobs``: worker processes (:func:`execute_runs`;
    the results do not depend on it).
    """
    camp = campaign if campaign is not None else load_allocation_campaign(config)
    seeds = camp["seeds"] if seeds is None else checked_seeds(seeds)
    out = Path(out)
    todo = campaign_runs(camp, out, seeds, steps_scale)
    execute_runs(todo, jobs=jobs, progress=progress and jobs == 1, on_run=on_run)
    runs = {(name, seed): folder for name, seed, _, folder in todo}
    ref = camp["reference_arm"]
    budget = {seed: read_json(runs[(ref, seed)] / "summary.json")["generations_total"] for seed in seeds}
    per_run = {
        name: {seed: arm_metrics(runs[(name, seed)], budget[seed], camp["targets"]) for seed in seeds}
        for name in camp["arms"]
    }
    arms = {}
    for name, by_seed in per_run.items():
        ms = list(by_seed.values())
        ref_ms = list(per_run[ref].values())
        ranges = {
            "effective_ratio": PROBABILITY,
            "mean_p": PROBABILITY,
            "mean_arcsin": OBJECTIVE,
            "hard_quartile_p": PROBABILITY,
            "generations": POSITIVE,
        }
        row = {key: seed_interval([m[key] for m in ms], bounds) for key, bounds in ranges.items()}
        for tgt in camp["targets"]:
            row[f"generations_to_{tgt}"] = seed_interval([m["generations_to"][tgt] for m in ms], POSITIVE)
            row[f"compute_ratio_{tgt}"] = seed_interval(
                [r["generations_to"][tgt] / m["generations_to"][tgt] for r, m in zip(ref_ms, ms)], POSITIVE
            )
        row["grad_mass_over_planned"] = seed_interval([m["grad_mass_over_planned"] for m in ms], POSITIVE)
        row["effective_ratio_gain"] = seed_interval(
            [m["effective_ratio"] / r["effective_ratio"] - 1 for r, m in zip(ref_ms, ms)], (-1.0, math.inf)
        )  # a ratio, less 1
        arms[name] = row
    summary = {
        "seeds": seeds,
        "reference_arm": ref,
        "budget_generations": budget,
        "targets": camp["targets"],
        "steps_scale": steps_scale,
        "arms": arms,
        "per_run": {n: {str(s): m for s, m in d.items()} for n, d in per_run.items()},
        "campaign": camp,
    }
    write_json(out / SUMMARY_FILE, summary)
    return summary


#: Display names of the arms (the rest keep their config name).
LABELS = {
    "fixed_g8": "fixed G = 8",
    "fixed_g16": "fixed G = 16",
    "dapo": "DAPO (≤ 4 draws)",
    "knapsack": "Knapsack RL value",
    "update": "update (E[σ̂])",
    "progress": "progress",
    "oracle_update": "oracle, update",
    "oracle_knapsack": "oracle, knapsack",
}


def summary_table(summary: dict):
    """One row per arm, one column per (metric, mean/lo/hi): the campaign's numbers as a DataFrame."""
    import pandas as pd

    flat = {
        LABELS.get(name, name): {(metric, stat): r[metric][stat] for metric in r for stat in ("mean", "lo", "hi")}
        for name, r in summary["arms"].items()
    }
    return pd.DataFrame.from_dict(flat, orient="index")


def allocation_figure(summary: dict, out_dir=None):
    """Hardest-quartile mean p against generations (mean over seeds) and the effective-gradient
    ratio per arm with its interval.  ``out_dir``: the campaign folder (its ledgers draw the curves)."""
    from ..plotstyle import styled

    return styled(_allocation_figure)(summary, out_dir)


def _allocation_figure(summary: dict, out_dir=None):
    from ..plotstyle import new_figure
    from ..simulator.ledger import read_ledger

    fig, (ax, bx) = new_figure(2, width=10.0, height=3.6)
    palette = ["#444444", "#7f7f7f", "#2ca02c", "#ff7f0e", "#1f77b4", "#9467bd", "#17becf", "#d62728"]
    root = Path(out_dir) if out_dir is not None else None
    names = list(summary["arms"])
    for i, name in enumerate(names):
        if root is not None:
            curves = []
            for seed in summary["seeds"]:
                led = read_ledger(root / "runs" / name / f"seed{seed}")
                curves.append(
                    (led["generations_cum"].to_numpy() - led["generations"].to_numpy(), led["mean_p_q1"].to_numpy())
                )
            grid = np.linspace(0, max(summary["budget_generations"].values()), 60)
            ys = np.mean([np.interp(grid, x, y, right=np.nan) for x, y in curves], axis=0)
            ax.plot(
                grid / 1e6,
                ys,
                color=palette[i % len(palette)],
                label=LABELS.get(name, name),
                ls="--" if name.startswith("oracle") else "-",
            )
        r = summary["arms"][name]["effective_ratio"]
        bx.bar(i, r["mean"], color=palette[i % len(palette)])
        if np.isfinite(r["lo"]):
            bx.errorbar(i, r["mean"], yerr=[[r["mean"] - r["lo"]], [r["hi"] - r["mean"]]], color="k", capsize=3)
    ax.set_xlabel("generations (millions)")
    ax.set_ylabel("mean p, initially hardest quartile")
    ax.set_title("learning per generation")
    ax.legend(loc="lower right", fontsize=7)
    bx.set_xticks(range(len(names)), [LABELS.get(n, n) for n in names], rotation=35, ha="right", fontsize=7)
    bx.set_ylabel("non-silent groups / groups drawn")
    n_seeds = len(summary["seeds"])
    bx.set_title(
        "effective-gradient ratio " + (f"(mean, 95 % CI, {n_seeds} seeds)" if n_seeds > 1 else "(1 seed: no interval)")
    )
    return fig


def interval_text(r, nd=3, scale=1.0):
    """'mean [lo, hi]' of a seed interval (scaled), '—' where missing."""
    if not r or r.get("n", 0) == 0 or not math.isfinite(r.get("mean") if r.get("mean") is not None else math.nan):
        return "—"
    m, lo, hi = (math.nan if r[k] is None else r[k] * scale for k in ("mean", "lo", "hi"))  # JSON writes NaN as null
    mark = TRANSFORMED_MARK if r.get("scale") in ("logit", "log") else ""  # "cut": the edge is printed
    part = f"{m:.{nd}f}" + (f" [{lo:.{nd}f}, {hi:.{nd}f}]{mark}" if math.isfinite(lo) else "")
    return part + (f" ({r['n']}/{r['of']} seeds)" if r["n"] < r["of"] else "")


_ci = interval_text  # the former name
