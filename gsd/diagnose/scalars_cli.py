"""``gsd scalars``: what a run's per-step scalar metrics say about its silent groups.

A separate command from ``gsd diagnose``: that one reads per-rollout dumps and measures every group;
this one reads what every run has (TRL's trainer_state.json, TensorBoard, W&B, verl's file logger),
whose per-step averages say less, and says which figures are measured, bounded or fitted.
Only argparse is imported here.
"""

from __future__ import annotations

#: Exit status when a ``--fail-on`` rule is broken (2 is a usage error or bad input); as
#: :data:`gsd.diagnose.scalar_diagnosis.FAIL_ON_EXIT`, spelled here so ``--help`` needs no import.
FAIL_ON_EXIT = 3

_HELP = "silent groups, wasted rollouts and a difficulty fit from scalar logs (TRL, TensorBoard, W&B, verl)"
_DESCRIPTION = f"""\
Read a run's per-step scalars and report, per logged step, the trainer's own silent fraction
(TRL's frac_reward_zero_std), the wasted rollouts, the lower bound m^G + (1-m)^G from the mean
reward m alone, and the Beta distribution of solve rates whose mean and zero-std fraction are the
logged ones, with its prediction of the silent fraction at other group sizes (and a bootstrap
interval when the groups per generation are known). Formats: TRL's output_dir or
trainer_state.json, a TensorBoard run folder, a W&B offline run folder or .wandb file, verl's
file-logger JSONL (trainer.logger=[file]), or a CSV / JSONL / parquet table with a step column
(W&B's history export). Rewards are taken as right/wrong. --fail-on makes the exit status
{FAIL_ON_EXIT} when a rule is broken (2: bad input). See the docs page "Reading real logs"."""


def register(sub) -> None:
    import argparse

    from ..cli.support import add_noise_scale_arguments, bounded_float, bounded_int, hidden_aliases

    p = sub.add_parser(
        "scalars", help=_HELP, description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("log", metavar="LOG", help="a scalar log: file or folder")
    p.add_argument(
        "--format",
        dest="fmt",
        choices=("auto", "trl", "tensorboard", "wandb", "verl", "table"),
        default="auto",
        help="default: from the name and content",
    )
    p.add_argument("--reward", help="mean-reward metric (default: reward, train/reward, critic/score/mean, ...)")
    p.add_argument(
        "--silent", help="zero-std-fraction metric (default: frac_reward_zero_std, train/frac_reward_zero_std)"
    )
    p.add_argument(
        "--step-column",
        dest="step_col",
        help="a table's step column (default: step, global_step, train/global_step, _step, Step)",
    )
    p.add_argument(
        "--group-size",
        type=bounded_int(2, 10**9, "answers per group"),
        help="G, TRL's num_generations / verl's rollout.n (default: the log's config, when it has one)",
    )
    p.add_argument(
        "--groups",
        type=bounded_int(1, 10**9, "groups per generation"),
        help="groups per generation (TRL: generation_batch_size / num_generations; verl: "
        "data.train_batch_size); default: the log's config",
    )
    p.add_argument(
        "--predict", default="4,16,32", help="group sizes to predict the silent fraction at (default 4,16,32)"
    )
    p.add_argument(
        "--level",
        type=bounded_float(0, 1, "a coverage", open_lo=True, open_hi=True),
        default=0.9,
        help="level of the bootstrap intervals (default 0.9)",
    )
    p.add_argument(
        "--draws",
        type=bounded_int(0, 10**5, "bootstrap replicates"),
        default=200,
        help="bootstrap replicates (default 200; 0: no intervals)",
    )
    p.add_argument(
        "--fail-on",
        help=f"exit with status {FAIL_ON_EXIT} when a rule holds, e.g. 'silent>0.5,wasted>0.3': silent is "
        "the largest logged per-step silent fraction, wasted the run's wasted share; a rule the log "
        "cannot check counts as broken",
    )
    add_noise_scale_arguments(p)
    p.add_argument(
        "--knee-from-log",
        action="store_true",
        help="the knee at the run's lr from the step gains GSDGRPOTrainer(gsd_objective=...) logged (gsd/gain_*): "
        "the batch advice takes it in B_noise's place (instead of --noise-scale)",
    )
    p.add_argument("--all-steps", action="store_true", help="print every step (default: at most 12, evenly spaced)")
    p.add_argument(
        "--all-columns",
        action="store_true",
        help="every column of the step table (default: those that fit 100 columns)",
    )
    p.add_argument("--verbose", action="store_true", help="the same as --all-columns")
    p.add_argument("--json", action="store_true", help="print {summary, steps} as JSON")
    hidden_aliases(p, {"--step-col": "step_col"})  # gsd diagnose's spelling before "-column"
    p.set_defaults(func=_scalars)


def _scalars(args) -> int:
    import json

    import numpy as np

    from ..cli.support import CliError, json_ready, noise_scale_arg, parse_list
    from .scalar_diagnosis import (
        alerts,
        diagnose_scalars,
        fail_on_status,
        parse_fail_on,
    )

    rules = parse_fail_on(args.fail_on) if args.fail_on is not None else []  # before any reading
    predict = parse_list(args.predict, int, "predict") if args.predict.strip() else None
    if predict is not None and ((predict < 1) | (predict > 10**9)).any():
        raise CliError(f"--predict {args.predict!r}: group sizes must be integers in [1, 10^9]")
    if args.draws and args.draws < 10:
        raise CliError(f"--draws {args.draws}: 0 (no intervals) or at least 10 replicates")
    knee = None
    if args.knee_from_log:
        if args.noise_scale is not None:
            raise CliError("--knee-from-log and --noise-scale both give the knee: give one")
        from ..core.noise_scale import knee_from_log

        knee = knee_from_log(args.log, level=args.level)
    usable = knee is not None and np.isfinite(knee.knee) and knee.knee > 0
    dx = diagnose_scalars(
        args.log,
        fmt=args.fmt,
        step_col=args.step_col,
        reward=args.reward,
        silent=args.silent,
        group_size=args.group_size,
        groups=args.groups,
        predict=predict,
        level=args.level,
        draws=args.draws,
        noise=(knee if usable else None) if knee is not None else noise_scale_arg(args.noise_scale),
        run_lr=args.run_lr,
    )
    if knee is not None:
        dx.summary["step_gain_knee"] = knee.summary()
    broken = alerts(dx.summary, dx.steps, rules)
    steps = dx.steps
    if args.json:
        rows = json.loads(steps.to_json(orient="records", double_precision=15))
        print(
            json.dumps(
                {
                    "summary": json_ready(dx.summary),
                    "steps": rows,
                    "fail_on": [{"metric": a, "op": o, "threshold": t, "value": v} for a, o, t, v in broken],
                },
                indent=2,
                allow_nan=False,
                default=str,
            )
        )
    else:
        print(scalar_report(dx, all_steps=args.all_steps, all_columns=args.all_columns, verbose=args.verbose))
    return fail_on_status(dx.summary, dx.steps, rules, "scalars")


#: The step table's columns by default, in order (the rest: --all-columns, --json).
DEFAULT_COLUMNS = ("step", "mean_reward", "silent_frac", "wasted_rollouts", "silent_lower_bound")


def scalar_report(dx, *, all_steps: bool = False, all_columns: bool = False, verbose: bool = False) -> str:
    """The text report: the run and its waste, the advised setting
    (:func:`gsd.core.advice.advice_headline`), the step table, the notes; at most
    :data:`REPORT_WIDTH` columns unless ``all_columns``."""
    import numpy as np

    from ..cli.support import REPORT_WIDTH, wrap_lines
    from ..core.advice import advice_headline

    s, steps = dx.summary, dx.steps
    head = f"{s['format']} log, {s['logged_steps']} logged steps (last {s['last_step']})"
    if s.get("silent_share") is not None:
        head += f": {s['silent_share']:.1%} of its groups silent"
        if s.get("wasted_rollouts") is not None:
            head += (
                f", {s['wasted_rollouts']:.0f} of {s['rollouts']} rollouts wasted"
                f"{'' if s.get('wasted_exact') else ' (one generation per step assumed)'}"
            )
    lines = [head + "."]
    k = s.get("step_gain_knee")
    if k:
        lines.append(
            f"Knee at the run's lr from its logged step gains: {k['knee']:.4g} generations per step "
            f"[{k['knee_lo']:.4g}, {k['knee_hi']:.4g}] ({k['b_small']:g} against {k['b_big']:g} generations, "
            f"{k['steps']} log entries)"
            + ("" if np.isfinite(k["knee"]) and k["knee"] > 0 else ": generation-limited at the run's B, no B advised")
        )
    if s.get("batch_advice"):
        lines += advice_headline(s["batch_advice"]).split("\n")
        lines.append(
            f"  for the population of solve rates fitted at step {s['advice_step']}; holding the run's prompts per "
            f"step: uniform G = {s['advised_group_size']}"
        )
    elif s.get("advice"):
        lines += advice_headline(s["advice"]).split("\n")
        lines.append(
            f"  for the population of solve rates fitted at step {s['advice_step']} (which G, not which prompts)"
        )
        lines.append(
            "  B and lr need the run's noise scale (--noise-scale): one log at one batch size cannot give it "
            "(gsd.live.noise_scale measures it in a run; gsd.core.noise_scale from two runs' grad_norm)"
        )
    elif s.get("fit_status"):
        lines.append("Advised: no group size (no step's difficulty fit is a proper Beta: see fit_status)")
    else:
        lines.append("Advised: no group size: give --group-size G (the log does not say it) to fit one")
    lines += ["", f"read {s['source']}: reward metric {s['reward_metric']}, silent metric {s['silent_metric']}"]
    if s.get("fit_status"):
        lines.append("difficulty fit per step: " + ", ".join(f"{k} {v}" for k, v in s["fit_status"].items()))
    shown = steps
    if not all_steps and len(steps) > 12:
        shown = steps.iloc[np.unique(np.linspace(0, len(steps) - 1, 12).round().astype(int))]
        lines.append(f"(12 of {len(steps)} steps shown; --all-steps for every one)")
    lines += _step_table(shown, all_columns or verbose)
    lines += [f"note: {note}" for note in s["notes"]]
    return "\n".join(lines if all_columns else wrap_lines(lines, REPORT_WIDTH))


def _step_table(shown, all_columns: bool) -> list[str]:
    """The step table: every column (``all_columns``), else :data:`DEFAULT_COLUMNS`, the predicted
    silent fractions and the fit's status, as many as fit 100 columns, and a line naming the rest."""
    from ..cli.support import REPORT_WIDTH, fit_columns

    def render(names):
        return shown[names].to_string(float_format=lambda x: f"{x:.4g}", index=False)

    if all_columns:
        return render(list(shown.columns)).split("\n")
    wanted = (
        [c for c in DEFAULT_COLUMNS if c in shown]
        + [c for c in shown if c.startswith("silent_at_") and not c.endswith(("_lo", "_hi"))]
        + [c for c in ("fit_status",) if c in shown]
    )
    rest = len(shown.columns) - len(wanted)
    return fit_columns(render, wanted, REPORT_WIDTH, more="--all-columns or --json", left_out=rest)
