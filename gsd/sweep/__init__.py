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

from ..lazy import lazy_exports

# Imported on first use, so that `gsd sweep --help` (and `gsd --help`) load no pandas.
__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "backends": (
            "BACKENDS",
            "RAY_INSTALL_HINT",
            "LocalBackend",
            "RayBackend",
            "SerialBackend",
            "TaskFailed",
            "run_task",
            "RunLock",
            "LockBusy",
        ),
        "engine": ("SweepResult", "run_sweep", "plan_sweep", "results_table", "load_results"),
        "grid": ("Grid", "RunSpec", "load_grid", "parse_grid", "expand", "run_name"),
    },
)
