"""``gsd simulate``: one training run, or the paper's multi-arm campaign.

    gsd simulate --config mlp_interference --out runs/mlp [--set lr=0.02 ...]
    gsd simulate --campaign paper_campaign --out runs/paper [--figure figures/campaign.png]
    gsd simulate --out runs/paper_grpo                  # the defaults: the paper's GRPO arm

``--resume`` continues an interrupted run (or campaign) in the same folder, from its last
checkpoint; a finished one is not redone (it says so).  After Ctrl-C the command prints the step it
stopped at and the exact command that resumes it.  Every bad key or value is reported as one line
with exit status 2.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import sys

from ..cli.support import CliError, bounded_int, emit, imports_done
from ..core.methods import ADVANTAGE_METHODS
from ..errors import InputError
from .config import SimConfig, parse_assignment, resolve_device


def register(sub) -> None:
    p = sub.add_parser(
        "simulate",
        help="train a Bernoulli-logit policy with GRPO / Dr.GRPO / DAPO and ledger it against the closed forms",
        description=__doc__.split("\n\n")[0],
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--config",
        help="TOML (or JSON) file of SimConfig keys, or the name of a shipped config (mlp_interference) (default: the dataclass defaults)",
    )
    src.add_argument(
        "--campaign",
        help="campaign TOML with [base] and [arms.NAME] tables, or the name of a shipped campaign (paper_campaign)",
    )
    p.add_argument("--out", required=True, help="run (or campaign) folder")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one config key (repeatable); values are read as TOML, e.g. --set method=dapo --set lr=0.1",
    )
    p.add_argument("--resume", action="store_true", help="continue the unfinished run in --out")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), help="override the config's device")
    p.add_argument(
        "--threads",
        type=bounded_int(1, 1024, "torch CPU threads"),
        help="torch CPU threads, for the torch engine (default: one, or more when the step is large and a "
        "short probe shows they pay off on this machine now; the summary records the count, results "
        "depend on it); the numpy engine (--set engine=numpy, or auto's choice) runs on one",
    )
    p.add_argument("--figure", help="campaign: also write the figure here (e.g. figures/campaign.png)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=_simulate)


def _overrides(args) -> dict:
    out = dict(parse_assignment(s) for s in args.sets)
    if args.device:
        out["device"] = args.device
    return out


@contextlib.contextmanager
def _memory_is_input():
    """A run too large for this machine's memory is the size the user asked for: one line."""
    try:
        yield
    except (MemoryError, RuntimeError) as exc:
        text = str(exc)
        if not isinstance(exc, MemoryError) and "allocate" not in text and "out of memory" not in text:
            raise
        raise InputError(
            "the run does not fit in memory (lower n_prompts, batch_size or group_size, or set "
            f"rollouts = 'counts'; the run folder resumes with --resume): {text.splitlines()[0] if text else type(exc).__name__}"
        ) from None


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _resume_command(args) -> str:
    """The command that continues this one's folder: the same source, --set, device, threads and
    figure, plus --resume."""
    cmd = ["gsd", "simulate"]
    if args.campaign or args.config:
        cmd += ["--campaign", args.campaign] if args.campaign else ["--config", args.config]
    cmd += ["--out", args.out]
    for s in args.sets:
        cmd += ["--set", s]
    for flag, value in (("--device", args.device), ("--threads", args.threads), ("--figure", args.figure)):
        if value is not None:
            cmd += [flag, str(value)]
    return shlex.join([*cmd, "--resume"])


@contextlib.contextmanager
def _interrupt_says_how_to_resume(args):
    from .runfolder import RunInterrupted

    try:
        yield
    except RunInterrupted as exc:
        raise KeyboardInterrupt(f"{exc}\nresume with: {_resume_command(args)}") from None


def _simulate(args) -> int:
    overrides = _overrides(args)
    if args.figure and not args.campaign:
        raise CliError("--figure goes with --campaign")
    if args.campaign:
        from .campaign import load_campaign, make_campaign_figure, run_paper_campaign

        imports_done()
        load_campaign(args.campaign, overrides)  # every error before any work
        with _memory_is_input(), _interrupt_says_how_to_resume(args):
            summary = run_paper_campaign(
                args.out,
                config_path=args.campaign,
                overrides=overrides,
                progress=not args.no_progress,
                resume=args.resume,
                notify=_say,
                threads=args.threads,
            )
        if args.figure:
            make_campaign_figure(summary, args.figure)
        _print_campaign(summary, args.json)
        return 0
    from .dispatch import run_simulation

    imports_done()
    cfg = SimConfig.from_toml(args.config) if args.config else SimConfig()
    cfg = cfg.with_overrides(overrides)
    resolve_device(cfg.device)
    with _memory_is_input(), _interrupt_says_how_to_resume(args):
        summary = run_simulation(
            cfg, args.out, resume=args.resume, progress=not args.no_progress, notify=_say, threads=args.threads
        )
    if args.json:
        print(json.dumps({k: v for k, v in summary.items() if k != "config"}, indent=2))
    else:
        emit(_arm_table({cfg.name: summary}), False, title=f"run folder: {args.out}")
    return 0


def _arm_table(summaries: dict) -> dict:
    """One row per arm, as {column: list} (printed by :func:`gsd.cli.support.emit` without pandas)."""
    rows = [
        {
            "arm": name,
            "method": s["method"],
            "silent_R2": s["silent_r2"],
            "decile_share_max_diff": s["decile_share_max_abs_diff"],
            "mass/closed_form": s["grad_mass_over_closed_form"],
            "mean_p_final": s["final"]["mean_p"],
            "hard_q_final": s["final"]["quartile_mean_p"][0],
            "generations": s["generations_total"],
            "engine": s.get("engine", "torch"),  # a summary written before the numpy engine: torch's
        }
        for name, s in summaries.items()
    ]
    return {key: [r[key] for r in rows] for key in rows[0]}


def _print_campaign(summary: dict, as_json: bool) -> None:
    if as_json:
        print(json.dumps({k: v for k, v in summary.items() if k not in ("series", "campaign")}, indent=2))
        return
    emit(_arm_table(summary["arms"]), False, title="arms (ledger over training)")
    dec = summary["decile_measurement"]
    methods = [m for m in ADVANTAGE_METHODS if m in dec]
    table = {"decile": [f"{d / 10:.1f}" for d in range(10)]}
    for m in methods:
        table[f"{m}_measured"] = dec[m]["share_measured"]
        table[f"{m}_closed"] = dec[m]["share_closed_form"]
    print()
    emit(table, False, title=f"initial-population gradient-mass shares ({dec['draws']} draws per prompt)")
    ratio = summary.get("dapo_generation_cost_ratio")
    if ratio is not None:
        print(
            f"\nDAPO generations / GRPO generations: {ratio:.4f} (closed form {summary['dapo_generation_cost_ratio_pred']:.4f})"
        )
    print(f"figure: {summary['figure']}")
