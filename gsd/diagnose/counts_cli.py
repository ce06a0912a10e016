"""``gsd count``: a run's silent groups per step from its logs read piece by piece, on one process
or over Ray tasks; memory that grows with the groups, not the rollouts.

Only argparse is imported here; the readers are imported when the command runs.
"""

from __future__ import annotations

_HELP = "count a long run's silent groups per step, reading its logs piece by piece (or over Ray)"
_DESCRIPTION = """\
Read a run's rollout logs batch by batch into per-group counts and print, per step, its groups,
silent groups, silent fraction and wasted rollouts (the measured columns of `gsd diagnose`, equal
to them field by field). verl dumps and CSV / parquet / JSONL tables are read piece by piece; TRL
and AReaL logs are read whole. --shards N counts the files in N Ray tasks and merges their counts
exactly (a sum): the same answer as one process. --out DIR writes groups.parquet, steps.parquet and
prompts.parquet, the group table written as it is made. See the docs page "Performance"."""

OUTPUT_FILES = ("groups.parquet", "steps.parquet", "prompts.parquet", "summary.json")


def register(sub) -> None:
    import argparse

    from ..cli.support import bounded_float, bounded_int
    from ..integrations import TRAINERS

    p = sub.add_parser(
        "count", help=_HELP, description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("logs", nargs="+", metavar="LOG", help="log files, folders or glob patterns")
    p.add_argument(
        "--format",
        dest="fmt",
        choices=("auto",) + TRAINERS + ("table",),
        default="auto",
        help="the log's trainer, or a table (default: found from the files, as gsd diagnose does)",
    )
    p.add_argument("--reward-column", dest="reward", metavar="REWARD", help="as for gsd diagnose")
    p.add_argument("--threshold", type=bounded_float(-1e300, 1e300, "a reward value"), help="reward >= T is right")
    p.add_argument(
        "--group-column",
        dest="group_col",
        metavar="GROUP_COLUMN",
        help="a table's group id column (as for gsd diagnose)",
    )
    p.add_argument(
        "--prompt-column",
        dest="prompt_col",
        metavar="PROMPT_COLUMN",
        help="a table's prompt column (as for gsd diagnose)",
    )
    p.add_argument(
        "--step-column", dest="step_col", metavar="STEP_COLUMN", help="a table's step column (as for gsd diagnose)"
    )
    p.add_argument(
        "--shards", type=bounded_int(1, 4096, "a number of Ray tasks"), help="count the files in this many Ray tasks"
    )
    p.add_argument("--address", help="a Ray cluster to join (with --shards; default: a local instance)")
    p.add_argument("--out", metavar="DIR", help="write the group, step and prompt tables and a summary here")
    p.add_argument("--json", action="store_true", help="print {summary, steps} as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_count)


def _count(args) -> int:
    import json

    from ..validation import InputError

    options = {
        "fmt": args.fmt,
        "reward": args.reward,
        "prompt_col": args.prompt_col,
        "step_col": args.step_col,
        "group_col": args.group_col,
        "threshold": args.threshold,
    }
    if args.address and not args.shards:
        raise InputError("--address needs --shards")
    if args.out:
        counts, summary = write_counts(args, options)
    else:
        counts = _run(args, options, groups=False)
        summary = summary_of(counts)
    if args.json:
        steps = {c: v.tolist() for c, v in counts.steps.items()}
        print(json.dumps({"summary": summary, "steps": steps}, indent=2, allow_nan=True))
    else:
        print(format_counts(counts, summary))
    return 0


def _run(args, options, groups):
    """The counts, on one process or in ``--shards`` Ray tasks."""
    if args.shards:
        from .shards import count_sharded

        return count_sharded(args.logs, shards=args.shards, address=args.address, groups=groups, **options)
    from .counts import count_rollouts

    return count_rollouts(args.logs, progress=False if args.no_progress else None, groups=groups, **options)


def summary_of(counts) -> dict:
    """The run's totals: rollouts, groups, silent groups and their share, prompts, what was left out."""
    s = counts.steps
    groups = int(s["groups"].sum())
    return {
        "rollouts": int(s["rollouts"].sum()),
        "steps": int(s["step"].size),
        "groups": groups,
        "silent_groups": int(s["silent_groups"].sum()),
        "silent_frac": float(s["silent_groups"].sum() / groups) if groups else None,
        "wasted_rollouts": int(s["wasted_rollouts"].sum()),
        "prompts": int(counts.hashes.size),
        "incomplete_groups": counts.incomplete_groups,
        "incomplete_rollouts": counts.incomplete_rollouts,
        "bad_rows": counts.bad_count,
        "rewards_as": counts.right_rule,
        "warnings": list(counts.warnings),
    }


def format_counts(counts, summary, max_steps: int = 12) -> str:
    """The per-step table (the last ``max_steps`` steps) and the totals, as text."""
    s = counts.steps
    lines = [f"{'step':>8} {'groups':>8} {'silent':>8} {'silent%':>8} {'rollouts':>10} {'wasted':>10}"]
    for i in range(max(0, s["step"].size - max_steps), s["step"].size):
        frac = s["silent_frac"][i]
        lines.append(
            f"{int(s['step'][i]):>8} {int(s['groups'][i]):>8} {int(s['silent_groups'][i]):>8} "
            f"{'' if frac != frac else f'{100 * frac:.1f}':>8} {int(s['rollouts'][i]):>10} "
            f"{int(s['wasted_rollouts'][i]):>10}"
        )
    frac = summary["silent_frac"]
    lines.append(
        f"{summary['rollouts']} rollouts in {summary['groups']} groups over {summary['steps']} steps and "
        f"{summary['prompts']} prompts; silent: {summary['silent_groups']} groups"
        + (f" ({100 * frac:.1f} %)" if frac is not None else "")
        + f", {summary['wasted_rollouts']} rollouts wasted"
    )
    lines += [f"warning: {w}" for w in summary["warnings"]]
    return "\n".join(lines)


def write_counts(args, options):
    """Count, writing the group table as it is made (one run of steps at a time, a parquet row
    group each), then the step and prompt tables and the summary, into ``--out`` as one set
    under its lock; (counts, summary)."""
    from pathlib import Path

    from ..io.atomic import ParquetStream, replace_set, write_json
    from ..io.lock import hold_folder

    out = Path(args.out)
    with hold_folder(out, option="out"), replace_set(out, OUTPUT_FILES) as stage:
        with ParquetStream(stage / "groups.parquet") as sink:
            counts = _run(args, options, groups=sink.write)
        summary = summary_of(counts)
        prompts = {**counts.prompts, "label": counts.labels[counts.prompts["prompt"]]}
        for name, table in (("steps", counts.steps), ("prompts", prompts)):
            with ParquetStream(stage / f"{name}.parquet") as sink:
                sink.write(table)
        write_json(stage / "summary.json", summary)
    return counts, summary
