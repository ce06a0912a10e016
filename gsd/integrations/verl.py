"""verl's GRPO (checked against ``verl`` 0.9.1): its convention, its rollout dumps, their quirks.

What it computes
    ``compute_grpo_outcome_advantage``: A_i = (r_i − mean_group) / (std_group + 1e-6), sample
    std (ddof 1), the group being the responses sharing a ``uid`` (one per dataset row drawn);
    ``norm_adv_by_std_in_grpo=False`` only centres.  A group whose scores have zero std is
    silent (advantage 0); DAPO's recipe (``algorithm.filter_groups``) drops and refills them.

What it writes (``trainer.rollout_data_dir``)
    One ``{global_step}.jsonl`` per training step, one JSON object per response: ``input`` (the
    decoded prompt), ``output``, ``gts``, ``score`` (the summed token-level score), ``step``,
    and every reward extra-info key with one value per response (e.g. ``acc``, ``pred``).
    Quirks:

    * no ``uid`` or dataset index is written, and with ``trainer.balance_batch=True`` (the
      default) the batch is reordered by sequence length before the dump: a group can only be
      found as the rows of one step with the same ``input`` text, so two dataset rows with the
      same text in one batch read as one group of 2n — unless the reward function returns a
      group id (e.g. the dataset index) as an extra key, named with ``--group-col``;
    * numpy booleans in the extra info are dumped as the strings ``"True"`` / ``"False"``;
    * validation dumps (``trainer.validation_data_dir``) use the same file names in another
      folder (``validation_data/`` beside ``rollout_data/`` in the usual layout).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import TRUTH_COLUMN

__all__ = ["DDOF", "EPS", "SCALES", "SOURCE", "NOT_REWARD", "DEFAULT_REWARD", "BOOL_STRINGS", "is_log_file",
           "step_of", "is_validation_folder", "write_step", "FILE_DESCRIPTION"]

DDOF = 1
EPS = 1e-6
SCALES = ("group", "none", "rloo", "rloo_vectorized")
SOURCE = ("verl 0.9.1 compute_grpo_outcome_advantage (norm_adv_by_std_in_grpo), compute_rloo_outcome_advantage, "
          "compute_rloo_vectorized_outcome_advantage")

FILE_DESCRIPTION = "verl's {step}.jsonl"

#: Keys of a dumped row that are not rewards.
NOT_REWARD = ("input", "output", "gts", "step", "data_source", "request_id", "uid", TRUTH_COLUMN)
#: The reward verl normalises.
DEFAULT_REWARD = "score"
#: How verl's dump (``json.dumps(default=str)``) writes numpy booleans.
BOOL_STRINGS = {"True": 1.0, "False": 0.0}


def is_log_file(path: Path) -> bool:
    return path.suffix == ".jsonl" and path.stem.isdigit()


def step_of(path: Path) -> int:
    return int(path.stem)


def is_validation_folder(folder: Path) -> bool:
    """A dump folder whose name says validation (``validation_data``, ``val_generations``, ...)."""
    name = Path(folder).name.lower()
    return name.startswith("val") or "validation" in name or name.endswith("_val") or name == "eval"


def write_step(folder, step: int, prompts, scores, *, outputs="", extra: dict | None = None) -> Path:
    """Write one step of rollouts as verl's ``{folder}/{step}.jsonl``; returns the path.

    Parameters
    ----------
    folder : path
        The ``rollout_data_dir``.
    step : int
        Training step (verl's ``global_steps``, from 1).
    prompts, scores : array_like, one entry per rollout
        The prompt text and the sequence score.
    outputs : str or array_like
        The answers' text.
    extra : dict of array_like, optional
        Extra reward keys (e.g. ``{"acc": ...}``).
    """
    import pandas as pd

    from ..atomic import atomic_path
    from ._columns import column

    n = len(prompts)
    data = {"input": column(prompts, n, "prompts").astype(str), "output": column(outputs, n, "outputs").astype(str),
            "gts": np.full(n, ""), "score": column(scores, n, "scores").astype(np.float64),
            "step": np.full(n, int(step), dtype=np.int64)}
    for key, values in (extra or {}).items():
        data[key] = column(values, n, key)
    path = Path(folder) / f"{int(step)}.jsonl"
    with atomic_path(path) as tmp:
        pd.DataFrame(data).to_json(tmp, orient="records", lines=True, force_ascii=False, double_precision=15)
    return path
