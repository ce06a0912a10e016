"""Sweeps: grids of simulator runs on a local process pool, on Ray, or in-process (issue 6).

A grid file (TOML) names a base config and the values to vary; :func:`run_sweep` expands it
into ordinary run folders, runs what is not complete yet (retrying failures by resuming them),
and writes one tidy ``results.parquet``.  :mod:`gsd.sweep.law` measures the group-size law in
training from a sweep over group sizes and difficulty mixes.

.. code-block:: python

    from gsd.sweep import run_sweep

    res = run_sweep("law_in_training", "sweeps/law")   # the shipped grid, or a TOML file
    res.table.head()
"""

from .backends import BACKENDS, RAY_INSTALL_HINT, LocalBackend, RayBackend, SerialBackend, TaskFailed, run_task
from .engine import SweepResult, load_results, plan_sweep, results_table, run_sweep
from .grid import Grid, RunSpec, expand, load_grid, parse_grid, run_name
from .lock import LockBusy, RunLock

__all__ = [
    "BACKENDS", "RAY_INSTALL_HINT", "LocalBackend", "RayBackend", "SerialBackend", "TaskFailed", "run_task",
    "SweepResult", "run_sweep", "plan_sweep", "results_table", "load_results",
    "Grid", "RunSpec", "load_grid", "parse_grid", "expand", "run_name",
    "RunLock", "LockBusy",
]
