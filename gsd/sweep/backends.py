"""Where the runs of a sweep execute: a local process pool, or Ray tasks.

Both backends run the same task function, :func:`run_task`, which locks the run folder, skips
the run if it is complete, and otherwise calls the simulator's ``run_simulation`` (resuming
from whatever the folder holds) — or, for a task of several runs that can share one program,
:func:`run_program_task` (the simulator's ``run_many``; :func:`execute` picks).  A backend only ships tasks and reports how each ended; the
driver (:mod:`gsd.sweep.engine`) decides what to retry.

* :class:`LocalBackend` — ``concurrent.futures.ProcessPoolExecutor`` with the *spawn* start
  method, one worker per core by default, each limited to one thread for torch/BLAS/OpenMP.
  Workers die with the driver (Linux), so a killed sweep leaves no orphan writing a run.
  Runs on a cuda device share whatever GPU the workers see: size ``workers`` accordingly.
* :class:`SerialBackend` — in this process, one run after the other (debugging, tiny sweeps).
* :class:`RayBackend` — one Ray task per run, declaring ``num_cpus`` and ``num_gpus`` (1 when
  the run's device is cuda), on a fresh local Ray instance or on a cluster (``address``).  The
  sweep's output folder must then be on a file system every node sees.  Ray is optional:
  ``pip install 'grpo-gsd[ray]'``.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import multiprocessing
import os
import signal
import socket
import sys
import time
import traceback
from concurrent import futures
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from ..io.lock import LockBusy, RunLock, lock_path  # noqa: F401  (LockBusy, lock_path: exported here)
from ..validation import InputError

__all__ = [
    "BACKENDS",
    "LocalBackend",
    "RayBackend",
    "SerialBackend",
    "TaskFailed",
    "make_backend",
    "run_task",
    "run_program_task",
    "execute",
    "read_summary",
    "lock_path",
    "import_ray",
    "RAY_INSTALL_HINT",
]

BACKENDS = ("local", "ray", "serial")
RAY_INSTALL_HINT = "the ray backend needs Ray: pip install ray (or pip install '.[ray]' in the gsd checkout)"
#: Environment variables that cap the threads of BLAS / OpenMP libraries.
_THREAD_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)


class TaskFailed(RuntimeError):
    """A run raised (or its worker died); ``detail`` holds the remote traceback when known."""

    def __init__(self, message: str, detail: str = ""):
        super().__init__(message)
        self.detail = detail


# ------------------------------------------------------------------------------ the task
def read_summary(sim, run_dir) -> dict:
    """The summary of a complete run (the simulator's loader if it has one, else summary.json)."""
    loader = getattr(sim, "load_summary", None)
    if callable(loader):
        return dict(loader(run_dir))
    with open(Path(run_dir) / "summary.json", encoding="utf-8") as fh:
        return json.load(fh)


def _limit_threads(threads: int) -> None:
    threads = max(1, int(threads))
    for var in _THREAD_VARS:
        os.environ[var] = str(threads)
    torch = sys.modules.get("torch")
    if torch is not None:
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        try:
            torch.set_num_interop_threads(threads)
        except RuntimeError:
            pass  # only settable before torch's first parallel work


def run_task(task: dict) -> dict:
    """Run (or finish, or skip) one run; executes in a worker process.

    ``task`` holds ``simulator`` (module name), ``config`` (the simulator's config object),
    ``run_dir``, ``threads`` and ``lock_timeout``.  Returns the run's summary and how it went
    (status ``"busy"`` and the error when another live process held the folder past the timeout).
    """
    threads = task.get("threads")
    if threads is not None:
        _limit_threads(threads)
    sim = importlib.import_module(task["simulator"])
    if threads is not None:
        _limit_threads(threads)  # again: importing the simulator may have imported torch
    run_dir = Path(task["run_dir"])
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()
    lock = RunLock(lock_path(run_dir), timeout=task.get("lock_timeout"))
    try:
        lock.acquire()
    except LockBusy as exc:  # another live process writes it: this run retries or fails, alone
        return {
            "name": task.get("name", run_dir.name),
            "status": "busy",
            "resumed": False,
            "summary": {},
            "error": f"run folder {str(run_dir)!r} is in use by {exc.owner}",
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "seconds": time.time() - started,
        }
    with contextlib.ExitStack() as held:
        held.callback(lock.release)
        if sim.is_complete(run_dir):
            status, resumed = "found-complete", False
            summary = read_summary(sim, run_dir)
        else:
            resumed = run_dir.is_dir() and any(run_dir.iterdir())
            summary = sim.run_simulation(task["config"], run_dir, resume=resumed, progress=False)
            if summary is None:
                summary = read_summary(sim, run_dir)
            status = "ran"
    return {
        "name": task.get("name", run_dir.name),
        "status": status,
        "resumed": resumed,
        "summary": dict(summary),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "seconds": time.time() - started,
    }


def run_program_task(task: dict) -> dict:
    """Run several runs as one program (the simulator's ``run_many``); executes in a worker.

    ``task`` holds ``names``, ``configs`` and ``run_dirs`` (one per run) beside the keys of
    :func:`run_task`.  Every run's lock is taken (in folder order, so two programs never wait on
    each other; ``lock_timeout`` is one deadline for them all); a run whose folder another live
    process holds is left out — its entry has status ``"busy"`` and the error — and the others
    run: complete runs are found, the rest run or resume together.  Returns ``{"runs": [what
    run_task returns, per run]}``.
    """
    threads = task.get("threads")
    if threads is not None:
        _limit_threads(threads)
    sim = importlib.import_module(task["simulator"])
    if threads is not None:
        _limit_threads(threads)
    dirs = [Path(d) for d in task["run_dirs"]]
    started = time.time()
    timeout = task.get("lock_timeout")
    deadline = None if timeout is None else time.monotonic() + timeout
    busy: dict = {}
    with contextlib.ExitStack() as stack:
        for i in sorted(range(len(dirs)), key=lambda i: dirs[i]):
            dirs[i].parent.mkdir(parents=True, exist_ok=True)
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                stack.enter_context(RunLock(lock_path(dirs[i]), timeout=wait))
            except LockBusy as exc:  # that run waits for its owner; the program runs without it
                busy[i] = f"run folder {str(dirs[i])!r} is in use by {exc.owner}"
        held = [i for i in range(len(dirs)) if i not in busy]
        complete = {i: sim.is_complete(dirs[i]) for i in held}
        resumed = {i: not complete[i] and dirs[i].is_dir() and any(dirs[i].iterdir()) for i in held}
        todo = [i for i in held if not complete[i]]
        ran = sim.run_many([(task["configs"][i], dirs[i]) for i in todo], resume=True, progress=False) if todo else []
        summaries = dict(zip(todo, ran))
        common = {"host": socket.gethostname(), "pid": os.getpid(), "program": len(todo)}
        runs = [
            {
                "name": name,
                "status": "busy",
                "error": busy[i],
                "resumed": False,
                "summary": {},
                **common,
                "seconds": time.time() - started,
            }
            if i in busy
            else {
                "name": name,
                "status": "found-complete" if complete[i] else "ran",
                "resumed": resumed[i],
                "summary": dict(read_summary(sim, dirs[i]) if complete[i] else summaries[i]),
                **common,
                "seconds": time.time() - started,
            }
            for i, name in enumerate(task["names"])
        ]
    return {"runs": runs}


def execute(task: dict) -> dict:
    """A task of :func:`run_task` or of :func:`run_program_task`, by its keys."""
    return run_program_task(task) if "run_dirs" in task else run_task(task)


def _init_local_worker(threads: int) -> None:
    """Pool initializer: cap threads, and die with the driver (Linux) so no orphan holds a lock."""
    _limit_threads(threads)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
            if os.getppid() == 1:  # the driver died before prctl took effect
                os._exit(1)
        except OSError:
            pass


# ------------------------------------------------------------------------------ local
class LocalBackend:
    """A spawn-context process pool on this machine (``workers`` defaults to the core count)."""

    name = "local"

    def __init__(self, workers: int | None = None, threads_per_run: int = 1):
        if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
            raise InputError(f"workers must be a positive integer, got {workers!r}")
        self.workers = workers
        self.threads = max(1, int(threads_per_run))
        self._pool: futures.ProcessPoolExecutor | None = None
        self._broken = False
        self._saved_env: dict | None = None
        self._size = 1

    @staticmethod
    def default_workers() -> int:
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # pragma: no cover - not Linux
            return max(1, os.cpu_count() or 1)

    def start(self, n_tasks: int, specs=()) -> None:
        self._size = max(1, min(self.workers or self.default_workers(), max(1, n_tasks)))
        # Spawned workers inherit this environment: cap BLAS/OpenMP threads before they import.
        self._saved_env = {v: os.environ.get(v) for v in _THREAD_VARS}
        for v in _THREAD_VARS:
            os.environ.setdefault(v, str(self.threads))
        self._new_pool()

    def _new_pool(self) -> None:
        self._pool = futures.ProcessPoolExecutor(
            max_workers=self._size,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_local_worker,
            initargs=(self.threads,),
        )
        self._broken = False

    @property
    def size(self) -> int:
        return self._size

    def submit(self, task: dict):
        if self._broken:  # a worker died: the pool refuses work, start a fresh one
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._new_pool()
        return self._pool.submit(execute, task)

    def wait(self, handles) -> list:
        done, _ = futures.wait(handles, return_when=futures.FIRST_COMPLETED)
        out = []
        for f in done:
            exc = f.exception()
            if exc is None:
                out.append((f, True, f.result()))
                continue
            if isinstance(exc, BrokenProcessPool):
                self._broken = True
                err = TaskFailed(
                    f"worker process died ({exc})",
                    "a worker of the local pool died (killed, out of memory, or os._exit); "
                    "every run in flight was interrupted and is retried, resuming",
                )
            else:
                detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
                err = TaskFailed(f"{type(exc).__name__}: {exc}", detail)
            out.append((f, False, err))
        return out

    def stop(self, abort: bool = False) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            if abort:
                procs = list((getattr(pool, "_processes", None) or {}).values())
                pool.shutdown(wait=False, cancel_futures=True)
                for proc in procs:  # our own workers: their locks turn stale, runs resume later
                    if proc.is_alive():
                        proc.terminate()
                for proc in procs:
                    proc.join(timeout=5)
            else:
                pool.shutdown(wait=True)
        if self._saved_env is not None:
            for var, val in self._saved_env.items():
                if val is None:
                    os.environ.pop(var, None)
                else:
                    os.environ[var] = val
            self._saved_env = None


# ------------------------------------------------------------------------------ serial
class SerialBackend:
    """Every run in this process, one after another: for debugging and for tiny sweeps (a
    notebook's fast mode), where starting worker processes costs more than the runs.  Threads
    are left as the caller set them; a run that kills its process kills the sweep."""

    name = "serial"

    def __init__(self, workers: int | None = None):
        if workers not in (None, 1):
            raise InputError(f"the serial backend runs one run at a time; got workers={workers!r}")
        self._results: dict = {}
        self._next = 0

    def start(self, n_tasks: int, specs=()) -> None:
        self._results.clear()

    size = 1

    def submit(self, task: dict):
        self._next += 1
        handle = self._next
        task = {**task, "threads": None}
        try:
            self._results[handle] = (True, execute(task))
        except Exception as exc:  # noqa: BLE001 - reported to the driver, which may retry
            detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            self._results[handle] = (False, TaskFailed(f"{type(exc).__name__}: {exc}", detail))
        return handle

    def wait(self, handles) -> list:
        handle = handles[0]
        ok, value = self._results.pop(handle)
        return [(handle, ok, value)]

    def stop(self, abort: bool = False) -> None:
        self._results.clear()


# ------------------------------------------------------------------------------ ray
def import_ray():
    """``import ray``, or a ValueError that says how to install it."""
    try:
        import ray  # noqa: PLC0415
    except ImportError:
        raise InputError(RAY_INSTALL_HINT) from None
    return ray


class RayBackend:
    """Ray tasks, one per run, with declared ``num_cpus`` / ``num_gpus``.

    Without ``address`` a local Ray instance is started with ``num_cpus`` CPUs (default: the
    ``workers`` count, else every core) and shut down afterwards; with ``address`` (e.g.
    ``"auto"`` or ``"ray://head:10001"``) the driver joins that cluster and leaves it running.
    If Ray is already initialised in this process, that instance is used as it is.
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        workers: int | None = None,
        num_gpus: float | None = None,
        runtime_env: dict | None = None,
        init_kwargs: dict | None = None,
    ):
        if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
            raise InputError(f"workers must be a positive integer, got {workers!r}")
        self.address = address
        self.workers = workers
        self.num_gpus = num_gpus
        self.runtime_env = runtime_env
        self.init_kwargs = dict(init_kwargs or {})
        self._ray = None
        self._remote = None
        self._owns = False

    def start(self, n_tasks: int, specs=()) -> None:
        ray = import_ray()
        self._ray = ray
        if not ray.is_initialized():
            kwargs = dict(self.init_kwargs)
            if self.runtime_env:
                kwargs["runtime_env"] = self.runtime_env
            kwargs.setdefault("logging_level", "WARNING")
            kwargs.setdefault("log_to_driver", True)
            if self.address:
                ray.init(address=self.address, **kwargs)
            else:
                kwargs.setdefault("num_cpus", self.workers or LocalBackend.default_workers())
                if self.num_gpus is not None:
                    kwargs.setdefault("num_gpus", self.num_gpus)
                kwargs.setdefault("include_dashboard", False)
                ray.init(**kwargs)
            self._owns = True
        self._check_resources(specs)
        self._remote = ray.remote(execute)

    def _check_resources(self, specs) -> None:
        """Refuse runs the cluster can never schedule (Ray would wait for them forever)."""
        if not specs:
            return
        have = self._ray.cluster_resources()
        need_cpu = max(s.num_cpus for s in specs)
        need_gpu = max(s.num_gpus for s in specs)
        if need_cpu > have.get("CPU", 0):
            raise InputError(f"each run asks for {need_cpu:g} CPU(s) but the Ray cluster has {have.get('CPU', 0):g}")
        if need_gpu > have.get("GPU", 0):
            raise InputError(
                f"runs on a cuda device ask for {need_gpu:g} GPU(s) but the Ray cluster has {have.get('GPU', 0):g}"
            )

    @property
    def size(self) -> int:
        cpus = self._ray.cluster_resources().get("CPU", 1) if self._ray else 1
        return max(1, int(cpus))

    def submit(self, task: dict):
        opts = {"num_cpus": task.get("num_cpus", 1), "num_gpus": task.get("num_gpus", 0), "max_retries": 0}
        name = task.get("name")
        if name:
            opts["name"] = f"gsd-sweep:{name}"
        return self._remote.options(**opts).remote(task)

    def wait(self, handles) -> list:
        ray = self._ray
        ready, _ = ray.wait(list(handles), num_returns=1)
        out = []
        for ref in ready:
            try:
                out.append((ref, True, ray.get(ref)))
            except Exception as exc:  # RayTaskError wraps the run's exception; others: worker/node died
                cause = getattr(exc, "cause", None)
                shown = cause if isinstance(cause, BaseException) else exc
                lines = str(shown).strip().splitlines()
                msg = f"{type(shown).__name__}: {lines[-1] if lines else ''}"
                out.append((ref, False, TaskFailed(msg, str(exc))))
        return out

    def stop(self, abort: bool = False) -> None:
        ray = self._ray
        if ray is None:
            return
        if self._owns:
            ray.shutdown()
        self._ray = None
        self._remote = None
        self._owns = False


def make_backend(backend, *, workers=None, address=None, **options):
    """A backend object from its name (``"local"`` or ``"ray"``), or the object itself."""
    if not isinstance(backend, str):
        return backend
    if backend == "local":
        if address:
            raise InputError("--address is for the ray backend; the local backend runs on this machine")
        return LocalBackend(workers=workers, **options)
    if backend == "ray":
        import_ray()  # fail early, with the install hint
        return RayBackend(address=address, workers=workers, **options)
    if backend == "serial":
        if address:
            raise InputError("--address is for the ray backend; the serial backend runs in this process")
        return SerialBackend(workers=workers, **options)
    raise InputError(f"backend must be one of {BACKENDS}, got {backend!r}")
