"""Which way of spending rollouts makes a policy learn faster, at equal generations.

The comparison (shipped configs ``allocation_comparison`` at the paper's scale and
``allocation_comparison_small`` for ``gsd reproduce``) runs every arm of one budget-allocation
campaign (:mod:`.allocation_campaign`) once per seed and per *variant* (the tabular policy and
the shared-parameter MLP): uniform G ∈ {4, 8, 16}, DAPO (≤ 4 draws), a GRESO-style skip, Knapsack
RL's value, the one-step values and the values that look ahead, each from the run's own logged
counts (with fresh-count variants), and the oracle as an upper bound.  Every arm is read at the
total generations of the reference arm (uniform G = 8, all its steps).

Per variant it then names the **best uniform G** (the largest mean final objective, mean
2·arcsin√p, chosen after the fact: the strongest baseline, since a user can always tune one
number) and reads every arm against it:

* objective targets: what the best uniform G reaches (mean over seeds) after 50 % and 100 % of
  the budget, and the generations each arm spends to reach them (NaN: not within the budget);
* the final objective, its paired difference from the best uniform G (seed by seed: both arms
  start from the same population), the hardest-quartile p and the effective-gradient ratio;
* a **winner** flag: the arm's 95 % interval lies entirely on the better side of the best
  uniform G's interval (higher objective, or fewer generations to a target);
* the objective-gain decomposition: the change of mean 2·arcsin√p from the start, split by the
  initial-difficulty quartile of the prompts (sums to the whole gain), for every arm whose last
  step lies exactly at the budget (DAPO's and GRESO's runs overshoot it and are left out).

See :ref:`theory-allocation`.  Output: ``<out>/<variant>/`` (an allocation campaign folder) and
``<out>/comparison_summary.json``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..io.atomic import entry_path, read_json, write_json
from .allocation_campaign import POSITIVE, campaign_tables, checked_seeds, run_allocation_campaign, seed_interval

__all__ = [
    "load_comparison",
    "run_comparison",
    "variant_campaign",
    "summarise_comparison",
    "comparison_markdown",
    "comparison_figure",
    "CONFIG_NAME",
    "SMALL_CONFIG_NAME",
    "LABELS",
]

CONFIG_NAME = "allocation_comparison"
SMALL_CONFIG_NAME = "allocation_comparison_small"
SUMMARY_FILE = "comparison_summary.json"
#: The old campaign's targets, kept beside the objective targets (mean p, hardest quartile).
FIXED_TARGETS = {"mean_p": 0.9, "hard_quartile_p": 0.8}

LABELS = {
    "fixed_g4": "uniform G = 4",
    "fixed_g8": "uniform G = 8",
    "fixed_g16": "uniform G = 16",
    "dapo": "DAPO (≤ 4 draws)",
    "greso": "GRESO-style skip",
    "knapsack": "Knapsack RL value",
    "update": "update E[σ̂] (the default before)",
    "gain": "gain (one-step objective)",
    "horizon": "horizon (H-step objective)",
    "horizon_thompson": "horizon + Thompson",
    "update_halflife": "update, half-life counts",
    "update_forecast": "update, forecast p",
    "horizon_forecast": "horizon, forecast p",
    "gain_thompson": "gain + Thompson",
    "oracle_gain": "oracle gain (bound)",
    "oracle_horizon": "oracle horizon (bound)",
    "oracle_update": "oracle update (bound)",
    "update_b4": "update, 4 per prompt",
    "gain_b4": "gain, 4 per prompt",
    "horizon_b4": "horizon, 4 per prompt",
}


def load_comparison(path=None) -> dict:
    """The comparison: ``{"seeds", "reference_arm", "uniform_arms", "variants", "base", "arms"}``,
    every (variant, arm) config checked."""
    from ..resources import config_file
    from ..simulator.config import SimConfig, read_config_file

    where = f"campaign file {str(path or CONFIG_NAME)!r}"
    data = read_config_file(config_file(path or CONFIG_NAME, what="campaign file"))
    checked = campaign_tables(data, where, [0, 1, 2, 3, 4], least_seeds=2)
    camp = checked["campaign"]
    variants = data.get("variants", {"tabular": {}})
    if not isinstance(variants, dict) or not variants:
        raise InputError(f"{where}: [variants] must hold at least one [variants.NAME] table, got {variants!r}")
    for v, over in variants.items():
        entry_path(Path("."), v, what=f"{where}: variant")  # its campaign folder: <out>/<variant>
        if not isinstance(over, dict):
            raise InputError(f"{where}: variant {v!r} must be a table of config keys, got {over!r}")
    uniform = camp.get("uniform_arms", ["fixed_g4", "fixed_g8", "fixed_g16"])
    if not isinstance(uniform, list) or not uniform:
        raise InputError(f"{where}: campaign key 'uniform_arms' = {uniform!r}: must be a non-empty list of arm names")
    out = {
        "seeds": checked["seeds"],
        "reference_arm": camp.get("reference_arm", "fixed_g8"),
        "uniform_arms": list(uniform),
        "variants": dict(variants),
        "base": data["base"],
        "arms": data["arms"],
    }
    for name in (out["reference_arm"], *out["uniform_arms"]):
        if name not in out["arms"]:
            raise InputError(f"campaign arm {name!r} (reference or uniform) is not an arm ({', '.join(out['arms'])})")
    for v, over in out["variants"].items():
        for name, arm in out["arms"].items():
            SimConfig.from_dict({**out["base"], **over, **arm, "name": name})
    return out


def variant_campaign(comp: dict, variant: str) -> dict:
    """The allocation campaign of one variant of the comparison: its seeds, reference arm, targets and arms."""
    return {
        "seeds": comp["seeds"],
        "reference_arm": comp["reference_arm"],
        "targets": dict(FIXED_TARGETS),
        "base": {**comp["base"], **comp["variants"][variant]},
        "arms": comp["arms"],
    }


def run_comparison(out, *, config=None, seeds=None, variants=None, log=None, jobs: int = 1) -> dict:
    """Run (or resume) every variant × arm × seed under ``out``, then summarise (returns the summary).

    ``variants``: a subset of the comparison's variants to run now (the summary needs them all:
    it is written once every variant has run); ``log(message)``: a line per finished run;
    ``jobs``: worker processes for the runs of every variant together
    (:func:`~.allocation_campaign.execute_runs`: each run is a process's own, so the results do
    not depend on it).
    """
    from .allocation_campaign import campaign_runs, execute_runs

    comp = load_comparison(config)
    if seeds is not None:
        comp["seeds"] = checked_seeds(seeds, least=2)
    todo = list(comp["variants"]) if variants is None else list(variants)
    for v in todo:
        if v not in comp["variants"]:
            raise InputError(f"variant must be one of {list(comp['variants'])}, got {v!r}")
    runs = [
        ((v, name), seed, cfg, folder)
        for v in todo
        for name, seed, cfg, folder in campaign_runs(
            variant_campaign(comp, v), entry_path(Path(out), v, what="variant"), comp["seeds"]
        )
    ]
    import contextlib

    from ..io.lock import hold_folder

    with contextlib.ExitStack() as held:
        # Each variant folder is one process's for the whole of its runs (one process per variant
        # is how --variant splits the work): a second comparison into the same --out is refused at
        # once, naming the owner, instead of both failing on each other's run folders.
        for v in sorted(todo):
            held.enter_context(hold_folder(Path(out) / v, option="--out variant"))
        execute_runs(
            runs, jobs=jobs, on_run=None if log is None else (lambda vn, seed: log(f"{vn[0]} {vn[1]} seed {seed} done"))
        )
        for v in todo:  # every run is done: each variant's campaign reads its runs back and summarises
            run_allocation_campaign(Path(out) / v, campaign=variant_campaign(comp, v), progress=False)
    if all((Path(out) / v / "allocation_summary.json").is_file() for v in comp["variants"]):
        return summarise_comparison(out, comp)
    return {}


def _objective_curve(run_dir):
    """(generations spent, mean 2·arcsin√p after them): the state before each step, then the final."""
    from ..simulator.ledger import read_ledger

    led = read_ledger(run_dir)
    final = read_json(Path(run_dir) / "summary.json")["final"]
    x = np.concatenate([[0.0], led["generations_cum"].to_numpy(dtype=np.float64)])
    y = np.concatenate([led["mean_arcsin"].to_numpy(dtype=np.float64), [final["mean_arcsin"]]])
    return x, y


def _value_at(x, y, g):
    """The objective after at most g generations (the last state within them)."""
    i = int(np.searchsorted(x, g * (1 + 1e-12), side="right")) - 1
    return float(y[max(i, 0)])


def _generations_to(x, y, target, budget):
    hit = np.nonzero((y >= target) & (x <= budget * (1 + 1e-12)))[0]
    return float(x[hit[0]]) if hit.size else math.nan


def _decomposition(run_dir) -> list[float]:
    """Change of mean 2·arcsin√p from the start to the run's end, by initial-difficulty quartile
    (hardest first; each part is Σ over the quartile / all prompts, so the parts sum to the change)."""
    from ..simulator.config import SimConfig
    from ..simulator.population import initial_solve_rates
    from ..simulator.runfolder import final_solve_rates

    cfg = SimConfig.from_dict(read_json(Path(run_dir) / "config.json"))
    p0 = initial_solve_rates(cfg)
    p1 = final_solve_rates(Path(run_dir), cfg, p0)
    gain = 2 * np.arcsin(np.sqrt(p1)) - 2 * np.arcsin(np.sqrt(p0))
    quart = np.empty(p0.size, dtype=np.int64)
    quart[np.argsort(p0, kind="stable")] = np.arange(p0.size) * 4 // p0.size
    return (np.bincount(quart, weights=gain, minlength=4) / p0.size).tolist()


def summarise_comparison(out, comp: dict | None = None) -> dict:
    """Read every variant's campaign under ``out`` against its best uniform G; write the summary."""
    out = Path(out)
    comp = comp or load_comparison()
    result = {
        "seeds": comp["seeds"],
        "reference_arm": comp["reference_arm"],
        "uniform_arms": comp["uniform_arms"],
        "setup": {
            k: comp["base"].get(k)
            for k in (
                "n_prompts",
                "steps",
                "group_size",
                "lr",
                "g_min",
                "g_max",
                "replan_every",
                "logged_window",
                "difficulty",
            )
        },
        "variants": {v: _summarise_variant(out / v, comp, v) for v in comp["variants"]},
    }
    write_json(out / SUMMARY_FILE, result)
    return read_json(out / SUMMARY_FILE)  # as a reader sees it: NaN as None, keys as strings


def _summarise_variant(folder: Path, comp: dict, v: str) -> dict:
    """One variant's campaign (in ``folder``): its best uniform G, the objective targets that arm
    reaches at 50 % and 100 % of the budget, and every arm's row against it."""
    s = read_json(folder / "allocation_summary.json")
    seeds = s["seeds"]
    budget = {int(k): float(b) for k, b in s["budget_generations"].items()}  # by seed
    curves = {a: {seed: _objective_curve(folder / "runs" / a / f"seed{seed}") for seed in seeds} for a in s["arms"]}
    best = max(comp["uniform_arms"], key=lambda a: s["arms"][a]["mean_arcsin"]["mean"])
    t50 = float(np.mean([_value_at(*curves[best][sd], 0.5 * budget[sd]) for sd in seeds]))
    t100 = float(np.mean([_value_at(*curves[best][sd], budget[sd]) for sd in seeds]))
    arms = {a: _arm_row(folder, s, a, best, curves, budget, (t50, t100)) for a in s["arms"]}
    _mark_winners(arms, best, comp["uniform_arms"], len(seeds))
    return {
        "best_uniform": best,
        "targets": {"t50": t50, "t100": t100},
        "budget": budget,
        "overrides": comp["variants"][v],
        "arms": arms,
    }


def _arm_row(folder: Path, s: dict, a: str, best: str, curves: dict, budget: dict, targets) -> dict:
    """One arm's intervals over seeds: final objective, its paired difference to the best uniform G,
    generations to each target, the speed-up at the 50 % target and, for a run that spent its whole
    budget, the objective gain by initial-difficulty quartile."""
    t50, t100 = targets
    seeds = s["seeds"]
    r = s["arms"][a]
    per = s["per_run"][a]
    g50 = [_generations_to(*curves[a][sd], t50, budget[sd]) for sd in seeds]
    g100 = [_generations_to(*curves[a][sd], t100, budget[sd]) for sd in seeds]
    b50 = [_generations_to(*curves[best][sd], t50, budget[sd]) for sd in seeds]
    diff = [per[str(sd)]["mean_arcsin"] - s["per_run"][best][str(sd)]["mean_arcsin"] for sd in seeds]
    at_budget = all(
        per[str(sd)]["steps"] == int(read_json(folder / "runs" / a / f"seed{sd}" / "config.json")["steps"])
        for sd in seeds
    )
    row = {
        "mean_arcsin": r["mean_arcsin"],
        "diff_vs_best": seed_interval(diff),
        "hard_quartile_p": r["hard_quartile_p"],
        "mean_p": r["mean_p"],
        "effective_ratio": r["effective_ratio"],
        "grad_mass_over_planned": r["grad_mass_over_planned"],
        "generations_to_t50": seed_interval(g50, POSITIVE),
        "generations_to_t100": seed_interval(g100, POSITIVE),
        "speedup_t50": seed_interval([b / g if g > 0 else math.nan for b, g in zip(b50, g50)], POSITIVE),
    }
    if at_budget:
        parts = np.array([_decomposition(folder / "runs" / a / f"seed{sd}") for sd in seeds])
        row["decomposition"] = [seed_interval(parts[:, q].tolist()) for q in range(4)]
    return row


def _mark_winners(arms: dict, best: str, uniform_arms, n_seeds: int) -> None:
    """Set each arm's ``winner``: what it beats the best uniform G on, interval clear of interval
    (none for the uniform arms and the oracles)."""
    ref = arms[best]
    for a, row in arms.items():
        if a in uniform_arms or a.startswith("oracle"):
            row["winner"] = []
            continue
        won = []
        if row["mean_arcsin"]["lo"] > ref["mean_arcsin"]["hi"]:
            won.append("final objective")
        if row["hard_quartile_p"]["lo"] > ref["hard_quartile_p"]["hi"]:
            won.append("hardest quartile")
        if (
            row["generations_to_t50"]["n"] == n_seeds
            and ref["generations_to_t50"]["n"] == n_seeds
            and row["generations_to_t50"]["hi"] < ref["generations_to_t50"]["lo"]
        ):
            won.append("generations to the 50 % target")
        row["winner"] = won


def comparison_markdown(summary: dict) -> list[str]:
    """The comparison's tables (one per variant), the decomposition and the verdict, as markdown lines."""
    from .allocation_campaign import INTERVAL_NOTE, TRANSFORMED_MARK, interval_text

    L = []
    for v, sv in summary["variants"].items():
        best = sv["best_uniform"]
        t = sv["targets"]
        L.append(
            f"**{v} policy** ({', '.join(f'{k} = {x}' for k, x in sv['overrides'].items()) or 'base config'}); "
            f"best uniform: {LABELS.get(best, best)}; objective targets (mean 2·arcsin√p that it reaches at "
            f"50 % / 100 % of the budget): {t['t50']:.4f} / {t['t100']:.4f}.\n"
        )
        L.append(
            "| arm | final objective | − best uniform (paired) | generations (M) to 50 % target | "
            "generations (M) to 100 % target | hardest-quartile p | effective-gradient ratio | "
            "mass measured / planned | wins |"
        )
        L.append("|---|---|---|---|---|---|---|---|---|")
        for a, r in sv["arms"].items():
            L.append(
                f"| {LABELS.get(a, a)} | {interval_text(r['mean_arcsin'], 4)} | {interval_text(r['diff_vs_best'], 4)} | "
                f"{interval_text(r['generations_to_t50'], 2, 1e-6)} | {interval_text(r['generations_to_t100'], 2, 1e-6)} | "
                f"{interval_text(r['hard_quartile_p'], 4)} | {interval_text(r['effective_ratio'])} | "
                f"{interval_text(r['grad_mass_over_planned'], 2)} | {', '.join(r['winner']) or '—'} |"
            )
        L.append("")
        dec = {a: r["decomposition"] for a, r in sv["arms"].items() if "decomposition" in r}
        if dec:
            L.append(
                f"Objective-gain decomposition ({v}): change of mean 2·arcsin√p from the start, by initial "
                "quartile (Q1 hardest; the parts sum to the gain).\n"
            )
            L.append("| arm | Q1 (hardest) | Q2 | Q3 | Q4 (easiest) |")
            L.append("|---|---|---|---|---|")
            for a, parts in dec.items():
                L.append(f"| {LABELS.get(a, a)} | " + " | ".join(interval_text(q, 4) for q in parts) + " |")
            L.append("")
    if any(TRANSFORMED_MARK in line for line in L):  # the mark explained where the tables use it
        L.append(INTERVAL_NOTE + "\n")
    L.append(comparison_verdict(summary) + "\n")
    return L


def _signed(r) -> str:
    """'+0.0123 [+0.0100, +0.0150]' (the interval left out where there is none)."""
    f = lambda x: "nan" if x is None or not math.isfinite(x) else f"{x:+.4f}"
    return f"{f(r['mean'])} [{f(r['lo'])}, {f(r['hi'])}]"


def comparison_verdict(summary: dict) -> str:
    """Plain words: which rule wins where (an interval clear of the best uniform G's), else that none does."""
    lines = []
    for v, sv in summary["variants"].items():
        best = sv["best_uniform"]
        wins = {a: r["winner"] for a, r in sv["arms"].items() if r["winner"]}
        real = {a: r for a, r in sv["arms"].items() if a not in summary["uniform_arms"] and not a.startswith("oracle")}
        if not real:  # a comparison of uniform group sizes alone
            lines.append(f"{v}: no allocation rule among the arms; the best uniform G is {LABELS.get(best, best)}.")
            continue
        top = max(real, key=lambda a: real[a]["mean_arcsin"]["mean"])
        d = _signed(real[top]["diff_vs_best"])
        if wins:
            lines.append(
                f"{v}: "
                + "; ".join(
                    f"{LABELS.get(a, a)} beats {LABELS.get(best, best)} on {', '.join(w)}" for a, w in wins.items()
                )
                + f" (best rule {LABELS.get(top, top)}: final objective {d} against it, paired)."
            )
        else:
            lines.append(
                f"{v}: no rule's interval clears {LABELS.get(best, best)}'s; the closest, "
                f"{LABELS.get(top, top)}, ends {d} in mean 2·arcsin√p against it (paired)."
            )
    return " ".join(lines)


def comparison_figure(summary: dict, out_dir):
    """Mean 2·arcsin√p against generations (mean over seeds), one panel per variant, one legend
    below the panels: the uniform arms in black, one dash pattern per G (the best one thick), the
    allocation rules in colour (the oracles dashed)."""
    from ..plotstyle import styled

    return styled(_comparison_figure)(summary, out_dir)


#: Dash patterns of the uniform arms, in the order of their group size.
UNIFORM_DASHES = ((0, (1, 1.5)), (0, (5, 2)), (0, (8, 2, 1.5, 2)), (0, (3, 1, 1, 1, 1, 1)), (0, (2, 4)))


def _comparison_figure(summary: dict, out_dir):
    from matplotlib import colormaps
    from matplotlib.lines import Line2D

    from ..plotstyle import new_figure

    variants = list(summary["variants"])
    fig, axes = new_figure(len(variants), width=5.2 * len(variants), height=4.6)
    axes = np.atleast_1d(axes)
    cmap = colormaps["tab10"]
    arms = list(dict.fromkeys(a for v in variants for a in summary["variants"][v]["arms"]))
    uniform = [a for a in arms if a in summary["uniform_arms"]]
    rules = [a for a in arms if a not in summary["uniform_arms"]]
    style = {a: {"color": "k", "ls": UNIFORM_DASHES[i % len(UNIFORM_DASHES)]} for i, a in enumerate(uniform)}
    style.update(
        {
            a: {"color": cmap(i % 10), "ls": "--" if a.startswith("oracle") else "-" if i < 10 else "-."}
            for i, a in enumerate(rules)
        }
    )  # past ten colours, the rule's line is dash-dotted
    for ax, v in zip(axes, variants):
        sv = summary["variants"][v]
        grid = np.linspace(0, max(sv["budget"].values()), 80)
        for a in sv["arms"]:
            ys = []
            for seed in summary["seeds"]:
                x, y = _objective_curve(Path(out_dir) / v / "runs" / a / f"seed{seed}")
                idx = np.searchsorted(x, grid, side="right") - 1
                ys.append(np.where(grid <= x[-1], y[np.maximum(idx, 0)], np.nan))
            ax.plot(
                grid / 1e6,
                np.mean(ys, axis=0),
                lw=2.6 if a == sv["best_uniform"] else 1.3,
                zorder=3 if a in summary["uniform_arms"] else 2,
                **style[a],
            )  # the baselines over the rules
        ax.set_xlabel("generations (millions of sampled answers)")
        ax.set_ylabel("mean 2·arcsin√p over prompts (radians)")
        best = LABELS.get(sv["best_uniform"], sv["best_uniform"])
        ax.set_title(f"{v} policy; thick: {best}, the best uniform G", fontsize=9)
    handles = [Line2D([], [], lw=1.6, label=LABELS.get(a, a), **style[a]) for a in uniform + rules]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(5, len(handles)), fontsize=7, frameon=False)
    seeds = len(summary["seeds"])
    fig.suptitle(
        f"Budget allocation at equal generations: GRPO's objective against generations spent "
        f"(mean over {seeds} seed{'s' if seeds != 1 else ''})",
        fontsize=10,
    )
    return fig
