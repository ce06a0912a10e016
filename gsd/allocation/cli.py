"""``gsd plan --budget``: share a rollout budget among prompts (handler and its options).

The options are added to the ``plan`` parser by :func:`add_arguments`; :func:`plan_budget` runs
when ``--budget`` is given.  Inputs: known rates (``--p``, or ``--input`` with ``--column``),
logged counts (``--input`` with ``--k-column``/``--n-column``) or a per-rollout table grouped by
a prompt id (``--prompt-column``/``--reward-column``).  The output keeps every input column and
the input row order (per-rollout input: one row per prompt, in order of first appearance) and
adds ``posterior_mean``, ``group_size``, ``expected_value``, ``silent_probability`` and
``status``; a row that cannot be planned keeps its place with the reason in ``status``.
"""

from __future__ import annotations

import json

from ..cli.support import (
    REPORT_WIDTH,
    CliError,
    bounded_int,
    emit,
    hidden_aliases,
    json_ready,
    parse_list,
    real_option,
    wrap_lines,
)
from ..validation import MAX_EXACT_GROUP_SIZE

HELP = "rollouts per step to share out among the prompts (see docs/theory.md, section Spending a rollout budget)"

#: What ``--advice`` says beside its table: the verdict of the paper-scale comparison
#: (``gsd allocation-comparison``; docs/allocation_comparison.md).
EVIDENCE = (
    "Evidence (gsd allocation-comparison; docs/allocation_comparison.md): the per-step budget matters more than its split. "
    "At the paper's scale (5 seeds) uniform G = 4 beat G = 8 and 16 at equal generations, and every plan from logged "
    "counts at 8 rollouts per prompt per step lost to it (with one logit per prompt, even with the true p); at 4 per "
    "prompt no rule beat it with one logit per prompt, and with a shared network a plan did by less than 0.001 in mean "
    "2*arcsin(sqrt(p)). In the default check (500 prompts, 3 seeds, Beta(0.5, 0.5) at lr 0.1, 0.5 and 2, Beta(2, 2), "
    "Beta(0.3, 0.3)) uniform G = 2 beat G = 4 and 8 on every population, by 0.03 to 0.24, and the update plan at 8 per "
    "prompt ended below uniform G = 8 on three of the five (by 0.010 to 0.029) and above it on one (by 0.004). So the default plan is uniform G (--value uniform); a "
    "plan raises this step's expected value, which is not the same as learning faster: choose the uniform G first "
    "(value_per_rollout falls with G: more steps of smaller groups), then plan within that budget if you plan at all."
)


#: ``gsd plan --budget`` prints the plan's rows up to this many (a list of rates typed on the
#: command line); a file of prompts gets its summary, and its rows go to ``--output``.
SHOWN_ROWS = 20


def add_arguments(p) -> None:
    """The budget options of ``gsd plan``, in the order ``--help`` lists them."""
    g = p.add_argument_group("budget allocation (with --budget)")
    _add_value_options(g)
    _add_grid_options(g)
    _add_convention_options(g)
    _add_input_options(g)
    _add_advice_options(g)


def _add_value_options(g) -> None:
    """--budget and what a plan maximises: --value, and --lr/--horizon for the look-ahead values."""
    g.add_argument("--budget", type=bounded_int(1, 2**53, "a float64 holds it exactly"), help=HELP)
    g.add_argument(
        "--value",
        default=None,  # gsd.allocation.DEFAULT_PLAN, shared with gsd diagnose --budget
        help="uniform (default: the same G for every prompt that can carry a gradient, the largest the "
        "budget affords; see docs/allocation_comparison.md) or a plan by what a group is worth: "
        "update = E[σ̂] (GRPO, the default before), dr_grpo, progress, nonsilent, knapsack, "
        "gain / dr_gain (one-step gain of GRPO's / Dr.GRPO's objective), horizon / dr_horizon "
        "(gain over --horizon steps, needs --lr)",
    )
    g.add_argument(
        "--lr",
        type=real_option,
        default=None,
        help="--value horizon/dr_horizon: the per-step logit rate (a tabular SGD policy's learning rate)",
    )
    g.add_argument(
        "--horizon",
        type=bounded_int(1, 10**6, "steps looked ahead"),
        default=None,
        help="--value horizon/dr_horizon: steps looked ahead",
    )


def _add_grid_options(g) -> None:
    """The group sizes a plan may use (g_min, g_min + step, …, g_max) and --no-skip."""
    g.add_argument(
        "--g-min",
        type=bounded_int(1, MAX_EXACT_GROUP_SIZE, "the exact sums' limit"),
        default=2,
        help="smallest group size served (default 2)",
    )
    g.add_argument(
        "--g-max",
        type=bounded_int(1, MAX_EXACT_GROUP_SIZE, "the exact sums' limit"),
        default=512,
        help="largest group size (default 512)",
    )
    g.add_argument(
        "--step",
        type=bounded_int(1, MAX_EXACT_GROUP_SIZE, "the exact sums' limit"),
        default=1,
        help="group sizes g_min, g_min + step, …, g_max (default 1)",
    )
    g.add_argument("--no-skip", action="store_true", help="serve every prompt (at least g_min answers)")


def _add_convention_options(g) -> None:
    """The trainer's std convention (--ddof, --eps) the GRPO values average."""
    g.add_argument(
        "--ddof",
        type=int,
        default=0,
        help="your trainer's std for --value update/progress: 0 population (the paper, default), "
        "1 sample std (TRL, verl)",
    )
    g.add_argument(
        "--eps",
        type=real_option,
        default=0.0,
        help="added to that std before dividing (default 0; TRL 1e-4, verl 1e-6); not the --epsilon target",
    )


def _add_input_options(g) -> None:
    """Where the counts come from: k/n columns or a per-rollout table, and the prior of the solve rate."""
    g.add_argument("--k-column", help="--input column of right answers per prompt (with --n-column)")
    g.add_argument("--n-column", help="--input column of logged rollouts per prompt (with --k-column)")
    g.add_argument("--prompt-column", help="--input is one row per rollout: the prompt-id column to group by")
    g.add_argument(
        "--reward-column", default="reward", help="0/1 reward column of a per-rollout --input (default reward)"
    )
    hidden_aliases(g, {"--prompt-col": "prompt_column", "--reward": "reward_column"})  # gsd diagnose's old spellings
    g.add_argument(
        "--prior",
        default="empirical-bayes",
        help="prior of the solve rate for counts: empirical-bayes (default), uniform, jeffreys or A,B",
    )


def _add_advice_options(g) -> None:
    """--advice (which uniform G learns fastest) with its options, and --show-rows."""
    g.add_argument(
        "--advice",
        action="store_true",
        help="also say which uniform G learns fastest: expected progress per generation (per second with "
        "--cost) of uniform G on the grid, summarised; the full tables go to --output "
        "(FILE's name with .advice before its suffix) and --json",
    )
    g.add_argument(
        "--hold",
        choices=("prompts", "generations"),
        default="prompts",
        help="--advice: what a step holds fixed as G changes, its prompts (the usable rows; default) or its "
        "generations (--budget)",
    )
    from ..cli.support import add_advice_arguments

    add_advice_arguments(g)
    g.add_argument(
        "--verbose",
        action="store_true",
        help="--advice: also the evidence behind the uniform default (gsd allocation-comparison)",
    )
    g.add_argument(
        "--all-columns",
        action="store_true",
        help="print the plan's rows at full width (default: the columns that fit 100 characters)",
    )
    g.add_argument(
        "--show-rows",
        action="store_true",
        help=f"print every row of the plan (default: up to {SHOWN_ROWS} rows; past that a summary, and the "
        "rows go to --output or --json)",
    )


#: Group sizes ``--advice`` compares (those on the plan's grid): a coarse grid, so a file of 10^4 posteriors stays quick.
ADVICE_SIZES = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)


def speed_advice(src, args):
    """gsd.group_size_advice for ``--advice``: the grid sizes of :data:`ADVICE_SIZES` (and g_min, g_max)."""
    import numpy as np

    from ..cli.support import step_cost
    from ..core.advice import DEFAULT_OPTIMIZER, group_size_advice

    g_min, g_max, step = max(2, args.g_min), args.g_max, args.step
    grid = np.array(sorted({g_min, g_max} | set(ADVICE_SIZES)))
    grid = grid[(grid >= g_min) & (grid <= g_max) & ((grid - args.g_min) % step == 0)]
    if grid.size == 0:
        raise CliError(f"--advice: no group size >= 2 on the grid g_min {args.g_min}, g_max {args.g_max}, step {step}")
    n = len(src) if not hasattr(src, "a") else src.a.size
    size = {"prompts_per_step": n} if args.hold == "prompts" else {"generations_per_step": args.budget}
    if args.hold == "generations":
        grid = grid[grid <= args.budget]
        if grid.size == 0:
            raise CliError(f"--advice --hold generations: --budget {args.budget} holds no group of the grid")
    return group_size_advice(
        src,
        hold=args.hold,
        optimizer=args.optimizer or DEFAULT_OPTIMIZER,
        g_grid=grid,
        cost=step_cost(args.cost),
        ddof=args.ddof,
        eps=args.eps,
        **size,
    )


def advice_path(output: str) -> str:
    """Where ``--advice``'s full tables go beside ``--output FILE``: FILE with ``.advice`` before its suffix."""
    from pathlib import Path

    out = Path(output)
    return str(out.with_name(out.stem + ".advice" + out.suffix))


def batch_advice_for(src, args, advice):
    """``--advice --noise-scale``: :func:`gsd.core.advice.batch_advice` with the noise scale taken as measured
    at ``--budget`` generations per step and the uniform plan's G at that budget (None without --noise-scale)."""
    from ..cli.support import noise_scale_arg, step_cost
    from ..core.advice import batch_advice

    noise = noise_scale_arg(getattr(args, "noise_scale", None))
    if noise is None:
        return None
    G = advice.at_budget.get("uniform_G") if advice is not None else None
    if not G or G < 2:
        raise CliError("--noise-scale: the budget holds no uniform group of G >= 2, the G it was measured at")
    rates = src.mean if hasattr(src, "a") else src
    return batch_advice(
        rates, noise, generations_per_step=args.budget, group_size=int(G), lr=args.run_lr, cost=step_cost(args.cost)
    )


def advice_summary(speed) -> list[str]:
    """``--advice``'s few lines: the best G per generation (and per second), a few G beside it, the conventions."""
    t = speed.table.set_index("G")
    shown = [g for g in (2, 4, 8, 16, 32, 64) if g in t.index and g != speed.advised_G_per_generation]
    lines = [
        f"Fastest uniform G per generation: {speed.advised_G_per_generation}"
        + (
            " (" + ", ".join(f"G = {g} at {t.loc[g, 'relative_per_generation']:.2f}x" for g in shown) + ")"
            if shown
            else ""
        ),
    ]
    if speed.advised_G_per_second is not None:
        lines.append(
            f"Fastest uniform G per second: {speed.advised_G_per_second} ("
            + ", ".join(
                f"G = {g} at {t.loc[g, 'relative_per_second']:.2f}x" for g in shown if g != speed.advised_G_per_second
            )
            + f"; cost from {speed.cost.source})"
        )
    else:
        lines.append("Per second: give --cost T_STEP,T_PROMPT,T_ROLLOUT")
    lines.append(
        f"  (expected progress of the prompts' objective; {speed.convention()}; docs/theory.md, section "
        "Which G learns fastest)"
    )
    return lines


def advice_value(rule: str) -> str:
    """The value ``--advice`` tabulates for a ``--value`` rule: ``uniform`` maximises none and
    reports E[σ̂] (``update``); a value is its own."""
    return "update" if rule == "uniform" else rule


def _prior(text: str):
    if text in ("empirical-bayes", "uniform", "jeffreys"):
        return text
    vals = parse_list(text, float, "prior")
    if vals.size != 2:
        raise CliError(f"--prior must be empirical-bayes, uniform, jeffreys or A,B, got {text!r}")
    return tuple(vals.tolist())


def _source(args):
    """(table, per-row status, source for the allocator over the usable rows, mean, kind)."""
    import numpy as np
    import pandas as pd

    from ..core.posterior import posterior_from_counts
    from ..io import input_tables as tables

    if args.input is None:
        if args.k_column or args.n_column or args.prompt_column:
            raise CliError("--k-column, --n-column and --prompt-column need --input")
        p = parse_list(args.p, float, "p")
        df = pd.DataFrame({"p": p})
        _, status = tables.numeric_column(df, "p", lo=0, hi=1)
        ok = status == tables.OK
        return df, status, p[ok], p, "rates"
    raw = tables.read_table(args.input, option="input")
    source = repr(str(args.input))
    if args.prompt_column:
        if args.k_column or args.n_column:
            raise CliError("give either --prompt-column (per-rollout table) or --k-column/--n-column, not both")
        tables.require_columns(raw, {"prompt-column": args.prompt_column, "reward-column": args.reward_column}, source)
        df, k, n, status = tables.counts_from_rollouts(raw, args.prompt_column, args.reward_column)
    elif args.k_column or args.n_column:
        if not (args.k_column and args.n_column):
            raise CliError("--k-column and --n-column go together")
        tables.require_columns(raw, {"k-column": args.k_column, "n-column": args.n_column}, source)
        df = raw
        k, n, status = tables.counts_from_columns(raw, args.k_column, args.n_column)
    else:
        tables.require_columns(raw, {"column": args.column}, source)
        p, status = tables.numeric_column(raw, args.column, lo=0, hi=1)
        ok = status == tables.OK
        return raw, status, p[ok], p, "rates"
    ok = status == tables.OK
    if not ok.any():
        raise CliError(f"input: no usable row in {source}; " + tables.describe_bad_rows(status, 3))
    post = posterior_from_counts(k[ok], n[ok], prior=_prior(args.prior))
    mean = np.full(len(df), np.nan)
    mean[ok] = post.mean
    return df, status, post, mean, "counts"


def plan_budget(args) -> int:
    """``gsd plan --budget``: check the options, read the prompts, plan, then write and print the plan."""
    from ..io import input_tables as tables

    _check_budget_options(args)
    df, status, src, mean, kind = _source(args)
    ok = status == tables.OK
    if not ok.any():
        raise CliError("input: no usable row; " + tables.describe_bad_rows(status, 3))
    look = _lookahead_options(args)
    plan, advice, skipped_advice = _make_plan(args, src, look)
    out, renamed, served = _plan_rows(df, status, src, mean, kind, plan)
    summary = plan.summary() | {
        "rows": len(out),
        "unusable_rows": int((~ok).sum()),
        "renamed_columns": renamed,
        "best_uniform_G": advice.best_G if advice else None,
        "uniform_at_budget": advice.at_budget if advice else None,
    }
    speed = speed_advice(src, args) if args.advice else None
    batch = batch_advice_for(src, args, advice) if args.advice else None
    if speed is not None:
        summary["advised_group_size"] = speed.advised_G_per_generation
        summary["speed"] = speed.summary()
        summary["batch_advice"] = None if batch is None else batch.summary()
    if args.output:
        _write_plan(args.output, out, speed, advice)
    if args.json:
        _print_json(args, out, summary, advice, speed)
        return 0
    if speed is not None:
        from ..core.advice import advice_headline

        # the advised setting first (advice_summary's first line, in its words); B, G and lr with --noise-scale
        print(advice_headline(batch if batch is not None else speed))
    _print_plan(args, plan, advice, skipped_advice, out, served)
    for line in tables.table_notes(status, renamed):
        print(line)
    if args.output:
        print(f"plan written to {args.output}")
    _print_rows(args, plan, out, served)
    if args.advice:
        _print_advice(args, speed, advice)
    return 0


def _check_budget_options(args) -> None:
    """--value (default :data:`gsd.allocation.DEFAULT_PLAN`), and the options --budget refuses, before any work."""
    from . import DEFAULT_PLAN, PLAN_RULES

    args.value = args.value or DEFAULT_PLAN
    if args.value not in PLAN_RULES:
        raise CliError(f"--value must be one of {', '.join(PLAN_RULES)}, got {args.value!r}")
    if args.epsilon is not None or args.delta is not None:
        raise CliError("--budget plans by value; it does not take --epsilon or --delta")
    if args.output and not args.output.endswith((".csv", ".parquet")):
        raise CliError(f"--output must end in .csv or .parquet, got {args.output!r}")


def _lookahead_options(args) -> dict:
    """lr= and horizon= for a look-ahead --value (empty otherwise, where --lr and --horizon are refused)."""
    from . import HORIZON_VALUES

    look = {"lr": args.lr, "horizon": args.horizon} if args.value in HORIZON_VALUES else {}
    if not look and (args.lr is not None or args.horizon is not None):
        raise CliError(f"--lr and --horizon are for --value {' / '.join(HORIZON_VALUES)}, not {args.value!r}")
    return look


def _make_plan(args, src, look):
    """(plan, uniform advice or None, why the advice is left out or None).

    One value table for the plan and the uniform advice beside it (the costly part at a large g_max);
    the uniform default's advice reads the --value update plan, and its own plan is one G for all.
    The uniform plan itself needs no table: without --advice, a table past its limit (10^5
    distinct rates at g_max 512) only drops the line that compares it with --value update.
    """
    from . import TableLimit, allocate_with_advice, uniform_plan

    grid = {"g_min": args.g_min, "g_max": args.g_max, "step": args.step, "skip": not args.no_skip}
    convention = {"ddof": args.ddof, "eps": args.eps}
    advice = skipped_advice = None
    try:
        plan, advice = allocate_with_advice(
            src, args.budget, value=advice_value(args.value), **grid, **convention, **look
        )
    except TableLimit as exc:
        if args.value != "uniform" or args.advice:
            raise
        skipped_advice = str(exc)
    if args.value == "uniform":
        plan = uniform_plan(src, args.budget, **grid, **convention)
    return plan, advice, skipped_advice


def _plan_rows(df, status, src, mean, kind, plan):
    """(output table, renamed input columns, which usable rows are served): every input row in its
    place, with ``posterior_mean``, ``group_size``, ``expected_value``, ``silent_probability`` and
    ``status`` (planned, skipped, or why the row could not be planned) added."""
    import numpy as np
    import pandas as pd

    from ..io import input_tables as tables
    from . import expected_silent_rate

    ok = status == tables.OK
    G = pd.array(np.zeros(len(df), dtype=np.int64), dtype="Int64")
    G[~ok] = pd.NA
    G[ok] = plan.group_size
    value = np.full(len(df), np.nan)
    value[ok] = plan.value
    silent = np.full(len(df), np.nan)
    served = plan.group_size > 0
    if served.any():
        sub = src[served] if kind == "rates" else type(src)(src.a[served], src.b[served], src.prior)
        idx = np.nonzero(ok)[0][served]
        silent[idx] = expected_silent_rate(sub, plan.group_size[served])
    st = status.copy()
    st[np.nonzero(ok)[0]] = np.where(served, "planned", "skipped")
    out, renamed = tables.add_columns(
        df,
        {
            "posterior_mean": np.where(ok, mean, np.nan),
            "group_size": G,
            "expected_value": value,
            "silent_probability": silent,
            "status": st,
        },
    )
    return out, renamed, served


def _write_plan(output, out, speed, advice) -> None:
    """The plan to ``output`` and, with --advice, the full tables beside it (progress of each G, and the
    value-per-rollout curve), each replaced whole: never a half-written plan."""
    from ..io.atomic import write_table

    write_table(output, out)
    if speed is not None:
        curve = advice.curve.rename(columns=lambda c: c if c == "G" else f"value_{c}")
        write_table(advice_path(output), speed.table.merge(curve, on="G", how="outer"))


def _print_json(args, out, summary, advice, speed) -> None:
    """--json: the summary and every row (with --advice, the advice's tables and the evidence)."""
    rows = json.loads(out.to_json(orient="records", double_precision=15))
    extra = {}
    if args.advice:
        extra = {
            "advice": json.loads(advice.curve.to_json(orient="records", double_precision=15)),
            "speed": json.loads(speed.table.to_json(orient="records", double_precision=15)),
            "evidence": EVIDENCE,
        }
    # NaN (a uniform plan's multiplier, a gain over a zero value) is JSON null: strict parsers refuse NaN
    print(json.dumps(json_ready({"summary": summary, "rows": rows} | extra), indent=2, allow_nan=False))


def _print_plan(args, plan, advice, skipped_advice, out, served) -> None:
    """The plan's lines: what it spent and served, and the uniform G at this budget beside it."""
    ub = advice.at_budget if advice else {}
    if advice is None:
        print(f"(the comparison with --value {advice_value(args.value)} is left out: {skipped_advice})")
    uniform = args.value == "uniform"
    _say(
        f"Plan: {len(out)} rows, budget {plan.budget} rollouts, value {plan.value_name}: spent {plan.spent}, "
        f"served {int(served.sum())}, skipped {int((~served).sum())}, total value {plan.total:.6g}"
        f" ({'uniform' if uniform else 'optimal' if plan.exact else f'within {plan.gap_bound:.3g} of optimal'})"
    )
    if ub.get("uniform_G"):
        # The default is that uniform G itself: its one-step ratio would read 1x, so the line names
        # what --value update would plan instead (one step's value, not a run's: see the evidence).
        gain = (
            f"--value {advice_value(args.value)} would plan {ub['gain']:.4g}x on one step"
            if uniform
            else f"the plan gives {ub['gain']:.4g}x"
        )
        _say(
            f"uniform G = {ub['uniform_G']} at this budget: value {ub['uniform_value']:.6g}; {gain}"
            + (f"; the most value per rollout at G = {advice.best_G}" if args.verbose else "")
        )


def _print_rows(args, plan, out, served) -> None:
    """The plan's rows (up to :data:`SHOWN_ROWS`, or all with --show-rows), else the spread of G and where the rows go."""
    import numpy as np

    if args.show_rows or len(out) <= SHOWN_ROWS:
        emit(out, False, width=None if args.all_columns else REPORT_WIDTH)
        return
    sizes = plan.group_size[served]
    if sizes.size:
        q = np.percentile(sizes, [50, 90])
        print(
            f"G over the {sizes.size} served prompts: min {sizes.min()}, median {q[0]:g}, "
            f"90th percentile {q[1]:g}, max {sizes.max()}"
        )
    print(
        f"{len(out)} rows not printed: --output FILE writes them (csv or parquet), --show-rows prints them, "
        "--json gives them with the summary"
    )


def _print_advice(args, speed, advice) -> None:
    """--advice's details (its headline came first), where its full tables are, and, with --verbose,
    the comparison's evidence."""
    for line in advice_summary(speed)[1 : None if args.verbose else -1]:  # the first: the headline's
        _say(line)
    _say(
        f"  full tables ({len(speed.table)} G by progress, {len(advice.curve)} G by value per rollout against the "
        f"--value {advice_value(args.value)} plan): "
        + (f"written to {advice_path(args.output)}" if args.output else "--output FILE or --json")
    )
    if args.verbose:
        _say(EVIDENCE)
    else:
        _say("More: --verbose (the evidence behind uniform G), --json, --output FILE.")


def _say(text: str) -> None:
    """Print ``text`` wrapped to :data:`gsd.cli.support.REPORT_WIDTH` columns."""
    print("\n".join(wrap_lines([text], REPORT_WIDTH)))
