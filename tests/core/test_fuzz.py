"""Property-based fuzz of the public API and the ``gsd`` command line.

Whatever the input — numbers including NaN, ±inf, huge and subnormal ones, integers beyond
int64, booleans, None, random strings, nested lists, random paths — a call either raises
:class:`gsd.InputError` or returns a finite answer in the function's documented range (or a
documented sentinel / NaN), within a time budget; a command exits 0, or 2 with one line.
Anything else (another exception, a hang, a MemoryError) fails the test.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gsd
from gsd.cli import main

BUDGET_S = 30  # a call that takes longer is a hang (the slowest legitimate one here takes < 1 s)

numbers = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=0, max_value=1),
    st.integers(-(2**70), 2**70),
    st.integers(0, 70),
    st.sampled_from([0, 1, 2, 0.5, 1e-320, 5e-324, 1e300, 2**53, 2**53 + 1, 10**9, 10**9 + 1, 2**62, 2**64]),
)
anything = st.one_of(
    numbers,
    st.booleans(),
    st.none(),
    st.text(max_size=6),
    st.lists(numbers, max_size=4),
    st.lists(st.lists(st.floats(0, 1), min_size=1, max_size=3), min_size=1, max_size=2),
)


@contextlib.contextmanager
def time_budget(what):
    """Fail (rather than wait forever) when ``what`` runs past BUDGET_S."""

    def expire(signum, frame):
        raise TimeoutError(f"{what} ran past {BUDGET_S} s: a hang")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(BUDGET_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def values(out) -> np.ndarray:
    if hasattr(out, "select_dtypes"):
        return out.select_dtypes("number").to_numpy(float).ravel()
    if hasattr(out, "detach"):
        return out.detach().cpu().numpy().astype(float).ravel()
    return np.asarray(out, dtype=float).ravel()


def unit(v):
    return np.all((v >= 0) & (v <= 1))


# name → (call with the fuzzed value x, check of the answer's values v).  Documented non-finite
# answers: fidelity_law's NaN (no meaning), the law's inf and DAPO's unbounded cost at p ∈ {0, 1}.
API = {
    "silent_rate p": (lambda x: gsd.silent_rate(x, 8), unit),
    "silent_rate G": (lambda x: gsd.silent_rate(0.3, x), unit),
    "nonsilent_rate G": (lambda x: gsd.nonsilent_rate(x, 64), unit),
    "dapo_generation_cost": (lambda x: gsd.dapo_generation_cost(0.3, 8, max_draws=x), lambda v: np.all(v >= 1)),
    "dapo_generation_cost p": (lambda x: gsd.dapo_generation_cost(x, 4), lambda v: np.all(v >= 1)),
    "silent_rate_subsampled": (lambda x: gsd.silent_rate_subsampled(x, 64, 8), unit),
    "silent_rate_subsampled n": (lambda x: gsd.silent_rate_subsampled(3, x, 2), unit),
    "group_size_for_silent_rate p": (lambda x: gsd.group_size_for_silent_rate(x, 0.01), lambda v: np.all(v >= -1)),
    "group_size_for_silent_rate delta": (lambda x: gsd.group_size_for_silent_rate(0.2, x), lambda v: np.all(v >= 2)),
    "expected_update p": (lambda x: gsd.expected_update(x, 8), lambda v: np.all((v >= 0) & (v <= 0.5))),
    "expected_update G": (lambda x: gsd.expected_update(0.3, x, "dapo"), lambda v: np.all((v >= 0) & (v <= 0.5))),
    "expected_update eps": (lambda x: gsd.expected_update(0.3, 8, eps=x), lambda v: np.all(v >= 0)),
    "fidelity p": (lambda x: gsd.fidelity(x, 16), unit),
    "fidelity G": (lambda x: gsd.fidelity(0.05, x), unit),
    "fidelity_law": (lambda x: gsd.fidelity_law(0.3, x), lambda v: np.all(np.isnan(v) | ((v >= 0) & (v < 1)))),
    "required_group_size": (lambda x: gsd.required_group_size(x, 0.05), lambda v: np.all(v >= -1)),
    "required_group_size epsilon": (lambda x: gsd.required_group_size(0.3, x, rule="law"), lambda v: np.all(v >= 0)),
    "required_group_size max": (
        lambda x: gsd.required_group_size(0.01, 0.05, max_group_size=x),
        lambda v: np.all(v >= 0),
    ),
    "group_size_law": (lambda x: gsd.group_size_law(x, 0.1), lambda v: np.all(v >= 0)),
    "plan_group_sizes": (lambda x: gsd.plan_group_sizes(x, epsilon=0.1), lambda v: np.all(np.isnan(v) | (v >= -1))),
    "advantages": (lambda x: gsd.advantages(x), lambda v: np.all(np.isfinite(v))),
    "advantages in a group": (lambda x: gsd.advantages([0, 1, x], "rloo"), lambda v: np.all(np.isfinite(v))),
    "group_std": (lambda x: gsd.group_std([1, 0, x], ddof=1), lambda v: np.all(v >= 0)),
    "trainer_advantages": (lambda x: gsd.trainer_advantages([x, 1, 0], "verl"), lambda v: np.all(np.isfinite(v))),
    "convention_gap": (lambda x: gsd.convention_gap(x, "openrlhf"), lambda v: np.all(np.isfinite(v))),
    "budget_share G": (lambda x: gsd.budget_share([0.3, 0.6], np.array([True, False]), G=x), unit),
    "decile_shares": (lambda x: gsd.decile_shares(x), unit),
}


@given(st.sampled_from(sorted(API)), anything)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_public_api_gives_an_input_error_or_a_documented_answer(name, x):
    call, check = API[name]
    with time_budget(f"{name}({x!r})"):
        try:
            out = call(x)
        except gsd.InputError:
            return
    v = values(out)
    with np.errstate(invalid="ignore"):
        assert v.size and check(v), f"{name}({x!r}) = {v[:6]}"


@given(st.one_of(numbers, st.lists(numbers, min_size=1, max_size=3)), st.sampled_from([0.5, 1e-9, 1e3, 1e-320]))
@settings(max_examples=60, deadline=None)
def test_loss_functions_refuse_or_answer_finitely(x, T):
    L = pytest.importorskip("gsd.losses")
    for what, call in (
        ("softmax_t", lambda: L.softmax_t([1.0, 0.0] if isinstance(x, list) else [x, 0.0], T=T)),
        ("clipped_surrogate", lambda: L.clipped_surrogate(x, 1.0)),
        ("aggregate", lambda: L.aggregate([[1.0, x if not isinstance(x, list) else 0.0]], [[1, 0]])),
    ):
        with time_budget(what):
            try:
                v = values(call())
            except gsd.InputError:
                continue
        assert np.all(np.isfinite(v)), f"{what}({x!r}, T={T}) = {v}"


# --------------------------------------------------------------------------- command line
def token(x) -> str:
    return ",".join(map(str, x)) if isinstance(x, list) else str(x)


tokens = st.one_of(anything.map(token), st.text(max_size=8))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    (d / "afile").write_text("x")
    (d / "adir.csv").mkdir()
    (d / "garbage.csv").write_bytes(b"\x00\xff\xfe not a table")
    (d / "other.csv").write_text("a,b\n0.1,2\n")
    (d / "rates.csv").write_text("llama8b_solve_rate\n0.1\n0.5\n")
    return d


def paths(files):
    fixed = [
        "/nonexistent/x.csv",
        "/sys/gsd/x.csv",
        "",
        ".",
        "/",
        str(files / "afile"),
        str(files / "adir.csv"),
        str(files / "afile" / "x.csv"),
        str(files / "garbage.csv"),
        str(files / "other.csv"),
        str(files / "rates.csv"),
    ]
    return st.one_of(st.sampled_from(fixed), st.text(min_size=1, max_size=12).map(lambda t: str(files / "r" / t)))


def run_cli(argv, cwd):
    """Run the CLI in ``cwd``: a relative path the fuzz draws ("" + ".csv" is ".csv") lands there,
    never in the checkout."""
    out, err = io.StringIO(), io.StringIO()
    with (
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        time_budget("gsd " + " ".join(argv)),
        _working_folder(cwd),
    ):
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse: usage errors exit 2, --help 0
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


@contextlib.contextmanager
def _working_folder(path):
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def check_cli(argv, rc, out, err):
    shown = "gsd " + " ".join(map(repr, argv))
    assert rc in (0, 2), f"{shown}: exit {rc}\n{err}"
    assert "Traceback" not in err + out, f"{shown}:\n{err}"
    if rc == 2 and "usage:" not in err:  # argparse prints its usage line and one error line
        assert err.count("\n") == 1 and err.startswith(f"gsd {argv[0]}: error: "), f"{shown}:\n{err}"


@st.composite
def commands(draw, files):
    t = draw
    kind = t(
        st.sampled_from(
            [
                "silent",
                "fidelity",
                "plan-p",
                "plan-input",
                "plan-output",
                "identity",
                "conventions",
                "group-size-table",
                "dapo-fit",
                "sweep",
                "simulate-config",
                "diagnose",
            ]
        )
    )
    if kind == "silent":
        return ["silent", "--p", t(tokens), "--G", t(tokens)]
    if kind == "fidelity":
        return ["fidelity", "--p", t(tokens), "--G", t(tokens)]
    if kind == "plan-p":
        return ["plan", "--p", t(tokens), t(st.sampled_from(["--epsilon", "--delta"])), t(tokens)]
    if kind == "plan-input":
        return ["plan", "--input", t(paths(files)), "--epsilon", "0.1"]
    if kind == "plan-output":
        return [
            "plan",
            "--p",
            "0.3",
            "--epsilon",
            "0.1",
            "--output",
            t(paths(files)) + t(st.sampled_from([".csv", ""])),
        ]
    if kind == "identity":
        return ["identity", "--rewards", t(tokens)]
    if kind == "conventions":
        return ["conventions", "--G", t(tokens)]
    if kind == "group-size-table":
        return ["group-size-table", "--p", t(tokens), "--fidelity", t(st.sampled_from(["0.9", "0.99"]))]
    if kind == "dapo-fit":
        return ["dapo-fit", t(paths(files)), "--bootstrap", "5"]
    if kind == "sweep":
        return ["sweep", "--grid", t(paths(files)), "--out", str(files / "sw"), "--dry-run"]
    if kind == "simulate-config":  # every case fails before training: --set steps=0 is out of range
        return ["simulate", "--config", t(paths(files)), "--out", str(files / "sim"), "--set", "steps=0"]
    return ["diagnose", t(paths(files)), "--no-progress"]


@given(st.data())
@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
def test_every_command_exits_0_or_2_with_one_line(files, data):
    argv = data.draw(commands(files))
    if "--output" in argv and not argv[-1].endswith(".csv"):
        argv[-1] += ".parquet" if argv[-1].endswith("x") else ""
    rc, out, err = run_cli(argv, files)
    check_cli(argv, rc, out, err)


@pytest.mark.parametrize(
    "argv",
    [
        ["silent", "--p", "nan", "--G", "8"],
        ["fidelity", "--p", "0.5", "--G", "4611686018427387904"],
        ["plan", "--p", "0.3", "--epsilon", "0.1", "--output", "/sys/gsd/plan.csv"],
    ],
)
def test_subprocess_errors_are_one_line_exit_2(argv):
    res = subprocess.run([sys.executable, "-m", "gsd.cli", *argv], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr


def test_import_gsd_loads_no_torch_scipy_or_pandas():
    code = "import sys, gsd; print(sorted(m for m in ('torch', 'scipy', 'pandas') if m in sys.modules))"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "[]", res.stdout + res.stderr
    assert math.isclose(
        float(
            subprocess.run(
                [sys.executable, "-c", "import gsd; print(gsd.silent_rate(0.5, 8))"],
                capture_output=True,
                text=True,
                timeout=120,
            ).stdout
        ),
        0.0078125,
    )
