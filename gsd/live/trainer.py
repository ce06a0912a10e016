"""TRL's ``GRPOTrainer`` with gsd inside: every group tracked, gsd's figures in TRL's logs, prompts optionally skipped.

:class:`GSDGRPOTrainer` is a ``GRPOTrainer`` subclass built when first used, so that this module
never imports TRL by itself.  Its tracker is :class:`gsd.live.tracker.GroupTracker`; its sampler,
when it skips, :class:`gsd.live.sampler.SkipSampler`.
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError
from ..lazy import built_on_first_use
from .reward_calls import open_unit_number
from .sampler import SkipPolicy, SkipSampler, as_max_skips
from .tracker import LIVE_METRICS, GroupTracker

__all__ = ["GSDGRPOTrainer"]  # built on first use, by __getattr__


def _iterable_dataset(dataset) -> bool:
    """A dataset TRL iterates without a sampler (``datasets.IterableDataset``, a torch one)."""
    for module, name in (("datasets", "IterableDataset"), ("torch.utils.data", "IterableDataset")):
        import sys

        cls = getattr(sys.modules.get(module), name, None)
        if cls is not None and isinstance(dataset, cls):
            return True
    return False


def _skip_settings(skip_policy, skip_above, max_skips):
    """The skipping arguments checked: (policy or None, skip_above or None, max_skips, the name of
    the argument that asks for skipping or None)."""
    if skip_above is not None:
        skip_above = open_unit_number(skip_above, "skip_above")
    if max_skips is not None:
        max_skips = as_max_skips(max_skips)
    if isinstance(skip_policy, str) and skip_policy == "value":
        skip_policy = SkipPolicy() if max_skips is None else SkipPolicy(max_skips=max_skips)
    elif isinstance(skip_policy, SkipPolicy):
        if max_skips is not None:
            raise InputError("max_skips: give it in the SkipPolicy (skip_policy=SkipPolicy(max_skips=...))")
    elif skip_policy is not None:
        raise InputError(f"skip_policy must be None, 'value' or a SkipPolicy, got {skip_policy!r}")
    if skip_policy is not None and skip_above is not None:
        raise InputError("give skip_policy or the legacy skip_above, not both")
    skips = "skip_above" if skip_above is not None else "skip_policy" if skip_policy is not None else None
    return skip_policy, skip_above, 4 if max_skips is None else max_skips, skips


def _check_before_trl(args, kwargs, skips):
    """What can be refused before TRL loads anything: a dataset skipping cannot use, a reward model
    given by name (it cannot be tracked)."""
    dataset = kwargs.get("train_dataset", args[3] if len(args) > 3 else None)
    if skips and _iterable_dataset(dataset):
        raise InputError(
            f"{skips} needs a map-style train_dataset (a datasets.Dataset): TRL reads an "
            f"{type(dataset).__name__} without a sampler, so nothing could be skipped"
        )
    funcs = kwargs.get("reward_funcs", args[1] if len(args) > 1 else None)
    for i, f in enumerate(funcs if isinstance(funcs, (list, tuple)) else [funcs]):
        if isinstance(f, str) or hasattr(f, "parameters"):
            raise InputError(
                f"reward_funcs[{i}]: {f!r} is a reward model; GSDGRPOTrainer tracks Python reward "
                "functions (score the model inside a reward function to track it)"
            )


class _Hooks:
    """TRL's ``GRPOTrainer`` with gsd inside: every group tracked, gsd's figures in TRL's logs,
    and optionally prompts skipped before generation (``skip_policy``, or the legacy
    ``skip_above``).

    It takes ``GRPOTrainer``'s arguments and these.

    Parameters
    ----------
    gsd_tracker : GroupTracker, optional
        The tracker (default: ``GroupTracker(num_generations)``).  Its reward functions are
        wrapped here unless they already are; its weights default to ``reward_weights``.
    skip_policy : None (default), ``"value"`` or SkipPolicy
        ``"value"``: fill each generation batch with the prompts of highest value per rollout
        among more candidates than it needs, with Thompson exploration and a cap on
        starvation (:class:`SkipPolicy`'s defaults; give a ``SkipPolicy`` to change them).
        None: TRL's own sampler.
    skip_above : float in (0, 1), optional
        The legacy rule: skip a prompt at its turn when its posterior probability of a silent
        group at the run's G is above this (None, the default: skip nothing).
    max_skips : int ≥ 0, optional
        Never skip a prompt at more than this many of its turns in a row (its solve rate moves
        as the model learns): it is drawn at least once every ``max_skips + 1`` turns (default
        4; with a ``SkipPolicy``, give it there).

    Skipping needs one process and a map-style ``train_dataset`` (a ``datasets.Dataset``, not
    an ``IterableDataset``, which TRL samples without a sampler): the constructor refuses it
    otherwise (tracking itself works in any number of processes and on any dataset).

    Each generation appends ``gsd/silent_frac``, ``gsd/silent_pred``, ``gsd/effective_ratio``,
    ``gsd/fidelity``, ``gsd/advised_group_size``, ``gsd/fidelity_group_size``
    (``gsd/recommended_group_size``, its deprecated alias) and ``gsd/skipped`` to TRL's training
    metrics: they reach ``trainer.state.log_history`` and ``report_to`` beside TRL's own.
    ``gsd_skip_counts`` says how many prompts were skipped and the rollouts not spent on them.

    With ``gradient_accumulation_steps`` ≥ 2 the trainer also records every micro-batch's and every step's
    gradient norm (:func:`gsd.live.noise_scale.gradient_noise_callback`, ``gsd_noise``) and, from the
    second recorded step, logs ``gsd/b_noise`` (the run's noise scale in generations) and the advised
    setting (:func:`gsd.core.advice.batch_advice`): ``gsd/advised_generations_per_step``,
    ``gsd/advised_group_size_in_batch`` and ``gsd/advised_lr`` (the run's lr: it is not scaled with B, see :class:`gsd.core.advice.BatchAdvice`).
    With ``gsd_objective`` (``gsd_objective(model)``: a scalar torch tensor the run should raise, smooth in
    the weights, e.g. the log-likelihood of reference answers on a fixed set of prompts) the recorder also
    measures what each step gains in it at B and B/2 generations, logs ``gsd/knee`` (the knee at the run's
    own lr, :func:`gsd.core.noise_scale.knee_from_step_gains`) and advises B from it instead of B_noise
    (no advised B while the knee is ∞); it also logs the gains themselves (``gsd/gain_small``,
    ``gsd/gain_big`` and their batch sizes), from which :func:`gsd.core.noise_scale.knee_from_log` and
    ``gsd scalars --knee-from-log`` give the knee again from ``trainer_state.json``.
    """

    def __init__(
        self, *args, gsd_tracker=None, skip_policy=None, skip_above=None, max_skips=None, gsd_objective=None, **kwargs
    ):
        skip_policy, skip_above, max_skips, skips = _skip_settings(skip_policy, skip_above, max_skips)
        if gsd_objective is not None and not callable(gsd_objective):
            raise InputError(f"gsd_objective must be a function of the model, got {type(gsd_objective).__name__}")
        if gsd_tracker is not None and not isinstance(gsd_tracker, GroupTracker):
            raise InputError(f"gsd_tracker must be a GroupTracker, got {type(gsd_tracker).__name__}")
        _check_before_trl(args, kwargs, skips)
        super().__init__(*args, **kwargs)
        if skips and self.accelerator.num_processes > 1:
            raise InputError(
                f"{skips} works in one process (this run has "
                f"{self.accelerator.num_processes}); track without skipping, or train in one"
            )
        if getattr(self, "multi_objective_aggregation", "sum_then_normalize") != "sum_then_normalize":
            raise InputError(
                "GSDGRPOTrainer follows multi_objective_aggregation='sum_then_normalize' (a group is "
                "silent when its weighted total has zero std)"
            )
        tracker = gsd_tracker if gsd_tracker is not None else GroupTracker(self.num_generations)
        self.gsd_tracker = self._gsd_attach(tracker)
        if skips and (_iterable_dataset(self.train_dataset) or not hasattr(self.train_dataset, "__getitem__")):
            raise InputError(
                f"{skips} needs a map-style train_dataset (a datasets.Dataset): TRL reads an "
                f"{type(self.train_dataset).__name__} without a sampler, so nothing could be skipped"
            )
        self.gsd_skip_above, self.gsd_max_skips = skip_above, int(max_skips)
        self.gsd_skip_policy = skip_policy
        self.gsd_sampler = None
        self.gsd_noise = None
        self._gsd_gains_logged = 0
        if int(self.args.gradient_accumulation_steps) >= 2:
            from .noise_scale import gradient_noise_callback

            self.gsd_noise = gradient_noise_callback(gsd_objective)
            self.add_callback(self.gsd_noise)

    def _gsd_attach(self, tracker):
        """The tracker checked against the trainer (G, reward weights) and its reward functions
        wrapped by it."""
        if tracker.num_generations != self.num_generations:
            raise InputError(
                f"gsd_tracker has num_generations={tracker.num_generations}, the trainer {self.num_generations}"
            )
        weights = [float(x) for x in self.reward_weights.tolist()]
        if tracker.weights is None:
            tracker.weights = weights
        elif len(tracker.weights) != len(weights) or not np.allclose(tracker.weights, weights):
            raise InputError(
                f"gsd_tracker weights {tracker.weights} differ from the trainer's reward_weights {weights}"
            )
        mine = [getattr(f, "_gsd_tracker", None) is tracker for f in self.reward_funcs]
        if not all(mine):
            if any(mine):
                raise InputError("some reward functions are wrapped by gsd_tracker and some are not")
            self.reward_funcs = tracker.wrap(list(self.reward_funcs))
        return tracker

    def _get_train_sampler(self, dataset=None):
        if self.gsd_skip_above is None and self.gsd_skip_policy is None:
            return super()._get_train_sampler(dataset)
        dataset = self.train_dataset if dataset is None else dataset
        tracker = self.gsd_tracker
        keys = [tracker.key(v) for v in dataset[tracker.prompt_id or "prompt"]]
        batch = self.args.generation_batch_size // self.num_generations
        self.gsd_sampler = SkipSampler(
            keys,
            tracker,
            batch_size=batch,
            repeat_count=self.num_iterations * self.args.steps_per_generation,
            shuffle=self.shuffle_dataset,
            seed=self.args.seed,
            skip_above=self.gsd_skip_above,
            max_skips=self.gsd_max_skips,
            policy=self.gsd_skip_policy,
        )
        return self.gsd_sampler

    def _generate_and_score_completions(self, inputs):
        before = self.gsd_tracker.generations
        out = super()._generate_and_score_completions(inputs)
        if self.model.training and self.gsd_tracker.generations > before:
            try:
                gen = self.gsd_tracker.metrics[-1]
                if self.gsd_sampler is not None:
                    gen["skipped"] = self.gsd_sampler.take_skipped()
                values = [float(gen[name]) for name in LIVE_METRICS]
            except Exception as exc:  # noqa: BLE001 (never stop the run for a metric)
                self.gsd_tracker._unscorable(
                    self.state.global_step + 1,
                    "metrics",
                    f"gsd's metrics were not logged ({type(exc).__name__}: {exc})",
                )
            else:
                for name, v in zip(LIVE_METRICS, values):
                    self._metrics["train"][f"gsd/{name}"].append(v)
                try:
                    batch = self._gsd_batch_metrics()
                except Exception as exc:  # noqa: BLE001 (never stop the run for a metric)
                    batch = {}
                    self.gsd_tracker._unscorable(
                        self.state.global_step + 1, "metrics", f"gsd's batch advice was not logged ({exc})"
                    )
                for name, v in batch.items():
                    self._metrics["train"][f"gsd/{name}"].append(v)
        return out

    def _gsd_batch_metrics(self) -> dict:
        """The step gains measured since the last generation (with an objective), and the run's noise scale
        (or knee) and the advised (B, G, lr) once two steps are recorded."""
        rec = None if self.gsd_noise is None else self.gsd_noise.record
        out = {} if rec is None else self._gsd_new_gains(rec)
        post = getattr(self.gsd_tracker, "last_posterior", None)
        if rec is None or len(rec.big_sq) < 2 or post is None:
            return out
        from ..core.advice import batch_advice

        ns = rec.estimate()
        out["b_noise"] = float(ns.b_noise)
        if rec.objective is not None and len(rec.gain_big) >= 2:
            ns = rec.knee()  # the knee at the run's own lr, from its step gains, takes B_noise's place
            out["knee"] = float(ns.knee)
        bn = ns.knee if "knee" in out else ns.b_noise
        if np.isfinite(bn) and bn > 0:
            adv = batch_advice(
                post.mean,
                ns,
                generations_per_step=rec.micro * rec.accumulation,
                group_size=self.num_generations,
                lr=float(self.args.learning_rate),
                g_grid=(2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64),
            )
            out.update(
                {
                    "advised_generations_per_step": float(adv.B_per_generation),
                    "advised_group_size_in_batch": float(adv.G),
                    "advised_lr": float(adv.lr_per_generation),
                }
            )
        return out

    def _gsd_new_gains(self, rec) -> dict:
        """The mean step gains of the steps measured since the last generation (usually one), for
        :func:`gsd.core.noise_scale.knee_from_log` to read back from the log."""
        if rec.objective is None or len(rec.gain_big) <= self._gsd_gains_logged:
            return {}
        new = slice(self._gsd_gains_logged, len(rec.gain_big))
        self._gsd_gains_logged = len(rec.gain_big)
        return {
            "gain_small": float(np.mean(rec.gain_small[new])),
            "gain_big": float(np.mean(rec.gain_big[new])),
            "gain_small_generations": float(rec.gain_sizes[0]),
            "gain_big_generations": float(rec.gain_sizes[-1]),
        }

    @property
    def gsd_skip_counts(self) -> dict:
        """Over the training generations so far: prompts skipped to fill their batches, and the
        rollouts not spent on them (G each)."""
        skipped = int(sum(m["skipped"] for m in self.gsd_tracker.metrics))
        return {
            "generations": self.gsd_tracker.generations,
            "skipped_prompts": skipped,
            "rollouts_saved": skipped * self.num_generations,
        }


def _trainer_class():
    """``GSDGRPOTrainer``: gsd's hooks on top of TRL's ``GRPOTrainer`` (TRL imported here)."""
    try:
        from trl import GRPOTrainer
    except ImportError as exc:
        raise ImportError("GSDGRPOTrainer needs TRL: pip install '.[trl,torch]' in the gsd checkout") from exc

    cls = type("GSDGRPOTrainer", (_Hooks, GRPOTrainer), {"__doc__": _Hooks.__doc__, "__module__": __name__})
    cls.__qualname__ = "GSDGRPOTrainer"
    return cls


__getattr__ = built_on_first_use(__name__, {"GSDGRPOTrainer": _trainer_class})
