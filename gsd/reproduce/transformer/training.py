"""Training a task's model with TRL's own ``GRPOTrainer.train()``: per step, TRL's logged
``frac_reward_zero_std`` beside the closed forms from the exact solve rates, and the settings
(:func:`trl_settings`) every training on a task shares.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

from ...errors import InputError
from .task import Task, torch_threads

#: The trainings of :func:`~gsd.reproduce.transformer.train_silent` in
#: :func:`~gsd.reproduce.transformer.run`: TRL's settings per method.
TRAININGS = {
    "grpo": {"scale_rewards": "group", "loss_type": "grpo"},
    "dr_grpo": {"scale_rewards": "none", "loss_type": "dr_grpo"},
}
#: Every method :func:`train_silent` takes: :data:`~.training.TRAININGS` and gsd's skip sampler on GRPO's
#: settings (``GSDGRPOTrainer(skip_above=0.95, max_skips=4)``, the values of the docs' example).
METHODS = {**TRAININGS, "skip": TRAININGS["grpo"]}
SKIP = {"skip_above": 0.95, "max_skips": 4}


def trl_settings(
    task: Task,
    *,
    G: int,
    rows: int,
    lr: float,
    steps: int,
    seed: int,
    out_dir,
    method: str = "grpo",
    log_completions: bool = False,
) -> dict:
    """The ``GRPOConfig`` arguments of every training on a task: CPU, no vLLM, one generation per
    optimizer step of ``rows`` completions (``G`` per prompt), no KL term, plain sampling
    (temperature 1, no top-k/top-p), a constant learning rate, and ``method``'s loss
    (:data:`~.training.METHODS`)."""
    return dict(
        output_dir=out_dir,
        use_cpu=True,
        use_vllm=False,
        report_to=[],
        learning_rate=lr,
        max_completion_length=task.max_len,
        num_generations=G,
        per_device_train_batch_size=rows,
        gradient_accumulation_steps=1,
        steps_per_generation=1,
        beta=0.0,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        max_steps=steps,
        save_strategy="no",
        logging_steps=1,
        seed=seed,
        lr_scheduler_type="constant",
        log_completions=log_completions,
        num_completions_to_print=0,
        disable_tqdm=True,
        **METHODS[method],
    )


def train_silent(
    task: Task,
    method: str = "grpo",
    *,
    G: int = 8,
    copies: int = 16,
    steps: int = 40,
    lr: float = 3e-3,
    seed: int = 0,
    threads: int = 1,
    completions_dir=None,
    prompts_per_step=None,
    trainer_class=None,
    trainer_kwargs=None,
    args_class=None,
    args_kwargs=None,
    callbacks=(),
) -> dict:
    r"""Train the task's model with TRL's ``GRPOTrainer.train()``; per step, TRL's logged
    ``frac_reward_zero_std`` against the closed forms from the exact solve rates.

    Parameters
    ----------
    task : Task
        Its model is trained in place.
    method : {"grpo", "dr_grpo", "skip"}, optional
        :data:`~.training.METHODS`: GRPO (``scale_rewards="group"``, ``loss_type="grpo"``), Dr.GRPO
        (``"none"``, ``"dr_grpo"``), or GRPO's settings in gsd's ``GSDGRPOTrainer`` with its skip
        sampler (:data:`SKIP`): prompts predicted silent are replaced by others before generation,
        so every step generates as many completions as the other two.
    G, copies, steps, lr, seed, threads
        Group size; groups of every prompt per step (the batch is ``copies × prompts × G``
        completions, one generation per step); optimiser steps (AdamW, TRL's default) at ``lr``;
        TRL's seed; torch threads.
    completions_dir : path, optional
        TRL's ``output_dir`` with ``log_completions=True``: TRL writes its own
        ``completions/completions_{step:05d}.parquet`` there at every step, the log
        ``gsd diagnose`` reads (:func:`calibrate`).  Default: a temporary folder, no log.
    prompts_per_step : int, optional
        Groups per step from a dataset of the prompts once each (TRL's ``RepeatSampler`` walks
        through it in shuffled passes) instead of ``copies`` groups of every prompt.
    trainer_class, trainer_kwargs : optional
        A ``GRPOTrainer`` subclass to train with (default: TRL's own, or ``GSDGRPOTrainer`` for
        ``"skip"``) and keyword arguments it takes beyond ``GRPOTrainer``'s.
    args_class, args_kwargs : optional
        A ``GRPOConfig`` subclass (e.g. trl-cgrpo's ``CGRPOConfig``) and fields replacing or adding to
        the ones set here (``max_steps`` is then an upper bound a callback may stop before).
        With ``gradient_accumulation_steps`` M and ``steps_per_generation=1`` a step holds M
        generation calls of ``rows / M`` completions each, recorded as one step.
    callbacks : sequence of ``TrainerCallback``, optional
        Added beside the recorder (e.g. :func:`gsd.live.noise_scale.gradient_noise_callback`).

    Returns
    -------
    dict
        Per step: ``measured`` (TRL's ``frac_reward_zero_std``), ``silent_from_rewards`` (the
        same from the rewards the reward function returned: the truth recorded in the run),
        ``exact`` (mean over the step's groups of :math:`p_x^G + (1-p_x)^G`, p_x exact before
        the step's generation), ``pooled`` (:math:`\bar p^G + (1-\bar p)^G` of the mean solve
        rate), ``mean_p``, ``p`` (every prompt's exact p before the generation), ``groups``
        (the prompt index of each group) and ``k`` (its right answers); ``p_final`` (exact p after
        the last step); ``r2_exact``, ``r2_pooled`` (R² of each as a prediction of the measured
        fraction, no refit); for ``"skip"``, ``skipped`` (prompts skipped per step).  Per step also
        ``generations`` (rewards the reward function returned), ``step_time`` (TRL's own
        ``step_time`` metric, seconds) and ``wall`` (``time.perf_counter`` seconds from the start of
        training to the step's end, the exact-p forward passes included).
    """
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    _check_training(task, method, G, copies, steps, prompts_per_step)
    groups = len(task.prompts) * copies if prompts_per_step is None else int(prompts_per_step)
    record = _Record()
    reward, callback = _recorders(task, record)
    folder = _output_folder(completions_dir)
    with torch_threads(threads), folder as out_dir:
        settings = trl_settings(
            task,
            G=G,
            rows=groups * G,
            lr=lr,
            steps=steps,
            seed=seed,
            out_dir=out_dir,
            method=method,
            log_completions=completions_dir is not None,
        )
        args = (args_class or GRPOConfig)(**{**settings, **dict(args_kwargs or {})})
        kind, extra = _trainer_class(method, GRPOTrainer, trainer_class, trainer_kwargs)
        data = list(task.prompts) * (copies if prompts_per_step is None else 1)
        tr = kind(
            model=task.model,
            reward_funcs=[reward],
            args=args,
            callbacks=[callback, *callbacks],
            train_dataset=Dataset.from_dict({"prompt": data}),
            processing_class=task.tokenizer,
            **extra,
        )
        _quiet(tr)
        tr.train()
        if completions_dir is not None:
            tr.save_state()  # trainer_state.json beside completions/: TRL's own frac_reward_zero_std per step
    task.model.eval()
    calls = max(1, int(args.gradient_accumulation_steps) // max(1, int(args.steps_per_generation or 1)))
    return _silent_result(task, tr, record, method=method, G=G, groups=groups, lr=lr, calls=calls)


def _check_training(task: Task, method: str, G, copies, steps, prompts_per_step) -> None:
    """:func:`train_silent`'s arguments, each an :class:`~gsd.InputError` naming it."""
    if method not in METHODS:
        raise InputError(f"method must be one of {tuple(METHODS)}, got {method!r}")
    for name, v, hi in (("G", G, 64), ("copies", copies, 64), ("steps", steps, 10**5)):
        if not (isinstance(v, (int, np.integer)) and (2 if name == "G" else 1) <= v <= hi):
            raise InputError(f"{name} must be an integer in [{2 if name == 'G' else 1}, {hi}], got {v!r}")
    if prompts_per_step is not None and not (
        isinstance(prompts_per_step, (int, np.integer)) and 1 <= prompts_per_step <= len(task.prompts)
    ):
        raise InputError(f"prompts_per_step must be an integer in [1, {len(task.prompts)}], got {prompts_per_step!r}")


@dataclass
class _Record:
    """What a training records as it runs: the exact p at each step's start, (prompt indices,
    rewards) of each generation as the reward function returned them, and ``perf_counter`` at the
    start of training and at each step's end."""

    before: list = field(default_factory=list)
    generations: list = field(default_factory=list)
    ends: list = field(default_factory=list)


def _recorders(task: Task, record: _Record):
    """The reward function (right iff the first token is in the prompt's right set; it records what
    it returns) and the callback that records the exact p and the times, both writing into ``record``."""
    import time

    from transformers import TrainerCallback

    right = {p: set(r) for p, r in zip(task.prompts, task.right)}
    index = {p: i for i, p in enumerate(task.prompts)}

    def first_token(prompts, completions, completion_ids, **kw):
        r = [float(len(c) > 0 and c[0] in right[p]) for p, c in zip(prompts, completion_ids)]
        record.generations.append(([index[p] for p in prompts], r))
        return r

    class Exact(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            record.ends.append(time.perf_counter())

        def on_step_begin(self, args, state, control, **kw):
            record.before.append(task.solve_rates())

        def on_step_end(self, args, state, control, **kw):
            record.ends.append(time.perf_counter())

    return first_token, Exact()


def _output_folder(completions_dir):
    """TRL's ``output_dir``: ``completions_dir`` as it is, else a temporary folder removed after."""
    import tempfile

    return tempfile.TemporaryDirectory() if completions_dir is None else contextlib.nullcontext(str(completions_dir))


def _trainer_class(method: str, default, trainer_class, trainer_kwargs):
    """The trainer class and the keyword arguments it takes beyond ``GRPOTrainer``'s: the one given,
    else ``GSDGRPOTrainer`` with :data:`SKIP` for ``"skip"``, else ``default`` (TRL's own)."""
    kind, extra = default, {}
    if method == "skip":
        from ...live import GSDGRPOTrainer

        kind, extra = GSDGRPOTrainer, SKIP
    if trainer_class is not None:
        kind, extra = trainer_class, dict(trainer_kwargs or {})
    return kind, extra


def _quiet(tr) -> None:
    """The trainer without its per-step lines (the result has them): PrinterCallback's; with
    disable_tqdm no progress callback is added, in a notebook neither the NotebookProgressCallback's
    table of losses."""
    from transformers import PrinterCallback, ProgressCallback

    for cb in (PrinterCallback, ProgressCallback):
        tr.remove_callback(cb)


def _step_rows(record: _Record, log_history: list, G: int, calls: int = 1) -> list:
    """Per step, TRL's logged silent fraction and step time beside the closed forms at the exact p
    recorded before the step's generation (:func:`train_silent`'s ``steps``); ``calls`` generation
    calls per step are joined into one."""
    from ...core.silent import silent_rate

    gens = record.generations
    if calls > 1:
        gens = [
            (sum((w for w, _ in gens[i : i + calls]), []), sum((r for _, r in gens[i : i + calls]), []))
            for i in range(0, len(gens) - calls + 1, calls)
        ]

    measured = [h["frac_reward_zero_std"] for h in log_history if "frac_reward_zero_std" in h]
    step_time = [h["step_time"] for h in log_history if "step_time" in h]
    ends = record.ends
    rows = []
    for p, (who, r), m, st, end in zip(record.before, gens, measured, step_time, ends[1:]):
        grp = np.asarray(who).reshape(-1, G)[:, 0]
        r = np.asarray(r).reshape(-1, G)
        rows.append(
            {
                "generations": int(r.size),
                "step_time": float(st),
                "wall": end - ends[0],
                "measured": m,
                "silent_from_rewards": float((r.min(1) == r.max(1)).mean()),
                "exact": float(np.mean(silent_rate(p[grp], G))),
                "pooled": float(silent_rate(p[grp].mean(), G)),
                "mean_p": float(p.mean()),
                "p": p.tolist(),
                "groups": grp.tolist(),
                "k": r.sum(1).astype(int).tolist(),
            }
        )
    return rows


def _silent_result(
    task: Task, tr, record: _Record, *, method: str, G: int, groups: int, lr: float, calls: int = 1
) -> dict:
    """:func:`train_silent`'s result from the trained model, the trainer's log and the run's record."""
    from ...simulator.ledger import r_squared

    rows = _step_rows(record, tr.state.log_history, G, calls)
    obs = [r["measured"] for r in rows]
    out = {
        "method": method,
        "G": G,
        "groups_per_step": groups,
        "lr": lr,
        "steps": rows,
        "p_final": task.solve_rates().tolist(),
        "r2_exact": r_squared(obs, [r["exact"] for r in rows]),
        "r2_pooled": r_squared(obs, [r["pooled"] for r in rows]),
        "trl_reward": [h["reward"] for h in tr.state.log_history if "reward" in h],
        "grad_norm": [h["grad_norm"] for h in tr.state.log_history if h.get("grad_norm") is not None],
    }
    if getattr(tr, "gsd_tracker", None) is not None:
        out["skipped"] = [int(m.get("skipped", 0)) for m in tr.gsd_tracker.metrics]
    return out
