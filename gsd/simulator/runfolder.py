"""A run folder, whatever engine fills it: its files, and the one layer that opens, locks,
verifies, checkpoints, resumes and finishes it.

A run is a folder: ``config.json`` (the resolved config), ``ledger.parquet``, a checkpoint
(``checkpoint.pt`` from the torch engine, :mod:`.engine` and :mod:`.batched`; ``checkpoint.npz``
from the numpy one, :mod:`.tabular`) and, once finished, ``summary.json`` — the mark a sweep
engine looks for (:func:`is_complete`).  Nothing here imports torch: a tabular run on the CPU
never loads it.

Every engine, alone or as a program of runs, goes through the same three calls, so a rule about
folders is written once:

1. :func:`open_runs` — hold each folder's lock (:func:`gsd.io.lock.hold_folder`), check that the
   folder is new or holds this very config (:func:`open_run_folder`), read a finished run's
   summary back, and read and verify an unfinished one's checkpoint *whole*, before any step:
   it must name this run (:func:`run_identity`: config fingerprint, seed, engine, prompts, steps,
   dtype) and every array must have its shape, dtype and range; a damaged or foreign one is one
   line naming the file and what is wrong.  The ledger is rewritten from the checkpoint (a
   ledger that lags it, or is damaged, is replaced by the rows the run continues from).
2. :func:`drive` — the steps, a checkpoint every ``checkpoint_every`` and at the last; Ctrl-C
   becomes :class:`RunInterrupted`, which says where each run resumes.
3. :func:`finish` — read each ledger back (:func:`verify_ledger`), then write ``summary.json``
   last: it marks the run complete.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.methods import method_spec
from ..errors import InputError
from ..io.atomic import TEMP_GLOB, make_folder, read_json, remove_temps, write_atomic, write_json
from ..io.lock import hold_folder
from .config import SimConfig, config_diff, repeat_settings
from .ledger import COLUMNS, LEDGER_FILE, read_ledger, summarise, write_ledger

CONFIG_FILE, CHECKPOINT_FILE, SUMMARY_FILE = "config.json", "checkpoint.pt", "summary.json"
#: The numpy engine's checkpoint (:mod:`.tabular`): arrays and its random state, no pickle.
NUMPY_CHECKPOINT_FILE = "checkpoint.npz"
CHECKPOINT_FILES = {"torch": CHECKPOINT_FILE, "numpy": NUMPY_CHECKPOINT_FILE}
ROLLOUTS_DIR = "rollouts"  # the rollout log's folder in a run folder (config key rollout_log)


def is_complete(out_dir) -> bool:
    """True when ``out_dir`` holds a finished run (its ``summary.json`` exists)."""
    return (Path(out_dir) / SUMMARY_FILE).is_file()


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C (or any KeyboardInterrupt) during a run: where it stopped and where it resumes.

    Steps are counted as the progress bar counts them, by steps done: ``step`` of ``steps`` were
    done when it stopped, and ``resume_step`` is the run folder's last checkpoint, where a resume
    continues (0: no checkpoint yet, a resume starts over).
    """

    def __init__(self, out: Path, name: str, step: int, steps: int, resume_step: int):
        self.out, self.name, self.step, self.steps, self.resume_step = out, name, step, steps, resume_step
        super().__init__(
            f"{name}: stopped at step {step} of {steps} in {str(out)!r}; "
            + (
                f"its last checkpoint is at step {resume_step}, where a resume continues"
                if resume_step
                else "no checkpoint yet, a resume starts at step 0"
            )
        )


def logged_rows_per_step(cfg: SimConfig) -> int:
    """Rollouts a step logs at most: its kept groups (DAPO's redraws are not logged)."""
    if cfg.allocation != "fixed" and cfg.budget:
        return cfg.budget
    return (cfg.batch_size or cfg.n_prompts) * cfg.group_size


def answers_per_step(cfg: SimConfig) -> int:
    """Answers a step draws at most: batch × G × (DAPO: max_draws)."""
    if cfg.allocation != "fixed" and cfg.budget:
        return cfg.budget  # a budget plan draws at most its budget (no redraws with a plan)
    return (
        (cfg.batch_size or cfg.n_prompts)
        * cfg.group_size
        * (cfg.max_draws if method_spec(cfg.method).redraws_silent else 1)
    )


def open_run_folder(out: Path, cfg: SimConfig, resume: bool, engine: str = "torch"):
    """Create the folder, or check that the one there belongs to this config.

    Returns ``("done", summary)`` for a finished run of the same config, ``("resume", path)``
    when a checkpoint should be loaded, ``("restart", None)`` for an unfinished run that has none
    yet, ``("fresh", None)`` otherwise.
    """
    saved_path = out / CONFIG_FILE
    if saved_path.is_file():
        saved = read_json(saved_path)
        if not _same_run(saved, cfg.to_dict()):
            diff = "; ".join(config_diff(saved, cfg.to_dict()))
            raise InputError(
                f"out_dir {str(out)!r} holds a run with a different config ({diff}); to continue that "
                f"run, give it the same config (gsd simulate: {repeat_settings(saved, cfg.to_dict())}), "
                "or use another folder"
            )
        if is_complete(out):
            remove_temps(out)  # a finished run's temporary files are a killed writer's (the lock is ours)
            return "done", read_json(out / SUMMARY_FILE)
        if not resume:
            raise InputError(
                f"out_dir {str(out)!r} holds an unfinished run of this config; pass resume (--resume) to continue it"
            )
        remove_temps(out)  # half-written files of the killed process
        ckpt = out / CHECKPOINT_FILES[engine]
        other = next((e for e, name in CHECKPOINT_FILES.items() if e != engine and (out / name).is_file()), None)
        if not ckpt.is_file() and other is not None:
            raise InputError(
                f"out_dir {str(out)!r}: its checkpoint was written by the {other} engine and this process would "
                f"run the {engine} engine (config key 'engine' = {cfg.engine!r}, device {cfg.device!r}); "
                f"resume with --set engine={other}"
            )
        return ("resume", ckpt) if ckpt.is_file() else ("restart", None)
    if out.is_dir() and not out.is_symlink() and _only_temps(out):
        # A process killed while writing the folder's first file (config.json) left its temporary
        # file alone there: stale (the folder's lock is ours), removed, and the run starts fresh.
        remove_temps(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(
            f"out_dir {str(out)!r} exists and is not a run folder (no {CONFIG_FILE}); use an empty or new folder"
        )
    make_folder(out)
    write_json(saved_path, cfg.to_dict())
    return "fresh", None


def _only_temps(folder: Path) -> bool:
    """Whether ``folder`` holds nothing but this package's temporary files (and is not empty)."""
    entries = list(folder.iterdir())
    return bool(entries) and all(e.match(TEMP_GLOB) and (e.is_file() or e.is_symlink()) for e in entries)


def _same_run(saved, now: dict) -> bool:
    """Whether a folder's saved config is this run's: equal, or equal but for ``engine`` where
    one side is ``"auto"`` (which engine ran is the checkpoint's to say: :func:`open_run_folder`
    names it, and ``--set engine=NAME`` continues it)."""
    if saved == now:
        return True
    if not isinstance(saved, dict) or "auto" not in (saved.get("engine"), now.get("engine")):
        return False
    return {k: v for k, v in saved.items() if k != "engine"} == {k: v for k, v in now.items() if k != "engine"}


def damaged(path: Path, why: str) -> InputError:
    return InputError(f"{str(path)!r} is damaged ({why}); delete it, or the run folder, and run again")


def run_identity(cfg: SimConfig, engine: str) -> dict:
    """What a checkpoint records of the run it belongs to: a fingerprint of the config (every key
    but ``engine``, whose ``"auto"`` the ``engine`` entry resolves), and, readable in a message,
    the seed, the engine, the prompts, the steps and the dtype."""
    conf = {k: v for k, v in cfg.to_dict().items() if k != "engine"}
    digest = hashlib.sha256(json.dumps(conf, sort_keys=True, default=str).encode()).hexdigest()[:20]
    return {
        "config": digest,
        "seed": cfg.seed,
        "engine": engine,
        "n_prompts": cfg.n_prompts,
        "steps": cfg.steps,
        "dtype": cfg.dtype,
    }


def check_identity(path: Path, found, cfg: SimConfig, engine: str) -> None:
    """A checkpoint's recorded identity (:func:`run_identity`) against this run's: a checkpoint
    copied from another run folder (another seed, config or dtype) is refused, naming what differs."""
    if isinstance(found, (str, bytes, np.ndarray)):
        try:
            found = json.loads(str(found))
        except ValueError:
            found = None
    if not isinstance(found, dict):
        raise damaged(path, "it does not name the run it belongs to (written by an older gsd, or not by gsd)")
    want = run_identity(cfg, engine)
    for key in ("engine", "seed", "dtype", "n_prompts", "steps", "config"):
        if found.get(key) != want[key]:
            what = "config fingerprint" if key == "config" else key
            raise InputError(
                f"{str(path)!r} belongs to another run (its {what} is {found.get(key)!r}, this run's "
                f"{want[key]!r}): copied from another run folder? delete it, or the run folder, and "
                "run again"
            )


def check_array(path: Path, name: str, a, shape: tuple, dtype, *, nonnegative: bool = False, finite: bool = True):
    """One array of a checkpoint, checked: its shape, its dtype exactly, every value finite (and
    >= 0); a damaged one is named with the entry and what is wrong.  Returns the array."""
    if not hasattr(a, "dtype") or not hasattr(a, "shape"):
        raise damaged(path, f"entry {name!r} is a {type(a).__name__}, not an array")
    if tuple(a.shape) != tuple(shape):
        raise damaged(path, f"entry {name!r} has shape {tuple(a.shape)}, this run's is {tuple(shape)}")
    if _dtype_name(a.dtype) != _dtype_name(dtype):
        raise damaged(path, f"entry {name!r} is {_dtype_name(a.dtype)}, this run's is {_dtype_name(dtype)}")
    values = np.asarray(a, dtype=np.float64)
    if finite and not np.isfinite(values).all():
        bad = values[~np.isfinite(values)][0]
        raise damaged(path, f"entry {name!r} holds {float(bad)!r}")
    if nonnegative and (values < 0).any():
        raise damaged(path, f"entry {name!r} holds a negative value ({float(values[values < 0][0])!r})")
    return a


def _dtype_name(dtype) -> str:
    """'float32' for numpy's and torch's float32 alike (torch's is named 'torch.float32')."""
    text = str(dtype)
    return text[len("torch.") :] if text.startswith("torch.") else np.dtype(dtype).name


def check_ledger_rows(path: Path, rows, start: int) -> None:
    """A checkpoint's ledger: (start, columns) float64, and its step column 0 … start − 1."""
    check_array(path, "ledger", rows, (start, len(COLUMNS)), np.float64, finite=False)
    steps = np.asarray(rows, dtype=np.float64)[:, list(COLUMNS).index("step")]
    if not np.array_equal(steps, np.arange(start, dtype=np.float64)):
        raise damaged(path, f"its ledger's steps are not 0 … {start - 1}")


def check_step(path: Path, step, cfg: SimConfig, what: str = "step") -> int:
    """A checkpoint's next step (or another count of steps, named ``what``): an integer in [1, steps]."""
    value = step.item() if hasattr(step, "item") and getattr(step, "ndim", 0) == 0 else step
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 < int(value) <= cfg.steps:
        raise damaged(path, f"its {what} {value!r} does not fit a run of {cfg.steps} steps")
    return int(value)


def verify_ledger(out: Path, rows: np.ndarray) -> None:
    """Read the ledger file back before the run is marked complete: it must hold ``rows``."""
    path = out / LEDGER_FILE
    on_disk = read_ledger(out, columns=list(COLUMNS))
    back = np.column_stack([np.asarray(on_disk[c], dtype=np.float64) for c in COLUMNS]) if len(rows) else rows
    if back.shape != rows.shape or not np.array_equal(back, rows.astype(np.float64), equal_nan=True):
        raise damaged(path, "it does not hold the rows the run computed")


# --------------------------------------------------------------------------- the layer
@dataclass
class Member:
    """One run an engine is about to run: its position in the caller's list, config, folder, initial
    p, verified checkpoint (None: from step 0) and the step it starts at."""

    pos: int
    cfg: SimConfig
    out: Path
    p0: np.ndarray
    ckpt: dict | None
    start: int = 0


def open_runs(items, p0s, *, resume: bool, engine: str, read_checkpoint, held, notify=None):
    """Open the run folders of ``items`` (``(config, folder)`` pairs; ``p0s`` their initial p) for
    ``engine``: returns (summaries, members).

    Each folder's lock is taken on the ExitStack ``held`` (released when the caller's block ends);
    a finished run's summary is read back (``summaries[pos]``, nothing reruns); every other run is
    a :class:`Member`, with its checkpoint read by ``read_checkpoint(path, cfg, p0)`` — which
    verifies it whole — when it has one.  The ledger file is rewritten from a checkpoint's rows.
    """
    say = notify or (lambda message: None)
    summaries: list = [None] * len(items)
    members = []
    for pos, ((cfg, out), p0) in enumerate(zip(items, p0s)):
        held.enter_context(hold_folder(out, option="out_dir"))  # a second process on this folder: one-line error
        mode, found = open_run_folder(out, cfg, resume, engine=engine)
        if mode == "done":
            say(
                f"{cfg.name}: finished earlier ({cfg.steps} steps in {str(out)!r}); its summary is read back, nothing reruns"
            )
            summaries[pos] = found
            continue
        ckpt = read_checkpoint(found, cfg, p0) if mode == "resume" else None
        start = 0
        if ckpt is not None:
            start = int(ckpt["step"])
            # The checkpoint is written first: a ledger that lags it (a kill between the two) or
            # that is damaged is replaced by the rows the run continues from.
            write_ledger(out / LEDGER_FILE, np.asarray(ckpt["ledger"], dtype=np.float64))
            # engine = "auto" resumes whichever engine wrote the checkpoint: said, not silent
            chosen = (
                f", engine = 'auto' continues with the {engine} engine that wrote it" if cfg.engine != engine else ""
            )
            say(f"{cfg.name}: resuming at step {start} of {cfg.steps} (the checkpoint in {str(out)!r}{chosen})")
        elif mode == "restart":
            say(f"{cfg.name}: no checkpoint in {str(out)!r} yet; starting at step 0 of {cfg.steps}")
        members.append(Member(pos, cfg, Path(out), p0, ckpt, start))
    return summaries, members


def drive(prog, members: list, *, progress: bool, on_step=None, desc: str | None = None) -> None:
    """Run ``prog`` (``start``, ``step(step)``, ``save(next_step)``) from its start to the members'
    last step: a checkpoint every ``checkpoint_every`` steps and at the last.  ``step`` may return
    a dict the progress bar shows.  ``on_step(step)``: after each step and its checkpoint.  Ctrl-C
    is raised again as :class:`RunInterrupted` (where the runs stopped, where they resume)."""
    from ..io.progress import progress_bar

    base, steps = members[0].cfg, members[0].cfg.steps
    name = base.name if len(members) == 1 else f"{len(members)} runs"
    bar = progress_bar(
        total=steps,
        initial=prog.start,
        disable=not progress,
        desc=desc or (f"{base.name} [{base.method}]" if len(members) == 1 else name),
        unit="step",
    )
    saved = done = prog.start
    try:
        for step in range(prog.start, steps):
            shown = prog.step(step)
            done = step + 1
            if done % base.checkpoint_every == 0 or done == steps:
                prog.save(done)
                saved = done
            bar.update(1)
            if progress and shown and (step % 10 == 0 or done == steps):
                bar.set_postfix(**shown)
            if on_step is not None:
                on_step(step)
    except KeyboardInterrupt:
        bar.close()
        raise RunInterrupted(members[0].out, name, done, steps, saved) from None
    bar.close()


def save_checkpoint(out: Path, engine: str, payload, rows: np.ndarray) -> None:
    """Write a run's checkpoint (``payload``: the engine's serialised bytes) then its ledger ``rows``,
    each atomically: the checkpoint first, so a kill between the two leaves a ledger that lags it,
    which :func:`open_runs` rewrites from the checkpoint."""
    write_atomic(out / CHECKPOINT_FILES[engine], payload)
    write_ledger(out / LEDGER_FILE, rows)


def finish(members: list, ledgers: list, initial: list, final: list, **summary_keys) -> list[dict]:
    """Mark every member's run complete: its ledger read back (:func:`verify_ledger`), then its
    ``summary.json`` (:func:`~.ledger.summarise` with ``summary_keys``) written last; the summaries,
    read back, in the members' order."""
    out = []
    for m, ledger, first, last in zip(members, ledgers, initial, final):
        verify_ledger(m.out, ledger.table[: m.cfg.steps])
        summary = summarise(ledger.columns(), m.cfg, initial=first, final=last, **summary_keys)
        write_json(m.out / SUMMARY_FILE, summary)  # written last: it marks the run complete
        out.append(read_json(m.out / SUMMARY_FILE))
    return out


def ledger_row(step: int, host: dict, generations_cum: int, planner=None) -> dict:
    """A ledger row (:meth:`Ledger.put`'s names) from a step's host values."""
    n_batch = host["n_batch"]
    row = dict(
        step=step,
        n_batch=n_batch,
        silent_frac=host["silent"] / n_batch,
        zero_update_frac=host["zero_update"] / n_batch,
        groups=host["groups"],
        generations=host["generations"],
        generations_cum=generations_cum,
        loss=host["loss"],
        kl=host["kl"],
        clip_frac=host["clip_frac"],
        grad_mass=float(host["grad_mass_d"].sum()),
        grad_mass_d=host["grad_mass_d"],
        mean_p=host["mean_p"],
        mean_arcsin=host["mean_arcsin"],
        mean_p_q=host["mean_p_q"],
        effective_ratio=(n_batch - host["zero_update"]) / host["groups"] if host["groups"] else math.nan,
        value_planned=planner.value_planned if planner else math.nan,
        grad_planned=planner.grad_planned if planner else math.nan,
        **{
            c: host[c]
            for c in ("silent_pred", "zero_update_pred", "groups_pred", "grad_limit", "grad_law", "grad_limit_d")
        },
    )
    if "grad_pred" in host:
        row.update(grad_pred=host["grad_pred"], grad_pred_d=host["grad_pred_d"])
    return row


def read_logits(out: Path) -> dict:
    """A run folder's last checkpoint, whichever engine wrote it: ``step``, ``z`` (the tabular
    logits, float64 numpy; None for a network policy) and ``z_ref`` (the initial logits)."""
    out = Path(out)
    if (out / NUMPY_CHECKPOINT_FILE).is_file():
        with np.load(out / NUMPY_CHECKPOINT_FILE, allow_pickle=False) as f:
            return {"step": int(f["step"]), "z": f["z"].astype(np.float64), "z_ref": f["z_ref"].astype(np.float64)}
    if not (out / CHECKPOINT_FILE).is_file():
        raise InputError(f"out_dir {str(out)!r} holds no checkpoint")
    import torch

    ckpt = torch.load(out / CHECKPOINT_FILE, map_location="cpu", weights_only=True)
    z = ckpt["policy"].get("z")
    return {
        "step": int(ckpt["step"]),
        "z": None if z is None else z.to(torch.float64).numpy(),
        "z_ref": ckpt["z_ref"].to(torch.float64).numpy(),
    }


def final_solve_rates(out: Path, cfg: SimConfig, p0: np.ndarray) -> np.ndarray:
    """Every prompt's p at a run folder's last checkpoint (float64): sigmoid of the tabular
    logits, or the network policy rebuilt from ``p0`` with the checkpoint's weights."""
    state = read_logits(out)
    if state["z"] is not None:
        return sigmoid(state["z"])
    import torch

    from .policy import make_policy
    from .population import STREAM_INIT, sub_seed

    policy = make_policy(
        cfg, p0, seed=sub_seed(cfg.seed, STREAM_INIT), dtype=getattr(torch, cfg.dtype), device=torch.device("cpu")
    )
    policy.load_state_dict(torch.load(Path(out) / CHECKPOINT_FILE, map_location="cpu", weights_only=True)["policy"])
    with torch.no_grad():
        return torch.sigmoid(policy()).double().numpy()


def logit(p):
    """log(p/(1 − p)), float64 (the torch engine's ``torch.logit`` of the float64 p0)."""
    return np.log(p / (1.0 - p))


_logit = logit  # the name other branches import


def sigmoid(z, out=None, negate: bool = False):
    """1/(1 + exp(−z)) (``negate``: of −z), into ``out`` when given (the same operations, the same
    bits): the numpy engine's policy, and a checkpoint's logits read back as solve rates."""
    out = np.empty_like(z) if out is None else out
    with np.errstate(over="ignore"):  # exp(−z) = inf at z ≪ 0 gives 1/inf = 0, the limit
        if negate:
            np.exp(z, out=out)
        else:
            np.negative(z, out=out)
            np.exp(out, out=out)
        np.add(1.0, out, out=out)
        return np.divide(1.0, out, out=out)


_sigmoid = sigmoid  # the name other branches import
