"""AReaL (checked against ``areal`` 1.0.4): its convention, its rollout dumps, their quirks.

What it computes
    ``PPOActor._compute_advantages`` (``areal/trainer/ppo/actor.py``) shifts and scales the
    reward ((r + reward_bias)·reward_scaling, clipped to ±reward_clip), then normalises it with
    ``Normalization`` (``areal/utils/data.py``) when ``actor.reward_norm`` is set.  A GRPO run
    sets ``mean_level: group``, ``std_level: group``, ``group_size: n_samples``; then
    A_i = (r_i − mean_group) / (std_group + eps), computed in float64 (``high_precision``), the
    std with ddof 1 (``std_unbiased=True``, the default since AReaL 0.3.4) and eps = 1e-5
    (``NormConfig.eps``); ``std_level: null`` only centres (Dr.GRPO).  ``NormConfig``'s own
    defaults are ``batch`` levels (one mean and std over the batch) and ``reward_norm`` itself
    defaults to None (no normalisation).  The groups of ``Normalization`` are consecutive blocks
    of ``group_size`` rows of the training batch, which are one task's rows.  AReaL has no
    built-in filter of zero-std groups: DAPO's dynamic sampling is the ``dynamic_filter_fn`` a
    recipe hands to ``prepare_batch`` (``should_accept_fn``), which runs *after* the dump.

What it writes (``rollout.dump_to_file=True``)
    ``WorkflowExecutor._dump_trajectory`` (``areal/infra/workflow_executor.py``) writes every
    finished task to ``{fileroot}/logs/{user}/{experiment_name}/{trial_name}/rollout/{version}/
    {task_id}.jsonl`` (evaluation tasks under ``eval-rollout/``), one JSON object per answer:
    ``task_id``, ``sample_idx`` (the answer's row in the task), ``seqlen``, ``prompt_len``,
    ``head_version``, ``tail_version``, ``reward``, ``prompt`` and ``completion`` (decoded).
    A task is one dataset row run ``n_samples`` times (``GroupedRolloutWorkflow``): one group.
    Quirks:

    * the folder is the task's ``tail_version``, the newest policy version among its tokens:
      the number of weight updates before its last token was generated, so version 0 is the
      first step's rollouts; an asynchronous run (``max_head_offpolicyness`` > 0) trains a step
      on several versions, and a step's own version is not written;
    * ``head_version`` is the oldest version among *all* tokens, prompt tokens included, which
      the single-turn workflow stamps -1: it is -1 in every row it writes;
    * an answer with no completion token is left out of the dump but trained on: its task's
      rows miss a ``sample_idx``, and the group is incomplete;
    * a task rejected by ``should_accept_fn`` (e.g. DAPO's filter) is dumped all the same;
    * each ``WorkflowExecutor`` numbers its tasks from 0 and appends to ``{task_id}.jsonl``:
      executors that share a trial folder (one per data-parallel rank when each rank runs its
      own rollout engine) write several groups into one file, told apart here by the prompt
      text (two ranks drawing the same prompt under one task id and version stay merged);
    * the reward is a float32 (``torch.tensor(reward, dtype=torch.float32).item()``), before
      bias, scaling, clipping and the overlong penalty, none of which changes which rewards of a
      group are equal (clipping aside: two rewards beyond ``reward_clip`` become equal).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .._errors import InputError

__all__ = ["NAME", "DDOF", "EPS", "SCALES", "SOURCE", "FILE_DESCRIPTION", "PROMPT_COL", "STEP_COL", "GROUP_COLS",
           "INDEX_COL", "DEFAULT_REWARD", "NOT_REWARD", "is_log_file", "step_of", "is_validation_folder",
           "zero_std", "complete_groups"]

NAME = "areal"
DDOF = 1
EPS = 1e-5
#: ``reward_norm`` with ``mean_level: group`` and ``std_level: group`` / ``null``.
SCALES = ("group", "none")
SOURCE = ("AReaL 1.0.4 areal/utils/data.py Normalization (std_unbiased=True, eps=1e-5, high_precision float64) "
          "with reward_norm mean_level/std_level 'group', applied in areal/trainer/ppo/actor.py "
          "PPOActor._compute_advantages")

FILE_DESCRIPTION = "AReaL's rollout/{version}/{task_id}.jsonl"

PROMPT_COL = "prompt"
#: The row's copy of its folder's version.
STEP_COL = "tail_version"
#: Within one version: a group is the rows of one task file with one prompt text.
GROUP_COLS = ("task_id", "prompt")
#: The answer's row within its task (0 … n_samples − 1): a gap marks an answer left out.
INDEX_COL = "sample_idx"
DEFAULT_REWARD = "reward"
NOT_REWARD = ("task_id", "sample_idx", "seqlen", "prompt_len", "head_version", "tail_version", "prompt", "completion")

_TRAIN_FOLDER = "rollout"
_EVAL_FOLDER = "eval-rollout"


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit() and text.count("-") <= 1


def is_log_file(path: Path) -> bool:
    """``{version}/{task_id}.jsonl`` under ``rollout/`` or ``eval-rollout/``."""
    path = Path(path)
    return (path.suffix == ".jsonl" and path.stem.isdigit() and _is_int(path.parent.name)
            and path.parent.parent.name in (_TRAIN_FOLDER, _EVAL_FOLDER))


def step_of(path: Path) -> int:
    """The version folder of a dump file (the task's ``tail_version``)."""
    return int(Path(path).parent.name)


def is_validation_folder(folder: Path) -> bool:
    """The evaluation dump (``eval-rollout/``, or one of its version folders)."""
    folder = Path(folder)
    return folder.name == _EVAL_FOLDER or folder.parent.name == _EVAL_FOLDER


def zero_std(values, group, n_groups: int) -> np.ndarray:
    """Per group, whether AReaL's group std is zero: every reward of the group equal.

    The dump holds float32 rewards, which ``Normalization`` widens to float64 before taking
    the std; distinct float64 values are distinct, so the std is zero exactly when the group's
    values are all equal (up to the mean's rounding, below 1e-16 relative, far below eps).

    Parameters
    ----------
    values : ndarray of float
        One reward per rollout.
    group : ndarray of int
        Dense group code per rollout, 0 … n_groups − 1.
    n_groups : int

    Returns
    -------
    ndarray of bool, shape (n_groups,)
    """
    values = np.asarray(values, dtype=np.float64)
    group = np.asarray(group, dtype=np.int64)
    lo = np.full(n_groups, np.inf)
    hi = np.full(n_groups, -np.inf)
    np.minimum.at(lo, group, values)
    np.maximum.at(hi, group, values)
    return lo == hi


def complete_groups(index, group, n_groups: int):
    """Per group, whether the dump holds every answer AReaL normalised with the others.

    A task's answers carry ``sample_idx`` 0 … n_samples − 1.  The dump leaves out an answer with
    no completion token and AReaL's ``GroupedRolloutWorkflow`` drops an episode that returned
    None: either leaves a group with fewer rows than the run's largest ``sample_idx`` + 1 (the
    training batch then no longer splits into one task per ``group_size`` block).  Two
    executors' tasks of one id, version and prompt repeat a ``sample_idx``.  Such groups are
    not complete.

    Parameters
    ----------
    index : ndarray of int
        ``sample_idx`` per rollout (non-negative).
    group : ndarray of int
        Dense group code per rollout, 0 … n_groups − 1.
    n_groups : int

    Returns
    -------
    complete : ndarray of bool, shape (n_groups,)
    G : int
        The group size the run shows (largest ``sample_idx`` + 1; 0 for no rows).
    """
    index = np.asarray(index, dtype=np.int64)
    group = np.asarray(group, dtype=np.int64)
    if index.size and index.min() < 0:
        raise InputError(f"{INDEX_COL} must be >= 0 (an answer's row in its task), got {int(index.min())}")
    G = int(index.max()) + 1 if index.size else 0
    rows = np.bincount(group, minlength=n_groups)
    pairs = np.unique(np.stack([group, index], axis=1), axis=0)  # (group, sample_idx) once each
    distinct = np.bincount(pairs[:, 0], minlength=n_groups)
    return (rows == G) & (distinct == G), G
