"""The two optimizers a run can use, SGD (with momentum) and Adam, as torch.optim applies them.

Why not ``torch.optim`` itself: constructing any ``torch.optim.Optimizer`` imports
``torch._dynamo`` (its ``add_param_group`` is wrapped to disable the compiler), which costs as
much as importing torch — 1.7 s of a 4 s campaign process measured on 2 busy cores — for a
tabular run that needs ``θ ← θ − lr·g``.  These classes apply torch.optim's single-tensor
updates with its default settings, operation for operation, so the parameters are bit-identical
to torch.optim.SGD / torch.optim.Adam on CPU (the tests step both side by side).

* :class:`SGD`: b ← μ·b + g (b ← g on the first step), θ ← θ − lr·b; with μ = 0, θ ← θ − lr·g.
* :class:`Adam`: m ← m + (1−β₁)(g − m), v ← β₂·v + (1−β₂)·g², θ ← θ − lr/(1−β₁ᵗ) ·
  m / (sqrt(v)/sqrt(1−β₂ᵗ) + ε), with β = (0.9, 0.999), ε = 1e-8.
"""

from __future__ import annotations

from ..extras import require_torch

torch = require_torch("the torch engine (gsd.simulator.optim)")

__all__ = ["SGD", "Adam", "make_optimizer"]


class _Optimizer:
    def __init__(self, params, lr: float):
        self.params = [q for q in params if q.requires_grad]
        self.lr = lr

    def zero_grad(self) -> None:
        """Drop the gradients (as ``zero_grad(set_to_none=True)``)."""
        for q in self.params:
            q.grad = None


class SGD(_Optimizer):
    """torch.optim.SGD(params, lr, momentum) without dampening, Nesterov or weight decay."""

    def __init__(self, params, lr: float, momentum: float = 0.0):
        super().__init__(params, lr)
        self.momentum = momentum
        self.buffers: list[torch.Tensor | None] = [None] * len(self.params)

    @torch.no_grad()
    def step(self) -> None:
        for i, q in enumerate(self.params):
            if q.grad is None:
                continue
            g = q.grad
            if self.momentum:
                if self.buffers[i] is None:
                    self.buffers[i] = g.detach().clone()
                else:
                    self.buffers[i].mul_(self.momentum).add_(g)
                g = self.buffers[i]
            q.add_(g, alpha=-self.lr)

    def state_dict(self) -> dict:
        return {"buffers": [b for b in self.buffers]}

    def load_state_dict(self, state: dict) -> None:
        self.buffers = [None if b is None else b.to(q.device) for b, q in zip(state["buffers"], self.params)]


class Adam(_Optimizer):
    """torch.optim.Adam(params, lr) with its defaults: betas (0.9, 0.999), eps 1e-8."""

    betas, eps = (0.9, 0.999), 1e-8

    def __init__(self, params, lr: float):
        super().__init__(params, lr)
        self.steps = [0] * len(self.params)
        self.exp_avg = [torch.zeros_like(q) for q in self.params]
        self.exp_avg_sq = [torch.zeros_like(q) for q in self.params]

    @torch.no_grad()
    def step(self) -> None:
        beta1, beta2 = self.betas
        for i, q in enumerate(self.params):
            if q.grad is None:
                continue
            g = q.grad
            self.steps[i] += 1
            t = float(self.steps[i])
            self.exp_avg[i].lerp_(g, 1 - beta1)
            self.exp_avg_sq[i].mul_(beta2).addcmul_(g, g, value=1 - beta2)
            step_size = self.lr / (1 - beta1**t)
            denom = (self.exp_avg_sq[i].sqrt() / (1 - beta2**t) ** 0.5).add_(
                self.eps
            )  # ** 0.5, as torch (not math.sqrt)
            q.addcdiv_(self.exp_avg[i], denom, value=-step_size)

    def state_dict(self) -> dict:
        return {"steps": list(self.steps), "exp_avg": list(self.exp_avg), "exp_avg_sq": list(self.exp_avg_sq)}

    def load_state_dict(self, state: dict) -> None:
        self.steps = [int(s) for s in state["steps"]]
        self.exp_avg = [m.to(q.device) for m, q in zip(state["exp_avg"], self.params)]
        self.exp_avg_sq = [v.to(q.device) for v, q in zip(state["exp_avg_sq"], self.params)]


def make_optimizer(cfg, params):
    """The config's optimizer (``optimizer``, ``lr``, ``momentum``) over ``params``."""
    if cfg.optimizer == "sgd":
        return SGD(params, lr=cfg.lr, momentum=cfg.momentum)
    return Adam(params, lr=cfg.lr)
