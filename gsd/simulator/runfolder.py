"""A run folder, whatever engine fills it: its files, how it is opened, checked and marked finished.

A run is a folder: ``config.json`` (the resolved config), ``ledger.parquet``, a checkpoint
(``checkpoint.pt`` from the torch engine, :mod:`.engine`; ``checkpoint.npz`` from the numpy one,
:mod:`.tabular`) and, once finished, ``summary.json`` — the mark a sweep engine looks for
(:func:`is_complete`).  Nothing here imports torch: a tabular run on the CPU never loads it.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .._errors import InputError
from ..atomic import make_folder, read_json, remove_temps, write_json
from ..methods import method_spec
from .config import SimConfig, config_diff, repeat_settings
from .ledger import COLUMNS, LEDGER_FILE, read_ledger

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
        super().__init__(f"{name}: stopped at step {step} of {steps} in {str(out)!r}; "
                         + (f"its last checkpoint is at step {resume_step}, where a resume continues"
                            if resume_step else "no checkpoint yet, a resume starts at step 0"))


def logged_rows_per_step(cfg: SimConfig) -> int:
    """Rollouts a step logs at most: its kept groups (DAPO's redraws are not logged)."""
    if cfg.allocation != "fixed" and cfg.budget:
        return cfg.budget
    return (cfg.batch_size or cfg.n_prompts) * cfg.group_size


def answers_per_step(cfg: SimConfig) -> int:
    """Answers a step draws at most: batch × G × (DAPO: max_draws)."""
    if cfg.allocation != "fixed" and cfg.budget:
        return cfg.budget  # a budget plan draws at most its budget (no redraws with a plan)
    return (cfg.batch_size or cfg.n_prompts) * cfg.group_size * (cfg.max_draws if method_spec(cfg.method).redraws_silent else 1)


def open_run_folder(out: Path, cfg: SimConfig, resume: bool, engine: str = "torch"):
    """Create the folder, or check that the one there belongs to this config.

    Returns ``("done", summary)`` for a finished run of the same config, ``("resume", path)``
    when a checkpoint should be loaded, ``("restart", None)`` for an unfinished run that has none
    yet, ``("fresh", None)`` otherwise.
    """
    saved_path = out / CONFIG_FILE
    if saved_path.is_file():
        saved = read_json(saved_path)
        if saved != cfg.to_dict():
            diff = "; ".join(config_diff(saved, cfg.to_dict()))
            raise InputError(f"out_dir {str(out)!r} holds a run with a different config ({diff}); to continue that "
                             f"run, give it the same config (gsd simulate: {repeat_settings(saved, cfg.to_dict())}), "
                             "or use another folder")
        if is_complete(out):
            return "done", read_json(out / SUMMARY_FILE)
        if not resume:
            raise InputError(f"out_dir {str(out)!r} holds an unfinished run of this config; pass resume (--resume) to continue it")
        remove_temps(out)  # half-written files of the killed process
        ckpt = out / CHECKPOINT_FILES[engine]
        other = next((e for e, name in CHECKPOINT_FILES.items() if e != engine and (out / name).is_file()), None)
        if not ckpt.is_file() and other is not None:
            raise InputError(f"out_dir {str(out)!r}: its checkpoint was written by the {other} engine and this process would "
                             f"run the {engine} engine (config key 'engine' = {cfg.engine!r}, device {cfg.device!r}); "
                             f"resume with --set engine={other}")
        return ("resume", ckpt) if ckpt.is_file() else ("restart", None)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"out_dir {str(out)!r} exists and is not a run folder (no {CONFIG_FILE}); use an empty or new folder")
    make_folder(out)
    write_json(saved_path, cfg.to_dict())
    return "fresh", None


def damaged(path: Path, why: str) -> InputError:
    return InputError(f"{str(path)!r} is damaged ({why}); delete it, or the run folder, and run again")


def verify_ledger(out: Path, rows: np.ndarray) -> None:
    """Read the ledger file back before the run is marked complete: it must hold ``rows``."""
    path = out / LEDGER_FILE
    on_disk = read_ledger(out, columns=list(COLUMNS))
    back = np.column_stack([np.asarray(on_disk[c], dtype=np.float64) for c in COLUMNS]) if len(rows) else rows
    if back.shape != rows.shape or not np.array_equal(back, rows.astype(np.float64), equal_nan=True):
        raise damaged(path, "it does not hold the rows the run computed")


def ledger_row(step: int, host: dict, generations_cum: int, planner=None) -> dict:
    """A ledger row (:meth:`Ledger.put`'s names) from a step's host values."""
    n_batch = host["n_batch"]
    row = dict(
        step=step, n_batch=n_batch, silent_frac=host["silent"] / n_batch, zero_update_frac=host["zero_update"] / n_batch,
        groups=host["groups"], generations=host["generations"], generations_cum=generations_cum,
        loss=host["loss"], kl=host["kl"], clip_frac=host["clip_frac"],
        grad_mass=float(host["grad_mass_d"].sum()), grad_mass_d=host["grad_mass_d"],
        mean_p=host["mean_p"], mean_arcsin=host["mean_arcsin"], mean_p_q=host["mean_p_q"],
        effective_ratio=(n_batch - host["zero_update"]) / host["groups"] if host["groups"] else math.nan,
        value_planned=planner.value_planned if planner else math.nan,
        grad_planned=planner.grad_planned if planner else math.nan,
        **{c: host[c] for c in ("silent_pred", "zero_update_pred", "groups_pred", "grad_limit", "grad_law", "grad_limit_d")},
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
    return {"step": int(ckpt["step"]), "z": None if z is None else z.to(torch.float64).numpy(),
            "z_ref": ckpt["z_ref"].to(torch.float64).numpy()}


def final_solve_rates(out: Path, cfg: SimConfig, p0: np.ndarray) -> np.ndarray:
    """Every prompt's p at a run folder's last checkpoint (float64): sigmoid of the tabular
    logits, or the network policy rebuilt from ``p0`` with the checkpoint's weights."""
    state = read_logits(out)
    if state["z"] is not None:

        return _sigmoid(state["z"])
    import torch

    from .policy import make_policy
    from .population import STREAM_INIT, sub_seed

    policy = make_policy(cfg, p0, seed=sub_seed(cfg.seed, STREAM_INIT), dtype=getattr(torch, cfg.dtype),
                         device=torch.device("cpu"))
    policy.load_state_dict(torch.load(Path(out) / CHECKPOINT_FILE, map_location="cpu", weights_only=True)["policy"])
    with torch.no_grad():
        return torch.sigmoid(policy()).double().numpy()


def _logit(p):
    """log(p/(1 − p)), float64 (the torch engine's ``torch.logit`` of the float64 p0)."""
    return np.log(p / (1.0 - p))


def _sigmoid(z):
    """The solve rate of a logit (the numpy engine's policy, and a checkpoint's logits read back)."""
    with np.errstate(over="ignore"):  # exp(−z) = inf at z ≪ 0 gives 1/inf = 0, the limit
        return 1.0 / (1.0 + np.exp(-z))
