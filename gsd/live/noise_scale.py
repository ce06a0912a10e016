"""The gradient noise scale of a live TRL run: a callback that records every micro-batch's gradient norm
beside the accumulated step's, for :func:`gsd.core.noise_scale.noise_scale_from_norms`.

With ``gradient_accumulation_steps`` = M ≥ 2 the trainer sums M micro-batch gradients, each of a loss
divided by M (TRL's ``grpo``, ``bnpo`` and ``dr_grpo`` losses), before the optimizer step: the step's
gradient is the mean of the micro-batches'.  The callback reads the accumulated gradient after each
micro-batch (``on_substep_end``) and before the optimizer step (``on_pre_optimizer_step``); the
difference of two reads times M is one micro-batch's gradient.  Its squared norm (mean over the M) is
‖G_small‖² at ``per_device_train_batch_size`` generations, the step's is ‖G_big‖² at M times that.
Micro-batches are independent draws only when each generates its own completions (TRL's
``steps_per_generation=1``); micro-batches sliced from one shuffled generation split groups between
them, which couples them through the group's advantages (the step is then recorded, and flagged).

Left out, and counted: steps whose gradient was clipped (``max_grad_norm`` reached: the clipped step is
no longer the mean of the micro-batches), and runs over several processes (the last micro-batch's
gradient is all-reduced, the others are not).
"""

from __future__ import annotations

import numpy as np

from ..errors import InputError

__all__ = ["gradient_noise_callback"]


def _flat_grad(model):
    import torch

    parts = [p.grad.detach().reshape(-1) for p in model.parameters() if p.grad is not None]
    return torch.cat(parts).to(torch.float64) if parts else None


class _Recorder:
    """The state of :func:`gradient_noise_callback`'s callback (kept apart from TRL's class)."""

    def __init__(self):
        self.small_sq: list[float] = []  # per recorded step: mean over micro-batches of ‖g_k‖²
        self.big_sq: list[float] = []  # per recorded step: |mean_k g_k|²
        self.steps: list[int] = []
        self.clipped = 0
        self.skipped_multiprocess = 0
        self.micro = 0  # generations per micro-batch
        self.accumulation = 0
        self.shared_generation = False
        self._prev = None
        self._sq: list[float] = []

    def begin(self):
        self._prev, self._sq = None, []

    def substep(self, model):
        g = _flat_grad(model)
        if g is None:
            return
        x = g if self._prev is None else g - self._prev
        self._sq.append(float(x.dot(x)))
        self._prev = g.clone()

    def finish(self, args, state, model):
        M = int(args.gradient_accumulation_steps)
        g = _flat_grad(model)
        if g is None or M < 2 or len(self._sq) != M - 1:
            return
        if getattr(args, "world_size", 1) > 1:
            self.skipped_multiprocess += 1
            return
        total = float(g.dot(g))
        clip = getattr(args, "max_grad_norm", 0) or 0
        if clip > 0 and np.sqrt(total) >= clip * (1 - 1e-6):
            self.clipped += 1
            return
        x = g - self._prev
        sq = [*self._sq, float(x.dot(x))]
        self.small_sq.append(M * M * float(np.mean(sq)))  # micro-batch gradient = M × its share of the sum
        self.big_sq.append(total)
        self.steps.append(int(state.global_step) + 1)
        self.micro, self.accumulation = int(args.per_device_train_batch_size), M
        self.shared_generation = int(getattr(args, "steps_per_generation", 1) or 1) > 1

    def estimate(self, level: float = 0.95):
        """B_noise, ‖G‖², tr(Σ) with their interval from the steps recorded so far."""
        from ..core.noise_scale import noise_scale_from_norms

        if len(self.big_sq) < 2:
            raise InputError(
                f"the noise scale needs >= 2 recorded steps with gradient_accumulation_steps >= 2, got "
                f"{len(self.big_sq)} (clipped steps left out: {self.clipped})"
            )
        return noise_scale_from_norms(
            self.small_sq, self.big_sq, self.micro, self.micro * self.accumulation, level=level
        )


def gradient_noise_callback():
    """A ``transformers.TrainerCallback`` that records every step's micro-batch and accumulated gradient
    norms; ``callback.record`` holds them and ``callback.record.estimate()`` gives B_noise with its interval.

    Examples
    --------
    ``trainer.add_callback(cb := gradient_noise_callback())``, train with ``gradient_accumulation_steps``
    ≥ 2 (and ``steps_per_generation=1`` for independent micro-batches), then ``cb.record.estimate()``.
    """
    from transformers import TrainerCallback

    class GradientNoiseCallback(TrainerCallback):
        def __init__(self):
            self.record = _Recorder()

        def on_step_begin(self, args, state, control, **kw):
            self.record.begin()

        def on_substep_end(self, args, state, control, model=None, **kw):
            if model is not None:
                self.record.substep(model)

        def on_pre_optimizer_step(self, args, state, control, model=None, **kw):
            if model is not None:
                self.record.finish(args, state, model)

    return GradientNoiseCallback()
