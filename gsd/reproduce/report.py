"""``gsd reproduce``: regenerate the paper's evidence and say, number by number, how close it is.

:func:`run_reproduction` runs every part on the built-in defaults — Big-Math analysis,
group-size table, theory checks, DAPO consistency fit on a generated curve, trainer convention
gap, the controlled campaign (when the simulator is installed) and every figure — and writes
into one folder:

* ``report.md`` — readable report, the comparison table first;
* ``report.json`` — the same numbers, machine-readable;
* ``figures/`` — every figure (PNG);
* ``campaign/`` — the campaign run folder (when run).

Nothing is tuned towards a published value: the published numbers (:data:`PUBLISHED`, in
:mod:`.published`) are only read when the comparison table is written; the Markdown is
:mod:`.report_markdown`'s.  This module runs the stages, one function per part, and writes the two
files; the names of the other two modules stay importable from here.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from .. import __version__
from ..core.trainers import convention_gap
from ..core.update import fidelity
from ..errors import MissingExtra
from ..extras import require_torch
from ..io.atomic import make_folder, replace_set, write_atomic, write_json
from ..io.lock import hold_folder
from ..plotstyle import save_figure
from ..validation import InputError
from . import bigmath, dapo_fit, group_size_table, provenance, theory
from .figures import campaign_figure, loss_figures, make_figures, monte_carlo_sizes, optional_import
from .published import HISTOGRAM_NOTE, PUBLISHED, Published, compare
from .report_markdown import allocation_verdict as allocation_verdict  # kept importable from here
from .report_markdown import render_markdown

__all__ = ["Published", "PUBLISHED", "HISTOGRAM_NOTE", "compare", "run_reproduction", "REPORT_KEYS", "DEFAULT_OUT"]

DEFAULT_OUT = Path("reports") / "latest"
#: Top-level keys of report.json.
REPORT_KEYS = (
    "meta",
    "comparisons",
    "bigmath",
    "group_size_table",
    "theory",
    "dapo",
    "conventions",
    "campaign",
    "allocation",
    "transformer",
    "group_size_training",
    "figures",
)
#: Sizes of the transformer stage: ``gsd reproduce --transformer``.
TRANSFORMER_MODES = ("fast", "full", "skip")
#: Sizes of the group-size training stage: ``gsd reproduce --group-size-training`` (the full run is
#: ``gsd group-size-training``: tens of minutes).
GROUP_SIZE_TRAINING_MODES = ("fast", "skip")


# --------------------------------------------------------------------------- stages
class _Stages:
    """Prints "[i/n] stage … done (s)" to stderr and records timings."""

    def __init__(self, total: int, show: bool):
        self.total, self.show, self.i, self.seconds = total, show, 0, {}

    def run(self, name: str, fn, *args, **kwargs):
        self.i += 1
        if self.show:
            print(f"[{self.i}/{self.total}] {name} …", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        dt = time.perf_counter() - t0
        self.seconds[name] = dt
        if self.show:
            print(f"      done in {dt:.1f} s", file=sys.stderr, flush=True)
        return out


def _records(df: pd.DataFrame) -> list[dict]:
    return df.to_dict(orient="records")


def _bigmath_stage(difficulty_path):
    d = bigmath.load_difficulty(difficulty_path)
    s = bigmath.summary(d)
    return {
        "source": s["source"],
        "rollouts_per_problem": s["rollouts_per_problem"],
        "notes": s["notes"],
        "population": s["population"],
        "headline": s["headline"],
        "silent_rates": _records(s["silent_rates"]),
        "budget_shares": _records(s["budget_shares"]),
        "deciles": _records(s["deciles"]),
    }


def _group_size_stage():
    table = group_size_table.group_size_table()
    # Check, not assume, that the bisection's answer is the first G reaching the target: scan.
    scan_ok = True
    for row in table.itertuples():
        G = np.arange(2, int(row.G_exact) + 1)
        phi = fidelity(row.p, G)
        first = int(G[np.argmax(phi >= row.fidelity)]) if (phi >= row.fidelity).any() else -1
        scan_ok &= first == row.G_exact
    monotone = bool(
        all((np.diff(fidelity(p, np.arange(1, 1001))) >= -1e-15).all() for p in (0.5, 0.3, 0.1, 0.05, 0.01))
    )
    return {
        "rows": _records(table),
        "wide": _records(group_size_table.group_size_table_wide(table)),
        "all_symmetric": bool(table.symmetric.all()),
        "matches_brute_force_scan": bool(scan_ok),
        "fidelity_nondecreasing_in_G_to_1000": monotone,
        "hard_prompt_check": group_size_table.hard_prompt_check(),
    }


def _theory_stage(fast: bool, seed: int):
    n = monte_carlo_sizes(fast)
    mc = theory.identity_monte_carlo(n_draws=n["identity_draws"], seed=seed)
    om = theory.objective_monte_carlo(n_groups=n["objective_groups"], seed=seed + 1)
    return {
        "identity": {
            "G": 8,
            "baselines": sorted(float(b) for b in mc.baseline.unique()),
            "draws_per_k": n["identity_draws"],
            "max_abs_deviation_grpo": float(mc.max_dev_grpo.max()),
            "max_abs_deviation_dr_grpo": float(mc.max_dev_dr_grpo.max()),
        },
        "objective_monte_carlo": {
            "G": 64,
            "groups_per_p": n["objective_groups"],
            "max_abs_z_grpo": float(np.abs(om.z_grpo).max()),
            "max_abs_z_dr_grpo": float(np.abs(om.z_dr_grpo).max()),
            "rows": _records(
                om[["p", "mc_grpo", "exact_grpo", "large_G_grpo", "mc_dr_grpo", "exact_dr_grpo", "large_G_dr_grpo"]]
            ),
        },
        "_frames": {"identity": mc, "objective": om},
    }


def _dapo_stage(fast: bool, seed: int):
    model = dapo_fit.AllCorrectModel()
    cfg = {
        **dapo_fit.REFERENCE_CURVE,
        "seed": seed,
        "steps": "0, 10, ..., 600",
        "difficulty": "shipped Big-Math p̂",
        "n_samples": dapo_fit.N_SAMPLES,
    }
    curve = dapo_fit.synthetic_curve(
        tau=cfg["tau"], T_inf=cfg["T_inf"], noise_sd=cfg["noise_sd"], seed=seed, model=model
    )
    fit = dapo_fit.fit_all_correct_curve(
        curve.step, curve.fraction, model=model, seed=seed, n_bootstrap=monte_carlo_sizes(fast)["dapo_bootstrap"]
    )
    exact = dapo_fit.synthetic_curve(tau=cfg["tau"], T_inf=cfg["T_inf"], noise_sd=0.0, model=model)
    exact_fit = dapo_fit.fit_all_correct_curve(exact.step, exact.fraction, model=model, n_bootstrap=0)
    s = fit.summary()
    lo, hi = s["tau_ci"]
    return {
        "synthetic": cfg,
        "fit": s,
        "tau_true": cfg["tau"],
        "tau_relative_error": s["tau"] / cfg["tau"] - 1.0,
        "tau_in_bootstrap_interval": bool(lo <= cfg["tau"] <= hi),
        "noise_free_tau": exact_fit.tau,
        "noise_free_r2": exact_fit.r2,
        "bigmath_all_correct_at_T1": float(model(1.0)),
        "bigmath_mean_solve_rate": float(model.mean_solve_rate(1.0)),
        "_fit": fit,
        "_curve": curve,
    }


def _conventions_stage():
    frames = [convention_gap(8, t) for t in ("paper", "trl", "verl", "openrlhf")]
    return _records(pd.concat(frames, ignore_index=True))


def _reuse(run_dir: Path, config, marker: str, finished: str, progress: bool) -> dict:
    """Reuse only what this code and config made (:mod:`.provenance`), and say which it is."""
    prep = provenance.prepare_folder(run_dir, config, marker=marker)
    reused = prep["earlier"] == "same" and (run_dir / finished).is_file()
    note = {
        "none": "computed",
        "other": "computed again: the earlier results there were made by other code or config",
        "same": "reused: an earlier complete run by the same code and config"
        if reused
        else "resumed: an earlier unfinished run by the same code and config",
    }[prep["earlier"]]
    if progress and prep["earlier"] != "none":
        print(f"      {run_dir}: {note} (fingerprint {prep['fingerprint'][:12]})", file=sys.stderr, flush=True)
    return {"reused_complete_run": reused, "reuse": note, "fingerprint": prep["fingerprint"]}


def campaign_stage(out: Path, progress: bool, overrides: dict | None = None):
    mod, why = optional_import("gsd.simulator.campaign")
    if mod is None:
        return {"status": "not available", "reason": why}
    run_dir = out / "campaign"
    try:
        reuse = _reuse(run_dir, mod.load_campaign(None, overrides), "campaign.json", "campaign_summary.json", progress)
        summary = mod.run_paper_campaign(run_dir, progress=progress, overrides=overrides)
    except ValueError as exc:  # e.g. the folder holds files of another origin: report it, keep the rest
        return {"status": "failed", "reason": str(exc), "run_dir": str(run_dir)}
    return {"status": "ok", "run_dir": str(run_dir), **reuse, **campaign_numbers(summary)}


def _allocation_stage(out: Path, progress: bool):
    """Beyond the paper: the allocation comparison at reproduce size (uniform G, DAPO, GRESO-style
    skip, the allocator's values; tabular and MLP policies)."""
    mod, why = optional_import("gsd.reproduce.allocation_comparison")
    if mod is None:
        return {"status": "not available", "reason": why}
    try:  # its planned arms and its MLP variant run on the torch engine: without the extra, say so
        require_torch("the allocation comparison (its planned arms and MLP policy)")
    except MissingExtra as exc:
        return {"status": "not available", "reason": str(exc)}
    run_dir = out / "allocation"
    try:
        comp = mod.load_comparison(mod.SMALL_CONFIG_NAME)
        reuse = _reuse(run_dir, comp, next(iter(comp["variants"])), mod.SUMMARY_FILE, progress)
        summary = mod.run_comparison(run_dir, config=mod.SMALL_CONFIG_NAME)
    except ValueError as exc:  # e.g. a run folder of another config: report it, keep the rest
        return {"status": "failed", "reason": str(exc), "run_dir": str(run_dir)}
    return {"status": "ok", "run_dir": str(run_dir), **reuse, "config": mod.SMALL_CONFIG_NAME, "comparison": summary}


def _trl_module(name: str, what: str):
    """(the module ``name``, None) when it and every package TRL's own code needs import; else
    (None, the stage's "not available" record saying why)."""
    mod, why = optional_import(name)
    if mod is None:
        return None, {"status": "not available", "reason": why}
    from ..extras import require_trl

    try:  # the stage runs TRL's own code: every package it needs, named at once
        require_trl(what)
    except MissingExtra as exc:
        return None, {"status": "not available", "reason": str(exc)}
    except ImportError as exc:
        return None, {"status": "not available", "reason": f"{exc.__class__.__name__}: {exc}"}
    return mod, None


def transformer_stage(mode: str, seed: int, fig_dir: Path, out: Path):
    """Beyond the paper: TRL 1.16.0's own update on a tiny transformer whose solve rates are
    exact, against the closed forms (:mod:`gsd.reproduce.transformer`).  The full sizes draw
    the figures the docs quote (into ``fig_dir``); the fast ones into ``out/transformer``, so that
    a fast run never overwrites them."""
    if mode == "skip":
        return {"status": "skipped", "reason": "--transformer skip"}
    mod, missing = _trl_module("gsd.reproduce.transformer", "the transformer stage of gsd reproduce")
    if mod is None:
        return missing
    result = mod.run(fast=mode == "fast", seed=seed)
    where = fig_dir if mode == "full" else out / "transformer"
    make_folder(where)
    paths = [
        save_figure(mod.figure(result), where / "transformer_update.png"),
        save_figure(mod.silent_figure(result), where / "transformer_silent.png"),
    ]
    return {
        "status": "ok",
        "mode": mode,
        **{k: result[k] for k in ("G", "n_prompts", "draws", "copies")},
        "rows": _records(mod.table(result)),
        "mean_length": {v: r["mean_length"] for v, r in result["variants"].items()},
        "p": {v: r["p"] for v, r in result["variants"].items()},
        "silent_r2": {
            m: {"exact": t["r2_exact"], "pooled": t["r2_pooled"]} for m, t in result["training"]["runs"].items()
        },
        "_figures": paths,
    }


def group_size_training_stage(mode: str, out: Path):
    """Beyond the paper: which G and which prompts learn fastest per generation in TRL's own trainer
    (:mod:`gsd.reproduce.group_size_training`), at its fast size (seconds; its numbers exercise the
    pipeline, the docs quote the full run's), into ``out/group_size_training``."""
    if mode == "skip":
        return {"status": "skipped", "reason": "--group-size-training skip"}
    mod, missing = _trl_module("gsd.reproduce.group_size_training", "the group-size training stage of gsd reproduce")
    if mod is None:
        return missing
    where = out / "group_size_training"
    results = mod.run(where, mod.FAST, progress=False)
    path = save_figure(mod.figure(results), where / "group_size_training.png")
    return {
        "status": "ok",
        "mode": mode,
        "run_dir": str(where),
        "budget": mod.FAST.budget,
        "rows": _records(mod.summary(results)),
        "_figures": [path],
    }


def _find_r2(summary) -> float | None:
    """The GRPO arm's silent-fraction R² (``summary["silent_r2"]["grpo"]``), None if absent."""
    r2 = summary.get("silent_r2") if isinstance(summary, dict) else None
    value = r2.get("grpo") if isinstance(r2, dict) else None
    return None if value is None else float(value)


def campaign_numbers(summary: dict) -> dict:
    """The campaign's headline numbers from the simulator's summary (the full one stays in its folder)."""
    out = {"silent_r2_grpo": _find_r2(summary)}
    if not isinstance(summary, dict):
        return out
    arms = summary.get("arms", {}) if isinstance(summary.get("arms"), dict) else {}
    out["silent_r2"] = summary.get("silent_r2")
    out["silent_rmse"] = {n: a.get("silent_rmse") for n, a in arms.items()}
    base = (summary.get("campaign") or {}).get("base", {})
    out["setup"] = {k: base.get(k) for k in ("n_prompts", "steps", "group_size", "lr", "seed") if k in base}
    dec = summary.get("decile_measurement") or {}
    out["decile_share_max_abs_diff"] = {
        m: dec[m].get("share_max_abs_diff") for m in ("grpo", "dr_grpo") if isinstance(dec.get(m), dict)
    }
    out["decile_draws"] = dec.get("draws")
    out["hard_quartile_initial"] = summary.get("hard_quartile_initial")
    out["hard_quartile_final"] = summary.get("hard_quartile_final")
    out["dapo_generation_cost_ratio"] = summary.get("dapo_generation_cost_ratio")
    out["dapo_generation_cost_ratio_pred"] = summary.get("dapo_generation_cost_ratio_pred")
    return out


def _figures_stage(fig_dir: Path, fast: bool, campaign: dict, theory_frames, dapo_result, allocation=None):
    from . import figures as F

    # The Monte Carlo runs and the fit of the earlier stages are drawn as they are, not redrawn.
    reused = {
        "identity_gk.png": lambda: theory.identity_figure(theory_frames["identity"]),
        "objectives.png": lambda: theory.objectives_figure(mc=theory_frames["objective"]),
        "dapo_fit.png": lambda: dapo_fit.fit_figure(
            dapo_result["_fit"], truth=dapo_result["_curve"].truth.to_numpy(), title=dapo_fit.reference_title()
        ),
    }
    written = make_figures(fig_dir, fast=fast, only=[n for n in F.FIGURES if n not in reused])
    written += [save_figure(make(), fig_dir / name) for name, make in reused.items()]
    skipped = {}
    paths, why = loss_figures(fig_dir)
    written += paths
    if why:
        skipped["losses"] = why
    if campaign.get("status") == "ok":
        paths, why = campaign_figure(Path(campaign["run_dir"]), fig_dir)
        written += paths
    else:
        why = f"campaign {campaign.get('status')}"
    if why:
        skipped["campaign"] = why
    if allocation and allocation.get("status") == "ok":
        from .allocation_comparison import comparison_figure

        written.append(
            save_figure(
                comparison_figure(allocation["comparison"], allocation["run_dir"]),
                fig_dir / "allocation_comparison.png",
            )
        )
    else:
        skipped["allocation_comparison"] = f"allocation comparison {(allocation or {}).get('status', 'not run')}"
    return {"written": [Path(p) for p in written], "skipped": skipped}


# --------------------------------------------------------------------------- main entry
def run_reproduction(
    out=DEFAULT_OUT,
    *,
    fast: bool = False,
    skip_campaign: bool = False,
    progress: bool = True,
    difficulty=None,
    seed: int = 0,
    figures_dir=None,
    transformer: str = "fast",
    group_size_training: str = "fast",
) -> dict:
    """Run every part, write report.md / report.json / figures into ``out``; return the report.

    ``fast``: smaller Monte Carlo and bootstrap runs (same analyses).  ``skip_campaign``: do not
    train the simulator's campaign.  ``difficulty``: a per-problem solve-rate file to analyse in
    place of the shipped Big-Math histogram (its published comparisons then do not apply).
    ``transformer``: the sizes of the TRL-on-a-transformer stage, ``"fast"`` (default, in either
    mode: under a minute; figures in ``out/transformer``), ``"full"`` (minutes; the figures the
    docs quote, in the figures folder) or ``"skip"``.  ``group_size_training``: ``"fast"`` (default,
    seconds: every arm of :mod:`gsd.reproduce.group_size_training` at its fast size, into
    ``out/group_size_training``) or ``"skip"``.
    """
    _check_modes(transformer, group_size_training)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"out: {str(out)!r} exists and is not a folder")
    make_folder(out)
    with hold_folder(out, option="out"):  # one reproduction per folder at a time
        fig_dir = Path(figures_dir) if figures_dir is not None else out / "figures"
        t_start = time.perf_counter()
        stages = _Stages(total=10, show=progress)
        parts = _run_stages(
            stages,
            out,
            fig_dir,
            fast=fast,
            skip_campaign=skip_campaign,
            progress=progress,
            difficulty=difficulty,
            seed=seed,
            transformer=transformer,
            group_size_training=group_size_training,
        )
        comparisons = _comparisons(parts, difficulty)
        total = time.perf_counter() - t_start
        report = {"meta": _meta(out, fast, seed, stages.seconds, total), "comparisons": comparisons, **parts}
        with replace_set(out, ("report.json", "report.md")) as stage:  # the two agree, always
            write_json(stage / "report.json", report)
            write_atomic(stage / "report.md", render_markdown(report))
        if progress:
            print(f"report: {out / 'report.md'}  ({total:.1f} s)", file=sys.stderr)
        return report


def _check_modes(transformer: str, group_size_training: str) -> None:
    """Refuse a stage size that is not one of its modes, before any work."""
    if transformer not in TRANSFORMER_MODES:
        raise InputError(f"transformer must be one of {TRANSFORMER_MODES}, got {transformer!r}")
    if group_size_training not in GROUP_SIZE_TRAINING_MODES:
        raise InputError(f"group_size_training must be one of {GROUP_SIZE_TRAINING_MODES}, got {group_size_training!r}")


def _run_stages(
    stages: _Stages,
    out: Path,
    fig_dir: Path,
    *,
    fast: bool,
    skip_campaign: bool,
    progress: bool,
    difficulty,
    seed: int,
    transformer: str,
    group_size_training: str,
) -> dict:
    """Every stage in turn, the figures last: one record per part, keyed and ordered as in report.json."""
    big = stages.run("Big-Math: silent rates, budget and decile shares", _bigmath_stage, difficulty)
    gst = stages.run("group-size table (exact vs law)", _group_size_stage)
    th = stages.run("theory: identity and objective Monte Carlo", _theory_stage, fast, seed)
    dapo = stages.run("DAPO consistency fit on a generated curve", _dapo_stage, fast, seed)
    conv = stages.run("trainer conventions at G = 8", _conventions_stage)
    camp, alloc = _simulator_stages(stages, out, skip_campaign, progress)
    trf = stages.run(
        "beyond the paper: TRL's update on a tiny transformer vs the closed forms",
        transformer_stage,
        transformer,
        seed,
        fig_dir,
        out,
    )
    gstr = stages.run(
        "beyond the paper: group size and prompt choice in TRL training (fast size)",
        group_size_training_stage,
        group_size_training,
        out,
    )
    figs = stages.run("figures", _figures_stage, fig_dir, fast, camp, th.pop("_frames"), dapo, alloc)
    figs["written"] += [Path(p) for p in trf.pop("_figures", []) + gstr.pop("_figures", [])]
    dapo.pop("_fit")
    dapo.pop("_curve")
    # Relative to the report, so its links work wherever the folder is moved with its figures
    # (`make figures` writes them to ../../figures).
    figs["written"] = sorted(Path(os.path.relpath(p.resolve(), out.resolve())).as_posix() for p in figs["written"])
    return {
        "bigmath": big,
        "group_size_table": gst,
        "theory": th,
        "dapo": dapo,
        "conventions": conv,
        "campaign": camp,
        "allocation": alloc,
        "transformer": trf,
        "group_size_training": gstr,
        "figures": figs,
    }


def _simulator_stages(stages: _Stages, out: Path, skip_campaign: bool, progress: bool) -> tuple[dict, dict]:
    """The controlled campaign and the allocation comparison (both skipped by ``skip_campaign``)."""
    if skip_campaign:
        stages.i += 1
        camp = {"status": "skipped", "reason": "--skip-campaign"}
        if progress:
            print(f"[{stages.i}/{stages.total}] campaign skipped", file=sys.stderr)
        stages.i += 1
        return camp, {"status": "skipped", "reason": "--skip-campaign"}
    try:
        camp = stages.run("controlled campaign (simulator)", campaign_stage, out, progress)
    except ImportError as exc:  # a half-installed simulator: say so, keep the rest
        camp = {"status": "not available", "reason": f"{exc.__class__.__name__}: {exc}"}
    alloc = stages.run("beyond the paper: budget allocation comparison (simulator)", _allocation_stage, out, progress)
    return camp, alloc


def _comparisons(parts: dict, difficulty) -> list[dict]:
    """Ours against the published numbers; the Big-Math rows marked when computed on a user's file."""
    big, gst, conv = parts["bigmath"], parts["group_size_table"], parts["conventions"]
    ours = {
        "bigmath_silent_G8": big["headline"]["silent_G8_closed_form"],
        "bigmath_extreme_share_dr_grpo": big["headline"]["extreme_share_dr_grpo"],
        "bigmath_extreme_share_grpo": big["headline"]["extreme_share_grpo"],
        "fidelity_law_p0.05_G64": gst["hard_prompt_check"]["law"],
        "fidelity_exact_p0.05_G64": gst["hard_prompt_check"]["exact"],
        "trl_gap_G8": next(r["gap_percent"] for r in conv if r["trainer"] == "trl"),
        "campaign_silent_r2": parts["campaign"].get("silent_r2_grpo"),
    }
    comparisons = compare(ours)
    if difficulty is not None:
        for row in comparisons:
            if row["key"].startswith("bigmath_"):
                row["note"] = "computed on a user file, not the paper's data"
                row["data"] = "user file"
    return comparisons


def _meta(out: Path, fast: bool, seed: int, seconds: dict, total: float) -> dict:
    """The run's record: version, time, mode, seed, platform and seconds per stage."""
    return {
        "gsd_version": __version__,
        "created_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "mode": "fast" if fast else "full",
        "seed": seed,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "seconds": {**{k: round(v, 2) for k, v in seconds.items()}, "total": round(total, 2)},
        "out": str(out),
    }
