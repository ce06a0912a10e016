"""Start-up time of ``import gsd`` and of the ``gsd`` command line, against a baseline revision.

Each command runs in a fresh interpreter (subprocess wall time, the way a user meets it); the
figure is the median of ``--repeats`` runs after one warm-up run that fills the OS file cache.
The baseline is another git revision of this repository (default: the last one before imports
were deferred), checked out into a temporary worktree and put first on ``PYTHONPATH``, so both
sides run with the same interpreter and packages in the same session::

    .venv/bin/python benchmarks/bench_startup.py                  # table
    .venv/bin/python benchmarks/bench_startup.py --json out.json  # also the raw times

The table also names the heavy libraries (torch, scipy, pandas, matplotlib) each command loaded.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from gsd.atomic import write_json  # a benchmark's result file is never half-written

ROOT = Path(__file__).resolve().parents[1]
# main just before start-up was worked on (every library imported eagerly)
DEFAULT_BASELINE = "1971267"
HEAVY = ("torch", "scipy", "pandas", "matplotlib")

# (label, argv after the interpreter).  The CLI is run as the console script runs it.
_CLI = "import sys, gsd.cli as c; sys.exit(getattr(c, 'run', c.main)())"  # run: the console entry (older revisions: main)
COMMANDS = [
    ("import gsd", ["-c", "import gsd"]),
    ("gsd --help", ["-c", _CLI, "--help"]),
    ("gsd silent --p 0.5 --G 8", ["-c", _CLI, "silent", "--p", "0.5", "--G", "8"]),
    ("gsd fidelity --p 0.05,0.5 --G 8,64", ["-c", _CLI, "fidelity", "--p", "0.05,0.5", "--G", "8,64"]),
    ("gsd plan --p 0.1,0.5 --epsilon 0.05", ["-c", _CLI, "plan", "--p", "0.1,0.5", "--epsilon", "0.05"]),
    ("gsd identity --rewards 0,1,1,0", ["-c", _CLI, "identity", "--rewards", "0,1,1,0"]),
    ("gsd conventions --G 8", ["-c", _CLI, "conventions", "--G", "8"]),
]

# Appended to every run: report which heavy libraries ended up loaded (stderr, last line).
_PROBE = ("import atexit, sys; atexit.register(lambda: sys.stderr.write("
          "'\\nHEAVY ' + ','.join(m for m in %r if m in sys.modules) + '\\n'))\n" % (HEAVY,))
_ORIGIN = "import gsd as _g; sys.stderr.write('\\nFROM ' + _g.__file__ + '\\n')\n"


def run_once(argv: list[str], pythonpath: str | None) -> tuple[float, str, str]:
    """Wall seconds, the heavy modules loaded, and the source folder of gsd for one run."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    # `-c CODE` keeps the command's own argv: the probe and the origin check go before CODE
    code_at = argv.index("-c") + 1
    argv = [*argv[:code_at], _PROBE + _ORIGIN + argv[code_at], *argv[code_at + 1:]]
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(argv[2:])} failed (exit {res.returncode}):\n{res.stderr[-2000:]}")
    lines = res.stderr.splitlines()
    heavy = next((ln[6:] for ln in reversed(lines) if ln.startswith("HEAVY ")), "")
    origin = next((ln[5:] for ln in lines if ln.startswith("FROM ")), "")
    return wall, heavy, origin


def measure(pythonpath: str | None, repeats: int) -> dict:
    out = {}
    for label, argv in COMMANDS:
        run_once(argv, pythonpath)  # warm-up: file cache, .pyc files
        times, heavy, origin = [], "", ""
        for _ in range(repeats):
            wall, heavy, origin = run_once(argv, pythonpath)
            times.append(wall)
        out[label] = {"median_s": statistics.median(times), "times_s": times, "heavy": heavy, "gsd_from": origin}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", default=DEFAULT_BASELINE, help="git revision to compare with ('' for none)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", help="also write the raw figures here")
    args = ap.parse_args(argv)

    results = {"python": sys.version.split()[0], "repeats": args.repeats, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        base = None
        if args.baseline:
            base = Path(tmp) / "baseline"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base), args.baseline],
                           check=True)
        try:
            results["current"] = measure(str(ROOT), args.repeats)
            if base is not None:
                results["baseline"] = measure(str(base), args.repeats)
                results["baseline_rev"] = args.baseline
        finally:
            if base is not None:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)

    cur, bas = results["current"], results.get("baseline")
    print(f"start-up wall time, median of {args.repeats} fresh interpreters (python {results['python']})")
    head = f"{'command':<40} {'now [s]':>8}"
    if bas:
        head += f" {'base [s]':>9} {'base/now':>9}"
    print(head + "  heavy libraries loaded now" + (" (baseline)" if bas else ""))
    for label, _ in COMMANDS:
        row = f"{label:<40} {cur[label]['median_s']:8.3f}"
        if bas:
            b = bas[label]["median_s"]
            row += f" {b:9.3f} {b / cur[label]['median_s']:9.1f}"
        row += f"  {cur[label]['heavy'] or '-'}" + (f" ({bas[label]['heavy'] or '-'})" if bas else "")
        print(row)
    if bas and any(ROOT.as_posix() in v["gsd_from"] for v in bas.values()):
        print("warning: the baseline runs imported the current checkout, not the baseline", file=sys.stderr)
    if args.json:
        write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
