"""A run's counts over several processes or machines: its files split into shards, each shard's
cells counted by a Ray task (:func:`gsd.diagnose.counts.count_files`), the partial counts merged
exactly (:meth:`gsd.diagnose.counts.Cells.merge`: rows and counts add, ranges take the min and
max) — the same answer as one process, whatever the split.

A folder of runs is read as one run per folder (:func:`count_runs`); one sharded log (a table
split into part files, a verl run's step files) as one run (:func:`count_sharded`).  The files of
a shard travel as paths: every worker must see them (a shared file system, or one machine).
"""

from __future__ import annotations

import numpy as np

from ..validation import InputError
from .counts import Partial, RunCounts, count_files, effective_threshold, finish, plan_run
from .options import LogOptions

__all__ = ["count_sharded", "partial_sharded", "count_runs", "split"]


def split(files, shards: int) -> list[list]:
    """``files`` in ``shards`` runs of consecutive files, sizes within one of each other."""
    if isinstance(shards, bool) or not isinstance(shards, (int, np.integer)) or shards < 1:
        raise InputError(f"shards must be a whole number >= 1, got {shards!r}")
    bounds = np.linspace(0, len(files), min(int(shards), max(len(files), 1)) + 1).round().astype(int)
    return [list(files[a:b]) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def _ray(address, num_cpus):
    """Ray, started locally with ``num_cpus`` (or joined at ``address``); whether we started it."""
    try:
        import ray
    except ImportError:
        raise InputError("sharded counts need Ray: pip install 'grpo-gsd[ray]'") from None
    if ray.is_initialized():
        return ray, False
    options = {"address": address} if address else {"num_cpus": num_cpus}
    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False, **options)
    return ray, True


def count_sharded(
    paths,
    *,
    shards: int = 2,
    threshold: float | None = None,
    address: str | None = None,
    num_cpus: int | None = None,
    groups=True,
    **options,
) -> RunCounts:
    """:func:`gsd.diagnose.counts.count_rollouts` of one run whose files are counted in ``shards``
    Ray tasks (one CPU each), merged exactly.  ``address``: a Ray cluster to join (default: a
    local instance with ``num_cpus``, shut down afterwards; one already running is used as is).
    Row order across shards is (shard, row): a group's prompt is that of its first row, as in one
    pass over the files in order.  ``groups``: as :func:`gsd.diagnose.counts.finish` takes it;
    ``options``: how to read the logs (:class:`gsd.diagnose.options.LogOptions`)."""
    partial, fmt, warnings, n_files = partial_sharded(
        paths, shards=shards, address=address, num_cpus=num_cpus, threshold=threshold, **options
    )
    return finish(partial, fmt, threshold, warnings, n_files=n_files, groups=groups)


def partial_sharded(paths, *, shards: int = 2, address=None, num_cpus=None, threshold=None, **options):
    """:func:`gsd.diagnose.counts.count_partial` with the files counted in ``shards`` Ray tasks and
    their partial counts merged exactly: (partial counts, format, warnings, files read)."""
    run = plan_run(paths, LogOptions.take(options, "partial_sharded"))
    threshold = effective_threshold(threshold, run.declared)
    files, fmt, cols, reward, warnings = run.files, run.fmt, run.cols, run.reward, run.warnings
    if run.context is not None:  # whole-run rules applied file by file in order (TRL): one process
        partial = count_files(files, fmt, cols, reward, threshold, progress=False, context=run.context)
        partial.meta.update(excluded=run.excluded, declared=run.declared, threshold=threshold)
        return partial, fmt, warnings, len(files)
    parts = split(files, shards)
    ray, started = _ray(address, num_cpus or len(parts))
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(count_files)
        refs = [
            task.remote(part, fmt, cols, reward, threshold, shard=i, progress=False) for i, part in enumerate(parts)
        ]
        partial = Partial.merge(ray.get(refs))
        partial.meta.update(excluded=run.excluded, declared=run.declared, threshold=threshold)
    finally:
        if started:
            ray.shutdown()
    return partial, fmt, warnings, len(files)


def count_runs(folders, *, address: str | None = None, num_cpus: int | None = None, **options) -> dict:
    """{folder: RunCounts} of several runs, one Ray task per run (each read as
    :func:`gsd.diagnose.counts.count_rollouts` reads it)."""
    from .counts import count_rollouts

    folders = list(folders)
    if not folders:
        raise InputError("count_runs: no run folder given")
    ray, started = _ray(address, num_cpus or len(folders))
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(count_rollouts)
        results = ray.get([task.remote(f, progress=False, **options) for f in folders])
    finally:
        if started:
            ray.shutdown()
    return dict(zip(map(str, folders), results))
