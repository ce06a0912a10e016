"""What ``gsd diagnose`` prints and writes: the human report, the JSON, the output folder."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..cli.support import REPORT_WIDTH, wrap_lines
from ..io.atomic import jsonable, replace_set, write_json, write_table
from ..io.lock import hold_folder
from .tables import STEP_KEYS, Diagnosis

__all__ = ["format_report", "diagnosis_json", "write_outputs", "diagnose_into", "OUTPUT_FILES"]

#: Files written by :func:`write_outputs` into the output folder.
OUTPUT_FILES = ("steps.parquet", "prompts.parquet", "groups.parquet", "summary.json", "diagnose.png")

_GROUP_COLUMNS = (
    "step",
    "prompt",
    "G",
    "generated",
    "n",
    "k",
    "n_before",
    "k_before",
    "n_eff",
    "k_eff",
    "a",
    "b",
    "silent",
    "binary_silent",
    "silent_pred",
    "sigma",
    "sigma_pred",
)


def diagnosis_json(dx: Diagnosis) -> dict:
    """``{"summary": {...}, "steps": [{"step", "groups", "rollouts", "silent_frac", "silent_pred",
    "wasted_rollouts", "fidelity", ...}, ...]}``; NaN becomes ``null``."""
    steps = dx.columns("steps")
    keys = list(STEP_KEYS) + [c for c in steps if c not in STEP_KEYS]
    values = [steps[k].tolist() for k in keys]
    records = [dict(zip(keys, row)) for row in zip(*values)]
    return jsonable({"summary": dx.summary, "steps": records})


def _pct(x) -> str:
    return "—" if x is None or not np.isfinite(x) else f"{100 * x:.1f} %"


def format_report(dx: Diagnosis, *, max_steps: int | None = 12, verbose: bool = False) -> str:
    """The human report, read top down: the verdict and the advised setting first (the advice's
    headline, :func:`gsd.core.advice.advice_headline`), then the measured waste, the steps and the
    prompts. Every line fits :data:`REPORT_WIDTH` columns (longer prose is wrapped).

    ``max_steps``: at most this many rows of the step table, evenly spaced, and a line above them
    saying so (None: every step). ``verbose``: also how the log was read (groups, silence, the
    half-life), the advice's model and its alternatives, and the fidelity law's group sizes.
    """
    s = dx.summary
    pr = dx.columns("prompts")
    lines = [_verdict_headline(s)] + _headline_lines(s)
    lines += [""] + _run_lines(s, dx.silence_is_binary) + _warning_lines(s)
    lines += [""] + _step_lines(dx.columns("steps"), max_steps)
    if "verdict" in pr:
        lines += ["", _verdict_line(pr)] + _prompt_lines(pr)
    lines += _budget_lines(s, pr)
    if verbose:
        lines += ["", "How the log was read:"] + _read_lines(s) + advice_lines(s) + _fidelity_law_lines(s, pr)
        lines += [
            "Predictions use each prompt's Beta posterior before the step; see the docs page 'Reading real logs' "
            "and docs/theory.md, section Rollout logs, for the formats and the formulas.",
        ]
    else:
        lines += ["", "More: --verbose (how the log was read, the advice's model), --json, --out FOLDER (every table)."]
    return "\n".join(wrap_lines(lines, REPORT_WIDTH))


def _verdict_headline(s: dict) -> str:
    """Line 1: the run and how much of its generation was silent."""
    size = f"{s['format']} run, {s['steps']:,} steps, {s['prompts']:,} prompts, {s['rows']:,} rollouts"
    if not s.get("silent_observable", True):
        return f"{size}: the trainer removed its silent groups before the dump (see below)."
    return f"{size}: {_pct(s['wasted_share'])} of them wasted in silent groups."


def _headline_lines(s: dict) -> list[str]:
    """The advised setting (the advice's own headline) and this run's G beside it."""
    from ..core.advice import advice_headline

    adv = s.get("advice")
    if not adv:
        return ["Advised: no group size (no right/wrong rewards to predict from: give --threshold)"]
    lines = advice_headline(adv).split("\n")
    batch = s.get("batch_advice")
    if batch:  # the run's noise scale given: B, G and lr first, the G holding its prompts per step after
        lines = advice_headline(batch).split("\n") + [
            "  holding the run's prompts per step: " + lines[0][len("Advised: ") :]
        ]
    rel = adv.get("relative_per_generation", {})
    g = s.get("group_size")
    if isinstance(g, int | np.integer) and str(int(g)) in rel and int(g) != adv["advised_G_per_generation"]:
        lines.append(f"  this run's G = {int(g)}: {rel[str(int(g))]:.2f}x the advised G's progress per generation")
    return lines


def _read_lines(s: dict) -> list[str]:
    """What was read and how: rollouts, groups, silence, the half-life, what was left out, the warnings."""
    lines = [
        f"  read {s['rows']:,} rollouts ({s['format']}) from {s['files']} file(s): {s['steps']} steps, "
        f"{s['prompts']:,} prompts, {s['groups']:,} groups",
        f"  groups: {s['group_by']}",
        f"  silent: {s['silence']}",
        f"  right/wrong for the predictions: {s['rewards_as']}" if s["prior"] is not None else "",
    ]
    lines = [x for x in lines if x]
    if s.get("half_life_choice"):
        h = s["half_life"]
        lines.append(
            f"  posteriors: half-life {'none (every earlier rollout counts fully)' if h is None else f'{h:g} steps'}, "
            f"chosen by --half-life auto (the best one-step-ahead log score of "
            f"{s['half_life_choice']['groups_scored']:,} groups)"
        )
    return lines


def _warning_lines(s: dict) -> list[str]:
    """What could not be used, and the warnings: always printed."""
    lines = []
    if s["bad_rows"]:
        lines.append(f"{s['bad_rows']:,} row(s) could not be used, e.g. " + "; ".join(s["bad_rows_listed"][:3]))
    if s["singletons"]:
        lines.append(
            f"{s['singletons']:,} prompt-steps had a single rollout (no group): left out of the silent fractions."
        )
    if s["steps_without_groups"]:
        shown = ", ".join(map(str, s["steps_without_groups"][:8]))
        lines.append(
            f"Steps with one rollout per prompt (no groups): {shown}{' ...' if len(s['steps_without_groups']) > 8 else ''}."
        )
    lines += [f"WARNING: {w}" for w in s["warnings"]]
    return lines


def _run_lines(s: dict, silence_is_binary: bool) -> list[str]:
    """The run in five numbers: silent groups (measured and predicted), waste, effective gradient, fidelity, prior."""
    c = s.get("calibration") or {}
    predicted = s["prior"] is not None
    of = s["of"]
    binary_measured = c["silent_groups_measured"] / s["groups"] if c and s["groups"] else float("nan")
    if not s.get("silent_observable", True):
        lines = [
            "  silent groups        not in the log: the trainer removed them before the dump "
            f"({s['silent_frac_dumped'] * 100:.1f} % of the dumped groups)"
        ]
    elif predicted and silence_is_binary:
        lines = [
            f"  silent groups        {_pct(s['silent_frac'])} measured, {_pct(s['silent_pred'])} predicted "
            f"(z = {c.get('z', float('nan')):+.1f} over all groups)"
        ]
    elif predicted:
        # Graded rewards under a threshold: the trainer's silence (every reward equal) is measured
        # only; the prediction is of all-right/all-wrong groups, so z sets it beside that measure.
        lines = [
            f"  silent groups        {_pct(s['silent_frac'])} measured (every reward equal, as the trainer sees it)",
            f"  all right/all wrong  {_pct(binary_measured)} measured, {_pct(s['silent_pred'])} predicted "
            f"(z = {c.get('z', float('nan')):+.1f} over all groups; {s['rewards_as']})",
        ]
    else:
        lines = [f"  silent groups        {_pct(s['silent_frac'])} measured"]
    lines += [
        f"  wasted rollouts      {s['wasted_rollouts']:,} ({_pct(s['wasted_share'])} of {of})",
        f"  effective-gradient   {_pct(s['effective_gradient_ratio'])} of {of} carried a signal",
    ]
    if predicted:
        prior, conv = s["prior"], s["update_convention"]
        lines += [
            f"  fidelity of groups   {s['fidelity']:.3f} (expected GRPO update / large-group update; std with "
            f"ddof {conv['ddof']}, eps {conv['eps']:g}, as {conv['from']})",
            f"  prior of p           Beta({prior['a']:.3g}, {prior['b']:.3g}), mean {prior['mean']:.3f} (empirical Bayes over the run)"
            if "loglik" in prior
            else f"  prior of p           Beta({prior['a']:.3g}, {prior['b']:.3g})",
        ]
    return lines


def _fidelity_law_lines(s: dict, pr) -> list[str]:
    """The fidelity law's group sizes over the prompts (not the advice)."""
    if "group_size" not in pr:
        return []
    gs = pr["group_size"]
    ok = gs > 0
    return [
        "",
        f"Fidelity law (not the advice): the G at which one group's expected update is within "
        f"{s['epsilon']:g} of the large-group limit, at each prompt's posterior mean: "
        + (
            f"median {np.median(gs[ok]):.0f}, 90th percentile {np.percentile(gs[ok], 90):.0f}"
            if ok.any()
            else "none reachable"
        )
        + (f"; {int((~ok).sum()):,} prompt(s) need more than the planner's cap" if (~ok).any() else "")
        + ".",
    ]


def _budget_lines(s: dict, pr) -> list[str]:
    """With --budget: how the default plan shares it over the prompts."""
    if "group_size_budget" not in pr:
        return []
    alloc = pr["group_size_budget"]
    drawn = alloc > 0
    return [
        f"A budget of {s['budget']:,} rollouts per step ({int(alloc.sum()):,} spent), {s['budget_plan']} plan "
        "(gsd plan --budget's default): "
        f"{int(drawn.sum()):,} of {alloc.size:,} prompts drawn"
        + (
            f", G from {alloc[drawn].min()} to {alloc[drawn].max()} (median {np.median(alloc[drawn]):.0f})"
            if drawn.any()
            else ""
        )
        + "."
    ]


def _step_lines(st, max_steps: int | None) -> list[str]:
    """The step table: every step, or ``max_steps`` of them evenly spaced and a line saying so."""
    n = st["step"].size
    rows = np.arange(n)
    lines = []
    if max_steps is not None and n > max_steps:
        rows = np.unique(np.linspace(0, n - 1, max_steps).round().astype(int))
        lines.append(
            f"{rows.size} of {n} steps, evenly spaced from the first to the last "
            "(--all-steps prints every one; --json and --out hold them all):"
        )
    trainer = "trainer_silent_frac" in st
    lines.append(
        f"{'step':>8} {'groups':>7} {'rollouts':>9} {'silent':>8} {'pred':>8} {'wasted':>8} {'fidelity':>9}"
        + (f" {'TRL says':>9}" if trainer else "")
    )
    for i in rows:
        lines.append(
            f"{st['step'][i]:>8} {st['groups'][i]:>7} {st['rollouts'][i]:>9} {_pct(st['silent_frac'][i]):>8} "
            f"{_pct(st['silent_pred'][i]):>8} {int(st['wasted_rollouts'][i]):>8,} {_num(st['fidelity'][i]):>9}"
            + (f" {_pct(st['trainer_silent_frac'][i]):>9}" if trainer else "")
        )
    return lines


def advice_lines(s: dict) -> list[str]:
    """The advice's details (``--verbose``): per second, its model, the G holding generations instead,
    the noise scale, its notes. The advised setting itself is the headline (:func:`_headline_lines`)."""
    adv = s.get("advice")
    if not adv:
        return []
    batch = s.get("batch_advice")
    out = ["", "The advice in detail:"]
    if adv["advised_G_per_second"] is not None:
        c = adv["cost"]
        out.append(
            f"  per second: G = {adv['advised_G_per_second']} (step cost {c['t_step']:g} s + {c['t_prompt']:g} s "
            f"per prompt + {c['t_rollout']:g} s per generation, {c['source']})"
        )
    else:
        out.append("  per second: give --cost T_STEP,T_PROMPT,T_ROLLOUT (one run at one G cannot separate them)")
    out.append(
        f"  model: expected progress of the run's objective under each prompt's posterior, "
        f"{adv['prompts_per_step']} prompts per step held fixed; {adv['convention'].split('; ', 1)[1]}; "
        "the advised G is the model's optimum (docs/theory.md, section Which G learns fastest)"
    )
    gen = s.get("advice_holding_generations")
    if gen:
        rel_g = gen.get("relative_per_generation", {})
        out.append(
            f"  holding generations per step instead ({gen['generations_per_step']} per step, e.g. TRL's "
            f"per_device_train_batch_size kept while num_generations changes): G = "
            f"{gen['advised_G_per_generation']} ("
            + ", ".join(f"G = {g} at {r:.2f}x" for g, r in rel_g.items() if int(g) != gen["advised_G_per_generation"])
            + ")"
        )
    if batch:
        lo, hi = batch["b_noise_interval"]
        out.append(
            f"  noise scale: B_noise {batch['b_noise']:.3g} [{lo:.3g}, {hi:.3g}] generations at the run's B = "
            f"{batch['run']['B']}, G = {batch['run']['G']}; steps = S_min(1 + B_noise/B), generations = "
            "E_min(1 + B/B_noise) (docs/theory.md, section The noise scale)"
        )
    else:
        out.append(
            "  B and lr: give --noise-scale (measured from gradient norms at two batch sizes; one log at one "
            "batch size cannot separate |G|^2 from tr(Sigma)/B) and --run-lr"
        )
    out += [f"  note: {n}" for n in adv.get("notes", [])]
    return out


def _verdict_line(pr) -> str:
    from .tables import VERDICT_DELTA, VERDICT_PROB

    verdict = np.asarray(pr["verdict"])
    words = ", ".join(f"{int((verdict == w).sum()):,} {w}" for w in ("starved", "saturated", "learning", "unsure"))
    return (
        f"Prompts: {words} (starved, saturated, learning: posterior probability > {VERDICT_PROB:g} that "
        f"p < {VERDICT_DELTA:g}, p > {1 - VERDICT_DELTA:g}, or in between; unsure: no side reaches {VERDICT_PROB:g} yet)."
    )


#: Prompts listed in the report's per-prompt table (all of them in --out's prompts.parquet).
MAX_PROMPTS = 12


def _prompt_lines(pr) -> list[str]:
    """The per-prompt table: posterior mean and interval beside the verdict, for up to
    :data:`MAX_PROMPTS` prompts spread over the range of posterior means."""
    order = np.argsort(pr["p_mean"], kind="stable")
    total = order.size
    if order.size > MAX_PROMPTS:
        order = order[np.unique(np.linspace(0, order.size - 1, MAX_PROMPTS).round().astype(int))]
    lines = [
        f"{len(order)} of {total:,} prompts, by posterior mean (--out writes them all, prompts.parquet):"
        if len(order) < total
        else "Per prompt:"
    ]
    lines.append(f"  {'prompt':<28} {'rollouts':>8} {'right':>6} {'p mean':>7} {'interval':>15} {'verdict':>9}")
    for i in order:
        text = shown_prompt(pr["prompt"][i])
        text = text if len(text) <= 28 else text[:27] + "…"
        interval = f"[{pr['p_lo'][i]:.3f}, {pr['p_hi'][i]:.3f}]"
        lines.append(
            f"  {text:<28} {int(pr['rollouts'][i]):>8} {int(pr['right'][i]):>6} {pr['p_mean'][i]:>7.3f} "
            f"{interval:>15} {pr['verdict'][i]:>9}"
        )
    return lines


#: A tokenizer's special token at either end of a decoded prompt (``<unk>``, ``<s>``, ``<|im_start|>``):
#: AReaL dumps the prompt decoded with them, which the report's narrow column has no room for.
_END_TOKENS = re.compile(r"^(?:\s*<\|?[^<>\s]{1,24}\|?>)+\s*|\s*(?:<\|?[^<>\s]{1,24}\|?>\s*)+$")


def shown_prompt(prompt) -> str:
    """A prompt as the report shows it: without the special tokens at its ends (the tables written
    by ``--out`` keep it as logged)."""
    text = str(prompt)
    return _END_TOKENS.sub("", text) or text


def _num(x) -> str:
    return "—" if x is None or not np.isfinite(x) else f"{x:.3f}"


def write_outputs(dx: Diagnosis, out, *, figure: bool = True) -> list[Path]:
    """Write the tables (parquet), the summary (JSON) and the figure into ``out`` as one set:
    the folder holds this diagnosis whole or the previous one whole (a full disk while the figure
    is drawn leaves the previous set), and one process writes it at a time."""
    out = Path(out)
    with hold_folder(out, option="out"), replace_set(out, OUTPUT_FILES) as stage:
        _write_set(dx, stage, figure)
    return [out / name for name in OUTPUT_FILES if figure or name != "diagnose.png"]


def diagnose_into(out, run, *, figure: bool = True) -> Diagnosis:
    """``run(groups=...)`` (a streaming :func:`gsd.diagnose.diagnose`) with its group table written
    to ``out``'s groups.parquet as it is made, one run of steps at a time, then the rest of
    :func:`write_outputs`'s set: the table never whole in memory, the set replaced whole."""
    from ..io.atomic import ParquetStream

    out = Path(out)
    with hold_folder(out, option="out"), replace_set(out, OUTPUT_FILES) as stage:
        with ParquetStream(stage / "groups.parquet") as sink:
            dx = run(groups=lambda g: sink.write({c: g[c] for c in _GROUP_COLUMNS}))
        _write_set(dx, stage, figure, groups=False)
    return dx


def _write_set(dx: Diagnosis, stage: Path, figure: bool, groups: bool = True) -> None:
    write_table(stage / "steps.parquet", dx.steps)
    write_table(stage / "prompts.parquet", dx.prompts)
    if groups:
        write_table(stage / "groups.parquet", dx.groups[list(_GROUP_COLUMNS)])
    write_json(stage / "summary.json", dx.summary)
    if figure:
        from .figure import diagnosis_figure

        diagnosis_figure(dx, stage / "diagnose.png")
