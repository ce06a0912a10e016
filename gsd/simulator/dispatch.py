"""Which engine runs a config: numpy (:mod:`.tabular`) when nothing in it needs torch, else torch.

:func:`run_simulation` and :func:`run_many` are the simulator's entry points (the CLI, the
campaigns, the sweeps and the reproduction call them); each run goes to the engine
:func:`~.config.resolve_engine` names, and torch is imported only when one does.
"""

from __future__ import annotations

from pathlib import Path

from ..extras import require_torch
from .config import SimConfig, numpy_blockers, resolve_engine

__all__ = ["run_simulation", "run_many"]


def _config(config) -> SimConfig:
    return config if isinstance(config, SimConfig) else SimConfig.from_dict(config)


def _require_torch_engine(cfg: SimConfig) -> None:
    """Without torch, one line naming the setting that needs the torch engine and the extra."""
    why = ", ".join(numpy_blockers(cfg)) or f"engine = {cfg.engine!r}"
    require_torch(f"the torch engine (this run's {why})")


def run_simulation(
    config,
    out_dir,
    *,
    resume: bool = False,
    progress: bool = True,
    on_step=None,
    notify=None,
    threads: int | None = None,
) -> dict:
    """Train one arm into the run folder ``out_dir`` and return its summary (see
    :func:`gsd.simulator.ledger.summarise`); a finished run is read back, not redone.

    ``config``: a :class:`SimConfig` or a dict of its keys.  ``resume``: continue an unfinished
    run from its last checkpoint.  ``on_step(step)``: called after each step.  ``notify(message)``:
    told, in one line, when the run is found finished or resumes.  ``threads``: torch CPU threads
    (the torch engine only; the numpy engine runs on one).  A KeyboardInterrupt is raised again
    as :class:`~.runfolder.RunInterrupted`, which says where the run stopped and resumes.
    """
    cfg = _config(config)
    if resolve_engine(cfg) == "numpy":
        from .tabular import run_programs

        return run_programs([(cfg, out_dir)], resume=resume, progress=progress, on_step=on_step, notify=notify)[0]
    _require_torch_engine(cfg)
    from .engine import run_simulation as run_torch

    return run_torch(cfg, out_dir, resume=resume, progress=progress, on_step=on_step, notify=notify, threads=threads)


def run_many(
    runs,
    *,
    resume: bool = False,
    progress: bool = True,
    threads: int | None = None,
    max_runs: int | None = None,
    on_step=None,
    notify=None,
) -> list[dict]:
    """Run every ``(config, out_dir)`` of ``runs``, as few programs as their configs allow, and
    return their summaries in order; each run gives what it gives alone (:mod:`.tabular`,
    :mod:`.batched`).  ``max_runs``: at most this many runs per program (memory)."""
    items = [(_config(c), Path(o)) for c, o in runs]
    by_engine: dict = {"numpy": [], "torch": []}
    for i, (cfg, out) in enumerate(items):
        by_engine[resolve_engine(cfg)].append(i)
    summaries: list = [None] * len(items)
    if by_engine["numpy"]:
        from .tabular import run_programs

        done = run_programs(
            [items[i] for i in by_engine["numpy"]],
            resume=resume,
            progress=progress,
            on_step=on_step,
            notify=notify,
            max_runs=max_runs,
        )
        for i, s in zip(by_engine["numpy"], done):
            summaries[i] = s
    if by_engine["torch"]:
        _require_torch_engine(items[by_engine["torch"][0]][0])
        from .batched import run_many as run_torch

        done = run_torch(
            [items[i] for i in by_engine["torch"]],
            resume=resume,
            progress=progress,
            threads=threads,
            max_runs=max_runs,
            on_step=on_step,
            notify=notify,
        )
        for i, s in zip(by_engine["torch"], done):
            summaries[i] = s
    return summaries
