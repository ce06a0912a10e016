"""Start-up time and peak memory of ``import gsd`` and of the ``gsd`` command line, against a
baseline revision, with ``python -c pass`` as the floor.

Each command runs in a fresh interpreter (subprocess wall time, the way a user meets it, and the
child's own peak resident set size from ``os.wait4``); the figures are the medians of
``--repeats`` runs after one warm-up run that fills the OS file cache.  Among the commands,
``gsd diagnose`` on the example logs the package ships (``data/example_logs``: TRL, verl V1 and
AReaL, 128 rollouts each), given to both revisions by their path in this checkout.
The baseline is another git revision of this repository (default: the last one before imports
were deferred), checked out into a temporary worktree and put first on ``PYTHONPATH``, so both
sides run with the same interpreter and packages in the same session::

    .venv/bin/python benchmarks/bench_startup.py                  # table
    .venv/bin/python benchmarks/bench_startup.py --json out.json  # also the raw times
    .venv/bin/python benchmarks/bench_startup.py --only diagnose --baseline HEAD~1   # gsd diagnose only

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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gsd.io.atomic import write_json  # noqa: E402  (a benchmark's result file is never half-written)

ROOT = Path(__file__).resolve().parents[1]
# main just before start-up was worked on (every library imported eagerly)
DEFAULT_BASELINE = "1971267"
HEAVY = ("torch", "scipy", "pandas", "matplotlib")

# (label, argv after the interpreter).  The CLI is run as the console script runs it.
_CLI = (
    "import sys, gsd.cli as c; sys.exit(getattr(c, 'run', c.main)())"  # run: the console entry (older revisions: main)
)
COMMANDS = [
    ("import gsd", ["-c", "import gsd"]),
    ("gsd --help", ["-c", _CLI, "--help"]),
    ("gsd silent --p 0.5 --G 8", ["-c", _CLI, "silent", "--p", "0.5", "--G", "8"]),
    ("gsd fidelity --p 0.05,0.5 --G 8,64", ["-c", _CLI, "fidelity", "--p", "0.05,0.5", "--G", "8,64"]),
    ("gsd plan --p 0.1,0.5 --epsilon 0.05", ["-c", _CLI, "plan", "--p", "0.1,0.5", "--epsilon", "0.05"]),
    ("gsd identity --rewards 0,1,1,0", ["-c", _CLI, "identity", "--rewards", "0,1,1,0"]),
    ("gsd conventions --G 8", ["-c", _CLI, "conventions", "--G", "8"]),
]
LOGS = ROOT / "data" / "example_logs"
COMMANDS += [
    (f"gsd diagnose example_logs/{name}", ["-c", _CLI, "diagnose", "--no-progress", str(LOGS / name)])
    for name in ("trl", "verl/rollout_data", "areal")
]
#: The floor: an interpreter that does nothing (no probe: it must not import gsd).
FLOOR = ("python -c pass", ["-c", "pass"])

# Appended to every run: report which heavy libraries ended up loaded (stderr, last line).
_PROBE = (
    "import atexit, sys; atexit.register(lambda: sys.stderr.write("
    "'\\nHEAVY ' + ','.join(m for m in %r if m in sys.modules) + '\\n'))\n" % (HEAVY,)
)
_ORIGIN = "import gsd as _g; sys.stderr.write('\\nFROM ' + _g.__file__ + '\\n')\n"


def run_once(argv: list[str], pythonpath: str | None, probe: bool = True) -> tuple[float, float, float, str, str]:
    """Wall seconds, CPU seconds (user + system: what a busy machine's other jobs inflate least),
    peak RSS (MB), the heavy modules loaded and the source folder of gsd for one run."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    if probe:  # `-c CODE` keeps the command's own argv: the probe and the origin check go before CODE
        code_at = argv.index("-c") + 1
        argv = [*argv[:code_at], _PROBE + _ORIGIN + argv[code_at], *argv[code_at + 1 :]]
    with tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, *argv], stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=tempfile.gettempdir()
        )
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage (ru_maxrss in KB on Linux)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[2:])} failed (exit {proc.returncode}):\n{stderr[-2000:]}")
    lines = stderr.splitlines()
    heavy = next((ln[6:] for ln in reversed(lines) if ln.startswith("HEAVY ")), "")
    origin = next((ln[5:] for ln in lines if ln.startswith("FROM ")), "")
    rss_mb = usage.ru_maxrss / 1024 if sys.platform != "darwin" else usage.ru_maxrss / 2**20
    return wall, usage.ru_utime + usage.ru_stime, rss_mb, heavy, origin


def measure(pythonpath: str | None, repeats: int, commands) -> dict:
    out = {}
    for label, argv in commands:
        probe = (label, argv) != FLOOR
        run_once(argv, pythonpath, probe)  # warm-up: file cache, .pyc files
        times, cpu, rss, heavy, origin = [], [], [], "", ""
        for _ in range(repeats):
            wall, used, mb, heavy, origin = run_once(argv, pythonpath, probe)
            times.append(wall)
            cpu.append(used)
            rss.append(mb)
        out[label] = {
            "median_s": statistics.median(times),
            "times_s": times,
            "median_cpu_s": statistics.median(cpu),
            "cpu_s": cpu,
            "median_rss_mb": statistics.median(rss),
            "rss_mb": rss,
            "heavy": heavy,
            "gsd_from": origin,
        }
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", default=DEFAULT_BASELINE, help="git revision to compare with ('' for none)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", help="also write the raw figures here")
    ap.add_argument(
        "--only", default="", help="only the commands whose label contains this text (the floor always runs)"
    )
    args = ap.parse_args(argv)
    commands = [FLOOR] + [c for c in COMMANDS if args.only in c[0]]

    results = {"python": sys.version.split()[0], "repeats": args.repeats, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        base = None
        if args.baseline:
            base = Path(tmp) / "baseline"
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base), args.baseline], check=True
            )
        try:
            results["current"] = measure(str(ROOT), args.repeats, commands)
            if base is not None:
                results["baseline"] = measure(str(base), args.repeats, commands)
                results["baseline_rev"] = args.baseline
        finally:
            if base is not None:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)

    cur, bas = results["current"], results.get("baseline")
    print(
        f"start-up wall time, CPU time and peak RSS, medians of {args.repeats} fresh interpreters "
        f"(python {results['python']}; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
    )
    head = f"{'command':<42} {'now [s]':>8} {'cpu [s]':>8} {'now [MB]':>9}"
    if bas:
        head += f" {'base [s]':>9} {'cpu [s]':>8} {'base [MB]':>10} {'base/now s':>11} {'cpu':>6} {'MB':>6}"
    print(head + "  heavy libraries loaded now" + (" (baseline)" if bas else ""))
    for label, _ in commands:
        c = cur[label]
        row = f"{label:<42} {c['median_s']:8.3f} {c['median_cpu_s']:8.3f} {c['median_rss_mb']:9.1f}"
        if bas:
            b = bas[label]
            row += (
                f" {b['median_s']:9.3f} {b['median_cpu_s']:8.3f} {b['median_rss_mb']:10.1f}"
                f" {b['median_s'] / c['median_s']:11.2f} {b['median_cpu_s'] / c['median_cpu_s']:6.2f}"
                f" {b['median_rss_mb'] / c['median_rss_mb']:6.2f}"
            )
        row += f"  {c['heavy'] or '-'}" + (f" ({bas[label]['heavy'] or '-'})" if bas else "")
        print(row)
    if bas and any(ROOT.as_posix() in v["gsd_from"] for v in bas.values()):
        print("warning: the baseline runs imported the current checkout, not the baseline", file=sys.stderr)
    if args.json:
        write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
