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

With an Adam-family optimizer (``exp_avg_sq`` in its state: torch's Adam and AdamW, TRL's default) the
callback also records the same norms weighted by Adam's preconditioner P = 1/(√v̂ + ε), read from the
optimizer's state before the step (v̂ the bias-corrected second moment of the steps so far, ε the group's
eps): ‖g‖²_P = Σ_i P_i g_i².  P is fixed while the step's micro-batches accumulate and does not depend on
them, so E‖G_B‖²_P = GᵀPG + tr(PΣ)/B exactly and the same two-batch estimator gives the noise scale of
the preconditioned gradient, tr(PΣ)/GᵀPG (``estimate(preconditioned=True)``).  The first step has no
second moment yet and is left out of that series; so are (P = 0) the coordinates whose second moment is
still exactly 0 (no gradient in any earlier step), where 1/ε would swamp every other term.

Given an ``objective`` (``objective(model)``: a scalar torch tensor the run should raise, e.g. an exact
solve rate), the callback also measures, before each optimizer step, what the step would gain in it at two
batch sizes: Φ(θ + δ) − Φ(θ) for the step δ the optimizer would take from its present state with the
step's gradient, and with each micro-batch's gradient alone (mean over the micro-batches), by forward
passes at the moved weights (restored exactly after), in eval mode; and Φ after the optimizer's real
step.  δ is Adam's step without momentum, −lr·ĝ/(√v̂ + ε) with v̂ = (β₂v + (1 − β₂)ĝ²)/(1 − β₂^(t+1)) the
second moment this gradient would leave (:func:`adam_step`): the momentum averages the last 1/(1 − β₁)
gradients, whose noise over a run adds up as the gradients' own, so a step measured with it would hide
most of the batch's effect.  :func:`gsd.core.noise_scale.knee_from_step_gains` turns the two series into
the knee of the run at its own learning rate (``record.knee()``).  It costs M + 1 forward passes of the
objective per step and keeps M gradient vectors and one copy of the weights while a step accumulates.

Left out, counted and warned about once each (training goes on): steps whose gradient was clipped
(``max_grad_norm`` reached: the clipped step is no longer the mean of the micro-batches), steps whose
gradient is not finite (NaN or inf), runs over several processes (the last micro-batch's gradient is
all-reduced, the others are not), runs with ``gradient_accumulation_steps`` = 1 (no micro-batch to set
against the step), and anything that fails inside the callback: a callback never stops the user's training.
"""

from __future__ import annotations

import math
import warnings
from contextlib import contextmanager

import numpy as np

from ..errors import InputError

__all__ = ["gradient_noise_callback", "adam_preconditioner", "adam_step"]


def _flat_grad(model):
    """Every trainable parameter's gradient in one float64 vector, zeros where a parameter has none yet
    (a parameter first used by a later micro-batch keeps the vector's length); None when none has one."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad or p.grad is not None]
    if all(p.grad is None for p in params):
        return None
    return torch.cat(
        [
            torch.zeros(p.numel(), dtype=torch.float64, device=p.device)
            if p.grad is None
            else p.grad.detach().reshape(-1).to(torch.float64)
            for p in params
        ]
    )


def _clip_tolerance(model, n: int) -> float:
    """How far below max_grad_norm a clipped gradient's norm can come out: clipping scales it by max_grad_norm
    over torch's norm of it, summed in the gradients' dtype, whose relative error is at most n·u for n
    squares (u its unit roundoff; recursive summation, Higham's bound), capped at 1%: a step within it
    counts as clipped (one step left out, where recording a clipped step would bias the estimate)."""
    import torch

    dtype = next((p.grad.dtype for p in model.parameters() if p.grad is not None), torch.float32)
    u = torch.finfo(dtype).eps / 2 if dtype.is_floating_point else 2.0**-24
    return min(n * u, 1e-2)


def adam_preconditioner(model, optimizer):
    """Adam's per-coordinate preconditioner P = 1/(√v̂ + ε), flattened in the order of :func:`_flat_grad`
    (every trainable parameter), from the optimizer's state before its next step:
    v̂ = exp_avg_sq/(1 − β₂^t) after t steps, ε and β₂ from the parameter's group.  None when the optimizer
    keeps no ``exp_avg_sq`` (not Adam-family) or has not stepped yet; P = 0 for a parameter it holds no
    state for yet."""
    import torch

    opt = getattr(optimizer, "optimizer", optimizer)  # accelerate wraps the torch optimizer
    state, groups = getattr(opt, "state", None), getattr(opt, "param_groups", None)
    if state is None or not groups:
        return None
    group_of = {id(p): g for g in groups for p in g["params"]}
    params = [p for p in model.parameters() if p.requires_grad or p.grad is not None]
    parts, stepped = [], False
    for p in params:
        st, group = state.get(p, {}), group_of.get(id(p))
        v, t = st.get("exp_avg_sq"), st.get("step")
        if v is None or t is None or group is None or float(t) < 1:
            # no second moment yet: P = 0, as for a coordinate below
            parts.append(torch.zeros(p.numel(), dtype=torch.float64, device=p.device))
            continue
        stepped = True
        beta2, eps = float(group["betas"][1]), float(group["eps"])
        v_hat = v.detach().reshape(-1).to(torch.float64) / (1.0 - beta2 ** float(t))
        # a coordinate with no second moment yet (no gradient in any step so far) would weigh 1/ε: Adam's
        # step there is set by the current gradient alone, outside this fixed-preconditioner model
        parts.append(torch.where(v_hat > 0, 1.0 / (v_hat.sqrt() + eps), 0.0))
    return torch.cat(parts) if stepped else None


def adam_step(model, optimizer, grad):
    """The step the optimizer would take from its present state with the flat gradient ``grad`` (the
    order of :func:`_flat_grad`), momentum and weight decay left out: −lr·g/(√v̂ + ε) for an
    Adam-family group (``betas`` in it), v̂ = (β₂v + (1 − β₂)g²)/(1 − β₂^(t+1)) the second moment after
    this step (v = 0, t = 0 before the first), torch's arithmetic; −lr·g for any other group (SGD).  None
    when a parameter is in no group."""
    import torch

    opt = getattr(optimizer, "optimizer", optimizer)  # accelerate wraps the torch optimizer
    state, groups = getattr(opt, "state", {}), getattr(opt, "param_groups", None) or []
    group_of = {id(p): g for g in groups for p in g["params"]}
    params = [p for p in model.parameters() if p.requires_grad or p.grad is not None]
    parts, at = [], 0
    for p in params:
        group, g = group_of.get(id(p)), grad[at : at + p.numel()]
        at += p.numel()
        if group is None:
            return None
        lr = float(group["lr"])
        if "betas" not in group:
            parts.append(-lr * g)
            continue
        beta2, eps = float(group["betas"][1]), float(group["eps"])
        st = state.get(p, {})
        v, t = st.get("exp_avg_sq"), float(st.get("step", 0))
        v = torch.zeros_like(g) if v is None else v.detach().reshape(-1).to(torch.float64)
        v = beta2 * v + (1.0 - beta2) * g * g
        parts.append(-lr * g / ((v / (1.0 - beta2 ** (t + 1.0))).sqrt() + eps))
    return torch.cat(parts)


@contextmanager
def _moved(model, params, delta):
    """The weights moved by the flat ``delta`` inside, restored bit for bit after; eval mode inside (no
    dropout: the objective is a function of the weights)."""
    import torch

    saved = [p.detach().clone() for p in params]
    training = model.training
    model.eval()
    try:
        with torch.no_grad():
            at = 0
            for p in params:
                p.add_(delta[at : at + p.numel()].view_as(p).to(p.dtype))
                at += p.numel()
        yield
    finally:
        with torch.no_grad():
            for p, old in zip(params, saved, strict=True):
                p.copy_(old)
        model.train(training)


class _Recorder:
    """The state of :func:`gradient_noise_callback`'s callback (kept apart from TRL's class)."""

    def __init__(self, objective=None):
        self.objective = objective
        # with an objective, per measured step: Φ, the gains Φ(θ + δ) − Φ(θ) of Adam's step (no momentum)
        # from a micro-batch's gradient (mean over them) and from the step's, and Φ after the real step
        self.phi: list[float] = []
        self.gain_small: list[float] = []
        self.gain_big: list[float] = []
        self.gain_levels: list[list[float]] = []  # per step, the gain at each of gain_sizes (generations)
        self.gain_sizes: list[int] = []
        self.phi_after: list[float] = []
        self.steps_gain: list[int] = []
        self._vecs: list = []
        self.small_sq: list[float] = []  # per recorded step: mean over micro-batches of ‖g_k‖²
        self.big_sq: list[float] = []  # per recorded step: |mean_k g_k|²
        self.steps: list[int] = []
        self.small_sq_adam: list[float] = []  # the same, weighted by Adam's preconditioner: Σ P g²
        self.big_sq_adam: list[float] = []
        self.steps_adam: list[int] = []
        self.clipped = 0
        self.nonfinite = 0  # steps whose gradient held NaN or inf
        self.skipped_multiprocess = 0
        self.problems: list[dict] = []  # what was left out or failed: step, kind, reason (warned once per kind)
        self._warned: set = set()
        self.micro = 0  # generations per micro-batch
        self.accumulation = 0
        self.shared_generation = False
        self._prev = None
        self._sq: list[float] = []
        self._w = None
        self._wsq: list[float] = []

    def begin(self):
        self._prev, self._sq, self._w, self._wsq, self._vecs = None, [], None, [], []

    def substep(self, model, optimizer=None):
        g = _flat_grad(model)
        if g is None:
            return
        if self._prev is None and optimizer is not None:
            self._w = adam_preconditioner(model, optimizer)  # fixed until the optimizer steps
        x = g if self._prev is None else g - self._prev
        self._sq.append(float(x.dot(x)))
        if self.objective is not None:
            self._vecs.append(x.clone())
        if self._w is not None and self._w.shape == x.shape:
            self._wsq.append(float((self._w * x).dot(x)))
        self._prev = g.clone()

    def problem(self, step, kind, reason):
        """Note a step left out (or a failure), warning once per kind; even a warnings filter set to
        "error" does not reach the training loop."""
        self.problems.append({"step": step, "kind": kind, "reason": reason})
        if kind not in self._warned:
            self._warned.add(kind)
            try:
                warnings.warn(
                    f"gsd: the noise-scale recorder left out step {step} ({reason}); training goes on; later "
                    "steps with this problem are listed in record.problems without a further warning",
                    RuntimeWarning,
                    stacklevel=3,
                )
            except Warning:
                pass

    def finish(self, args, state, model, optimizer=None):
        M = int(args.gradient_accumulation_steps)
        step = int(state.global_step) + 1
        if M < 2:
            self.problem(step, "no-accumulation", "gradient_accumulation_steps = 1: no micro-batch to compare")
            return
        g = _flat_grad(model)
        if g is None or len(self._sq) != M - 1:
            return
        if getattr(args, "world_size", 1) > 1:
            self.skipped_multiprocess += 1
            self.problem(step, "multiprocess", "several processes: only the last micro-batch is all-reduced")
            return
        total = float(g.dot(g))
        if not (math.isfinite(total) and all(math.isfinite(x) for x in self._sq)):
            self.nonfinite += 1
            self.problem(step, "not-finite", "the gradient holds NaN or inf")
            return
        clip = getattr(args, "max_grad_norm", 0) or 0
        if clip > 0 and np.sqrt(total) >= clip * (1 - _clip_tolerance(model, g.numel())):
            self.clipped += 1
            self.problem(step, "clipped", f"the gradient was clipped at max_grad_norm = {clip:g}")
            return
        x = g - self._prev
        sq = [*self._sq, float(x.dot(x))]
        self.small_sq.append(M * M * float(np.mean(sq)))  # micro-batch gradient = M × its share of the sum
        self.big_sq.append(total)
        self.steps.append(int(state.global_step) + 1)
        self.micro, self.accumulation = int(args.per_device_train_batch_size), M
        self.shared_generation = int(getattr(args, "steps_per_generation", 1) or 1) > 1
        w = self._w
        if w is not None and w.shape == g.shape and len(self._wsq) == M - 1:
            self.small_sq_adam.append(M * M * float(np.mean([*self._wsq, float((w * x).dot(x))])))
            self.big_sq_adam.append(float((w * g).dot(g)))
            self.steps_adam.append(self.steps[-1])
        if self.objective is not None and len(self._vecs) == M - 1:
            self.gains(model, optimizer, g, [M * v for v in [*self._vecs, x]])

    def gains(self, model, optimizer, g, micro):
        """Φ(θ + δ) − Φ(θ) for Adam's step (no momentum) from the step's gradient ``g`` and from each
        micro-batch gradient in ``micro`` (whose mean is ``g``); with M a power of two, also from the means
        of 2, 4, … consecutive micro-batches (``gain_levels``: per level, the mean over its batches)."""
        import torch

        params = [p for p in model.parameters() if p.requires_grad or p.grad is not None]
        M = len(micro)
        sizes = [1 << i for i in range(M.bit_length() - 1)] if M & (M - 1) == 0 else [1]
        batches = [[torch.stack(micro[i : i + j]).mean(0) for i in range(0, M, j)] for j in sizes] + [[g]]
        steps = [[adam_step(model, optimizer, v) for v in level] for level in batches]
        if any(d is None for level in steps for d in level):
            self.problem(self.steps[-1], "no-optimizer-group", "a parameter outside the optimizer's groups")
            return
        with _moved(model, params, torch.zeros_like(g)), torch.no_grad():
            phi = float(self.objective(model))
        levels = []
        for level in steps:
            moved = []
            for d in level:
                with _moved(model, params, d), torch.no_grad():
                    moved.append(float(self.objective(model)) - phi)
            levels.append(float(np.mean(moved)))
        self.phi.append(phi)
        self.gain_levels.append(levels)
        self.gain_sizes = [j * self.micro for j in sizes] + [M * self.micro]
        self.gain_big.append(levels[-1])
        self.gain_small.append(levels[0])
        self.steps_gain.append(self.steps[-1])

    def after_step(self, model):
        """Φ after the optimizer's real step, for the steps measured."""
        import torch

        if self.objective is not None and len(self.phi_after) < len(self.phi):
            with _moved(model, [], None), torch.no_grad():
                self.phi_after.append(float(self.objective(model)))

    def knee(self, level: float = 0.95):
        """The knee at the run's learning rate from the steps measured so far
        (:func:`gsd.core.noise_scale.knee_from_step_gains`); needs an objective."""
        from ..core.noise_scale import knee_from_gain_levels, knee_from_step_gains

        if self.objective is None or not self.gain_big:
            raise InputError("the knee needs gradient_noise_callback(objective=...) and >= 1 measured step")
        if len(self.gain_sizes) > 2:  # M = 4, 8, …: every level in one least-squares fit
            return knee_from_gain_levels(self.gain_levels, self.gain_sizes, level=level)
        b = self.micro * self.accumulation
        return knee_from_step_gains(self.gain_small, self.gain_big, self.micro, b, level=level)

    def estimate(self, level: float = 0.95, *, preconditioned: bool = False):
        """B_noise, ‖G‖², tr(Σ) with their interval from the steps recorded so far; with
        ``preconditioned`` the noise scale of Adam's preconditioned gradient, tr(PΣ)/GᵀPG."""
        from ..core.noise_scale import noise_scale_from_norms

        small, big = (self.small_sq_adam, self.big_sq_adam) if preconditioned else (self.small_sq, self.big_sq)
        if len(big) < 2:
            raise InputError(
                f"the noise scale needs >= 2 recorded steps with gradient_accumulation_steps >= 2"
                f"{' and an Adam-family optimizer past its first step' if preconditioned else ''}, got "
                f"{len(big)} (clipped steps left out: {self.clipped})"
            )
        return noise_scale_from_norms(small, big, self.micro, self.micro * self.accumulation, level=level)


def gradient_noise_callback(objective=None):
    """A ``transformers.TrainerCallback`` that records every step's micro-batch and accumulated gradient
    norms; ``callback.record`` holds them and ``callback.record.estimate()`` gives B_noise with its interval.
    With ``objective`` (``objective(model)``: a scalar torch tensor the run should raise) it also measures
    what each step would gain in it at the micro-batch's and the step's batch size, and
    ``callback.record.knee()`` gives the knee at the run's learning rate.

    Examples
    --------
    ``trainer.add_callback(cb := gradient_noise_callback())``, train with ``gradient_accumulation_steps``
    ≥ 2 (and ``steps_per_generation=1`` for independent micro-batches), then ``cb.record.estimate()``.
    """
    from transformers import TrainerCallback

    class GradientNoiseCallback(TrainerCallback):
        def __init__(self):
            self.record = _Recorder(objective)

        def on_step_begin(self, args, state, control, **kw):
            self._guarded(state, self.record.begin)

        def on_substep_end(self, args, state, control, model=None, optimizer=None, **kw):
            if model is not None:
                self._guarded(state, self.record.substep, model, optimizer)

        def on_pre_optimizer_step(self, args, state, control, model=None, optimizer=None, **kw):
            if model is not None:
                self._guarded(state, self.record.finish, args, state, model, optimizer)

        def on_step_end(self, args, state, control, model=None, **kw):
            if model is not None:
                self._guarded(state, self.record.after_step, model)

        def _guarded(self, state, hook, *a):
            try:
                hook(*a)
            except Exception as exc:  # noqa: BLE001 (a callback must never end the user's training)
                self.record.begin()  # the step's partial reads are dropped, the next step starts clean
                self.record.problem(getattr(state, "global_step", None), "error", f"{type(exc).__name__}: {exc}")

    return GradientNoiseCallback()
