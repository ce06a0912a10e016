"""The seconds a training step costs: t(step) = t_step + t_prompt·(prompts per step) + t_rollout·(generations
per step), fitted from a run's own step times (:func:`fit_step_cost`, :func:`step_times_from_log`); the
group-size and batch advice (:mod:`gsd.core.advice`) take it for their per-second answers."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from ..errors import InputError
from ..io.numbers import seconds_value, step_number
from ..validation import shown

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["StepCost", "fit_step_cost", "step_times_from_log"]


@dataclass(frozen=True)
class StepCost:
    """Seconds per training step = t_step + t_prompt·(prompts per step) + t_rollout·(generations per step).

    ``t_step``: the fixed part (the optimiser, the weight sync, the logging); ``t_prompt``: a prompt's
    part that its answers share (reading it, its prefill); ``t_rollout``: one answer's generation and its
    share of the backward pass.  ``source`` says where the numbers came from.
    """

    t_step: float = 0.0
    t_prompt: float = 0.0
    t_rollout: float = 0.0
    source: str = "given"

    def __post_init__(self):
        for name in ("t_step", "t_prompt", "t_rollout"):
            v = getattr(self, name)
            if (
                isinstance(v, bool)
                or not isinstance(v, int | float | np.integer | np.floating)
                or not (math.isfinite(v) and 0 <= v <= 1e12)
            ):
                raise InputError(f"{name} must be a finite number of seconds in [0, 1e12], got {v!r}")
            object.__setattr__(self, name, float(v))
        if self.t_step + self.t_prompt + self.t_rollout <= 0:
            raise InputError(
                "a step cost needs at least one positive term (t_step, t_prompt, t_rollout), "
                f"got {self.t_step}, {self.t_prompt}, {self.t_rollout}"
            )

    def seconds(self, prompts, generations):
        """Seconds per step at these prompts and generations per step (broadcast)."""
        return (
            self.t_step + self.t_prompt * np.asarray(prompts, float) + self.t_rollout * np.asarray(generations, float)
        )


def fit_step_cost(seconds: ArrayLike, prompts_per_step: ArrayLike, generations_per_step: ArrayLike) -> StepCost:
    """Least-squares t_step, t_prompt, t_rollout ≥ 0 from step times at several configurations.

    Each entry is one run (or one step) at ``prompts_per_step`` prompts and ``generations_per_step``
    generations, taking ``seconds`` per step.  The three terms are separable only when the
    configurations span three independent directions of (1, prompts, generations): one run at one G
    cannot separate them, and runs that share their prompts per step cannot tell t_step from
    t_prompt — then their sum is fitted as ``t_step`` (``source`` says so), valid at that many prompts.

    Examples
    --------
    >>> c = fit_step_cost([3.4, 5.4, 9.4, 5.8], [8, 8, 8, 16], [16, 32, 64, 32])
    >>> round(c.t_step, 6), round(c.t_prompt, 6), round(c.t_rollout, 6)
    (1.0, 0.05, 0.125)
    """
    from scipy.optimize import nnls

    t = np.asarray(seconds, dtype=np.float64).ravel()
    n = np.asarray(prompts_per_step, dtype=np.float64).ravel()
    g = np.asarray(generations_per_step, dtype=np.float64).ravel()
    if not (t.size == n.size == g.size) or t.size == 0:
        raise InputError(
            f"seconds, prompts_per_step and generations_per_step must be of one nonzero length, got "
            f"{t.size}, {n.size}, {g.size}"
        )
    for name, v, lo in (("seconds", t, 0.0), ("prompts_per_step", n, 1.0), ("generations_per_step", g, 1.0)):
        bad = ~np.isfinite(v) | (v < lo)
        if bad.any():
            raise InputError(f"{name} must be finite and >= {lo:g}, got {shown(v[bad])}")
    X = np.column_stack([np.ones_like(n), n, g])
    rank = np.linalg.matrix_rank(X / X.max(axis=0))
    if rank == 3:
        t_step, t_prompt, t_rollout = nnls(X, t)[0].tolist()
        return StepCost(t_step, t_prompt, t_rollout, source=f"fitted to {t.size} step times")
    if np.ptp(n) == 0 and np.ptp(g) > 0:
        coef = nnls(X[:, [0, 2]], t)[0]
        return StepCost(
            coef[0],
            0.0,
            coef[1],
            source=f"fitted to {t.size} step times at {n[0]:g} prompts per step: t_step includes the "
            "prompts' share (t_step and t_prompt are not separable there)",
        )
    raise InputError(
        f"the step times come from {len({(a, b) for a, b in zip(n, g)})} configuration(s) that cannot "
        "separate t_step, t_prompt and t_rollout (one run at one G cannot): give the terms "
        "(StepCost(t_step, t_prompt, t_rollout), gsd's --cost) or step times of runs at several G"
    )


def step_times_from_log(path) -> pd.DataFrame:
    """Seconds per training step a trainer logged: ``step``, ``seconds`` (and ``generation_seconds``).

    Reads TRL's ``trainer_state.json`` (a file, an output folder or its latest ``checkpoint-*``:
    ``log_history`` rows with ``step_time``, the mean over the logging window of
    ``GRPOTrainer.training_step``'s wall time, generation included) or verl's file-logger JSONL
    (``{"step", "data"}`` rows with ``timing_s/step``, and ``timing_s/gen`` as ``generation_seconds``).
    """
    import pandas as pd

    path = Path(path)
    if path.is_dir():
        state = path / "trainer_state.json"
        if not state.exists():
            ckpts = sorted(
                path.glob("checkpoint-*/trainer_state.json"),
                key=lambda q: int(q.parent.name.split("-")[-1]) if q.parent.name.split("-")[-1].isdigit() else -1,
            )
            if not ckpts:
                raise InputError(f"path: no trainer_state.json in {str(path)!r} or its checkpoint-* folders")
            state = ckpts[-1]
        path = state
    if not path.is_file():
        raise InputError(f"path: no such file {str(path)!r}")
    if path.suffix == ".json":
        try:
            history = json.loads(path.read_text()).get("log_history", [])
        except (json.JSONDecodeError, AttributeError) as e:
            raise InputError(f"path: {str(path)!r} is not a trainer_state.json ({e})") from None
        at = f"path: {str(path)!r}, log_history"
        rows = [
            (step_number(h["step"], at), seconds_value(h["step_time"], f"{at} step_time"), math.nan)
            for h in history
            if isinstance(h, dict) and "step_time" in h and "step" in h and h["step_time"] is not None
        ]
    else:
        rows = []
        with open(path) as fh:
            for number, line in enumerate(fh, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                data = rec.get("data", rec) if isinstance(rec, dict) else {}
                if isinstance(data, dict) and "timing_s/step" in data:
                    at = f"path: {str(path)!r}, line {number}"
                    gen = data.get("timing_s/gen")
                    rows.append(
                        (
                            step_number(rec.get("step", len(rows)), at),
                            seconds_value(data["timing_s/step"], f"{at} timing_s/step"),
                            math.nan if gen is None else seconds_value(gen, f"{at} timing_s/gen"),
                        )
                    )
    if not rows:
        raise InputError(f"path: {str(path)!r} holds no step time (TRL's step_time, verl's timing_s/step)")
    return pd.DataFrame(rows, columns=["step", "seconds", "generation_seconds"])
