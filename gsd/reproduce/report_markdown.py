"""The reproduction report as Markdown: the comparison table first, then one section per part.

:func:`render_markdown` turns the report that :func:`gsd.reproduce.report.run_reproduction` writes
to ``report.json`` into ``report.md``; each section has its own function, named for its part.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .published import HISTOGRAM_NOTE

__all__ = [
    "render_markdown",
    "allocation_markdown",
    "allocation_verdict",
    "transformer_markdown",
    "group_size_training_markdown",
]


def _fmt(v, nd=4):
    if v is None:
        return "—"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        if not math.isfinite(v):
            return "—"
        if v != 0 and abs(v) < 10.0 ** (-nd):
            return f"{v:.2e}"
        return f"{v:.{nd}f}"
    return str(v)


def _md_table(rows: list[dict], columns: list[tuple[str, str]], nd=4) -> str:
    head = "| " + " | ".join(title for _, title in columns) + " |"
    sep = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(_fmt(r.get(key), nd) for key, _ in columns) + " |" for r in rows]
    return "\n".join([head, sep, *body])


def _pct(x):
    return None if x is None or not math.isfinite(x) else 100.0 * x


def render_markdown(report: dict) -> str:
    """The report as Markdown: comparison table first, then one section per part."""
    m = report["meta"]
    return "\n".join(
        _header_markdown(m)
        + _comparison_markdown(report["comparisons"])
        + _bigmath_markdown(report["bigmath"])
        + _group_size_table_markdown(report["group_size_table"])
        + _theory_markdown(report["theory"])
        + _dapo_markdown(report["dapo"])
        + _conventions_markdown(report["conventions"])
        + _campaign_markdown(report["campaign"])
        + allocation_markdown(report.get("allocation") or {"status": "not run"})
        + transformer_markdown(report.get("transformer") or {"status": "not run"})
        + group_size_training_markdown(report.get("group_size_training") or {"status": "not run"})
        + _figures_markdown(report["figures"])
        + _timing_markdown(m["seconds"])
    )


def _header_markdown(m: dict) -> list[str]:
    """The title and the run's metadata (the ``meta`` record)."""
    L = ["# gsd reproduction report\n"]
    L.append(
        f"gsd {m['gsd_version']}, {m['created_utc']}, mode **{m['mode']}**, seed {m['seed']}, "
        f"{m['seconds']['total']:.1f} s on {m['platform']} (Python {m['python']}).\n"
    )
    L.append(
        "Regenerated offline from the package's built-in defaults. Nothing is fitted or tuned towards the "
        "published values: they are only read to write the table below.\n"
    )
    return L


def _comparison_markdown(comparisons: list[dict]) -> list[str]:
    """The table of ours against the published numbers, with the note on the rows from the histogram."""
    L = ["## Ours vs published\n"]
    rows = []
    for r in comparisons:
        d = r["decimals"]
        unit = r["unit"]
        sp = " %" if unit == "%" else unit
        dunit = " points" if unit == "%" else unit
        rows.append(
            {
                "quantity": r["quantity"],
                "ours": "not computed" if not r["computed"] else f"{r['ours']:.{d + 2}f}{sp}",
                "published": f"{r['published']:.{d}f}{sp}",
                "difference": "—" if not r["computed"] else f"{r['difference']:+.{d + 2}f}{dunit}",
                "agree": "yes" if r["agrees_at_printed_precision"] else ("—" if not r["computed"] else "no"),
                "data": r.get("data") or "—",
                "source": r["source"] + (f" ({r['note']})" if r.get("note") else ""),
            }
        )
    L.append(
        _md_table(
            rows,
            [
                ("quantity", "quantity"),
                ("ours", "ours"),
                ("published", "published"),
                ("difference", "ours − published"),
                ("agree", "agrees at printed precision"),
                ("data", "data"),
                ("source", "published in"),
            ],
        )
    )
    if any(r.get("data") == "histogram" for r in comparisons):
        L.append(f'\nRows with data "histogram": {HISTOGRAM_NOTE}.')
    L.append("")
    return L


def _bigmath_markdown(b: dict) -> list[str]:
    """Big-Math: silent shares per G, gradient-budget shares and decile shares."""
    pop = b["population"]
    L = ["## Big-Math: silent groups and the gradient budget\n"]
    L.append(
        f"Source: {b['source']}; {pop['n_problems']:,} problems, mean solve rate {pop['mean_solve_rate']:.4f}. "
        f"Never solved {100 * pop['never_solved']:.2f} %, always solved {100 * pop['always_solved']:.2f} %, "
        f"so {100 * pop['silent_at_every_G']:.2f} % are silent at every G.\n"
    )
    for note in b.get("notes", []):
        L.append(f"Note: {note}.\n")
    L.append(
        "Expected silent share, closed form mean p̂^G + (1−p̂)^G vs exact subsampling of the logged "
        "rollouts (hypergeometric):\n"
    )
    L.append(_silent_rate_table(b["silent_rates"]))
    L.append("\nGradient-budget shares (extreme: 0 < p̂ < 0.1 or 0.9 < p̂ < 1; medium: 0.4 ≤ p̂ ≤ 0.6):\n")
    L.append(_budget_share_table(b["budget_shares"]))
    L.append("\nPer decile of p̂ (% of prompts, % of the budget):\n")
    L.append(_decile_table(b["deciles"]))
    L.append("")
    return L


def _silent_rate_table(rows: list[dict]) -> str:
    """Silent share per G, closed form beside the subsampled rollouts, in %."""
    return _md_table(
        [
            {
                **r,
                "closed_form": _pct(r["closed_form"]),
                "subsampled": _pct(r["subsampled"]),
                "difference": _pct(r["difference"]),
            }
            for r in rows
        ],
        [
            ("G", "G"),
            ("closed_form", "closed form (%)"),
            ("subsampled", "subsampled (%)"),
            ("difference", "difference (points)"),
        ],
        nd=2,
    )


def _budget_share_table(rows: list[dict]) -> str:
    """Gradient-budget shares of the extreme, medium and other prompts per method, in %."""
    return _md_table(
        [
            {
                **r,
                "method": {"grpo": "GRPO", "dr_grpo": "Dr.GRPO"}[r["method"]],
                "extreme": _pct(r["extreme"]),
                "medium": _pct(r["medium"]),
                "other": _pct(r["other"]),
            }
            for r in rows
        ],
        [
            ("method", "method"),
            ("weighting", "weights"),
            ("extreme", "extreme (%)"),
            ("medium", "medium (%)"),
            ("other", "other (%)"),
        ],
        nd=2,
    )


def _decile_table(rows: list[dict]) -> str:
    """Per decile of p̂: its share of the prompts and of each method's budget, in %."""
    return _md_table(
        [
            {
                "decile": f"[{r['lo']:.1f}, {r['hi']:.1f}{']' if r['decile'] == 9 else ')'}",
                **{k: _pct(r[k]) for k in ("prompts", "dr_grpo", "grpo", "dr_grpo_G8", "grpo_G8")},
            }
            for r in rows
        ],
        [
            ("decile", "p̂"),
            ("prompts", "prompts"),
            ("dr_grpo", "Dr.GRPO"),
            ("grpo", "GRPO"),
            ("dr_grpo_G8", "Dr.GRPO G=8"),
            ("grpo_G8", "GRPO G=8"),
        ],
        nd=2,
    )


def _group_size_table_markdown(g: dict) -> list[str]:
    """The fidelity table (exact smallest G beside the law) and its checks."""
    L = ["## Group-size table (fidelity targets)\n"]
    L.append(
        "Smallest G ≥ 2 with exact fidelity φ(p, G) ≥ target, beside the law round(1/(8εp(1−p))). "
        f"Rows for 1 − p identical to p: **{_fmt(g['all_symmetric'])}**; bisection equals a brute-force scan: "
        f"**{_fmt(g['matches_brute_force_scan'])}**; φ nondecreasing in G up to 1000: "
        f"**{_fmt(g['fidelity_nondecreasing_in_G_to_1000'])}**.\n"
    )
    wide = g["wide"]
    cols = [("p", "p"), ("1 - p", "1 − p")] + [(c, c) for c in wide[0] if c not in ("p", "1 - p")]
    L.append(_md_table(wide, cols))
    h = g["hard_prompt_check"]
    L.append(f"\nHard prompt p = {h['p']}, G = {h['G']}: law {h['law']:.4f}, exact {h['exact']:.4f}.\n")
    return L


def _theory_markdown(t: dict) -> list[str]:
    """The identity and the objective Monte Carlo checks."""
    idt = t["identity"]
    L = ["## Theory checks\n"]
    L.append(
        f"- Identity g = σ(s̄₊ − s̄₋) at G = {idt['G']}, score baselines {idt['baselines']}, "
        f"{idt['draws_per_k']} random groups per k: largest deviation {idt['max_abs_deviation_grpo']:.1e} (GRPO), "
        f"{idt['max_abs_deviation_dr_grpo']:.1e} (Dr.GRPO, σ²)."
    )
    om = t["objective_monte_carlo"]
    L.append(
        f"- Bernoulli-logit Monte Carlo at G = {om['G']} ({om['groups_per_p']} groups per p): largest |z| of "
        f"the simulated mean update against the exact finite-G expectation: {om['max_abs_z_grpo']:.2f} (GRPO), "
        f"{om['max_abs_z_dr_grpo']:.2f} (Dr.GRPO), over {len(om['rows'])} values of p.\n"
    )
    return L


def _dapo_markdown(d: dict) -> list[str]:
    """The DAPO consistency fit on the generated curve."""
    f = d["fit"]
    syn = d["synthetic"]
    L = ["## DAPO consistency fit (generated curve)\n"]
    L.append(
        "No DAPO log is shipped. The check runs on a curve generated by the model itself "
        f"(τ = {syn['tau']:g}, T∞ = {syn['T_inf']:g}, Gaussian noise {syn['noise_sd']:g}, steps {syn['steps']}, "
        f"difficulty: {syn['difficulty']}); run `gsd dapo-fit CURVE.csv` on a real log.\n"
    )
    L.append(
        _md_table(
            [
                {
                    "q": f"τ (true {syn['tau']:g}), {100 * f['confidence']:.0f} % bootstrap interval",
                    "v": f"{f['tau']:.2f}  [{f['tau_ci'][0]:.2f}, {f['tau_ci'][1]:.2f}]",
                },
                {"q": "τ linearised std. error / bootstrap sd", "v": f"{f['tau_se']:.2f} / {f['tau_boot_sd']:.2f}"},
                {"q": "true τ inside the bootstrap interval", "v": _fmt(d["tau_in_bootstrap_interval"])},
                {"q": "T∞ pinned by the plateau", "v": f"{f['T_inf']:.3f} (plateau {f['plateau']:.4f})"},
                {"q": "R², one parameter τ", "v": f"{f['r2']:.4f}  [{f['r2_ci'][0]:.4f}, {f['r2_ci'][1]:.4f}]"},
                {"q": "R², generic P − a·e^(−t/b) (two parameters)", "v": f"{f['generic2_r2']:.4f}"},
                {"q": "R², generic c + a(1 − e^(−t/b)) (three parameters)", "v": f"{f['generic3_r2']:.4f}"},
                {
                    "q": "noise-free curve: τ recovered / R²",
                    "v": f"{d['noise_free_tau']:.3f} / {d['noise_free_r2']:.6f}",
                },
                {
                    "q": "Big-Math E[p^32] at T = 1 / mean p̂",
                    "v": f"{d['bigmath_all_correct_at_T1']:.4f} / {d['bigmath_mean_solve_rate']:.4f}",
                },
            ],
            [("q", "quantity"), ("v", "value")],
        )
    )
    L.append(
        "\nThe noise-free fit misses τ slightly because T∞ is pinned to the mean of the last "
        f"{f['plateau_points']} points, which sit just below the true plateau when the run has not fully "
        "saturated; `saturation` in report.json says how far it got.\n"
    )
    return L


def _conventions_markdown(conventions: list[dict]) -> list[str]:
    """Each trainer's update against the paper's at G = 8."""
    L = ["## Trainer conventions at G = 8\n"]
    L.append(
        _md_table(
            conventions,
            [
                ("trainer", "trainer"),
                ("ddof", "ddof"),
                ("eps", "eps"),
                ("ratio_no_eps", "update / paper's"),
                ("gap_percent", "gap (%)"),
            ],
        )
    )
    L.append("")
    return L


def _campaign_markdown(c: dict) -> list[str]:
    """The controlled campaign on the simulator."""
    L = ["## Controlled campaign (simulator)\n"]
    if c["status"] != "ok":
        return L + [f"campaign: {c['status']} ({c.get('reason', '')}).\n"]
    setup = c.get("setup", {})
    L.append(
        f"Run folder `{c['run_dir']}` ({_reuse_note(c)}). Setup: "
        + ", ".join(f"{k} = {v}" for k, v in setup.items())
        + ".\n"
    )
    r2 = c.get("silent_r2") or {}
    rmse = c.get("silent_rmse") or {}
    fin = c.get("hard_quartile_final") or {}
    dd = c.get("decile_share_max_abs_diff") or {}
    rows = [{"arm": n, "r2": r2.get(n), "rmse": rmse.get(n), "q1": fin.get(n), "dec": dd.get(n)} for n in r2]
    L.append(
        _md_table(
            rows,
            [
                ("arm", "arm"),
                ("r2", "R² silent fraction vs mean p^G+(1−p)^G"),
                ("rmse", "RMSE"),
                ("q1", "hardest quartile, final mean p"),
                ("dec", "decile shares: largest gap, measured vs closed form"),
            ],
        )
    )
    L.append(
        f"\nHardest quartile initial mean p: {_fmt(c.get('hard_quartile_initial'))}. DAPO generations "
        f"relative to GRPO: {_fmt(c.get('dapo_generation_cost_ratio'))} measured, "
        f"{_fmt(c.get('dapo_generation_cost_ratio_pred'))} predicted by the closed form. "
        f"Decile measurement: {c.get('decile_draws')} group draws per prompt.\n"
    )
    return L


def _figures_markdown(fg: dict) -> list[str]:
    """Links to every figure drawn, and the parts not drawn."""
    L = ["## Figures\n"]
    for p in fg["written"]:
        L.append(f"- [{Path(p).name}]({p})")
    for part, why in fg["skipped"].items():
        L.append(f"- {part}: not drawn ({why})")
    L.append("")
    return L


def _timing_markdown(sec: dict) -> list[str]:
    """Seconds per stage."""
    L = ["## Timing\n"]
    L.append(_md_table([{"stage": k, "s": v} for k, v in sec.items()], [("stage", "stage"), ("s", "seconds")], nd=2))
    L.append("")
    return L


def _reuse_note(stage: dict) -> str:
    fp = stage.get("fingerprint")
    return stage.get("reuse", "computed") + (f"; code and config fingerprint `{fp[:12]}`" if fp else "")


def transformer_markdown(t: dict) -> list[str]:
    """The "beyond the paper" section: TRL's expected update against the closed forms."""
    L = ["## Beyond the paper: TRL's update on a transformer\n"]
    if t.get("status") != "ok":
        return L + [f"transformer stage: {t.get('status')} ({t.get('reason', '')}).\n"]
    L.append(
        f"A tiny Qwen2 whose solve rates are exact (first-token reward), {t['n_prompts']} prompts, "
        f"G = {t['G']}, {t['draws'] * t['copies']} groups per prompt ({t['mode']} sizes; docs: "
        "transformer). Ratio of the mean update of TRL 1.16.0's own loss, along ∇p, to the closed "
        "form of its advantage (GRPO's with TRL's std for group and batch scaling, Dr.GRPO's for none); "
        "token-level losses rescaled so that an answer's mean weight is 1, so 1 is no length bias; also "
        "pooled over the hard (p < 1/2) and the easy prompts.\n"
    )
    L.append(
        _md_table(
            t["rows"],
            [
                ("variant", "lengths"),
                ("scale_rewards", "scale_rewards"),
                ("loss_type", "loss_type"),
                ("ratio", "ratio"),
                ("lo", "95 % lo"),
                ("hi", "95 % hi"),
                ("ratio_hard", "p < 1/2"),
                ("ratio_easy", "p > 1/2"),
            ],
            nd=3,
        )
    )
    L.append(
        "\nTraining in TRL, TRL's frac_reward_zero_std per step against the mean p^G + (1−p)^G: R² "
        + "; ".join(
            f"{m} {_fmt(r['exact'])} (exact p), {_fmt(r['pooled'])} (pooled p)" for m, r in t["silent_r2"].items()
        )
        + ".\n"
    )
    return L


def group_size_training_markdown(t: dict) -> list[str]:
    L = ["## Beyond the paper: group size and prompt choice in TRL training\n"]
    if t.get("status") != "ok":
        return L + [f"group-size training stage: {t.get('status')} ({t.get('reason', '')}).\n"]
    L.append(
        f"Fast size (run folder `{t['run_dir']}`; every arm {t['budget']} generations; the docs' numbers "
        "are the full run's, `gsd group-size-training`). Hardest-quarter mean exact p at the end, and the "
        "final mean 2·arcsin√p, per arm.\n"
    )
    L.append(
        _md_table(
            t["rows"],
            [
                ("task", "task"),
                ("protocol", "held per step"),
                ("arm", "arm"),
                ("G", "G"),
                ("final_hardest", "hardest quarter"),
                ("final_arcsin", "mean 2·arcsin√p"),
            ],
            nd=3,
        )
    )
    L.append("")
    return L


def allocation_markdown(a: dict) -> list[str]:
    """The "beyond the paper" section: the allocation campaign's table and what it says."""
    from .allocation_campaign import INTERVAL_NOTE, LABELS, interval_text

    L = ["## Beyond the paper: budget allocation (simulator)\n"]
    if a.get("status") != "ok":
        return L + [f"allocation campaign: {a.get('status')} ({a.get('reason', '')}).\n"]
    if "comparison" in a:
        from .allocation_comparison import comparison_markdown

        c = a["comparison"]
        L.append(
            f"Run folder `{a['run_dir']}` (config `{a['config']}`: the comparison at a size this report can "
            f"afford; its numbers exercise the pipeline, the verdict is the paper-scale run's — "
            f"docs/allocation_comparison.md, `gsd allocation-comparison`); seeds {c['seeds']}; "
            + ", ".join(f"{k} = {v}" for k, v in c["setup"].items())
            + ". Every arm is read at the total generations of uniform G = 8 (all its steps); allocated arms "
            "share 8 rollouts per prompt per step (docs/theory.md, section Allocation over a run). "
            + INTERVAL_NOTE
            + "\n"
        )
        from ..allocation.cli import EVIDENCE

        return L + comparison_markdown(c) + ["At the paper's scale (docs/allocation_comparison.md). " + EVIDENCE + "\n"]
    setup = a.get("setup", {})
    ref = a["reference_arm"]
    L.append(
        f"Run folder `{a['run_dir']}` ({_reuse_note(a)}); seeds {a['seeds']}; "
        + ", ".join(f"{k} = {v}" for k, v in setup.items())
        + f". Every arm is read at the total generations of {LABELS.get(ref, ref)} (all its steps); allocated "
        "arms share 8 rollouts per prompt per step (see docs/theory.md, section Spending a rollout "
        "budget). " + INTERVAL_NOTE + "\n"
    )
    t = a["targets"]
    rows = []
    for name, r in a["arms"].items():
        rows.append(
            {
                "arm": LABELS.get(name, name),
                "eff": interval_text(r["effective_ratio"]),
                "gain": interval_text(r["effective_ratio_gain"], 1, 100.0),
                "g_hq": interval_text(r["generations_to_hard_quartile_p"], 2, 1e-6),
                "cr": interval_text(r["compute_ratio_hard_quartile_p"], 2),
                "g_mp": interval_text(r["generations_to_mean_p"], 2, 1e-6),
                "hq": interval_text(r["hard_quartile_p"]),
                "mp": interval_text(r["mean_p"]),
                "arc": interval_text(r["mean_arcsin"]),
                "gp": interval_text(r.get("grad_mass_over_planned"), 2),
            }
        )
    L.append(
        _md_table(
            rows,
            [
                ("arm", "arm"),
                ("eff", "effective-gradient ratio"),
                ("gain", "vs fixed G = 8 (%)"),
                ("g_hq", f"generations (M) to hardest quartile ≥ {t['hard_quartile_p']}"),
                ("cr", "fixed G = 8 generations / arm's, same target"),
                ("g_mp", f"generations (M) to mean p ≥ {t['mean_p']}"),
                ("hq", "hardest quartile p, equal generations"),
                ("mp", "mean p"),
                ("arc", "mean 2·arcsin√p"),
                ("gp", "gradient mass measured / planned"),
            ],
        )
    )
    L.append("")
    L.append(allocation_verdict(a) + "\n")
    return L


def allocation_verdict(a: dict) -> str:
    """Plain words on Knapsack RL's claims and the winning value, from the campaign's numbers."""
    arms = a["arms"]
    lines = []
    k = arms.get("knapsack")
    if k:
        gain = k["effective_ratio_gain"]["mean"] * 100
        lo, hi = (k["effective_ratio_gain"][x] * 100 for x in ("lo", "hi"))
        inside = 20 <= gain <= 40
        # One seed has no interval: say so rather than print [+nan, +nan].
        interval = f"[{lo:+.0f}, {hi:+.0f}]" if math.isfinite(lo) and math.isfinite(hi) else "(one seed: no interval)"
        lines.append(
            f"Knapsack RL's value raises the effective-gradient ratio by {gain:+.0f} % "
            f"{interval} over fixed G = 8 (claim: +20–40 %): "
            + (
                "within the claimed range."
                if inside
                else ("above the claimed range." if gain > 40 else "below the claimed range.")
            )
        )
        cr = k["compute_ratio_hard_quartile_p"]
        if cr["n"]:
            lines.append(
                f"Fixed G = 8 needs {cr['mean']:.2f}× the generations of the Knapsack arm to bring the "
                f"hardest quartile to p ≥ {a['targets']['hard_quartile_p']} (claim: ~2×): "
                + ("the claim holds here." if cr["mean"] >= 1.8 else "far less than 2× here.")
            )
        else:
            lines.append(
                "Neither arm reached the hardest-quartile target within the budget; the ~2× compute claim "
                "cannot be checked at this size."
            )
    from .allocation_campaign import LABELS, interval_text

    real = {n: r for n, r in arms.items() if not n.startswith("oracle")}

    def best(key):
        name = max(real, key=lambda n: real[n][key]["mean"])
        return f"{LABELS.get(name, name)} ({interval_text(real[name][key])})"

    lines.append(
        f"Without the oracle, at equal generations, the best arm by the hardest quartile's p is "
        f"{best('hard_quartile_p')}; by mean 2·arcsin√p (GRPO's objective) {best('mean_arcsin')}; by mean p "
        f"{best('mean_p')}; by effective-gradient ratio {best('effective_ratio')}. A higher "
        "effective-gradient ratio is not by itself more learning: what matters is where the gradient goes."
    )
    return " ".join(lines)
