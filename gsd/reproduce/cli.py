"""Sub-commands of the reproduction: reproduce, figures, bigmath, group-size-table, dapo-fit,
allocation-comparison, transformer-update, transformer-train, group-size-training."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..cli.support import CliError, bounded_int, emit, real_option
from ..io.data import BIGMATH_COLUMN


def register(sub) -> None:
    """Add every sub-command of the reproduction to the ``gsd`` parser ``sub``, in this order."""
    _add_reproduce(sub)
    _add_transformer_update(sub)
    _add_transformer_train(sub)
    _add_group_size_training(sub)
    _add_figures(sub)
    _add_bigmath(sub)
    _add_group_size_table(sub)
    _add_dapo_fit(sub)
    _add_allocation_comparison(sub)


def _add_reproduce(sub) -> None:
    """``gsd reproduce``: its options; it runs :func:`_reproduce`."""
    p = sub.add_parser("reproduce", help="regenerate the paper's evidence and compare it with the published numbers")
    p.add_argument("--out", default="reports/latest", help="report folder (default reports/latest)")
    p.add_argument("--fast", action="store_true", help="smaller Monte Carlo and bootstrap runs")
    p.add_argument("--skip-campaign", action="store_true", help="do not run the simulator's campaign")
    p.add_argument("--figures", default=None, help="figure folder (default OUT/figures)")
    p.add_argument(
        "--difficulty",
        default=None,
        help="analyse this per-problem solve-rate file instead of the shipped Big-Math histogram",
    )
    p.add_argument(
        "--seed",
        type=bounded_int(0, 2**32 - 1, "numpy's seed range"),
        default=0,
        help="seed of the Monte Carlo checks and the DAPO fit (default 0)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--json", action="store_true", help="print the comparison table as JSON")
    p.add_argument(
        "--transformer",
        choices=("fast", "full", "skip"),
        default="fast",
        help="TRL's update on a tiny transformer vs the closed forms: fast (default, about a minute, "
        "32 groups per prompt), full (minutes, 400) or skip",
    )
    p.add_argument(
        "--group-size-training",
        choices=("fast", "skip"),
        default="fast",
        help="every arm of gsd group-size-training at its fast size (default fast, seconds) or skip",
    )
    p.set_defaults(func=_reproduce)


def _add_transformer_update(sub) -> None:
    """``gsd transformer-update``: its options; it runs :func:`_transformer_update`."""
    p = sub.add_parser(
        "transformer-update",
        help="TRL's own expected update on a tiny transformer with exact solve rates vs the closed forms",
    )
    p.add_argument("--fast", action="store_true", help="32 groups per prompt instead of 400")
    p.add_argument(
        "--G", type=bounded_int(2, 64, "TRL's num_generations here"), default=8, help="group size (default 8)"
    )
    p.add_argument(
        "--seed",
        type=bounded_int(0, 2**32 - 1, "numpy's seed range"),
        default=0,
        help="seed of the task and the draws (default 0)",
    )
    p.add_argument("--figure", default=None, help="also draw the ratios to this PNG")
    p.add_argument(
        "--silent-figure",
        default=None,
        help="also draw the trainings' silent fraction against the closed forms to this PNG",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=_transformer_update)


def _add_transformer_train(sub) -> None:
    """``gsd transformer-train``: its options; it runs :func:`_transformer_train`."""
    p = sub.add_parser(
        "transformer-train",
        help="TRL trainings of a tiny transformer with exact solve rates: gsd diagnose's calibration, "
        "the hardest quarter under GRPO, Dr.GRPO and the skip sampler, the update against σ",
    )
    p.add_argument("--fast", action="store_true", help="16 prompts, 8 steps, one seed (instead of 32, 30, three)")
    p.add_argument("--figure", default=None, help="also draw the three panels to this PNG")
    p.add_argument(
        "--out",
        default=None,
        help="a new folder that keeps the trainings' TRL logs, "
        "OUT/seed{seed}/{method}/ (completions/ and trainer_state.json), for gsd diagnose "
        "(default: a temporary folder)",
    )
    p.add_argument("--json", action="store_true", help="print the whole result as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=_transformer_train)


def _add_group_size_training(sub) -> None:
    """``gsd group-size-training``: its options; it runs :func:`_group_size_training`."""
    p = sub.add_parser(
        "group-size-training",
        help="which G and which prompts learn fastest per generation and per second: TRL trainings "
        "of a tiny transformer with exact p, every arm at equal generations, both protocols",
    )
    p.add_argument("--fast", action="store_true", help="the suite's size: 32 prompts, one seed, G in {2, 4}, seconds")
    p.add_argument(
        "--out",
        default="runs/group_size_training",
        help="run folder, one result file per cell (default runs/group_size_training)",
    )
    p.add_argument("--resume", action="store_true", help="read the cells already in --out instead of running them")
    p.add_argument("--lr", default=None, help="comma-separated learning rates (default 3e-4,1e-3)")
    p.add_argument("--seeds", type=bounded_int(1, 100, "seeds"), default=None, help="seeds 0..N-1 (default 3)")
    p.add_argument(
        "--arms",
        default=None,
        help="comma-separated arms beyond the uniform G: dr_grpo, greso, oracle, gsd, cgrpo (trl-cgrpo; default all)",
    )
    p.add_argument("--tasks", default=None, help="comma-separated tasks: first_token, shared (default both)")
    p.add_argument("--figure", default=None, help="also draw the hardest quarter against generations to this PNG")
    p.add_argument("--csv", default=None, help="also write the summary table (every column) to this CSV")
    p.add_argument("--tables", default=None, help="also write the docs page's markdown tables to this file")
    p.add_argument("--json", action="store_true", help="print the summary table as JSON")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=_group_size_training)


def _add_figures(sub) -> None:
    """``gsd figures``: its options; it runs :func:`_figures`."""
    p = sub.add_parser("figures", help="regenerate every figure (PNG) into a folder")
    p.add_argument("--out", default=None, help="folder (default: the checkout's figures/)")
    p.add_argument("--fast", action="store_true", help="smaller Monte Carlo runs")
    p.add_argument(
        "--campaign",
        default=None,
        help="campaign run folder to draw campaign.png from (default: reports/latest/campaign if present)",
    )
    p.add_argument("--no-losses", action="store_true", help="skip the loss-geometry figures")
    p.add_argument("--no-campaign", action="store_true", help="skip the campaign figure")
    p.set_defaults(func=_figures)


def _add_bigmath(sub) -> None:
    """``gsd bigmath``: its options; it runs :func:`_bigmath`."""
    p = sub.add_parser("bigmath", help="silent rates and gradient-budget shares of a difficulty distribution")
    p.add_argument("--input", default=None, help="per-problem solve-rate file (default: shipped Big-Math histogram)")
    p.add_argument("--column", default=BIGMATH_COLUMN, help=f"solve-rate column of --input (default {BIGMATH_COLUMN})")
    p.add_argument("--G", type=int, default=8, help="finite group size for the budget shares (default 8)")
    p.add_argument(
        "--table",
        choices=("summary", "silent", "budget", "deciles"),
        default="summary",
        help="what to print: the headline numbers, silent rates per G, budget shares or decile shares "
        "(default summary)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_bigmath)


def _add_group_size_table(sub) -> None:
    """``gsd group-size-table``: its options; it runs :func:`_group_size_table`."""
    p = sub.add_parser("group-size-table", help="the paper's table: exact smallest G vs the law, per fidelity and p")
    p.add_argument("--fidelity", default="0.9,0.95,0.99", help="fidelity targets, comma-separated")
    p.add_argument("--p", default="0.5,0.3,0.1,0.05", help="success probabilities, comma-separated")
    p.add_argument("--long", action="store_true", help="one row per (fidelity, p) with the checks")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_group_size_table)


def _add_dapo_fit(sub) -> None:
    """``gsd dapo-fit``: its options; it runs :func:`_dapo_fit`."""
    p = sub.add_parser("dapo-fit", help="fit the competence timescale of a logged all-correct curve (step, fraction)")
    p.add_argument("curve", help="CSV (or parquet) with columns step and fraction")
    p.add_argument(
        "--difficulty",
        default=None,
        help="initial solve rates: per-problem file or k,p_hat,count histogram (default: Big-Math)",
    )
    p.add_argument("--column", default=BIGMATH_COLUMN, help="solve-rate column of --difficulty")
    p.add_argument("--step-column", default="step", help="column of training steps (default step)")
    p.add_argument(
        "--fraction-column",
        default="fraction",
        help="column of the fraction of prompts with all samples right (default fraction)",
    )
    p.add_argument(
        "--samples",
        type=bounded_int(1, 10**6, "evaluation samples per prompt"),
        default=32,
        help="evaluation samples per prompt (default 32)",
    )
    p.add_argument(
        "--plateau-points",
        type=bounded_int(1, 10**6, "points of the curve"),
        default=8,
        help="final points that pin the plateau (default 8)",
    )
    p.add_argument("--start-step", type=real_option, default=0.0, help="step at which competence is 1 (default 0)")
    p.add_argument(
        "--bootstrap",
        type=bounded_int(1, 10**5, "each replicate refits the curve"),
        default=200,
        help="bootstrap replicates (default 200)",
    )
    p.add_argument(
        "--seed",
        type=bounded_int(0, 2**32 - 1, "numpy's seed range"),
        default=0,
        help="seed of the bootstrap (default 0)",
    )
    p.add_argument("--figure", default=None, help="also draw the fit to this PNG")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_dapo_fit)


def _add_allocation_comparison(sub) -> None:
    """``gsd allocation-comparison``: its options; it runs :func:`_allocation_comparison`."""
    p = sub.add_parser(
        "allocation-comparison", help="which way of spending rollouts learns fastest at equal generations (simulator)"
    )
    p.add_argument(
        "--out",
        default="runs/allocation_comparison",
        help="campaign folder (default runs/allocation_comparison); an unfinished one is resumed",
    )
    p.add_argument(
        "--config",
        default="allocation_comparison",
        help="campaign file or shipped name (default allocation_comparison: the paper's scale; "
        "allocation_comparison_small: the size gsd reproduce runs)",
    )
    p.add_argument(
        "--variant",
        action="append",
        default=None,
        help="run only this variant now (repeatable; e.g. one process per variant); the summary is "
        "written once every variant has run",
    )
    p.add_argument("--figure", default=None, help="also draw objective against generations to this PNG")
    p.add_argument(
        "--jobs",
        type=bounded_int(0, 1024, "worker processes"),
        default=0,
        help="worker processes for the runs (default 0: one per CPU this process may use; the results "
        "do not depend on it)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=_allocation_comparison)


def _parse_floats(text, name):
    try:
        values = [float(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise CliError(f"--{name} must be a comma-separated list of numbers, got {text!r}") from None
    if not values:
        raise CliError(f"--{name} is empty")
    return values


def _reproduce(args) -> int:
    from .report import run_reproduction

    report = run_reproduction(
        args.out,
        fast=args.fast,
        skip_campaign=args.skip_campaign,
        progress=not args.quiet,
        difficulty=args.difficulty,
        seed=args.seed,
        figures_dir=args.figures,
        transformer=args.transformer,
        group_size_training=args.group_size_training,
    )
    rows = [
        {k: r[k] for k in ("quantity", "ours", "published", "difference", "unit", "agrees_at_printed_precision")}
        for r in report["comparisons"]
    ]
    import pandas as pd

    df = pd.DataFrame(rows).rename(columns={"agrees_at_printed_precision": "agrees"})
    if args.json:
        emit(df, True)
    else:
        emit(df, False, title=f"ours vs published  (report: {Path(args.out) / 'report.md'})", floatfmt="{:.4f}")
        camp = report["campaign"]
        if camp["status"] != "ok":
            print(f"campaign: {camp['status']} ({camp.get('reason', '')})")
    return 0


def _figures_and_json(result, as_json: bool, figures) -> bool:
    """Draw each (figure function, path) with a path; print ``result`` as JSON when asked (and say so)."""
    from ..plotstyle import save_figure

    for draw, path in figures:
        if path:
            save_figure(draw(result), path)
    if as_json:
        from ..io.atomic import jsonable

        print(json.dumps(jsonable(result), indent=2))
    return as_json


def _transformer_update(args) -> int:
    from . import transformer

    log = None if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    result = transformer.run(fast=args.fast, G=args.G, seed=args.seed, log=log)
    if not _figures_and_json(
        result, args.json, ((transformer.figure, args.figure), (transformer.silent_figure, args.silent_figure))
    ):
        emit(
            transformer.table(result),
            False,
            floatfmt="{:.3f}",
            title=f"measured / closed form along ∇p, G = {args.G}, {result['draws'] * result['copies']} groups "
            "per prompt",
        )
        for method, t in result["training"]["runs"].items():
            print(
                f"training {method}: silent-fraction R² {t['r2_exact']:.3f} against the exact p, "
                f"{t['r2_pooled']:.3f} against the pooled p ({len(t['steps'])} steps)"
            )
    return 0


def _transformer_train(args) -> int:
    from . import transformer

    log = None if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    result = transformer.run_training(fast=args.fast, log=log, out=args.out)
    if not _figures_and_json(result, args.json, ((transformer.train_figure, args.figure),)):
        emit(
            transformer.training_table(result),
            False,
            floatfmt="{:.3f}",
            title=f"{result['n_prompts']} prompts, {result['steps']} steps, G = {result['G']}",
        )
        for lt in ("dr_grpo", "grpo"):
            s = result["sigma"][lt]
            print(
                f"update along ∇p against σ, loss_type={lt!r}: slope {s['slope']:.3f} "
                f"[{s['slope_lo']:.3f}, {s['slope_hi']:.3f}], R² per k {s['r2_k']:.3f}"
            )
        if args.out:
            print(f"TRL's logs kept in {args.out}/seed{{seed}}/{{method}}: gsd diagnose {args.out}/seed0/grpo")
    return 0


def _group_size_training(args) -> int:
    from . import group_size_training as gst

    def names(text):
        return None if text is None else tuple(x.strip() for x in str(text).split(",") if x.strip())

    lrs = None if args.lr is None else tuple(_parse_floats(args.lr, "lr"))
    cfg = gst.config_from(
        args.fast,
        lrs=lrs,
        seeds=None if args.seeds is None else tuple(range(args.seeds)),
        arms=names(args.arms),
        tasks=names(args.tasks),
    )
    log = None if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    results = gst.run(args.out, cfg, resume=args.resume, progress=not args.quiet, log=log)
    if args.figure:
        from ..plotstyle import save_figure

        save_figure(gst.figure(results), args.figure)
    cols = [
        "task",
        "lr",
        "protocol",
        "arm",
        "G",
        "seeds",
        "gens_to_0.5",
        "gens_to_0.8",
        "gens_to_0.9",
        "secs_to_0.8",
        "final_arcsin",
        "d_gens_0.8",
        "d_gens_0.8_lo",
        "d_gens_0.8_hi",
        "hardest_at_T",
    ]
    df = gst.summary(results)
    if args.csv or args.tables:
        from ..io.atomic import write_atomic

        if args.csv:
            write_atomic(args.csv, df.to_csv(index=False, float_format="%.6g"))
        if args.tables:
            write_atomic(args.tables, gst.page_tables(results))
    emit(
        df if args.json else df[cols],
        args.json,
        floatfmt="{:.3g}",
        title=f"equal generations ({cfg.budget} per training); NaN: a target not reached in every seed; d_*: "
        "paired against the best uniform G, Student-t 95 % over seeds",
    )
    return 0


def _figures(args) -> int:
    from ..plotstyle import figures_dir
    from .figures import make_all

    out = Path(args.out) if args.out else figures_dir()
    if args.no_campaign and args.campaign:
        raise CliError("--campaign and --no-campaign contradict each other")
    res = make_all(
        out,
        fast=args.fast,
        campaign=args.campaign,
        include_losses=not args.no_losses,
        include_campaign=not args.no_campaign,
        progress=True,
    )
    print(f"{len(res['written'])} figures in {out}")
    for part, why in res["skipped"].items():
        print(f"{part}: not drawn ({why})")
    return 0


def _bigmath(args) -> int:
    from . import bigmath

    if args.G < 2:
        raise CliError(f"--G must be >= 2, got {args.G}")
    d = bigmath.load_difficulty(args.input, column=args.column)
    if args.table == "silent":
        emit(bigmath.silent_rates(d), args.json)
    elif args.table == "budget":
        emit(bigmath.budget_shares(d, G=args.G), args.json)
    elif args.table == "deciles":
        emit(bigmath.decile_table(d, G=args.G), args.json)
    else:
        s = bigmath.summary(d, G=args.G)
        if args.json:
            print(
                json.dumps(
                    {
                        "source": s["source"],
                        "population": s["population"],
                        "headline": s["headline"],
                        "notes": s["notes"],
                    },
                    indent=2,
                )
            )
        else:
            import pandas as pd

            rows = [(k, v) for k, v in {**s["population"], **s["headline"]}.items()]
            emit(pd.DataFrame(rows, columns=["quantity", "value"]), False, title=f"source: {s['source']}")
            for note in s["notes"]:
                print(f"note: {note}")
    return 0


def _group_size_table(args) -> int:
    from . import group_size_table as gst

    fid = _parse_floats(args.fidelity, "fidelity")
    ps = _parse_floats(args.p, "p")
    if any(not 0 < f < 1 for f in fid):
        raise CliError(f"--fidelity values must lie in (0, 1), got {args.fidelity!r}")
    if any(not 0 < p < 1 for p in ps):
        raise CliError(f"--p values must lie in (0, 1), got {args.p!r}")
    table = gst.group_size_table(fid, ps)
    emit(table if args.long else gst.group_size_table_wide(table), args.json)
    return 0


def _dapo_fit(args) -> int:
    from . import dapo_fit

    steps, fraction = dapo_fit.read_curve(
        args.curve, step_column=args.step_column, fraction_column=args.fraction_column
    )
    difficulty = None
    if args.difficulty is not None:
        from .bigmath import load_difficulty

        difficulty = load_difficulty(args.difficulty, column=args.column).p
    fit = dapo_fit.fit_all_correct_curve(
        steps,
        fraction,
        difficulty,
        n_samples=args.samples,
        plateau_points=args.plateau_points,
        start_step=args.start_step,
        n_bootstrap=args.bootstrap,
        seed=args.seed,
    )
    if args.figure:
        from ..plotstyle import save_figure

        save_figure(dapo_fit.fit_figure(fit, title=Path(args.curve).name), args.figure)
    if args.json:
        from ..io.atomic import jsonable

        print(json.dumps(jsonable(fit.summary()), indent=2))
    else:
        emit(fit.table(), False, title=f"all-correct curve fit: {args.curve}")
        for note in fit.notes:
            print(f"note: {note}", file=sys.stderr)
    return 0


def _allocation_comparison(args) -> int:
    import time

    from .allocation_campaign import usable_cpus
    from .allocation_comparison import comparison_figure, comparison_markdown, run_comparison

    t0 = time.perf_counter()
    log = (
        None
        if args.quiet
        else (lambda msg: print(f"[{time.perf_counter() - t0:7.0f} s] {msg}", file=sys.stderr, flush=True))
    )
    summary = run_comparison(
        args.out, config=args.config, variants=args.variant, log=log, jobs=args.jobs or usable_cpus()
    )
    if not summary:
        print(f"ran {', '.join(args.variant)}; the summary waits for the other variants (run them into {args.out})")
        return 0
    print("\n".join(comparison_markdown(summary)))
    if args.figure:
        from ..plotstyle import save_figure

        save_figure(comparison_figure(summary, args.out), args.figure)
    return 0
