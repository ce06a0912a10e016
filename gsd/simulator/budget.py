"""Per-prompt group sizes from a rollout budget: the allocator's stage of the training step.

With ``allocation`` set to one of the values of :mod:`gsd.allocation` (not ``"fixed"``), every
``replan_every`` steps the run hands its budget (``budget`` rollouts per step) to
:func:`gsd.allocate_group_sizes` and the batch's constant group size is replaced by the plan
(0 = the prompt is skipped this step).  What the allocator knows about each prompt is set by
``allocation_source``:

* ``logged`` — the honest mode: the run's own counts so far (right answers k and answers n
  drawn for the prompt over the past steps, or over the last ``logged_window`` steps only, as
  the policy moves and old answers go stale), through the posterior of
  :func:`gsd.posterior_from_counts` with an empirical-Bayes prior fitted to the run's counts.
  Before any answer is drawn the plan is uniform (the largest grid G the budget affords);
* ``oracle`` — the true p of the policy at the planning step (an upper bound no trainer has).

The counts live on the run's device and are updated after each step's sampling; the host sees
them only when a plan is made.  See :ref:`theory-allocation`.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .sampling import Batch, Groups

__all__ = ["BudgetPlanner"]


class BudgetPlanner:
    """Plans G per prompt for the batch and keeps the counts a ``logged`` plan needs."""

    def __init__(self, cfg, n_prompts: int, device: torch.device):
        self.cfg = cfg
        self.k_cum = torch.zeros(n_prompts, dtype=torch.float64, device=device)
        self.n_cum = torch.zeros(n_prompts, dtype=torch.float64, device=device)
        # logged_window > 0: the counts of the last W steps only, kept in a ring of W slots.
        W = cfg.logged_window
        self.ring = torch.zeros((W, 2, n_prompts), dtype=torch.float64, device=device) if W else None
        self.G: torch.Tensor | None = None  # the current plan for the batch (B,) int64
        self.value_planned = math.nan  # Σ of the plan's expected values (the chosen value)
        self.grad_planned = math.nan  # Σ of the plan's expected GRPO update, in the run's ddof/eps

    @property
    def sizes(self) -> range:
        """Every group size a plan may use (the advantage table needs them all)."""
        return range(self.cfg.g_min, self.cfg.g_max + 1, self.cfg.g_step)

    def plan(self, step: int, batch: Batch) -> Batch:
        """The batch with the plan's group sizes (a new plan every ``replan_every`` steps)."""
        if self.G is None or step % self.cfg.replan_every == 0:
            self._replan(batch)
        G = self.G
        return Batch(idx=batch.idx, p=batch.p, G=G, g_max=max(1, int(G.max())), uniform=False)

    def observe(self, step: int, batch: Batch, groups: Groups) -> None:
        """Add the step's kept groups to the per-prompt counts (k right of G); with a window,
        drop the counts of the step that leaves it."""
        k, G = groups.k.to(torch.float64), groups.G.to(torch.float64)
        if self.ring is not None:
            slot = self.ring[step % self.ring.shape[0]]
            self.k_cum -= slot[0]
            self.n_cum -= slot[1]
            slot.zero_()
            target = slot
        else:
            target = torch.stack([self.k_cum, self.n_cum])
        if batch.idx is None:
            target[0] += k
            target[1] += G
        else:
            target[0].index_add_(0, batch.idx, k)
            target[1].index_add_(0, batch.idx, G)
        if self.ring is not None:
            self.k_cum += target[0]
            self.n_cum += target[1]
        else:
            self.k_cum, self.n_cum = target[0], target[1]

    def _replan(self, batch: Batch) -> None:
        from ..allocation import allocate_group_sizes, allocation_value
        from ..posterior import posterior_from_counts

        cfg = self.cfg
        B = batch.p.shape[0]
        budget = cfg.budget or B * cfg.group_size
        if cfg.allocation_source == "oracle":
            src = batch.p.detach().to(torch.float64).cpu().numpy()
        else:
            idx = slice(None) if batch.idx is None else batch.idx
            both = torch.stack([self.k_cum[idx], self.n_cum[idx]]).cpu().numpy().astype(np.int64)
            k, n = both
            src = posterior_from_counts(k, n) if (n > 0).any() else None
        if src is None:
            G = _uniform_plan(B, budget, cfg.g_min, cfg.g_max, cfg.g_step)
            self.value_planned = self.grad_planned = math.nan
        else:
            # The run's own std convention: its GRPO update is E[σ̂²/(σ̂_c + eps)], not E[σ̂].
            conv = {"ddof": cfg.ddof, "eps": cfg.eps}
            plan = allocate_group_sizes(src, budget, value=cfg.allocation, g_min=cfg.g_min, g_max=cfg.g_max,
                                        step=cfg.g_step, **conv)
            G = plan.group_size
            self.value_planned = plan.total
            self.grad_planned = float(allocation_value(src, G, "update", **conv).sum())
        self.G = torch.as_tensor(G, dtype=torch.int64, device=batch.p.device)

    def state_dict(self) -> dict:
        return {"k_cum": self.k_cum.cpu(), "n_cum": self.n_cum.cpu(), "ring": None if self.ring is None else self.ring.cpu(),
                "G": None if self.G is None else self.G.cpu(),
                "planned": torch.tensor([self.value_planned, self.grad_planned], dtype=torch.float64)}

    def load_state_dict(self, state: dict) -> None:
        dev = self.k_cum.device
        self.k_cum, self.n_cum = state["k_cum"].to(dev), state["n_cum"].to(dev)
        self.ring = None if state["ring"] is None else state["ring"].to(dev)
        self.G = None if state["G"] is None else state["G"].to(dev)
        self.value_planned, self.grad_planned = (float(x) for x in state["planned"])


def _uniform_plan(B: int, budget: int, g_min: int, g_max: int, g_step: int) -> np.ndarray:
    """The largest grid G the budget affords for every prompt, or g_min for as many as it affords."""
    per = budget // B
    G = np.zeros(B, dtype=np.int64)
    if per >= g_min:
        G[:] = min(g_max, g_min + (per - g_min) // g_step * g_step)
    else:
        G[: budget // g_min] = g_min
    return G
