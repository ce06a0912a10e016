"""Write rollouts the way verl and TRL log them (for the simulator, the tests and the benchmark).

* :func:`write_verl_step` — ``{folder}/{step}.jsonl``, one JSON object per rollout with keys
  ``input``, ``output``, ``gts``, ``score``, ``step`` and any extra reward keys, like verl's
  ``trainer.rollout_data_dir`` dumps;
* :func:`write_trl_step` — ``{folder}/completions/completions_{step:05d}.parquet`` with columns
  ``step``, ``prompt``, ``completion``, one column per reward function and ``advantage``, like
  TRL's ``GRPOTrainer(log_completions=True)``.

Each file is written atomically (a reader never sees half a step).  See :ref:`theory-logs`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .._validate import InputError
from ..atomic import atomic_path

__all__ = ["write_verl_step", "write_trl_step", "ROLLOUT_LOGS"]

#: Formats the writers produce (the simulator's ``rollout_log`` values).
ROLLOUT_LOGS = ("verl", "trl")


def _column(values, n, name):
    arr = np.asarray(values)
    if arr.ndim == 0:
        arr = np.full(n, arr.item())
    if arr.shape != (n,):
        raise InputError(f"{name} must have one entry per rollout ({n}), got shape {arr.shape}")
    return arr


def write_verl_step(folder, step: int, prompts, scores, *, outputs="", extra: dict | None = None) -> Path:
    """Write one step of rollouts as verl's ``{step}.jsonl``; returns the path.

    Parameters
    ----------
    folder : path
        The ``rollout_data_dir``.
    step : int
        Training step (verl's ``global_steps``, from 1).
    prompts, scores : array_like, one entry per rollout
        The prompt text (a group is the rows with the same prompt) and the sequence score.
    outputs : str or array_like
        The answers' text.
    extra : dict of array_like, optional
        Extra reward keys (e.g. ``{"acc": ...}``).
    """
    n = len(prompts)
    data = {"input": _column(prompts, n, "prompts").astype(str), "output": _column(outputs, n, "outputs").astype(str),
            "gts": np.full(n, ""), "score": _column(scores, n, "scores").astype(np.float64),
            "step": np.full(n, int(step), dtype=np.int64)}
    for key, values in (extra or {}).items():
        data[key] = _column(values, n, key)
    path = Path(folder) / f"{int(step)}.jsonl"
    with atomic_path(path) as tmp:
        pd.DataFrame(data).to_json(tmp, orient="records", lines=True, force_ascii=False, double_precision=15)
    return path


def write_trl_step(folder, step: int, prompts, rewards: dict, *, completions="", advantages=None) -> Path:
    """Write one step of rollouts as TRL's ``completions/completions_{step:05d}.parquet``.

    Parameters
    ----------
    folder : path
        TRL's ``output_dir``.
    step : int
        ``state.global_step``.
    prompts : array_like of str, one per rollout
    rewards : dict
        One column per reward function, named after it.
    completions : str or array_like
    advantages : array_like, optional (zeros if omitted)
    """
    n = len(prompts)
    data = {"step": np.full(n, int(step), dtype=np.int64), "prompt": _column(prompts, n, "prompts").astype(str),
            "completion": _column(completions, n, "completions").astype(str)}
    for name, values in rewards.items():
        data[name] = _column(values, n, name).astype(np.float64)
    data["advantage"] = np.zeros(n) if advantages is None else _column(advantages, n, "advantages").astype(np.float64)
    path = Path(folder) / "completions" / f"completions_{int(step):05d}.parquet"
    with atomic_path(path) as tmp:
        pd.DataFrame(data).to_parquet(tmp, index=False)
    return path
