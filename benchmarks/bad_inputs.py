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
* ``MemoryError``, ``hang``, ``crash`` (the worker died).

    .venv/bin/python benchmarks/bad_inputs.py                     # this checkout and the baseline
    .venv/bin/python benchmarks/bad_inputs.py --baseline '' --show wrong,traceback,hang,MemoryError
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import os
import select
import subprocess
import sys
import tempfile
from gsd.atomic import write_json  # a benchmark's result file is never half-written
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BASELINE = "1971267"  # main before issue 11

# --------------------------------------------------------------------------- the cases
NUMS = ["float('nan')", "float('inf')", "-float('inf')", "-1", "-0.5", "0", "1", "1.5", "2", "1e-320",
        "1e300", "2**62", "2**64", "10**30", "True", "None", "'x'", "''", "[]", "[float('nan')]",
        "[0.5, float('inf')]", "[[0.5]]", "3+1j", "0.5", "8"]


def _real(v):
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
    return _real(v) is not None


def is_prob(v):
    x = _real(v)
    return x is not None and 0 <= x <= 1


def is_int(v, lo=1, hi=2**53):
    x = _real(v)
    return x is not None and not isinstance(x, bool) and float(x) == int(x) and lo <= x <= hi


def is_open(v):
    x = _real(v)
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
    ("gsd.expected_update(0.3, 8, eps={})", lambda v: finite(v) and 0 <= _real(v) and v != "True", "v >= 0"),
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
    ("gsd.budget_share([0.3, 0.6], np.array([True, False]), G={})", lambda v: is_int(v, 2, EXACT) or v == "None",
     "(v >= 0) & (v <= 1)"),
    ("gsd.decile_shares([0.3, {}])", is_prob, "(v >= 0) & (v <= 1)"),
]
LOSSES = [
    ("L.softmax_t([1.0, {}])", lambda v: finite(v) or v == "-float('inf')",
     "(v >= 0) & (v <= 1)"),
    ("L.softmax_t([1.0, 0.0], T={})", lambda v: finite(v) and 0 < _real(v) and v != "True", "(v >= 0) & (v <= 1)"),
    ("L.kl_divergence([0.5, 0.5], [{}, 0.5])", lambda v: v == "0.5", "v >= 0"),
    ("L.clipped_surrogate({}, 1.0)", lambda v: finite(v) and 0 <= _real(v), "np.isfinite(v)"),
    ("L.clipped_surrogate(1.2, {})", finite, "np.isfinite(v)"),
    ("L.aggregate([[1.0, {}]], [[1, 1]])", finite, "np.isfinite(v)"),
]


def api_cases():
    cases = []
    for template, valid, check in API + LOSSES:
        for v in NUMS:
            # a nested list is an array of the same numbers: valid where the function broadcasts
            expect = "either" if v == "[[0.5]]" else "answer" if valid(v) else "error"
            cases.append({"kind": "api", "expr": template.format(v), "expect": expect, "check": check})
    return cases


CLI_TOKENS = ["nan", "inf", "-inf", "-1", "0", "1.5", "1e300", "1e-320", "4611686018427387904", "x", "",
              "0.5,,0.2", "1,2,x", "1000000000", "0.5", "8"]


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
    paths = ["/nonexistent/x.csv", str(tmp / "adir.csv"), str(tmp / "afile" / "sub" / "x.csv"), "/sys/gsd/x.csv",
             str(tmp / "garbage.csv"), str(tmp / "empty.csv"), str(tmp / "other.csv"), str(tmp / "nan.csv"),
             str(tmp / "inf.csv"), str(tmp / "afile")]
    cases = []

    def add(argv, ok):
        cases.append({"kind": "cli", "argv": argv, "expect": ok if isinstance(ok, str) else "answer" if ok else "error"})

    for t in CLI_TOKENS:
        add(["silent", "--p", t, "--G", "8"], _tok_ok("p", t))
        add(["silent", "--p", "0.3", "--G", t], _tok_ok("G", t) or (_tok_ok("rewards", t) and all(
            float(x) == int(float(x)) and 1 <= float(x) <= 2**53 for x in t.split(",") if x.strip())))
        add(["fidelity", "--p", t, "--G", "8"], _tok_ok("p", t))
        add(["fidelity", "--p", "0.3", "--G", t], _tok_ok("G", t))
        add(["plan", "--p", t, "--epsilon", "0.05"], _tok_ok("p", t))
        add(["plan", "--p", "0.3", "--delta", t], _tok_ok("open", t))
        add(["identity", "--rewards", f"0,1,{t}"], _tok_ok("rewards", f"0,1,{t}"))
        add(["conventions", "--G", t], _tok_ok("G", t) and all(float(x) >= 2 for x in t.split(",") if x.strip()))
        add(["group-size-table", "--p", t], "either" if t == "1e-320" else _tok_ok("open", t) or (_tok_ok("p", t) and all(
            0 < float(x) < 1 for x in t.split(",") if x.strip())))
        add(["bigmath", "--G", t], t in ("8", "1000000000"))
    for path in paths:
        add(["plan", "--input", path, "--epsilon", "0.05"], path.endswith("nan.csv"))
        add(["bigmath", "--input", path], path.endswith("nan.csv"))
        add(["dapo-fit", path, "--bootstrap", "5"], False)
        add(["diagnose", path], False)
        add(["sweep", "--grid", path, "--out", str(tmp / "sw")], False)
        add(["simulate", "--config", path, "--out", str(tmp / "sim")], "either" if path.endswith("empty.csv") else False)
        add(["simulate", "--out", path, "--set", "steps=0"], False)
    unwritable = [str(tmp / "adir.csv"), str(tmp / "afile" / "sub" / "x.csv"), "/sys/gsd/x.csv", "/nonexistent/x.txt",
                  str(tmp / "afile" / "x.parquet")]
    for path in unwritable:  # last: a case that wrongly succeeds must not overwrite the inputs above
        add(["plan", "--p", "0.3", "--epsilon", "0.05", "--output", path], False)
    for s in ["steps=-1", "steps=nan", "group_size=1e300", "lr=inf", "method='x'", "nokey=1", "steps", "=", "seed=1.5"]:
        add(["simulate", "--out", str(tmp / "simset"), "--set", s], False)
    add(["plan", "--input", str(tmp / "other.csv"), "--column", "nope", "--epsilon", "0.1"], False)
    return cases


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


for line in sys.stdin:
    case = json.loads(line)
    res = {}
    try:
        if case["kind"] == "api":
            v = values(eval(case["expr"]))
            fine = bool(np.all(eval(case["check"], {"np": np, "v": v}))) and v.size > 0
            res = {"outcome": "answer" if fine else "out of range", "detail": repr(v[:4].tolist())}
        else:
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    rc = main(case["argv"])
                except SystemExit as exc:
                    rc = exc.code
            text = err.getvalue().strip()
            if rc == 2 and (len(text.splitlines()) == 1 or "usage:" in text):
                res = {"outcome": "clear error", "detail": text.splitlines()[-1][:160]}
            elif rc == 0:
                o = out.getvalue()
                bad = any(w in o.replace("NaN", "nan").lower().split() for w in ("nan", "inf", "-inf"))
                res = {"outcome": "answer with nan/inf" if bad else "answer", "detail": o[-160:]}
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
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, env=self.env, cwd=tempfile.gettempdir())

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
    if o in ("hang", "crash", "MemoryError", "traceback"):
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
            res = w.run(case, first_budget if w.proc is None else budget)
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
    args = ap.parse_args(argv)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cases = api_cases() + cli_cases(tmp)
        sides = [("now", str(ROOT))]
        if args.baseline:
            base = tmp / "baseline"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base), args.baseline],
                           check=True)
            sides.append(("baseline", str(base)))
        try:
            for name, path in sides:
                t0 = time.perf_counter()
                results[name] = run_all(path, cases, args.budget, max(60.0, args.budget))
                print(f"{name}: {len(cases)} cases in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        finally:
            if args.baseline:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
    kinds = ("api", "cli")
    verdicts = ["clear error", "answer", "answer (NaN/inf shown)", "wrong answer", "refused valid input", "traceback",
                "MemoryError", "hang", "crash"]
    print(f"{'verdict':<22}" + "".join(f"{f'{s} {k}':>16}" for s in results for k in kinds))
    for v in verdicts:
        counts = [sum(1 for r in results[s] if r["kind"] == k and r["verdict"] == v) for s in results for k in kinds]
        print(f"{v:<22}" + "".join(f"{c:>16}" for c in counts))
    print(f"{'cases':<22}" + "".join(f"{sum(1 for r in results[s] if r['kind'] == k):>16}" for s in results for k in kinds))
    show = [s for s in args.show.split(",") if s]
    for r in results["now"]:
        if r["verdict"] in show:
            what = r.get("expr") or "gsd " + " ".join(r["argv"])
            print(f"[{r['verdict']}] {what}  ->  {r['detail']}")
    if args.json:
        write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
