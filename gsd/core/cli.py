"""Sub-commands of the math core: identity, silent, fidelity, plan, conventions, tour.

Each handler imports what it needs when it runs, so that ``gsd --help`` and the small
commands do not pay for scipy, pandas or torch.
"""

from __future__ import annotations

import json

from ..allocation import cli as cli_allocation
from ..cli.support import CliError, emit, parse_list, real_option, wrap_lines
from ..io.data import BIGMATH_COLUMN
from .groupsize import DEFAULT_MAX_GROUP_SIZE


def register(sub) -> None:
    p = sub.add_parser("identity", help="advantages, update and the identity g = σ(s̄₊ − s̄₋) for one group")
    p.add_argument("--rewards", required=True, help="comma-separated rewards, e.g. 0,1,1,0")
    p.add_argument(
        "--scores",
        help="comma-separated scalar scores s_i, one per reward (default: the Bernoulli-logit score r_i − r̄)",
    )
    p.add_argument("--ddof", type=int, default=0, help="std convention: 0 population (paper), 1 sample")
    p.add_argument("--eps", type=real_option, default=0.0, help="added to the std before dividing (paper: 0)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_identity)

    p = sub.add_parser("silent", help="silent-group rate p^G + (1−p)^G and DAPO's cost")
    p.add_argument("--p", required=True, help="success probabilities, comma-separated")
    p.add_argument("--G", required=True, help="group sizes, comma-separated")
    p.add_argument("--max-draws", type=int, default=None, help="DAPO draws in all (default: unlimited)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_silent)

    p = sub.add_parser("fidelity", help="exact fidelity φ(p, G) against the group-size law (G <= 10^9)")
    p.add_argument("--p", required=True, help="success probabilities, comma-separated")
    p.add_argument("--G", required=True, help="group sizes, comma-separated (every p with every G)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_fidelity)

    p = sub.add_parser("plan", help="group size per prompt for a fidelity or silent-rate target")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--p", help="success probabilities, comma-separated")
    src.add_argument("--input", help="per-prompt file (parquet, CSV or JSONL)")
    p.add_argument("--column", default=BIGMATH_COLUMN, help=f"solve-rate column of --input (default {BIGMATH_COLUMN})")
    tgt = p.add_mutually_exclusive_group()
    tgt.add_argument("--epsilon", type=real_option, help="fidelity target 1 − ε")
    tgt.add_argument("--delta", type=real_option, help="silent-rate target δ")
    p.add_argument(
        "--rule",
        choices=("exact", "law"),
        default="exact",
        help="fidelity target: the exact smallest G, or the group-size law 1/(8εp(1−p)) (default exact)",
    )
    p.add_argument(
        "--max-group-size",
        type=int,
        default=DEFAULT_MAX_GROUP_SIZE,
        help=f"largest G considered; beyond it a prompt's G prints as >MAX (default {DEFAULT_MAX_GROUP_SIZE:,})",
    )
    p.add_argument("--output", help="write the plan to OUT.csv or OUT.parquet")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    cli_allocation.add_arguments(p)
    p.set_defaults(func=_plan)

    p = sub.add_parser(
        "conventions", help="how far TRL / TRL async / verl / OpenRLHF / AReaL's GRPO update lies from the paper's"
    )
    p.add_argument("--G", default="4,8,16,64", help="group sizes, comma-separated (default 4,8,16,64)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_conventions)

    p = sub.add_parser("tour", help="print the worked numbers of the core")
    p.set_defaults(func=lambda args: tour())


def _identity(args) -> int:
    import numpy as np

    from . import groups

    r = parse_list(args.rewards, float, "rewards")
    std = float(groups.group_std(r, ddof=args.ddof))  # checks the rewards before any arithmetic on them
    if args.scores is None:
        s = (r - r.mean())[:, None]  # Bernoulli-logit score y − p at p = r̄
    else:
        s = parse_list(args.scores, float, "scores")[:, None]
        if s.shape[0] != r.shape[0]:
            raise CliError(f"--scores needs one value per reward ({r.size}), got {s.shape[0]}")
    rows = {
        "rewards": r.tolist(),
        "std_ddof": std,
        "silent": bool(groups.is_silent(r)),
        "adv_grpo": groups.advantages(r, "grpo", ddof=args.ddof, eps=args.eps).tolist(),
        "adv_dr_grpo": groups.advantages(r, "dr_grpo").tolist(),
        "g_grpo": float(groups.group_update(r, s, "grpo", ddof=args.ddof, eps=args.eps)[0]),
        "g_dr_grpo": float(groups.group_update(r, s, "dr_grpo")[0]),
    }
    binary = bool(np.isin(r, (0.0, 1.0)).all())
    if binary:
        sigma, contrast = groups.identity_terms(r, s)
        sigma_c = float(groups.group_std(r, ddof=args.ddof)) if r.size > args.ddof else float("nan")
        rows.update(
            sigma=float(sigma),
            contrast=float(contrast[0]),
            identity_grpo=float(sigma**2 / (sigma_c + args.eps)) * float(contrast[0]) if sigma > 0 else 0.0,
            identity_dr_grpo=float(sigma**2 * contrast[0]),
        )
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        width = max(len(k) for k in rows)
        for key, val in rows.items():
            print(f"{key:<{width}}  {val}")
        if not binary:
            print("(graded rewards: the binary identity does not apply; g = Cov_group(r, s)/(σ_c + eps))")
    return 0


def _silent(args) -> int:
    import numpy as np

    from . import silent

    p = parse_list(args.p, float, "p")[:, None]
    G = parse_list(args.G, float, "G")[None, :]
    P = silent.silent_rate(p, G)
    cost = silent.dapo_generation_cost(p, G, max_draws=args.max_draws)
    pb, Gb = np.broadcast_arrays(p, G)
    emit(
        {
            "p": pb.ravel(),
            "G": Gb.ravel().astype(np.int64),
            "silent_rate": P.ravel(),
            "dapo_groups_per_prompt": cost.ravel(),
        },
        args.json,
    )
    if not args.json and np.isinf(cost).any():
        print(
            "dapo_groups_per_prompt inf: every group is silent (p = 0 or 1) or so nearly that the cost exceeds "
            "float range; DAPO redraws forever (see --max-draws)"
        )
    return 0


def _fidelity(args) -> int:
    import numpy as np

    from . import update

    p = parse_list(args.p, float, "p")[:, None]
    G = parse_list(args.G, float, "G")[None, :]
    fid = update.fidelity(p, G)  # checks p and G first
    pb, Gb = np.broadcast_arrays(p, G)
    table = {
        "p": pb.ravel(),
        "G": Gb.ravel().astype(np.int64),
        "fidelity": fid.ravel(),
        "law": update.fidelity_law(p, G).ravel(),
        "m_grpo": update.expected_update(p, G, "grpo").ravel(),
        "m_dr_grpo": update.expected_update(p, G, "dr_grpo").ravel(),
    }
    emit(table, args.json)
    if not args.json and np.isnan(table["law"]).any():
        print(
            "law NaN: G = 1 or G·p(1−p) < 1/8, where the law has no meaning (use the exact fidelity;"
            " see docs/theory.md, section The group-size law)"
        )
    return 0


def _plan(args) -> int:
    if args.budget is not None:
        return cli_allocation.plan_budget(args)
    if args.epsilon is None and args.delta is None:
        raise CliError("give a target (--epsilon or --delta) or a rollout budget (--budget)")
    import numpy as np

    from . import groupsize

    if args.output and not args.output.endswith((".csv", ".parquet")):
        raise CliError(f"--output must end in .csv or .parquet, got {args.output!r}")
    if args.input:
        return _plan_table(args)
    p = parse_list(args.p, float, "p")
    columns = groupsize.plan_columns(
        p, epsilon=args.epsilon, delta=args.delta, rule=args.rule, max_group_size=args.max_group_size
    )
    if args.output:
        import pandas as pd

        from ..io.atomic import write_table

        write_table(args.output, pd.DataFrame(columns))  # atomic: never a half-written plan
    status = columns["status"]
    shown = dict(
        columns,
        group_size=np.where(
            status == "ok",
            columns["group_size"].astype(str),
            np.where(status == "unreachable", "never", f">{args.max_group_size}"),
        ),
    )
    emit(shown, args.json)
    return 0


def _plan_table(args) -> int:
    """``gsd plan --input``: every input row, in order, with its columns, the plan's columns and
    a status (a row without a usable rate keeps its place; the same reader as ``--budget``)."""
    import numpy as np
    import pandas as pd

    from ..io import input_tables as tables
    from ..io.atomic import write_table
    from . import groupsize

    df = tables.read_table(args.input, option="input")
    tables.require_columns(df, {"column": args.column}, repr(str(args.input)))
    p, status = tables.numeric_column(df, args.column, lo=0, hi=1)
    ok = status == tables.OK
    if not ok.any():
        raise CliError(f"input: no usable row in {str(args.input)!r}; " + tables.describe_bad_rows(status, 3))
    planned = groupsize.plan_columns(
        p[ok], epsilon=args.epsilon, delta=args.delta, rule=args.rule, max_group_size=args.max_group_size
    )
    G = pd.array(np.zeros(len(df), dtype=np.int64), dtype="Int64")
    G[~ok] = pd.NA
    G[ok] = planned["group_size"]
    st = status.copy()
    st[ok] = planned["status"]
    new = {"group_size": G, "status": st}
    for name in ("fidelity", "silent_rate"):
        new[name] = np.full(len(df), np.nan)
        new[name][ok] = planned[name]
    plan, renamed = tables.add_columns(df, new)
    if args.output:
        write_table(args.output, plan)  # atomic: never a half-written plan
    counts = pd.Series(st).value_counts()
    reachable = planned["status"] == "ok"
    summary = pd.Series(planned["group_size"][reachable]).describe(percentiles=[0.5, 0.9, 0.99])
    if args.json:
        print(
            json.dumps(
                {
                    "prompts": len(plan),
                    "status": counts.to_dict(),
                    "group_size": summary.to_dict(),
                    "renamed_columns": renamed,
                    "output": args.output,
                },
                indent=2,
            )
        )
        return 0
    print(f"{len(plan)} rows planned: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    spread = "group size over reachable prompts: " + ", ".join(f"{k} {v:.4g}" for k, v in summary.items())
    print("\n".join(wrap_lines([spread])))
    if counts.get("unreachable", 0):
        print("unreachable = p in {0, 1}: every group is silent at any G (group_size -1)")
    for line in tables.table_notes(status, renamed):
        print(line)
    if args.output:
        print(f"plan written to {args.output}")
    return 0


def _conventions(args) -> int:
    import pandas as pd

    from . import trainers

    G = parse_list(args.G, float, "G")
    df = pd.concat([trainers.convention_gap(G, t) for t in trainers.CONVENTIONS], ignore_index=True)
    if args.json:
        emit(df, True)
        return 0
    # The trainer's ratio with its own eps comes first (what `gsd tour` prints); eps = 0 after it.
    emit(
        df[["trainer", "G", "ddof", "eps", "ratio_min", "ratio_max", "ratio_no_eps", "gap_percent"]].rename(
            columns={
                "ratio_min": "ratio(k=1)",
                "ratio_max": "ratio(k=G/2)",
                "ratio_no_eps": "ratio(eps=0)",
                "gap_percent": "gap%(eps=0)",
            }
        ),
        False,
        floatfmt="{:.5g}",
        title="the trainer's GRPO update over the paper's, with its own ddof and eps, for k right of G\n"
        "(eps weighs most at k = 1); then with eps = 0, and the gap that leaves",
    )
    return 0


def tour() -> int:
    """The worked numbers of the core, printed (the short version of the reproduction)."""
    import numpy as np

    from ..io.data import load_bigmath
    from . import groups, groupsize, silent, trainers, update, weighting

    r = np.array([0.0, 1, 1, 0])
    print("1. One group, rewards (0, 1, 1, 0), G = 4")
    print(f"   σ = {groups.group_std(r):.4f} (ddof 0), GRPO advantages {groups.advantages(r).tolist()}")
    s = np.array([[0.3], [1.1], [0.7], [-0.2]])
    sigma, contrast = groups.identity_terms(r, s)
    print(
        f"   scores (0.3, 1.1, 0.7, −0.2): g_GRPO = {groups.group_update(r, s)[0]:.4f}"
        f" = σ·(s̄₊ − s̄₋) = {sigma:.4f}·{contrast[0]:.4f}"
    )
    print("2. Silent groups, P = p^G + (1−p)^G")
    for p, G in [(0.5, 8), (0.05, 8), (0.05, 64)]:
        print(f"   p = {p}, G = {G}: {float(silent.silent_rate(p, G)):.4f}")
    print("3. Fidelity φ(p, G) = E[σ]/sqrt(p(1−p)) against the law 1 − 1/(8Gp(1−p))")
    for p, G in [(0.5, 8), (0.05, 64)]:
        print(
            f"   p = {p}, G = {G}: exact {float(update.fidelity(p, G)):.4f}, law {float(update.fidelity_law(p, G)):.4f}"
        )
    print("4. Smallest G for 95 % fidelity: exact (law)")
    ps = np.array([0.5, 0.3, 0.1, 0.05])
    ex = groupsize.required_group_size(ps, 0.05)
    law = np.round(groupsize.group_size_law(ps, 0.05)).astype(int)
    print("   " + ", ".join(f"p={p}: {e} ({l})" for p, e, l in zip(ps, ex, law)))
    p = load_bigmath()
    ext = weighting.extreme_mask(p)
    print(
        f"5. Big-Math ({p.size:,} prompts): silent at G = 8 {silent.silent_rate(p, 8).mean():.1%}; extreme share"
        f" {weighting.budget_share(p, ext, method='dr_grpo'):.1%} (Dr.GRPO) vs"
        f" {weighting.budget_share(p, ext, method='grpo'):.1%} (GRPO)"
    )
    gaps = {t: trainers.convention_gap(8, t).iloc[0] for t in ("trl", "verl", "openrlhf")}
    print(
        "6. Trainers' GRPO update vs the paper's at G = 8, k = 1, with their ddof 1 and eps (`gsd conventions`):\n   "
        + ", ".join(f"{t} {float(row.ratio_min):.5g}" for t, row in gaps.items())
        + f"; {float(gaps['trl'].ratio_no_eps):.5g} with eps = 0"
    )
    return 0
