r"""The closed forms inside a real trainer: a tiny transformer whose solve rates are known exactly.

A tiny causal LM (Qwen2 from a config, a word-level tokenizer, both built in code) answers
prompts ``q0 … q15`` (up to ``q31``: :func:`words`).  The reward is decided by the completion's
first token: right iff it is in the prompt's set of right tokens, so the solve rate is a sum of
the model's own probabilities,

.. math::  p_x = \sum_{t \in R(x)} \pi_\theta(t \mid x),

exact from one forward pass, and :math:`\nabla p_x` by autograd.  Completions go on after the
first token (1 to ``max_len`` tokens in all), so TRL's token-level loss aggregation sees lengths;
in the ``"correlated"`` variant a right first token is mostly followed by EOS (right answers
short, wrong ones long), in ``"independent"`` the length does not depend on the first token.

:func:`train_silent` trains the model with ``GRPOTrainer.train()`` and sets TRL's logged
``frac_reward_zero_std`` beside the closed forms from the exact solve rates.

:func:`run_training` trains GRPO, Dr.GRPO and gsd's skip sampler from one initial model, runs
``gsd diagnose`` on TRL's own completions log against the exact p (:func:`calibrate`), follows the
hardest quarter of the prompts, and measures each group's update against its reward std
(:func:`sigma_update`).

:func:`measured_update` averages the gradient of TRL 1.16.0's own ``GRPOTrainer._compute_loss``
on inputs built by its own ``_generate_and_score_completions`` over many sampled groups and
compares it with the closed form (:ref:`theory-any-policy`).  torch, transformers and trl are
imported inside the functions: ``import gsd`` stays light.

Modules, each named for what it computes (every name is importable from here too):

* :mod:`.teacher` — the teacher the model is pretrained on: target rates, right sets, sequences;
* :mod:`.task` — the task: :class:`Task`, :func:`build_task`, the tokenizer, torch's threads;
* :mod:`.update` — :func:`measured_update`: TRL's expected update against :func:`closed_form_factor`;
* :mod:`.sigma` — :func:`sigma_update`: TRL's update per group against the group's σ-term;
* :mod:`.training` — :func:`train_silent` and :func:`trl_settings`: TRL trainings, silent groups;
* :mod:`.calibration` — :func:`calibrate`: ``gsd diagnose`` on a training's log against the exact p;
* :mod:`.update_experiment` — :func:`run` (``gsd transformer-update``), its table and figures;
* :mod:`.training_experiment` — :func:`run_training` (``gsd transformer-train``), its table and figure.
"""

from __future__ import annotations

from .calibration import calibrate
from .sigma import sigma_update
from .task import (
    MAX_PROMPTS,
    STRUCTURES,
    VARIANTS,
    WORDS,
    Task,
    build_task,
    import_stack,
    tokenizer,
    torch_threads,
    words,
)
from .teacher import MAX_V, N_U
from .training import METHODS, SKIP, TRAININGS, train_silent, trl_settings
from .training_experiment import TRAIN_RUN_SIZES, run_training, train_figure, training_table
from .update import LOSS_TYPES, SCALE_REWARDS, TRL_DDOF, TRL_EPS, closed_form_factor, measured_update
from .update_experiment import SIZES, TRAIN_SIZES, figure, run, silent_figure, table

__all__ = [
    "WORDS",
    "MAX_PROMPTS",
    "N_U",
    "MAX_V",
    "LOSS_TYPES",
    "SCALE_REWARDS",
    "VARIANTS",
    "STRUCTURES",
    "TRL_DDOF",
    "TRL_EPS",
    "SIZES",
    "TRAIN_SIZES",
    "TRAININGS",
    "METHODS",
    "SKIP",
    "TRAIN_RUN_SIZES",
    "Task",
    "build_task",
    "calibrate",
    "closed_form_factor",
    "figure",
    "import_stack",
    "measured_update",
    "run",
    "run_training",
    "sigma_update",
    "silent_figure",
    "table",
    "tokenizer",
    "torch_threads",
    "train_figure",
    "train_silent",
    "training_table",
    "trl_settings",
    "words",
]

_import_stack = import_stack  # the former name
