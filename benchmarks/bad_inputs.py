"""Catalogue of bad (and edge) inputs to the public API and the ``gsd`` command line.

Every case is run in a worker process with a time budget (a case that exceeds it is a *hang*)
and a 16 GB address-space limit (an allocation beyond it is a *MemoryError*, not an OOM kill).
Each case says what it expects: ``error`` (the input is invalid) or ``answer`` (a valid edge
input: the result must be finite and in the function's range, or a documented sentinel/NaN).
Outcomes:

* ``clear error`` — the package's input error (:class:`gsd.InputError`; at a baseline revision
  without it, any ``ValueError``), or for the CLI exit status 2 with one line (argparse's usage
  errors included);
* ``answer`` — a result in range where one was expected (``answer (NaN/inf shown)``: the CLI
  printed NaN or inf, to be read against the command's note);
* ``wrong answer`` — a result where an error was expected, or out of range / non-finite
  where it was not documented;
* ``traceback`` — any other exception (TypeError, OverflowError, a plain ValueError, ...), or
  for the CLI a traceback / exit status 1;
* ``MemoryError``, ``hang``, ``crash`` (the worker died);
* ``unclear error`` — a one-line error that does not name the knob at fault (``must_name``);
* ``data loss`` — a run folder or output folder left damaged, mixed or littered (scenarios).

Besides single calls, *scenarios* play a user's misfortunes on run folders: SIGKILL mid-run then
``--resume``, a second ``--resume`` on a running folder, damaged ``checkpoint.pt`` / ``.npz`` /
``summary.json`` / ``config.json`` / ``ledger.parquet``, a full disk (a file-size limit) during a
checkpoint or while ``gsd diagnose --out`` draws its figure; a checkpoint copied from another
seed's run or holding another dtype, ±inf/NaN logits, a wrong-shaped momentum, a negative Adam
step or second moment, a 10-byte generator state; a lock file that is a dangling symlink, a FIFO
or names pid 2^40; a sweep program with one run folder locked by a live process; a SIGKILLed
sweep's lock files; a campaign arm or a staging manifest naming a path outside its folder.  A CLI case may carry ``post``, an
expression on the files it wrote that must hold (the rows and columns of a plan).

    .venv/bin/python benchmarks/bad_inputs.py                     # this checkout and the baseline
    .venv/bin/python benchmarks/bad_inputs.py --baseline '' --show wrong,traceback,hang,MemoryError
"""

from __future__ import annotations

import argparse
import json
import math
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gsd.io.atomic import write_json  # a benchmark's result file is never half-written

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bad_inputs_advice import advice_cases  # noqa: E402 (issue 44's newest surfaces: noise scale, batch advice)
from bad_inputs_numbers import numbers_cases  # noqa: E402 (issue 44's surfaces, a module of their own)

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BASELINE = "aeb7a5e"  # main before issue 17

# --------------------------------------------------------------------------- the cases
NUMS = [
    "float('nan')",
    "float('inf')",
    "-float('inf')",
    "-1",
    "-0.5",
    "0",
    "1",
    "1.5",
    "2",
    "1e-320",
    "1e300",
    "2**62",
    "2**64",
    "10**30",
    "True",
    "None",
    "'x'",
    "''",
    "[]",
    "[float('nan')]",
    "[0.5, float('inf')]",
    "[[0.5]]",
    "3+1j",
    "0.5",
    "8",
]


def real_or_none(v):
    """The value of the expression ``v`` if it is a real number float64 holds finitely (bools count
    as 0/1, as numpy reads them: binary rewards are often booleans)."""
    try:
        x = eval(v)
    except Exception:
        return None
    if not isinstance(x, (int, float)):
        return None
    try:
        return x if math.isfinite(float(x)) else None
    except OverflowError:
        return None


def finite(v):
    return real_or_none(v) is not None


def is_prob(v):
    x = real_or_none(v)
    return x is not None and 0 <= x <= 1


def is_int(v, lo=1, hi=2**53):
    x = real_or_none(v)
    return x is not None and not isinstance(x, bool) and float(x) == int(x) and lo <= x <= hi


def is_open(v):
    x = real_or_none(v)
    return x is not None and 0 < x < 1


EXACT = 10**9  # the exact sums' documented limit
# (template with {} for the argument under test, validity predicate, range check on v, ids)
API = [
    ("gsd.silent_rate({}, 8)", is_prob, "(v >= 0) & (v <= 1)"),
    ("gsd.silent_rate(0.3, {})", is_int, "(v >= 0) & (v <= 1)"),
    ("gsd.nonsilent_rate({}, 8)", is_prob, "(v >= 0) & (v <= 1)"),
    ("gsd.nonsilent_rate(0.3, {})", is_int, "(v >= 0) & (v <= 1)"),
    ("gsd.dapo_generation_cost({}, 8, max_draws=4)", is_prob, "(v >= 1) & (v <= 4)"),
    ("gsd.dapo_generation_cost(0.3, {}, max_draws=4)", is_int, "(v >= 1) & (v <= 4)"),
    ("gsd.dapo_generation_cost(0.3, 8, max_draws={})", lambda v: is_int(v) or v == "None", "(v >= 1)"),
    ("gsd.silent_rate_subsampled({}, 64, 8)", lambda v: is_int(v, 0, 64), "(v >= 0) & (v <= 1)"),
    ("gsd.silent_rate_subsampled(3, {}, 2)", lambda v: is_int(v, 3, 10**6), "(v >= 0) & (v <= 1)"),
    ("gsd.group_size_for_silent_rate({}, 0.01)", is_prob, "v >= -1"),
    ("gsd.group_size_for_silent_rate(0.3, {})", is_open, "v >= 2"),
    ("gsd.expected_update({}, 8)", is_prob, "(v >= 0) & (v <= 0.5)"),
    ("gsd.expected_update(0.3, {})", lambda v: is_int(v, 1, EXACT), "(v >= 0) & (v <= 0.5)"),
    ("gsd.expected_update(0.3, {}, 'dr_grpo')", is_int, "(v >= 0) & (v <= 0.25)"),
    ("gsd.expected_update(0.3, 8, eps={})", lambda v: finite(v) and 0 <= real_or_none(v) and v != "True", "v >= 0"),
    ("gsd.expected_update(0.3, 8, ddof={})", lambda v: v in ("0", "1"), "v >= 0"),
    ("gsd.fidelity({}, 8)", is_prob, "(v >= 0) & (v <= 1)"),
    ("gsd.fidelity(0.3, {})", lambda v: is_int(v, 1, EXACT), "(v >= 0) & (v <= 1)"),
    ("gsd.fidelity_law({}, 8)", is_prob, "np.isnan(v) | ((v >= 0) & (v <= 1))"),
    ("gsd.fidelity_law(0.5, {})", is_int, "np.isnan(v) | ((v >= 0) & (v <= 1))"),
    ("gsd.required_group_size({}, 0.05)", is_prob, "v >= -1"),
    ("gsd.required_group_size(0.3, {})", is_open, "v >= 0"),
    ("gsd.required_group_size(0.3, 0.05, max_group_size={})", lambda v: is_int(v, 2, EXACT), "v >= 0"),
    ("gsd.group_size_law({}, 0.05)", is_prob, "v >= 0"),
    ("gsd.plan_group_sizes([{}], epsilon=0.05)", is_prob, "np.isnan(v) | (v >= -1)"),
    ("gsd.plan_group_sizes([0.3], delta={})", is_open, "np.isnan(v) | (v >= -1)"),
    ("gsd.advantages([0, 1, {}])", finite, "np.isfinite(v)"),
    ("gsd.advantages({})", lambda v: False, "np.isfinite(v)"),
    ("gsd.group_std([0, 1, {}])", finite, "v >= 0"),
    ("gsd.group_update([0, 1], [[0.0], [{}]])", finite, "np.isfinite(v)"),
    ("gsd.identity_terms([0, 1, {}], [[0.0], [1.0], [2.0]])", lambda v: v in ("0", "1", "True"), "np.isfinite(v)"),
    ("gsd.trainer_advantages([0, 1, {}], 'trl')", finite, "np.isfinite(v)"),
    ("gsd.convention_gap({})", lambda v: is_int(v, 2), "v >= 0"),
    ("gsd.difficulty_weight({})", is_prob, "np.isfinite(v) | np.isinf(v)"),
    ("gsd.budget_share([0.3, {}], np.array([True, False]))", is_prob, "(v >= 0) & (v <= 1)"),
    (
        "gsd.budget_share([0.3, 0.6], np.array([True, False]), G={})",
        lambda v: is_int(v, 2, EXACT) or v == "None",
        "(v >= 0) & (v <= 1)",
    ),
    ("gsd.decile_shares([0.3, {}])", is_prob, "(v >= 0) & (v <= 1)"),
]
LOSSES = [
    ("L.softmax_t([1.0, {}])", lambda v: finite(v) or v == "-float('inf')", "(v >= 0) & (v <= 1)"),
    (
        "L.softmax_t([1.0, 0.0], T={})",
        lambda v: finite(v) and 0 < real_or_none(v) and v != "True",
        "(v >= 0) & (v <= 1)",
    ),
    ("L.kl_divergence([0.5, 0.5], [{}, 0.5])", lambda v: v == "0.5", "v >= 0"),
    ("L.clipped_surrogate({}, 1.0)", lambda v: finite(v) and 0 <= real_or_none(v), "np.isfinite(v)"),
    ("L.clipped_surrogate(1.2, {})", finite, "np.isfinite(v)"),
    ("L.aggregate([[1.0, {}]], [[1, 1]])", finite, "np.isfinite(v)"),
]


# Single calls at the limits of cost and precision: (expression, expect, range check).
API_LIMITS = [
    ("__import__('gsd.integrations.trl', fromlist=['trl']).total_reward(np.ones((2, 3)), [1.0])", "error", "v >= 0"),
    (
        "gsd.expected_silent_rate(gsd.posterior_from_counts(2**52, 2**53, prior='uniform'), 8)",
        "answer",
        "(v >= 0) & (v <= 1) & (abs(v - 2 * 0.5**8) < 1e-9)",
    ),
    (
        "gsd.expected_silent_rate(gsd.posterior_from_counts(0, 2**53, prior='uniform'), 8)",
        "answer",
        "(v >= 0) & (v <= 1)",
    ),
    (
        "gsd.allocation_value(gsd.posterior_from_counts(2**52, 2**53, prior='uniform'), 8)",
        "answer",
        "(v >= 0) & (abs(v - 0.46391398740233325) < 1e-6)",
    ),  # allocation_value(0.5, 8)
    ("gsd.allocation_value(0.5, 2**53)", "error", "v >= 0"),
    ("gsd.allocation_value(0.5, 10**10, 'nonsilent')", "error", "v >= 0"),
    ("gsd.allocation_value([0.1, 0.2], [2, 3, 4])", "error", "v >= 0"),
    ("gsd.allocation_value(gsd.posterior_from_counts([1, 2], [3, 4]), [2, 3, 4])", "error", "v >= 0"),
    ("gsd.expected_silent_rate([0.1, 0.2], [2, 3, 4])", "error", "v >= 0"),
    (
        "gsd.allocate_group_sizes([0.3, 0.6], 2000004, g_min=2, g_max=1000002, step=1000000).group_size",
        "answer",
        "v == 1000002",
    ),
    (
        "gsd.allocate_group_sizes(gsd.posterior_from_counts([3, 5], [10, 10]), 2000004, g_min=2, g_max=1000002, "
        "step=1000000).group_size",
        "answer",
        "v == 1000002",
    ),
    ("gsd.allocate_group_sizes([0.3], 100, g_max=10**10).group_size", "error", "v >= 0"),
    ("gsd.allocate_group_sizes(np.linspace(0.01, 0.99, 60), 10**6, g_max=200001).group_size", "either", "v >= 0"),
    ("gsd.uniform_group_size_advice([0.3], 100, g_max=10**10).best_G", "error", "v >= 0"),
    ("gsd.concavity_violations([0.3], g_max=10**10)", "either", "v >= 0"),
    # cost bounded before work: a posterior's dense sum at G = 10^9 asked for 7.45 GiB
    ("gsd.allocation_value(gsd.posterior_from_counts(3, 8, prior='uniform'), 10**9)", "error", "v >= 0"),
]


def api_cases():
    cases = []
    for template, valid, check in API + LOSSES:
        for v in NUMS:
            # a nested list is an array of the same numbers: valid where the function broadcasts
            expect = "either" if v == "[[0.5]]" else "answer" if valid(v) else "error"
            cases.append({"kind": "api", "expr": template.format(v), "expect": expect, "check": check})
    for expr, expect, check in API_LIMITS:
        cases.append({"kind": "api", "expr": expr, "expect": expect, "check": check})
    return cases


CLI_TOKENS = [
    "nan",
    "inf",
    "-inf",
    "-1",
    "0",
    "1.5",
    "1e300",
    "1e-320",
    "4611686018427387904",
    "x",
    "",
    "0.5,,0.2",
    "1,2,x",
    "1000000000",
    "0.5",
    "8",
]


def _tok_ok(kind, t):
    try:
        vals = [float(x) for x in t.split(",") if x.strip()]
    except ValueError:
        return False
    if not vals:
        return False
    if kind == "p":
        return all(0 <= x <= 1 for x in vals)
    if kind == "G":
        return all(math.isfinite(x) and x == int(x) and 1 <= x <= EXACT for x in vals)
    if kind == "open":
        return all(0 < x < 1 for x in vals) and len(vals) == 1
    if kind == "rewards":
        return all(math.isfinite(x) for x in vals)
    return False


def cli_cases(tmp: Path):
    (tmp / "afile").write_text("x")
    (tmp / "adir.csv").mkdir(exist_ok=True)
    (tmp / "garbage.csv").write_bytes(b"\x00\xff\xfe not a table")
    (tmp / "empty.csv").write_text("")
    (tmp / "other.csv").write_text("a,b\n0.1,2\n")
    (tmp / "nan.csv").write_text("llama8b_solve_rate\n0.1\n\n0.5\nnan\n")
    (tmp / "inf.csv").write_text("llama8b_solve_rate\n0.1\ninf\n")
    paths = [
        "/nonexistent/x.csv",
        str(tmp / "adir.csv"),
        str(tmp / "afile" / "sub" / "x.csv"),
        "/sys/gsd/x.csv",
        str(tmp / "garbage.csv"),
        str(tmp / "empty.csv"),
        str(tmp / "other.csv"),
        str(tmp / "nan.csv"),
        str(tmp / "inf.csv"),
        str(tmp / "afile"),
    ]
    cases = []

    def add(argv, ok):
        cases.append(
            {"kind": "cli", "argv": argv, "expect": ok if isinstance(ok, str) else "answer" if ok else "error"}
        )

    for t in CLI_TOKENS:
        add(["silent", "--p", t, "--G", "8"], _tok_ok("p", t))
        add(
            ["silent", "--p", "0.3", "--G", t],
            _tok_ok("G", t)
            or (
                _tok_ok("rewards", t)
                and all(float(x) == int(float(x)) and 1 <= float(x) <= 2**53 for x in t.split(",") if x.strip())
            ),
        )
        add(["fidelity", "--p", t, "--G", "8"], _tok_ok("p", t))
        add(["fidelity", "--p", "0.3", "--G", t], _tok_ok("G", t))
        add(["plan", "--p", t, "--epsilon", "0.05"], _tok_ok("p", t))
        add(["plan", "--p", "0.3", "--delta", t], _tok_ok("open", t))
        add(["identity", "--rewards", f"0,1,{t}"], _tok_ok("rewards", f"0,1,{t}"))
        add(["conventions", "--G", t], _tok_ok("G", t) and all(float(x) >= 2 for x in t.split(",") if x.strip()))
        add(
            ["group-size-table", "--p", t],
            "either"
            if t == "1e-320"
            else _tok_ok("open", t) or (_tok_ok("p", t) and all(0 < float(x) < 1 for x in t.split(",") if x.strip())),
        )
        add(["bigmath", "--G", t], t in ("8", "1000000000"))
    for path in paths:
        # a row with NaN or inf is kept in place with a status saying why; the others are planned
        add(["plan", "--input", path, "--epsilon", "0.05"], path.endswith(("nan.csv", "inf.csv")))
        add(["bigmath", "--input", path], path.endswith("nan.csv"))
        add(["dapo-fit", path, "--bootstrap", "5"], False)
        add(["diagnose", path], False)
        add(["sweep", "--grid", path, "--out", str(tmp / "sw")], False)
        add(
            ["simulate", "--config", path, "--out", str(tmp / "sim")], "either" if path.endswith("empty.csv") else False
        )
        add(["simulate", "--out", path, "--set", "steps=0"], False)
    unwritable = [
        str(tmp / "adir.csv"),
        str(tmp / "afile" / "sub" / "x.csv"),
        "/sys/gsd/x.csv",
        "/nonexistent/x.txt",
        str(tmp / "afile" / "x.parquet"),
    ]
    for path in unwritable:  # last: a case that wrongly succeeds must not overwrite the inputs above
        add(["plan", "--p", "0.3", "--epsilon", "0.05", "--output", path], False)
    for s in [
        "steps=-1",
        "steps=nan",
        "group_size=1e300",
        "lr=inf",
        "method='x'",
        "nokey=1",
        "steps",
        "=",
        "seed=1.5",
        "engine=jax",
        "engine=1",
    ]:
        add(["simulate", "--out", str(tmp / "simset"), "--set", s], False)
    add(["plan", "--input", str(tmp / "other.csv"), "--column", "nope", "--epsilon", "0.1"], False)
    cases += limit_cases(tmp)
    cases += log_and_planner_cases(tmp)
    return cases


SMALL_RUN = ["--no-progress", "--set", "n_prompts=10", "--set", "steps=1", "--set", "device=cpu"]


def limit_cases(tmp: Path) -> list:
    """Config keys and options at their bounds, and tables in and out (rows, columns, types)."""
    (tmp / "rates5.csv").write_text("id,rate\n1,0.1\n2,\n3,0.5\n4,nan\n5,0.9\n")
    (tmp / "own_cols.csv").write_text("k,n,rate,status,group_size\n1,4,0.2,mine,3\n2,4,0.5,mine,3\n")
    (tmp / "roll.csv").write_text("prompt,reward\na,1\na,0\nb,1\nb,1\n")
    (tmp / "bigk.csv").write_text("k,n\n9007199254740993,9007199254740995\n1,4\n")
    (tmp / "bigid.csv").write_text("prompt,reward\n9007199254740993,1\n9007199254740992,0\n,1\n")
    (tmp / "mixed.jsonl").write_text('{"id": 1, "rate": 0.2}\n{"id": "a", "rate": 0.4}\n')
    seeds = ", ".join(map(str, range(1000)))
    (tmp / "huge_grid.toml").write_text(
        f"[grid]\nseed = [{seeds}]\ncheckpoint_every = [{seeds.replace('0, ', '1000, ', 1)}]\n"
    )
    out = tmp / "out"
    cases = []

    def add(argv, expect, must_name=None, post=None):
        cases.append({"kind": "cli", "argv": argv, "expect": expect, "must_name": must_name, "post": post})

    for i, (sets, knob) in enumerate(
        [
            (["--set", "g_max=1000000000000000000000000000000", "--set", "allocation=update"], "g_max"),
            (["--set", "max_draws=1000000000000000000000", "--set", "method=dapo"], "max_draws"),
            (["--set", "g_max=100000", "--set", "allocation=update"], "g_max"),
            (["--set", "group_size=100000", "--set", "rollouts=counts"], "group_size"),
            (["--set", "ppo_epochs=1000000000000"], "ppo_epochs"),
            (["--set", "steps=100000000000"], "steps"),
            (["--threads", "100000"], "threads"),
            (["--set", "engine=numpy", "--set", "policy=mlp"], "engine"),  # the numpy engine names what needs torch
            (["--set", "engine=numpy", "--set", "kl_coef=0.1"], "engine"),
        ]
    ):  # a folder each: a case that wrongly runs must not change the next one's answer
        add(["simulate", "--out", str(tmp / f"limits_sim{i}")] + SMALL_RUN + sets, "error", knob)
    add(["plan", "--p", "0.3", "--budget", "10", "--g-max", "10000000000"], "error", "g-max")
    add(["sweep", "--grid", str(tmp / "huge_grid.toml"), "--out", str(tmp / "sw"), "--dry-run"], "error")
    add(["plan", "--p", "0.3", "--epsilon", "0.05", "--output", "/proc/gsd-x.csv"], "error")
    add(
        [
            "plan",
            "--input",
            str(tmp / "rates5.csv"),
            "--column",
            "rate",
            "--epsilon",
            "0.05",
            "--output",
            str(out / "fid.csv"),
        ],
        "answer",
        post=f"len(pd.read_csv({str(out / 'fid.csv')!r})) == 5 and "
        f"pd.read_csv({str(out / 'fid.csv')!r})['id'].tolist() == [1, 2, 3, 4, 5]",
    )
    add(
        [
            "plan",
            "--input",
            str(tmp / "rates5.csv"),
            "--column",
            "rate",
            "--budget",
            "20",
            "--output",
            str(out / "bud.csv"),
        ],
        "answer",
        post=f"len(pd.read_csv({str(out / 'bud.csv')!r})) == 5",
    )
    for mode in (["--column", "rate"], ["--k-column", "k", "--n-column", "n"]):
        name = str(out / f"own_{mode[0][2:]}.csv")
        add(
            ["plan", "--input", str(tmp / "own_cols.csv"), *mode, "--budget", "16", "--output", name],
            "either",
            post=f"pd.read_csv({name!r})['status'].tolist() == ['mine', 'mine'] and "
            f"pd.read_csv({name!r})['group_size'].tolist() == [3, 3]",
        )
    for suffix in (".parquet", ".csv"):
        add(
            [
                "plan",
                "--input",
                str(tmp / "roll.csv"),
                "--prompt-column",
                "prompt",
                "--budget",
                "16",
                "--output",
                str(out / f"roll{suffix}"),
            ],
            "answer",
        )
    add(
        ["plan", "--input", str(tmp / "bigk.csv"), "--k-column", "k", "--n-column", "n", "--budget", "16", "--json"],
        "either",
        post="json.loads(stdout)['rows'][0]['status'] != 'planned'",
    )
    add(
        ["plan", "--input", str(tmp / "bigid.csv"), "--prompt-column", "prompt", "--budget", "16", "--json"],
        "either",
        post="len(json.loads(stdout)['rows']) == 3",
    )
    add(
        [
            "plan",
            "--input",
            str(tmp / "mixed.jsonl"),
            "--column",
            "rate",
            "--budget",
            "8",
            "--output",
            str(out / "mixed.parquet"),
        ],
        "either",
        post=f"pd.read_parquet({str(out / 'mixed.parquet')!r})['id'].tolist() == [1, 'a']",
    )
    # run folders, locks and configs (issue 27): each refused in one line naming the input
    (tmp / "grid1.toml").write_text('[base]\nn_prompts = 10\nsteps = 1\ndevice = "cpu"\n[grid]\nseed = [0, 1]\n')
    for value in ("nan", "-5", "inf"):
        add(
            [
                "sweep",
                "--grid",
                str(tmp / "grid1.toml"),
                "--out",
                str(tmp / "sw_lt"),
                "--lock-timeout",
                value,
                "--no-progress",
            ],
            "error",
            "lock-timeout",
        )
    (tmp / "graded.csv").write_text("prompt,step,reward\na,0,0.5\na,0,0.25\nb,0,1.0\nb,0,0.75\n")
    for option, value in (("--budget", "-4"), ("--epsilon", "7"), ("--level", "2"), ("--half-life", "nan")):
        add(
            ["diagnose", str(tmp / "graded.csv"), "--reward", "reward", "--no-progress", option, value],
            "error",
            option[2:],
        )
    arms = "[arms.fixed_g8]\ngroup_size = 8\n[arms.fixed_g4]\ngroup_size = 4\n[arms.fixed_g16]\ngroup_size = 16\n"
    base = '[base]\nn_prompts = 10\nsteps = 1\ndevice = "cpu"\n'
    for i, (text, knob) in enumerate(
        [
            (base + arms + "[campaign]\nseeds = [0]\n", "seeds"),
            (base + arms + "[campaign]\nseeds = 5\n", "seeds"),
            (base, "[arms]"),
            (base + arms + "[variants]\n", "[variants]"),
            (base + arms + '[arms."../../escape"]\nmethod = "grpo"\n', "arm"),
        ]
    ):
        (tmp / f"comparison{i}.toml").write_text(text)
        add(
            ["allocation-comparison", "--config", str(tmp / f"comparison{i}.toml"), "--out", str(tmp / f"cmp{i}")],
            "error",
            knob,
        )
    (tmp / "decile_draws.toml").write_text(
        base + '[campaign]\ndecile_draws = 1000000000000000\n[arms.grpo]\nmethod = "grpo"\n'
    )
    add(
        ["simulate", "--campaign", str(tmp / "decile_draws.toml"), "--out", str(tmp / "dd"), "--no-progress"],
        "error",
        "decile_draws",
    )
    (tmp / "noid.csv").write_text("prompt,reward\na,1\na,0\n,1\n,1\nb,1\nb,0\n")
    add(
        [
            "plan",
            "--input",
            str(tmp / "noid.csv"),
            "--prompt-column",
            "prompt",
            "--budget",
            "16",
            "--output",
            str(out / "noid.csv"),
        ],
        "answer",
        post=f"pd.read_csv({str(out / 'noid.csv')!r})['group_size'].isna().tolist() == [False, True, False]",
    )
    (tmp / "rollcol.csv").write_text("rollouts,reward\na,1\na,0\nb,1\nb,1\n")
    add(
        [
            "plan",
            "--input",
            str(tmp / "rollcol.csv"),
            "--prompt-column",
            "rollouts",
            "--budget",
            "16",
            "--output",
            str(out / "rollcol.csv"),
        ],
        "answer",
        post=f"pd.read_csv({str(out / 'rollcol.csv')!r})['rollouts'].tolist() == ['a', 'b']",
    )
    add(["plan", "--p", "0.3,0.5,0.1", "--budget", "100", "--g-max", "20000", "--advice"], "answer")
    # 10^6 logged (k, n) rows, n ≤ 64: ~2,000 distinct posteriors; 13–46 s before issue 27's fix (a hang here)
    import numpy as np

    rng = np.random.default_rng(0)
    n_big = rng.integers(1, 65, 10**6)
    np.savetxt(
        tmp / "counts_1e6.csv",
        np.column_stack([rng.binomial(n_big, rng.beta(0.5, 1.0, n_big.size)), n_big]),
        fmt="%d",
        delimiter=",",
        header="k,n",
        comments="",
    )
    add(
        [
            "plan",
            "--input",
            str(tmp / "counts_1e6.csv"),
            "--k-column",
            "k",
            "--n-column",
            "n",
            "--budget",
            "16000000",
            "--output",
            str(out / "counts_1e6.parquet"),
        ],
        "answer",
    )
    return cases


def log_and_planner_cases(tmp: Path) -> list:
    """Issue 38's classes: real formats read silently wrong, the planner's wrong answers, unreadable
    files and messages naming the wrong thing."""
    import numpy as np

    from gsd.integrations.trl import write_step as trl_step
    from gsd.integrations.verl import write_step as verl_step

    d = tmp / "i38"
    d.mkdir(exist_ok=True)
    cases = []

    def add(argv, expect, must_name=None, post=None):
        cases.append({"kind": "cli", "argv": argv, "expect": expect, "must_name": must_name, "post": post})

    def summary(expr):  # a post on the --json summary of gsd diagnose
        return f"(lambda s: {expr})(json.loads(stdout)['summary'])"

    diag = ["diagnose", "--no-progress", "--json"]
    # unreadable files: one line naming the file, fast
    good = b"".join(b'{"prompt": "%s", "step": 0, "reward": %d}\n' % (q, r) for q in (b"a", b"b") for r in (0, 1, 1))
    (d / "latin1.jsonl").write_bytes(good + b'{"prompt": "caf\xe9", "step": 0, "reward": 1}\n')
    add([*diag, str(d / "latin1.jsonl"), "--reward", "reward"], "answer", post=summary("s['bad_rows'] == 1"))
    for suffix in (".jsonl", ".csv"):
        with open(d / f"zeros{suffix}", "wb") as fh:
            fh.truncate(2 << 30)  # 2 GB of NUL bytes, sparse
        add([*diag, str(d / f"zeros{suffix}"), "--reward", "reward"], "error", "NUL")
    os.mkfifo(d / "fifo.csv")
    add([*diag, str(d / "fifo.csv"), "--reward", "reward"], "error", "fifo.csv")
    (d / "loop" / "a").mkdir(parents=True)
    (d / "loop" / "a" / "up").symlink_to("..")
    (d / "loop" / "a" / "x.jsonl").write_bytes(good)
    add([*diag, str(d / "loop" / "**" / "*.jsonl"), "--reward", "reward"], "answer")
    # numbers as typed
    for argv, name in (
        (["plan", "--p", "0.3,1e400", "--epsilon", "0.05"], "1e400"),
        (["plan", "--p", "0.3", "--epsilon", "1e400"], "1e400"),
        (["silent", "--p", "0.3", "--G=-1e999"], "-1e999"),
        (["simulate", "--out", str(d / "s1"), "--set", "lr=1e400"], "1e400"),
    ):
        add(argv, "error", name)
    (d / "huge.toml").write_text("lr = 1e400\n")
    add(["simulate", "--config", str(d / "huge.toml"), "--out", str(d / "s2")], "error", "1e400")
    (d / "list.json").write_text("[1, 2]")
    for command in ("simulate", "allocation-comparison"):
        add([command, "--config", str(d / "list.json"), "--out", str(d / f"{command}_list")], "error", "JSON list")
    add(
        [
            "simulate",
            "--out",
            str(d / "bm"),
            *SMALL_RUN,
            "--set",
            "difficulty=beta",
            "--set",
            "beta_mixture=[[1e308, 0.5, 0.5], [1e308, 2, 2]]",
        ],
        "answer",
    )
    # output files named with their option, before the work
    (d / "figdir.png").mkdir()
    (d / "figdir.csv").mkdir()
    (d / "curve.csv").write_text("step,fraction\n0,0.1\n1,0.2\n")
    for path in (str(d / "figdir.png"), "/proc/gsd-x.png", str(d / "latin1.jsonl" / "x.png")):
        add(["dapo-fit", str(d / "curve.csv"), "--figure", path], "error", "--figure")
        add(["plan", "--p", "0.3", "--epsilon", "0.05", "--output", path.replace(".png", ".csv")], "error", "--output")
    # half-life at its ends: a tiny half-life, steps near 2^62 (exact integer ages)
    rows = [f"q{p},{base + s},{(s + p + j) % 2}" for base in (0,) for s in range(4) for p in range(3) for j in range(4)]
    (d / "small.csv").write_text("prompt,step,reward\n" + "\n".join(rows) + "\n")
    (d / "big.csv").write_text(
        "prompt,step,reward\n"
        + "\n".join(r.replace(f",{s},", f",{2**62 + s},", 1) for r in rows for s in [int(r.split(",")[1])])
        + "\n"
    )
    add([*diag, str(d / "small.csv"), "--reward", "reward", "--half-life", "1e-320"], "answer")
    add([*diag, str(d / "big.csv"), "--reward", "reward", "--half-life", "1.5"], "answer")  # exact: a scenario
    # the planner: strict JSON, the uniform default without a table, the advice's optimum
    add(
        ["plan", "--p", "0,0.3,1,0.5", "--budget", "4", "--g-max", "8", "--json", "--advice"],
        "answer",
        post="json.loads(stdout, parse_constant=lambda c: 1 / 0) is not None",
    )
    add(
        ["plan", "--p", "0.3,0.5,0.1", "--budget", "9", "--g-max", "8", "--json", "--advice"],
        "answer",
        post="all(r['allocated_value'] >= r['uniform_value'] * (1 - 1e-12) for r in json.loads(stdout)['advice'])",
    )
    np.savetxt(d / "rates1e5.csv", np.random.default_rng(0).random(100_000), header="p", comments="", fmt="%.17g")
    add(
        [
            "plan",
            "--input",
            str(d / "rates1e5.csv"),
            "--column",
            "p",
            "--budget",
            "1000000",
            "--output",
            str(d / "plan1e5.parquet"),
        ],
        "answer",
        post=f"len(pd.read_parquet({str(d / 'plan1e5.parquet')!r})) == 100000",
    )
    # verl V1: a malformed key, a key written twice; verl's float32 silence
    v1 = [
        {"input": q, "output": "o", "score": float(r), "step": 1, "uid": f"u{g}_{i}_0"}
        for g, (q, rs) in enumerate([("q1", (1, 0, 1, 1)), ("q2", (0, 0, 1, 1)), ("q1", (1, 1, 0, 1))])
        for i, r in enumerate(rs)
    ]
    for name, edit, post in (
        (
            "plain",
            lambda rows: rows[5].update(uid="plain"),
            "s['bad_rows'] == 1 and 'uid' in s['group_by'] and 'V1 key' in s['bad_rows_listed'][0]",
        ),
        ("null", lambda rows: rows[5].update(uid=None), "s['bad_rows'] == 1 and 'uid' in s['group_by']"),
        (
            "twice",
            lambda rows: rows.append(dict(rows[1], score=1.0)),
            "s['extra_outputs'] == 0 and 'written twice' in s['bad_rows_listed'][0]",
        ),
    ):
        rows = [dict(r) for r in v1]
        edit(rows)
        (d / f"v1_{name}" / "rollout_data").mkdir(parents=True)
        (d / f"v1_{name}" / "rollout_data" / "1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        add([*diag, str(d / f"v1_{name}" / "rollout_data")], "answer", post=summary(post))
    verl_step(d / "f32" / "rollout_data", 1, ["q1", "q1", "q2", "q2"], [1.0, 0.99999999, 0.0, 1.0])
    add([*diag, str(d / "f32" / "rollout_data")], "answer", post="json.loads(stdout)['steps'][0]['silent_frac'] == 0.5")
    add(["diagnose", "--no-progress", "--format", "areal", str(d / "f32" / "rollout_data")], "error", "--format verl")
    # TRL: trainer_state.json of the wrong type
    for step in (1, 2):
        trl_step(d / "trl" / "completions", step, ["a"] * 4 + ["b"] * 4, {"r": [1.0, 0, 1, 1, 0, 0, 0, 1]})
    (d / "trl" / "trainer_state.json").write_text(json.dumps({"global_step": "2", "log_history": []}))
    add([*diag, str(d / "trl")], "answer", post=summary("any('global_step is' in w for w in s['warnings'])"))
    # AReaL: one row without its sample_idx beside complete ones
    (d / "areal" / "rollout" / "0").mkdir(parents=True)
    for t in range(3):
        rows = [
            {
                "task_id": t,
                "sample_idx": i,
                "seqlen": 5,
                "prompt_len": 2,
                "head_version": -1,
                "tail_version": 0,
                "reward": float(i % 2),
                "prompt": f"p{t}",
                "completion": "c",
            }
            for i in range(4)
        ]
        if t == 1:
            del rows[2]["sample_idx"]
        (d / "areal" / "rollout" / "0" / f"{t}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    add([*diag, str(d / "areal")], "answer", post=summary("'sample_idx' in s['bad_rows_listed'][0]"))
    return cases


# --------------------------------------------------------------------------- run-folder scenarios
# Each is the body of a function run in the worker, with ``tmp`` (a fresh folder), ``cli(*argv)``
# -> (rc, stdout, stderr) in-process, ``gsd_process(*argv)`` -> a Popen of ``gsd`` in a child, and
# ``judged(rc, err)`` (the CLI outcome).  It returns (outcome, detail).
SIM_ARGS = (
    "'--no-progress', '--set', 'n_prompts=200', '--set', 'steps=6', '--set', 'checkpoint_every=2', "
    "'--set', 'device=cpu'"
)
SCENARIOS = {
    "SIGKILL during a rollout-log write, then --resume: no temp file left anywhere": f"""
args = ['simulate', '--out', str(tmp / 'r'), {SIM_ARGS}, '--set', 'rollout_log=verl']
rc, _, err = cli(*args)
(tmp / 'r' / 'summary.json').unlink()
(tmp / 'r' / 'rollouts' / '.5.jsonl.99999.deadbeef.tmp').write_text('half')
(tmp / 'r' / '.checkpoint.pt.99999.deadbeef.tmp').write_text('half')  # rollout_log: the torch engine's folder
rc, _, err = cli(*args, '--resume')
if rc != 0:
    return judged(rc, err)
left = sorted(str(p.relative_to(tmp)) for p in (tmp / 'r').rglob('.*.tmp'))
return ('data loss', f'left: {{left}}') if left else ('answer', 'clean')
""",
    "damaged ledger.parquet, last checkpoint at the final step, --resume": f"""
args = ['simulate', '--out', str(tmp / 'r'), {SIM_ARGS}]
cli(*args)
(tmp / 'r' / 'summary.json').unlink()
(tmp / 'r' / 'ledger.parquet').write_bytes(b'PAR1 garbage')
rc, _, err = cli(*args, '--resume')
if rc != 0:
    return judged(rc, err)
try:
    rows = len(pd.read_parquet(tmp / 'r' / 'ledger.parquet'))
except Exception as exc:
    return 'data loss', f'run marked complete with an unreadable ledger ({{type(exc).__name__}})'
return ('answer', 'ledger rebuilt') if rows == 6 else ('data loss', f'ledger has {{rows}} rows')
""",
    **{
        f"damaged {name} ({engine} engine), --resume": f"""
args = ['simulate', '--out', str(tmp / 'r'), {SIM_ARGS}, '--set', 'engine={engine}']
cli(*args)
(tmp / 'r' / 'summary.json').unlink()
raw = (tmp / 'r' / '{name}').read_bytes()
(tmp / 'r' / '{name}').write_bytes(raw[: len(raw) // 2])
return judged(*cli(*args, '--resume')[::2])
"""
        for engine, name in (("torch", "checkpoint.pt"), ("numpy", "checkpoint.npz"))
    },
    "damaged summary.json, the command run again": f"""
args = ['simulate', '--out', str(tmp / 'r'), {SIM_ARGS}]
cli(*args)
(tmp / 'r' / 'summary.json').write_text('{{"steps": 6, ')
return judged(*cli(*args)[::2])
""",
    "damaged config.json, --resume": f"""
args = ['simulate', '--out', str(tmp / 'r'), {SIM_ARGS}]
cli(*args)
(tmp / 'r' / 'config.json').write_text('{{"steps": 6, ')
return judged(*cli(*args, '--resume')[::2])
""",
    "a second --resume on a running folder": """
args = ['simulate', '--out', str(tmp / 'r'), '--no-progress', '--set', 'n_prompts=400', '--set', 'steps=30000',
        '--set', 'checkpoint_every=1', '--set', 'device=cpu']  # runs for minutes: killed once the second has answered
first = gsd_process(*args)
try:
    deadline = time.time() + 60
    while not any((tmp / 'r' / name).exists() for name in ('checkpoint.pt', 'checkpoint.npz')):
        if time.time() > deadline or first.poll() is not None:
            return 'crash', 'the first run did not start'
        time.sleep(0.05)
    rc, _, err = cli(*args, '--resume')
    alive = first.poll() is None
finally:
    first.kill()
    _, first_err = first.communicate()
if rc == 0:
    return 'data loss', 'the second process ran the run again beside the first' + ('' if alive else
           f' (first died: {first_err.strip().splitlines()[-1][:80] if first_err.strip() else "?"})')
return judged(rc, err)
""",
    "SIGKILL at a random instant of a run, then --resume": """
args = ['simulate', '--out', str(tmp / 'r'), '--no-progress', '--set', 'n_prompts=300', '--set', 'steps=40',
        '--set', 'checkpoint_every=3', '--set', 'device=cpu', '--set', 'rollout_log=verl']
first = gsd_process(*args)
deadline = time.time() + 60
while (not any((tmp / 'r' / name).exists() for name in ('checkpoint.pt', 'checkpoint.npz'))
       and time.time() < deadline and first.poll() is None):
    time.sleep(0.01)
time.sleep(0.137)
first.send_signal(signal.SIGKILL)
first.communicate()
rc, _, err = cli(*args, '--resume')
if rc != 0:
    return judged(rc, err)
left = sorted(str(p.relative_to(tmp)) for p in (tmp / 'r').rglob('.*.tmp'))
ledger = pd.read_parquet(tmp / 'r' / 'ledger.parquet')
logs = sorted((tmp / 'r' / 'rollouts').iterdir())
for f in logs:
    for line in f.read_text().splitlines():
        json.loads(line)
if left or ledger['step'].tolist() != list(range(40)) or len(logs) != 40:
    return 'data loss', f'temps {left}, ledger steps {len(ledger)}, logs {len(logs)}'
return 'answer', 'resumed whole'
""",
    "a full disk (file-size limit) during a checkpoint": """
args = ['simulate', '--out', str(tmp / 'r'), '--no-progress', '--set', 'n_prompts=4000', '--set', 'steps=2',
        '--set', 'checkpoint_every=1', '--set', 'device=cpu']
with file_size_limit(16 << 10):
    rc, _, err = cli(*args)
left = sorted(str(p.relative_to(tmp)) for p in (tmp / 'r').rglob('.*.tmp')) if (tmp / 'r').exists() else []
if left:
    return 'data loss', f'left: {left}'
return judged(rc, err)
""",
    "gsd diagnose --out: the disk fills while the figure is written": f"""
for name, steps in (('a', 3), ('b', 4)):
    cli('simulate', '--out', str(tmp / name), {SIM_ARGS.replace("'steps=6'", "'steps=' + str(steps)")} ,
        '--set', 'rollout_log=verl')
rc, _, err = cli('diagnose', str(tmp / 'a' / 'rollouts'), '--no-progress', '--out', str(tmp / 'dx'))
if rc != 0:
    return 'crash', 'first diagnosis failed: ' + err[-120:]
before = {{p.name: p.read_bytes() for p in (tmp / 'dx').iterdir() if p.is_file()}}
import errno, matplotlib.figure
saved = matplotlib.figure.Figure.savefig
def full(*a, **k):
    raise OSError(errno.ENOSPC, 'No space left on device')
matplotlib.figure.Figure.savefig = full
try:
    rc, _, err = cli('diagnose', str(tmp / 'b' / 'rollouts'), '--no-progress', '--out', str(tmp / 'dx'))
finally:
    matplotlib.figure.Figure.savefig = saved
after = {{p.name: p.read_bytes() for p in (tmp / 'dx').iterdir() if p.is_file()}}
changed = sorted(n for n in before if after.get(n) != before[n])
if changed:
    return 'data loss', f'mixed set: {{changed}} replaced, the rest kept'
return judged(rc, err)
""",
}


# Checkpoints tampered with after a finished run's summary.json is removed: each must be refused
# before any step, in one line naming the file (issue 27).  ``{edit}`` changes the dict ``c``.
_TAMPER = f"""
args = ['simulate', '--out', str(tmp / 'r'), {SIM_ARGS}, '--set', 'engine={{engine}}', '--set', 'optimizer={{opt}}',
        '--set', 'momentum={{momentum}}']
cli(*args)
(tmp / 'r' / 'summary.json').unlink()
path = tmp / 'r' / ('checkpoint.npz' if '{{engine}}' == 'numpy' else 'checkpoint.pt')
if '{{engine}}' == 'numpy':
    import numpy as np
    with np.load(path) as f:
        c = {{{{k: f[k] for k in f.files}}}}
    {{edit}}
    np.savez(path, **c)
else:
    import torch
    c = torch.load(path, weights_only=True)
    {{edit}}
    torch.save(c, path)
rc, _, err = cli(*args, '--resume')
if rc == 2 and path.name not in err:
    return 'unclear error', err.strip()[-160:]
return judged(rc, err)
"""
TAMPERED = {
    "checkpoint.npz copied from another seed's run": (
        "numpy",
        "sgd",
        0,
        "import shutil; cli(*[a.replace(str(tmp / 'r'), str(tmp / 's')) for a in args], '--set', 'seed=1'); c = dict(np.load(tmp / 's' / 'checkpoint.npz'))",
    ),
    "checkpoint.npz logits stored as float32": ("numpy", "sgd", 0, "c['z'] = c['z'].astype(np.float32)"),
    "checkpoint.npz ledger stored as float16": ("numpy", "sgd", 0, "c['ledger'] = c['ledger'].astype(np.float16)"),
    "checkpoint.npz logit +inf": ("numpy", "sgd", 0, "c['z'][0] = np.inf"),
    "checkpoint.npz logit NaN": ("numpy", "sgd", 0, "c['z'][1] = np.nan"),
    "checkpoint.npz momentum of the wrong shape": ("numpy", "sgd", 0.9, "c['opt_buffer'] = c['opt_buffer'][:-1]"),
    "checkpoint.npz negative Adam step": ("numpy", "adam", 0, "c['opt_steps'] = np.int64(-1)"),
    "checkpoint.npz negative Adam second moment": ("numpy", "adam", 0, "c['opt_exp_avg_sq'][0] = -1.0"),
    "checkpoint.pt policy of the wrong size": ("torch", "sgd", 0, "c['policy']['z'] = c['policy']['z'][:-5].clone()"),
    "checkpoint.pt 10-byte generator state": ("torch", "sgd", 0, "c['rng_rollouts'] = c['rng_rollouts'][:10].clone()"),
    "checkpoint.pt NaN logit": ("torch", "adam", 0, "c['policy']['z'][2] = float('nan')"),
    "checkpoint.pt negative Adam step": ("torch", "adam", 0, "c['optimizer']['steps'] = [-1]"),
}
SCENARIOS.update(
    {name: _TAMPER.format(engine=e, opt=o, momentum=m, edit=edit) for name, (e, o, m, edit) in TAMPERED.items()}
)
SCENARIOS.update(
    {
        "a torch checkpoint in an engine=auto folder: the advice --set engine=torch works": f"""
args = ['simulate', '--out', str(tmp / 'r'), {SIM_ARGS}, '--set', 'engine=torch']
cli(*args)
(tmp / 'r' / 'summary.json').unlink()
saved = json.loads((tmp / 'r' / 'config.json').read_text())
(tmp / 'r' / 'config.json').write_text(json.dumps({{**saved, 'engine': 'auto'}}))
rc, _, err = cli(*args[:-2], '--resume')
if rc != 2 or '--set engine=torch' not in err:
    return judged(rc, err)
return judged(*cli(*args, '--resume')[::2])
""",
        **{
            f"run lock that is a {kind}": f"""
from gsd.io.lock import lock_path
lock = lock_path(tmp / 'r')
{make}
return judged(*cli('simulate', '--out', str(tmp / 'r'), {SIM_ARGS})[::2])
"""
            for kind, make in (("dangling symlink", "lock.symlink_to(tmp / 'nowhere')"), ("FIFO", "os.mkfifo(lock)"))
        },
        "run lock naming pid 2^40 (a note, no lock)": f"""
from gsd.io.lock import lock_path
lock_path(tmp / 'r').write_text(json.dumps({{'pid': 2**40, 'host': 'x'}}))
return judged(*cli('simulate', '--out', str(tmp / 'r'), {SIM_ARGS})[::2])
""",
        "campaign arm named '../../escape'": """
(tmp / 'c.toml').write_text('[base]\\nn_prompts = 10\\nsteps = 1\\ndevice = "cpu"\\n[arms."../../escape"]\\nmethod = "grpo"\\n')
rc, _, err = cli('simulate', '--campaign', str(tmp / 'c.toml'), '--out', str(tmp / 'a' / 'b' / 'c'), '--no-progress')
if (tmp / 'a' / 'escape').exists():
    return 'data loss', 'an arm folder was written outside --out'
return judged(rc, err)
""",
        "a leftover staging set in a gsd diagnose --out folder lists '../precious.txt'": f"""
cli('simulate', '--out', str(tmp / 'a'), {SIM_ARGS.replace("'steps=6'", "'steps=2'")}, '--set', 'rollout_log=verl')
rc, _, err = cli('diagnose', str(tmp / 'a' / 'rollouts'), '--no-progress', '--out', str(tmp / 'dx'))
(tmp / 'precious.txt').write_text('keep')
left = tmp / 'dx' / '.set.1.forged.tmp'
left.mkdir()
(left / '.set-manifest.json').write_text(json.dumps({{'write': [], 'remove': ['../precious.txt']}}))
rc, _, err = cli('diagnose', str(tmp / 'a' / 'rollouts'), '--no-progress', '--out', str(tmp / 'dx'))
if not (tmp / 'precious.txt').exists():
    return 'data loss', 'a file outside --out was deleted'
return judged(rc, err)
""",
        "one run folder of a sweep program locked by a live process: --lock-timeout 1 runs the others": """
(tmp / 'g.toml').write_text('[base]\\nn_prompts = 20\\nsteps = 2\\ndevice = "cpu"\\n[grid]\\nseed = [0, 1, 2]\\n')
from gsd.sweep.engine import plan_sweep
from gsd.io.lock import lock_path
specs = plan_sweep(str(tmp / 'g.toml'), str(tmp / 'sw'))
holder = subprocess.Popen([sys.executable, '-c', 'import sys; from gsd.io.lock import RunLock; RunLock(sys.argv[1]).acquire(); '
                           'print(1, flush=True); sys.stdin.read()', str(lock_path(specs[0].run_dir))],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
holder.stdout.readline()
try:
    rc, out, err = cli('sweep', '--grid', str(tmp / 'g.toml'), '--out', str(tmp / 'sw'), '--backend', 'serial',
                       '--lock-timeout', '1', '--max-retries', '0', '--no-progress', '--json')
finally:
    holder.kill(); holder.wait()
report = json.loads(out) if out.strip() else {}
if report.get('ran') == 2 and list(report.get('failed', {})) == [specs[0].name]:
    return 'answer', 'the busy run failed alone'
return 'wrong answer', f'rc {rc}: {out[-120:]} {err[-120:]}'
""",
        "a numpy sweep killed with SIGKILL: the next sweep leaves no lock file": """
(tmp / 'g.toml').write_text('[base]\\nn_prompts = 400\\nsteps = 3000\\ncheckpoint_every = 50\\ndevice = "cpu"\\n[grid]\\nseed = [0, 1]\\n')
first = gsd_process('sweep', '--grid', str(tmp / 'g.toml'), '--out', str(tmp / 'sw'), '--backend', 'serial', '--no-progress')
deadline = time.time() + 60
while not list((tmp / 'sw').glob('runs/*/checkpoint.npz')) and time.time() < deadline and first.poll() is None:
    time.sleep(0.05)
first.send_signal(signal.SIGKILL)
first.communicate()
rc, _, err = cli('sweep', '--grid', str(tmp / 'g.toml'), '--out', str(tmp / 'sw'), '--backend', 'serial', '--no-progress')
left = sorted(p.name for p in (tmp / 'sw' / 'runs').glob('*.lock'))
if left:
    return 'data loss', f'lock files left: {left}'
return judged(rc, err)
""",
    }
)


_COMPARISON_TOML = """
[campaign]
seeds = [0, 1]
reference_arm = "fixed_g8"
uniform_arms = ["fixed_g4", "fixed_g8", "fixed_g16"]
[variants.tabular]
policy = "tabular"
[base]
steps = 6
n_prompts = 60
rollouts = "counts"
closed_form_every = 0
checkpoint_every = 100
device = "cpu"
g_max = 16
[arms.fixed_g4]
allocation = "fixed"
group_size = 4
steps = 12
[arms.fixed_g8]
allocation = "fixed"
[arms.fixed_g16]
allocation = "fixed"
group_size = 16
steps = 3
"""
SCENARIOS.update(
    {
        **{
            f"a {kind} log the user may not read (PermissionError from open): one line naming it": f"""
import builtins
path = tmp / 'log.{kind}'
path.write_text({text!r})
real_open = builtins.open
def denied(file, *a, **k):
    if str(file) == str(path):
        raise PermissionError(13, 'Permission denied', str(path))
    return real_open(file, *a, **k)
builtins.open = denied
try:
    rc, _, err = cli('diagnose', str(path), '--reward', 'reward', '--no-progress')
finally:
    builtins.open = real_open
return judged(rc, err) if 'log.{kind}' in err else ('unclear error', err[-160:])
"""
            for kind, text in (
                ("csv", "prompt,step,reward\na,0,1\na,0,0\n"),
                ("jsonl", '{"prompt": "a", "step": 0, "reward": 1}\n{"prompt": "a", "step": 0, "reward": 0}\n'),
            )
        },
        "SIGKILL while config.json is written (only its temp in the folder), then --resume": f"""
(tmp / 'r').mkdir()
(tmp / 'r' / '.config.json.99999.deadbeef.tmp').write_text('{{"steps": ')
rc, _, err = cli('simulate', '--out', str(tmp / 'r'), {SIM_ARGS}, '--resume')
if rc != 0:
    return judged(rc, err)
left = sorted(p.name for p in (tmp / 'r').rglob('.*.tmp'))
return ('data loss', f'left: {{left}}') if left else ('answer', 'clean')
""",
        "steps near 2^62 with --half-life: the posteriors of steps near 0": """
import numpy as np
from gsd.diagnose import diagnose
rows = [(f'q{p}', s, (s * 7 + p * 3 + j) % 2) for s in (0, 1, 2, 5) for p in range(3) for j in range(4)]
for name, base in (('small', 0), ('big', 2**62)):
    frame = pd.DataFrame([(q, base + s, r) for q, s, r in rows], columns=['prompt', 'step', 'reward'])
    frame.to_csv(tmp / f'{name}.csv', index=False)
a, b = (diagnose(tmp / f'{name}.csv', reward='reward', half_life=1.5).prompts['p_mean'].to_numpy()
        for name in ('small', 'big'))
return ('answer', 'equal') if np.array_equal(a, b) else ('wrong answer', f'{a} != {b}')
""",
        "two gsd allocation-comparison into one --out at once: one wins, the other refused at once": f"""
COMPARISON_TOML = {_COMPARISON_TOML!r}
(tmp / 'c.toml').write_text(COMPARISON_TOML)
argv = ('allocation-comparison', '--config', str(tmp / 'c.toml'), '--out', str(tmp / 'o'), '--quiet', '--jobs', '1')
first = gsd_process(*argv)
deadline = time.time() + 60
while not list((tmp / 'o').glob('*.lock')) and first.poll() is None and time.time() < deadline:
    time.sleep(0.02)
second = gsd_process(*argv)
_, err2 = second.communicate(timeout=100)
_, err1 = first.communicate(timeout=100)
if first.returncode == 0 and second.returncode == 2 and len(err2.strip().splitlines()) == 1:
    return 'answer', 'one won, the other was refused: ' + err2.strip()[-100:]
if first.returncode == 0 and second.returncode == 0:
    return 'answer', 'the first had finished before the second started'
return 'wrong answer', f'exit {{first.returncode}} and {{second.returncode}}: {{err1[-80:]}} {{err2[-80:]}}'
""",
    }
)


def scenario_cases() -> list:
    expect = {
        "damaged": "either",
        "a second": "error",
        "a full disk": "error",
        "gsd diagnose": "error",
        "a csv log": "error",
        "a jsonl log": "error",
        "checkpoint.": "error",
        "run lock that": "error",
        "campaign arm": "error",
    }
    return [
        {
            "kind": "scenario",
            "name": name,
            "code": code,
            "budget": 120.0,
            "expect": next((v for k, v in expect.items() if name.startswith(k)), "answer"),
        }
        for name, code in SCENARIOS.items()
    ]


# --------------------------------------------------------------------------- the worker
WORKER = r'''
import contextlib, io, json, math, resource, sys, traceback
resource.setrlimit(resource.RLIMIT_AS, (16 << 30, 16 << 30))
import numpy as np
import gsd
from gsd.cli import main
try:
    import gsd.losses as L
except Exception:
    L = None
CLEAR = getattr(gsd, "InputError", ValueError)


def values(x):
    if hasattr(x, "select_dtypes"):
        x = x.select_dtypes("number").to_numpy(float)
    elif hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    elif isinstance(x, tuple):
        return np.concatenate([values(y).ravel() for y in x])
    return np.asarray(x, dtype=float).ravel()


import os, shutil, signal, subprocess, tempfile, textwrap, time
from pathlib import Path
import pandas as pd


def run_cli(argv):
    """(exit status, stdout, stderr) of ``gsd ARGV``; an exception that escapes the CLI is a
    traceback: exit 1 with its type and message on stderr (a MemoryError stays one)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
        except (MemoryError, KeyboardInterrupt):
            raise
        except BaseException as exc:
            rc = 1
            print(f"{type(exc).__name__}: {str(exc)[:160]}", file=sys.stderr)
    return rc, out.getvalue(), err.getvalue()


def judged(rc, err):
    text = err.strip()
    if rc == 2 and (len(text.splitlines()) == 1 or "usage:" in text):
        return "clear error", text.splitlines()[-1][:160]
    if rc == 0:
        return "answer", ""
    return "traceback", f"exit {rc}: {text[-160:]}"


def gsd_process(*argv):
    return subprocess.Popen([sys.executable, "-m", "gsd.cli", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


@contextlib.contextmanager
def file_size_limit(nbytes):
    old = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, old[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old)
        signal.signal(signal.SIGXFSZ, handler)


def scenario(case):
    env = {"tmp": Path(tempfile.mkdtemp(prefix="gsd-scenario-")), "cli": lambda *argv: run_cli(list(argv)), "judged": judged,
           "gsd_process": gsd_process, "file_size_limit": file_size_limit, "time": time, "signal": signal,
           "json": json, "pd": pd, "os": os, "subprocess": subprocess, "sys": sys}
    exec("def body():\n" + textwrap.indent(case["code"], "    "), env)
    try:
        outcome, detail = env["body"]()
    finally:
        shutil.rmtree(env["tmp"], ignore_errors=True)
    return {"outcome": outcome, "detail": detail}


for line in sys.stdin:
    case = json.loads(line)
    res = {}
    try:
        if case["kind"] == "scenario":
            res = scenario(case)
        elif case["kind"] == "api":
            v = values(eval(case["expr"]))
            fine = bool(np.all(eval(case["check"], {"np": np, "v": v}))) and v.size > 0
            res = {"outcome": "answer" if fine else "out of range", "detail": repr(v[:4].tolist())}
        else:
            rc, o, e = run_cli(case["argv"])
            text = e.strip()
            if rc == 2 and (len(text.splitlines()) == 1 or "usage:" in text):
                unclear = case.get("must_name") and case["must_name"] not in text
                res = {"outcome": "unclear error" if unclear else "clear error", "detail": text.splitlines()[-1][:160]}
            elif rc == 0:
                bad = any(w in o.replace("NaN", "nan").lower().split() for w in ("nan", "inf", "-inf"))
                res = {"outcome": "answer with nan/inf" if bad else "answer", "detail": o[-160:]}
                if case.get("post"):
                    try:
                        holds = bool(eval(case["post"], {"pd": pd, "json": json, "stdout": o}))
                    except Exception as exc:
                        holds, res["detail"] = False, f"{type(exc).__name__}: {str(exc)[:120]}"
                    if not holds:
                        res["outcome"] = "wrong answer"
            else:
                res = {"outcome": "traceback", "detail": f"exit {rc}: {text[-160:]}"}
    except MemoryError:
        res = {"outcome": "MemoryError", "detail": ""}
    except CLEAR as exc:
        res = {"outcome": "clear error", "detail": str(exc)[:160]}
    except BaseException as exc:
        res = {"outcome": "traceback", "detail": f"{type(exc).__name__}: {str(exc)[:160]}"}
    print(json.dumps(res), flush=True)
'''


class Worker:
    def __init__(self, pythonpath: str):
        self.env = dict(os.environ, PYTHONPATH=pythonpath, GSD_NO_PROGRESS="1")
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=self.env,
            cwd=tempfile.gettempdir(),
        )

    def run(self, case: dict, budget: float) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], budget)
        if not ready:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            return {"outcome": "hang", "detail": f"> {budget:g} s"}
        line = self.proc.stdout.readline()
        if not line:
            self.proc = None
            return {"outcome": "crash", "detail": "worker died"}
        return json.loads(line)

    def close(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def verdict(case, res) -> str:
    """The catalogue's outcome: what happened, judged against what the case expects."""
    o = res["outcome"]
    if o in ("hang", "crash", "MemoryError", "traceback", "data loss", "unclear error"):
        return o
    if case["expect"] == "either":
        return o if o in ("clear error", "answer") else "wrong answer"
    if case["expect"] == "error":
        return "clear error" if o == "clear error" else "wrong answer"
    if o == "clear error":
        return "refused valid input"
    return {"answer": "answer", "answer with nan/inf": "answer (NaN/inf shown)"}.get(o, "wrong answer")


def run_all(pythonpath: str, cases: list, budget: float, first_budget: float) -> list:
    w = Worker(pythonpath)
    out = []
    try:
        for i, case in enumerate(cases):
            # the first case pays for the worker's start (numpy, pandas, the CLI)
            res = w.run(case, max(first_budget if w.proc is None else budget, case.get("budget", 0)))
            out.append({**case, **res, "verdict": verdict(case, res)})
    finally:
        w.close()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", default=DEFAULT_BASELINE, help="git revision to compare with ('' for none)")
    ap.add_argument("--budget", type=float, default=10.0, help="seconds per case before it counts as a hang")
    ap.add_argument("--show", default="", help="comma-separated verdicts to list case by case (current checkout)")
    ap.add_argument("--json", help="write every case and its outcome here")
    ap.add_argument(
        "--only",
        choices=("all", "numbers", "advice"),
        default="all",
        help="numbers: only issue 44's cases (steps, counts, values that are not numbers, hooks); advice: only "
        "its newest (the noise scale, the batch advice, --noise-scale/--run-lr, forgetting, gsd count)",
    )
    args = ap.parse_args(argv)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cases = {"numbers": numbers_cases, "advice": advice_cases}[args.only](tmp) if args.only != "all" else []
        if args.only == "all":
            cases = api_cases() + cli_cases(tmp) + scenario_cases() + numbers_cases(tmp) + advice_cases(tmp)
        sides = [("now", str(ROOT))]
        if args.baseline:  # the revision's files, extracted (the repository's worktrees stay untouched)
            base = tmp / "baseline"
            base.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", args.baseline], capture_output=True, check=True
            )
            subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
            sides.append(("baseline", str(base)))
        for name, path in sides:
            t0 = time.perf_counter()
            results[name] = run_all(path, cases, args.budget, max(60.0, args.budget))
            print(f"{name}: {len(cases)} cases in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    kinds = ("api", "cli", "scenario")
    verdicts = [
        "clear error",
        "answer",
        "answer (NaN/inf shown)",
        "wrong answer",
        "refused valid input",
        "traceback",
        "unclear error",
        "MemoryError",
        "hang",
        "crash",
        "data loss",
    ]
    print(f"{'verdict':<22}" + "".join(f"{f'{s} {k}':>16}" for s in results for k in kinds))
    for v in verdicts:
        counts = [sum(1 for r in results[s] if r["kind"] == k and r["verdict"] == v) for s in results for k in kinds]
        print(f"{v:<22}" + "".join(f"{c:>16}" for c in counts))
    print(
        f"{'cases':<22}"
        + "".join(f"{sum(1 for r in results[s] if r['kind'] == k):>16}" for s in results for k in kinds)
    )
    show = [s for s in args.show.split(",") if s]
    for r in results["now"]:
        if r["verdict"] in show:
            what = r.get("expr") or r.get("name") or "gsd " + " ".join(r["argv"])
            print(f"[{r['verdict']}] {what}  ->  {r['detail']}")
    if args.json:
        write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
