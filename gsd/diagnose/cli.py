"""``gsd diagnose``: read a run's rollout logs and report silent groups, predictions and advice.

Only argparse is imported here; the readers and the math are imported when the command runs.
"""

from __future__ import annotations

_HELP = "diagnose a GRPO run from its rollout logs (verl, TRL or a table)"
_DESCRIPTION = """\
Read the rollouts a trainer logged and say how much of the run's generation went into silent
groups (every reward equal: no gradient), which uniform group size learns fastest, and, per step
and per prompt, what each prompt's Beta posterior predicted. --verbose says how the log was read.

Logs: TRL's output_dir (GRPOTrainer(log_completions=True)), verl's rollout dump folder
(trainer.rollout_data_dir), AReaL's (rollout.dump_to_file), or any CSV / parquet / JSONL table
of one row per answer (name its columns). A group is what the trainer normalised together: TRL,
a block of num_generations rows; verl, the rows sharing a uid (V1 trainer) or, in the legacy
trainer's dump, one prompt text (or one --group-column value); AReaL, one task. A scalar log
(trainer_state.json, TensorBoard, W&B) is gsd scalars' job. Docs: "Reading real logs"."""


def register(sub) -> None:
    import argparse

    from ..cli.support import hidden_aliases

    p = sub.add_parser(
        "diagnose", help=_HELP, description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    _add_log_arguments(p)
    _add_model_arguments(p)
    _add_output_arguments(p)
    hidden_aliases(
        p, {"--reward": "reward", "--group-col": "group_col", "--prompt-col": "prompt_col", "--step-col": "step_col"}
    )  # the spellings before gsd plan's "-column" ones
    p.set_defaults(func=_diagnose)
    _register_example_logs(sub)


def _add_log_arguments(p) -> None:
    """What to read: the logs, their format and the columns that hold rewards, groups, prompts and steps."""
    from ..cli.support import bounded_float, bounded_int  # the options' schema: checked before any log is read
    from ..integrations import TRAINERS

    p.add_argument("logs", nargs="+", metavar="LOG", help="log files, folders or glob patterns")
    p.add_argument(
        "--format",
        dest="fmt",
        choices=("auto",) + TRAINERS + ("table",),
        default="auto",
        help="log format: a trainer's dump or a plain table (default: from the file names)",
    )
    p.add_argument(
        "--reward-column",
        dest="reward",
        metavar="REWARD",
        help="the reward the trainer normalises: a column / key, or a weighted sum "
        "'correct+0.5*fmt' (terms name or coef*name joined by + or -). Default: verl's "
        "score; TRL, the sum of its reward columns with weight 1 (TRL does not log its "
        "reward_weights: give them here); a table: required",
    )
    p.add_argument(
        "--threshold",
        type=bounded_float(-1e300, 1e300, "a reward value"),
        help="count reward >= T as right for the posteriors and predictions "
        "(graded rewards without it get the measured figures only); "
        "silence stays 'every reward of the group equal'",
    )
    p.add_argument(
        "--group-column",
        dest="group_col",
        metavar="GROUP_COLUMN",
        help="column (verl: reward extra key) whose value identifies a group within a step, "
        "e.g. a dataset index: exact groups when a prompt text appears twice in a step",
    )
    p.add_argument(
        "--group-size",
        type=bounded_int(1, 2**31, "answers per group"),
        help="TRL's num_generations (default: inferred from the files)",
    )
    p.add_argument(
        "--prompt-column",
        dest="prompt_col",
        metavar="PROMPT_COLUMN",
        help="prompt-id column of a table (default prompt; verl: input)",
    )
    p.add_argument(
        "--step-column",
        dest="step_col",
        metavar="STEP_COLUMN",
        help="step column of a table (default step; else the number ending the file name)",
    )
    reading = p.add_mutually_exclusive_group()
    reading.add_argument(
        "--streaming",
        action="store_true",
        default=None,
        help="read verl dumps and tables piece by piece into per-group counts (the default, except "
        "with --scale batch or --group-size): the same report, in memory that grows with the groups, "
        "not the rollouts",
    )
    reading.add_argument(
        "--whole-log",
        dest="streaming",
        action="store_false",
        help="read every rollout into memory first (what --scale batch needs; the same report)",
    )
    p.add_argument(
        "--shards",
        type=bounded_int(1, 4096, "a number of Ray tasks"),
        help="with --streaming: count the files in this many Ray tasks, merged exactly",
    )
    p.add_argument("--address", help="with --shards: a Ray cluster to join (default: a local instance)")


def _add_model_arguments(p) -> None:
    """How to read them: the trainer's std convention, the prior and posteriors, the fidelity law, the advice."""
    from ..cli.support import add_advice_arguments, bounded_float, bounded_int

    steps = bounded_float(0, 1e300, "steps", open_lo=True)

    def _half_life_arg(text: str):
        return "auto" if text == "auto" else steps(text)

    _half_life_arg.__name__ = "half-life"  # argparse names the type in its error

    p.add_argument(
        "--ddof",
        type=int,
        choices=(0, 1),
        help="the std the trainer divides by, for the expected update "
        "and fidelity (default: the log's trainer, TRL and verl 1; a table 0, the paper's)",
    )
    p.add_argument(
        "--eps",
        type=bounded_float(0, 1e300, "added to a std"),
        help="added to that std (default: TRL 1e-4, verl 1e-6, a table 0)",
    )
    p.add_argument(
        "--scale",
        choices=("group", "batch", "none"),
        help="what the advantages were divided by: each group's std, one std over the step's generation, "
        "or nothing (Dr.GRPO: TRL scale_rewards='none', verl norm_adv_by_std_in_grpo=False). Default: "
        "read from the logged advantages where the log has them (TRL), else 'group'",
    )
    p.add_argument(
        "--prior",
        default="empirical-bayes",
        choices=("empirical-bayes", "uniform", "jeffreys"),
        help="prior of each prompt's solve rate (default: fitted to the run)",
    )
    p.add_argument(
        "--epsilon",
        type=bounded_float(0, 1, "a fidelity target is 1 - epsilon", open_lo=True, open_hi=True),
        default=0.05,
        help="fidelity target 1 - epsilon of the fidelity law's group sizes (default 0.05; "
        "not the advice, which is the G that learns fastest)",
    )
    p.add_argument(
        "--level",
        type=bounded_float(0, 1, "a credible level", open_lo=True, open_hi=True),
        default=0.9,
        help="level of the per-prompt credible intervals (default 0.9)",
    )
    p.add_argument(
        "--half-life",
        type=_half_life_arg,
        help="steps after which an old rollout counts half in the posteriors, "
        "or auto: the half-life whose posteriors best predict the run's own next groups "
        "(default: every earlier rollout counts fully)",
    )
    p.add_argument(
        "--budget",
        type=bounded_int(1, 2**53, "rollouts per step"),
        help="rollouts per step to share over the prompts, by gsd plan --budget's default plan (uniform G)",
    )
    add_advice_arguments(p)


def _add_output_arguments(p) -> None:
    """What to write: the output folder, the JSON, the step table's length, progress and --fail-on."""
    p.add_argument(
        "--out", help="write steps.parquet, prompts.parquet, groups.parquet, summary.json and diagnose.png here"
    )
    p.add_argument(
        "--all-steps",
        action="store_true",
        help="print every step in the report's step table (default: "
        "12 evenly spaced steps when there are more, and a line saying so)",
    )
    p.add_argument("--json", action="store_true", help="print {summary, steps} as JSON instead of the report")
    p.add_argument(
        "--verbose",
        action="store_true",
        help="also how the log was read (groups, silence), the advice's model and the fidelity law",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--fail-on",
        help="exit with status 3 when a rule holds, e.g. 'silent>0.5,wasted>0.3': silent is the "
        "largest per-step silent fraction, wasted the run's wasted share (for CI)",
    )


def _register_example_logs(sub) -> None:
    e = sub.add_parser(
        "example-logs",
        help="copy the shipped example rollout logs (TRL, verl, AReaL) into a folder",
        description="Copy the small rollout logs gsd ships into DEST, to try `gsd diagnose` on: "
        "DEST/trl (TRL's output_dir), DEST/verl/rollout_data (verl's V1 dump), DEST/areal "
        "(AReaL's rollout dump), DEST/rollouts.csv (a plain table) and DEST/PROVENANCE.md "
        "(how each was written, by the trainer's own code). DEST must not exist yet.",
    )
    e.add_argument("dest", metavar="DEST", help="the folder to create")
    e.set_defaults(func=_example_logs)


def _diagnose(args) -> int:
    import json
    from functools import partial

    from ..cli.support import noise_scale_arg, step_cost
    from . import diagnose, streams_by_default
    from .report import diagnose_into, diagnosis_json, format_report, write_outputs
    from .scalar_diagnosis import fail_on_status, parse_fail_on

    rules = parse_fail_on(args.fail_on) if args.fail_on is not None else []  # before any log is read
    run = partial(
        diagnose,
        args.logs,
        fmt=args.fmt,
        reward=args.reward,
        threshold=args.threshold,
        prompt_col=args.prompt_col,
        step_col=args.step_col,
        group_col=args.group_col,
        group_size=args.group_size,
        prior=args.prior,
        epsilon=args.epsilon,
        level=args.level,
        budget=args.budget,
        half_life=args.half_life,
        ddof=args.ddof,
        eps=args.eps,
        scale=args.scale,
        optimizer=args.optimizer,
        cost=step_cost(args.cost),
        noise=noise_scale_arg(args.noise_scale),
        run_lr=args.run_lr,
        progress=False if args.no_progress else None,
        streaming=args.streaming,
        shards=args.shards,
        address=args.address,
    )
    streamed = streams_by_default(args.streaming, args.shards, args.group_size, args.scale)
    if args.out and streamed:  # the group table written as it is made, never whole
        dx = diagnose_into(args.out, run)
    else:
        dx = run(groups=None) if streamed else run()
        if args.out:
            write_outputs(dx, args.out)
    if args.json:
        print(json.dumps(diagnosis_json(dx), indent=2, allow_nan=False))
    else:
        print(format_report(dx, max_steps=None if args.all_steps else 12, verbose=args.verbose))
        if args.out:
            print(f"Tables, summary and figure written to {args.out}")
    return fail_on_status(dx.summary, dx.columns("steps"), rules, "diagnose")


def _example_logs(args) -> int:
    import os
    import shutil
    import uuid
    from pathlib import Path

    from ..errors import InputError
    from ..io.atomic import make_folder, writing
    from ..resources import EXAMPLE_LOGS, example_logs

    dest = Path(args.dest)
    with writing(dest):  # a name the file system refuses (too long) is the user's DEST, named
        if dest.exists() or dest.is_symlink():
            raise InputError(f"DEST {args.dest!r} exists: give a new folder name (nothing is overwritten)")
    make_folder(dest.parent if str(dest.parent) else ".")
    # Copied into a hidden sibling, then renamed: DEST appears whole or not at all.  The sibling's
    # name is short whatever DEST's length (a DEST of 255 characters, the limit, still works).
    stage = dest.with_name(f".gsd-example-logs.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    source = example_logs()
    try:
        with writing(dest):  # a full disk or a name too long: DEST named, nothing left behind
            stage.mkdir()
            for name in EXAMPLE_LOGS:
                (shutil.copytree if (source / name).is_dir() else shutil.copy2)(source / name, stage / name)
            os.rename(stage, dest)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    print(f"Example logs copied to {dest}: try")
    for line in (
        f"gsd diagnose {dest / 'trl'}",
        f"gsd diagnose {dest / 'verl' / 'rollout_data'}",
        f"gsd diagnose {dest / 'areal'}",
    ):
        print(f"  {line}")
    return 0
