"""The sweep driver: expand a grid, run what is missing, retry failures, collect one table.

Layout of a sweep folder::

    sweeps/NAME/
        grid.toml            copy of the grid file of the last invocation
        sweep.json           manifest: the runs (name, grid values, folder), backend, outcome
        events.jsonl         one line per run event (ran / failed / retried / found complete)
        results.parquet      one row per run: grid values, status, the summary's scalars
        runs/<run name>/     an ordinary simulator run folder (resumable, inspectable alone)
        runs/<run name>.lock present while a process writes that folder

Running the same sweep again only does what is missing: complete runs are skipped, interrupted
ones resume from their checkpoint.  Runs the simulator can run as one program (its
``batch_key``; :mod:`gsd.simulator.batched`) share a task, split over the workers; each keeps its
own folder and lock, and ``events.jsonl`` says how many runs its program held.  The per-run lock makes it safe to run two sweeps over the
same folder at once (each run is written by one process; the other waits, then finds it
complete).  ``results.parquet``, ``sweep.json`` and ``grid.toml`` are replaced atomically
(:mod:`gsd.io.atomic`).
"""

from __future__ import annotations

import importlib
import json
import math
import numbers
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..io.atomic import entry_path, make_folder, write_atomic, write_json, write_table
from ..io.lock import clear_unheld, lock_path
from ..validation import InputError
from .backends import TaskFailed, make_backend, read_summary
from .grid import Grid, RunSpec, expand, load_grid

__all__ = ["run_sweep", "SweepResult", "plan_sweep", "results_table", "load_results"]

RESULTS = "results.parquet"
MANIFEST = "sweep.json"
EVENTS = "events.jsonl"


@dataclass
class SweepResult:
    """What :func:`run_sweep` did.  ``table`` is the content of ``results.parquet``."""

    out: Path
    table: pd.DataFrame
    ran: list = field(default_factory=list)  # run names executed (or finished) by this call
    skipped: list = field(default_factory=list)  # complete before this call (or by another sweep)
    failed: dict = field(default_factory=dict)  # name -> last error, after every retry
    attempts: dict = field(default_factory=dict)  # name -> tasks submitted by this call
    wall_s: float = 0.0
    backend: str = ""
    workers: int = 0

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def results_path(self) -> Path:
        return self.out / RESULTS


# ------------------------------------------------------------------------------ files
def _log_event(out: Path, **event) -> None:
    event = {"time": time.time(), **event}
    line = (json.dumps(event, default=str) + "\n").encode("utf-8")
    fd = os.open(out / EVENTS, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def load_results(out) -> pd.DataFrame:
    """The results table of a sweep folder."""
    path = Path(out) / RESULTS
    if not path.is_file():
        raise InputError(f"no results table in {str(out)!r} (run the sweep first)")
    return pd.read_parquet(path)


# ------------------------------------------------------------------------------ table
def _flatten(summary: dict, prefix: str = "") -> dict:
    """The scalar entries of a (nested) summary, with dotted keys; lists and arrays are left out."""
    flat = {}
    for key, value in summary.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, name + "."))
        elif value is None or isinstance(value, (str, bool, numbers.Number)):
            if isinstance(value, numbers.Number) and not isinstance(value, (bool, int, float)):
                value = value.item() if hasattr(value, "item") else float(value)  # numpy scalars
            flat[name] = value
        elif getattr(value, "ndim", None) == 0:
            flat[name] = value.item()
    return flat


#: Summary entries left out of the table: the echo of the full config (it is in each run folder).
_SUMMARY_SKIP = ("config",)


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable values are different
        return False


def results_table(specs: list[RunSpec], summaries: dict, out: Path | None = None) -> pd.DataFrame:
    """One row per run, in grid order: ``run``, the grid values, ``status``, ``run_dir``, then
    the summary's scalar entries, nested keys dotted.  A summary entry that repeats a grid value
    is dropped, one that differs from it gets a ``summary.`` prefix; lists and the summary's
    copy of the config are left out (they stay in each run's folder)."""
    rows = []
    for spec in specs:
        row = {"run": spec.name, **spec.params}
        summary = summaries.get(spec.name)
        row["status"] = "complete" if summary is not None else "failed"
        rd = spec.run_dir
        row["run_dir"] = str(rd.relative_to(out)) if (rd is not None and out is not None) else str(rd)
        summary = {k: v for k, v in (summary or {}).items() if k not in _SUMMARY_SKIP}
        for key, value in _flatten(summary).items():
            if key == "name" and value == spec.name:
                continue  # the config's name is the run's name: already the `run` column
            if key in row:
                if _same(row[key], value):
                    continue  # an echo of a grid value
                key = f"summary.{key}"
            row[key] = value
        rows.append(row)
    table = pd.DataFrame(rows)
    for col in table.columns:  # a column mixing kinds (e.g. 1 and "a") cannot go to parquet
        if table[col].dtype == object:
            kinds = {type(v) for v in table[col] if v is not None and not (isinstance(v, float) and math.isnan(v))}
            if len(kinds) > 1 and not kinds <= {int, float}:
                table[col] = [None if v is None else str(v) for v in table[col]]
    return table


# ------------------------------------------------------------------------------ driver
def plan_sweep(grid, out, simulator="gsd.simulator") -> list[RunSpec]:
    """Expand ``grid`` and bind each run to its folder under ``out/runs`` (runs nothing)."""
    grid = grid if isinstance(grid, Grid) else load_grid(grid)
    specs = expand(grid, simulator)
    runs = Path(out) / "runs"
    for spec in specs:
        spec.run_dir = entry_path(runs, spec.name, what="sweep run")
    return specs


def run_sweep(
    grid,
    out,
    *,
    backend="local",
    workers: int | None = None,
    address: str | None = None,
    max_retries: int = 2,
    simulator: str = "gsd.simulator",
    progress: bool = True,
    lock_timeout: float | None = None,
    backend_options: dict | None = None,
) -> SweepResult:
    """Run every run of ``grid`` that is not complete under ``out``; write ``results.parquet``.

    Parameters
    ----------
    grid : a grid file path (see :mod:`gsd.sweep.grid`) or a :class:`Grid`.
    out : the sweep folder (created).  On a Ray cluster it must be on a shared file system.
    backend : ``"local"`` (process pool), ``"ray"``, or a backend object.
    workers : local: pool size (default: the core count); ray without ``address``: the CPUs of
        the local Ray instance.
    address : ray only: an existing cluster (``"auto"``, ``"HOST:PORT"``, ``"ray://HOST:PORT"``).
    max_retries : a failed run is retried (resuming its folder) at most this many times.
    simulator : module with ``SimConfig``, ``run_simulation`` and ``is_complete``.
    lock_timeout : seconds a run waits for a folder locked by a live process before failing
        (``None``: wait).
    """
    if not isinstance(max_retries, int) or isinstance(max_retries, bool) or max_retries < 0:
        raise InputError(f"max_retries must be an integer >= 0, got {max_retries!r}")
    if lock_timeout is not None and (
        isinstance(lock_timeout, bool) or not isinstance(lock_timeout, (int, float)) or not 0 <= lock_timeout <= 1e9
    ):
        raise InputError(f"lock_timeout must be None (wait) or a number of seconds in [0, 1e9], got {lock_timeout!r}")
    t0 = time.perf_counter()
    grid = grid if isinstance(grid, Grid) else load_grid(grid)
    out = Path(out)
    specs = plan_sweep(grid, out, simulator)
    sim = importlib.import_module(simulator)
    backend_obj = make_backend(backend, workers=workers, address=address, **(backend_options or {}))
    make_folder(out / "runs")
    if grid.text is not None:
        write_atomic(out / "grid.toml", grid.text)
    manifest = {
        "grid": str(grid.source) if grid.source else None,
        "description": grid.description,
        "simulator": simulator,
        "backend": backend_obj.name,
        "started": time.time(),
        "runs": [{"name": s.name, "params": s.params, "run_dir": str(s.run_dir.relative_to(out))} for s in specs],
    }
    write_json(out / MANIFEST, manifest)

    summaries: dict[str, dict] = {}
    result = SweepResult(out=out, table=pd.DataFrame(), backend=backend_obj.name)
    pending = []
    for spec in specs:
        if sim.is_complete(spec.run_dir):
            summaries[spec.name] = read_summary(sim, spec.run_dir)
            result.skipped.append(spec.name)
        else:
            pending.append(spec)

    if pending:
        _execute(
            pending, backend_obj, out, simulator, max_retries, lock_timeout, progress, len(specs), summaries, result
        )

    # Lock files a killed earlier sweep's workers left (the kernel dropped their locks): removed.
    clear_unheld([lock_path(s.run_dir) for s in specs])
    result.table = results_table(specs, summaries, out)
    write_table(out / RESULTS, result.table)
    result.wall_s = time.perf_counter() - t0
    manifest.update(
        finished=time.time(),
        wall_s=result.wall_s,
        workers=result.workers,
        ran=result.ran,
        skipped=result.skipped,
        failed=result.failed,
    )
    write_json(out / MANIFEST, manifest)
    return result


def _task(spec: RunSpec, simulator: str, lock_timeout, attempt: int) -> dict:
    return {
        "name": spec.name,
        "simulator": simulator,
        "config": spec.config,
        "run_dir": str(spec.run_dir),
        "threads": max(1, int(math.floor(spec.num_cpus))),
        "num_cpus": spec.num_cpus,
        "num_gpus": spec.num_gpus,
        "lock_timeout": lock_timeout,
        "attempt": attempt,
    }


def _units(pending, simulator: str, workers: int) -> list[list]:
    """The pending runs as tasks: runs the simulator can run as one program (its ``batch_key``
    equal, not None) share a task — split in ``workers`` parts so the pool stays busy — and the
    rest are one task each.  A simulator without ``batch_key`` / ``run_many`` gets one per run."""
    sim = importlib.import_module(simulator)
    key_of = getattr(sim, "batch_key", None)
    if key_of is None or not hasattr(sim, "run_many"):
        return [[spec] for spec in pending]
    units, groups = [], {}
    for spec in pending:
        key = key_of(spec.config)
        if key is None:
            units.append([spec])
        else:
            groups.setdefault(key, []).append(spec)
    for members in groups.values():
        size = max(1, math.ceil(len(members) / max(1, workers)))
        units.extend(members[i : i + size] for i in range(0, len(members), size))
    return units


def _program_task(unit, simulator: str, lock_timeout, attempt: int) -> dict:
    task = _task(unit[0], simulator, lock_timeout, attempt)
    del task["config"], task["run_dir"]
    task.update(
        name=f"{unit[0].name}+{len(unit) - 1}",
        names=[s.name for s in unit],
        configs=[s.config for s in unit],
        run_dirs=[str(s.run_dir) for s in unit],
        num_cpus=max(s.num_cpus for s in unit),
        num_gpus=max(s.num_gpus for s in unit),
    )
    return task


def _execute(pending, backend, out, simulator, max_retries, lock_timeout, progress, total, summaries, result):
    from tqdm import tqdm

    bar = tqdm(
        total=total,
        initial=total - len(pending),
        desc=f"sweep ({backend.name})",
        unit="run",
        disable=not progress,
        file=sys.stderr,
    )
    inflight: dict = {}
    aborted = True
    backend.start(len(pending), pending)
    result.workers = backend.size
    try:

        def submit(unit):
            for spec in unit:
                result.attempts[spec.name] = result.attempts.get(spec.name, 0) + 1
            attempt = result.attempts[unit[0].name]
            task = (
                _task(unit[0], simulator, lock_timeout, attempt)
                if len(unit) == 1
                else _program_task(unit, simulator, lock_timeout, attempt)
            )
            inflight[backend.submit(task)] = unit

        for unit in _units(pending, simulator, backend.size):
            submit(unit)
        while inflight:
            for handle, ok, value in backend.wait(list(inflight)):
                unit = inflight.pop(handle)
                attempt = result.attempts[unit[0].name]
                if ok:
                    busy = _record_runs(unit, value, attempt, out, max_retries, summaries, result, bar)
                    if busy and attempt <= max_retries:
                        submit(busy)
                elif _record_failure(unit, value, attempt, out, max_retries, result, bar):
                    submit(unit)
        aborted = False
    finally:
        bar.close()
        backend.stop(abort=aborted)


def _record_runs(unit, value, attempt: int, out, max_retries: int, summaries: dict, result, bar) -> list:
    """Log and record the runs of a task that returned; returns the unit's runs whose folder was busy
    (its owner lives: each such run alone retries, or fails past ``max_retries``)."""
    runs = value["runs"] if len(unit) > 1 else [value]
    busy = [spec for spec, run in zip(unit, runs) if run["status"] == "busy"]
    for spec, run in zip(unit, runs):
        if run["status"] == "busy":
            _log_event(
                out,
                run=spec.name,
                event="retry" if attempt <= max_retries else "failed",
                attempt=attempt,
                error=run["error"],
            )
            if attempt > max_retries:
                result.failed[spec.name] = run["error"]
                bar.update(1)
            continue
        summaries[spec.name] = run["summary"]
        (result.ran if run["status"] == "ran" else result.skipped).append(spec.name)
        extra = {"program": run["program"]} if "program" in run else {}
        _log_event(
            out,
            run=spec.name,
            event=run["status"],
            attempt=attempt,
            resumed=run["resumed"],
            host=run["host"],
            pid=run["pid"],
            seconds=run["seconds"],
            **extra,
        )
        bar.update(1)
    return busy


def _record_failure(unit, value, attempt: int, out, max_retries: int, result, bar) -> bool:
    """Log a task that raised; record its runs failed past ``max_retries``; returns whether it retries."""
    err = value if isinstance(value, TaskFailed) else TaskFailed(str(value))
    retry = attempt <= max_retries
    for spec in unit:
        _log_event(
            out,
            run=spec.name,
            event="retry" if retry else "failed",
            attempt=attempt,
            error=str(err),
            detail=err.detail[-4000:],
        )
    if not retry:
        for spec in unit:
            result.failed[spec.name] = str(err)
            bar.update(1)
    return retry
