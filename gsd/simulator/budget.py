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

Counts go stale as p moves.  ``logged_half_life = h`` discounts them instead of cutting them off:
an answer drawn a steps ago weighs 2^(−a/h), and the posterior takes the weighted (fractional)
counts.  ``allocation_forecast`` moves every prompt's estimate forward to the steps the plan will
serve: its logit by lr × (the expected update m(p̂, G) of its current group size) × the steps
between the counts' mean age and the middle of the plan's period (a tabular SGD policy moves
exactly so in expectation; for a shared network it is a proxy), keeping the posterior's
concentration.  ``allocation_explore = "thompson"`` plans on one draw of p from each posterior
(a fresh draw at every plan: wide posteriors get explored).  The ``horizon`` values take the
run's lr (or ``allocation_lr``: for a shared network or Adam the per-prompt logit rate is not
the optimizer's lr) and ``horizon`` steps (0: the steps left).

``allocation = "greso"`` is not a value but a pre-rollout skip in the manner of GRESO (Sun et al.,
2025): every prompt gets ``group_size`` answers unless it was silent in each of its last
``greso_visits`` visits, in which case it is skipped except with probability ``greso_explore``.
Skipping saves generations, so at equal generations the run takes more steps.

The counts live on the run's device and are updated after each step's sampling; the host sees
them only when a plan is made, by :func:`.planning.plan_sizes` (the numpy engine's planner
calls it too).  See :ref:`theory-allocation`.
"""

from __future__ import annotations

import math

from ..extras import require_torch

torch = require_torch("budget allocation inside a run (gsd.simulator.budget)")

from .planning import STREAM_GRESO, STREAM_THOMPSON, age_counts, greso_sizes, plan_sizes, planned_sizes  # noqa: F401 (streams: re-exported)
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
        # greso: consecutive silent visits per prompt
        self.streak = torch.zeros(n_prompts, dtype=torch.int64, device=device)
        self.G: torch.Tensor | None = None  # the current plan for the batch (B,) int64
        self.value_planned = math.nan  # Σ of the plan's expected values (the chosen value)
        self.grad_planned = math.nan  # Σ of the plan's expected GRPO update, in the run's ddof/eps

    @property
    def sizes(self) -> range:
        """Every group size a plan may use (the advantage table needs them all)."""
        return planned_sizes(self.cfg)

    def plan(self, step: int, batch: Batch) -> Batch:
        """The batch with the plan's group sizes (a new plan every ``replan_every`` steps)."""
        if self.G is None or step % self.cfg.replan_every == 0:
            self._replan(step, batch)
        G = self.G
        return Batch(idx=batch.idx, p=batch.p, G=G, g_max=max(1, int(G.max())), uniform=False)

    def observe(self, step: int, batch: Batch, groups: Groups) -> None:
        """Add the step's kept groups to the per-prompt counts (k right of G); with a window,
        drop the counts of the step that leaves it."""
        k, G = groups.k.to(torch.float64), groups.G.to(torch.float64)
        visited = groups.G > 0
        idx = slice(None) if batch.idx is None else batch.idx
        streak = self.streak[idx]
        self.streak[idx] = torch.where(visited, torch.where(groups.silent_first, streak + 1, 0), streak)
        slot = age_counts(self.cfg, step, self.k_cum, self.n_cum, self.ring)
        if slot is not None:
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

    def _replan(self, step: int, batch: Batch) -> None:
        cfg = self.cfg
        idx = slice(None) if batch.idx is None else batch.idx
        if cfg.allocation == "greso":
            G = greso_sizes(cfg, step, (self.streak[idx] >= cfg.greso_visits).cpu().numpy())
            self.value_planned = self.grad_planned = math.nan
        else:
            p = batch.p.detach().to(torch.float64).cpu().numpy() if cfg.allocation_source == "oracle" else None
            k, n = torch.stack([self.k_cum[idx], self.n_cum[idx]]).cpu().numpy()
            G, self.value_planned, self.grad_planned = plan_sizes(
                cfg, step, p, k, n, None if self.G is None else self.G.cpu().numpy()
            )
        self.G = torch.as_tensor(G, dtype=torch.int64, device=batch.p.device)

    def state_dict(self) -> dict:
        return {
            "k_cum": self.k_cum.cpu(),
            "n_cum": self.n_cum.cpu(),
            "ring": None if self.ring is None else self.ring.cpu(),
            "streak": self.streak.cpu(),
            "G": None if self.G is None else self.G.cpu(),
            "planned": torch.tensor([self.value_planned, self.grad_planned], dtype=torch.float64),
        }

    def load_state_dict(self, state: dict) -> None:
        dev = self.k_cum.device
        self.k_cum, self.n_cum = state["k_cum"].to(dev), state["n_cum"].to(dev)
        self.ring = None if state["ring"] is None else state["ring"].to(dev)
        self.streak = state["streak"].to(dev)
        self.G = None if state["G"] is None else state["G"].to(dev)
        self.value_planned, self.grad_planned = (float(x) for x in state["planned"])
