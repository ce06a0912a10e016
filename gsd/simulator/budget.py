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
them only when a plan is made.  See :ref:`theory-allocation`.
"""

from __future__ import annotations

import math

import numpy as np
from .._extras import require_torch

torch = require_torch("budget allocation inside a run (gsd.simulator.budget)")

from .population import sub_seed
from .sampling import Batch, Groups

# Random streams of the planner (beside population.py's 0, 1, 2): Thompson draws and GRESO's skips.
STREAM_THOMPSON, STREAM_GRESO = 3, 4

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
        if self.cfg.allocation == "greso":
            return range(self.cfg.group_size, self.cfg.group_size + 1)
        return range(self.cfg.g_min, self.cfg.g_max + 1, self.cfg.g_step)

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
        if self.cfg.logged_half_life:
            decay = 2.0 ** (-1.0 / self.cfg.logged_half_life)
            self.k_cum *= decay
            self.n_cum *= decay
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

    def _replan(self, step: int, batch: Batch) -> None:
        from ..allocation import HORIZON_VALUES, allocate_group_sizes, allocation_value
        from ..posterior import BetaPosterior, fit_beta_prior

        cfg = self.cfg
        B = batch.p.shape[0]
        budget = cfg.budget or B * cfg.group_size
        idx = slice(None) if batch.idx is None else batch.idx
        if cfg.allocation == "greso":
            self.G = self._greso_plan(step, idx, batch)
            self.value_planned = self.grad_planned = math.nan
            return
        conv = {"ddof": cfg.ddof, "eps": cfg.eps}
        if cfg.allocation_source == "oracle":
            src = batch.p.detach().to(torch.float64).cpu().numpy()
        else:
            k, n = torch.stack([self.k_cum[idx], self.n_cum[idx]]).cpu().numpy()
            if not (n > 0).any():
                src = None
            else:
                # Empirical-Bayes prior from the whole counts, rounded (discounted counts are
                # fractional; where every one rounds to 0 the prior is uniform), then the posterior
                # of each prompt's own, possibly fractional, counts.
                kr, nr = np.rint(k), np.rint(n)
                usable = nr > 0
                a0, b0 = (fit_beta_prior(np.minimum(kr, nr)[usable].astype(np.int64), nr[usable].astype(np.int64))
                          if usable.any() else (1.0, 1.0))
                src = BetaPosterior(a0 + k, b0 + np.maximum(n - k, 0.0), (a0, b0))
        if src is None:
            G = _uniform_plan(B, budget, cfg.g_min, cfg.g_max, cfg.g_step)
            self.value_planned = self.grad_planned = math.nan
        else:
            if cfg.allocation_forecast and self.G is not None:
                src = self._forecast(src, self.G.cpu().numpy(), step)
            plan_src = src
            if cfg.allocation_explore == "thompson" and isinstance(src, BetaPosterior):
                rng = np.random.default_rng([sub_seed(cfg.seed, STREAM_THOMPSON), step])
                plan_src = rng.beta(src.a, src.b)
            look = {}
            if cfg.allocation in HORIZON_VALUES:
                left = cfg.steps - step
                look = {"lr": cfg.allocation_lr or cfg.lr, "horizon": int(min(cfg.horizon or left, left))}
            plan = allocate_group_sizes(plan_src, budget, value=cfg.allocation, g_min=cfg.g_min, g_max=cfg.g_max,
                                        step=cfg.g_step, **conv, **look)
            G = plan.group_size
            if not G.any():
                # Every prompt is worth 0 to the value (e.g. every draw or estimate at p = 1 to
                # rounding): nothing to rank, so the step samples uniformly rather than not at all.
                G = _uniform_plan(B, budget, cfg.g_min, cfg.g_max, cfg.g_step)
            self.value_planned = plan.total
            # The run's own std convention: its GRPO update is E[σ̂²/(σ̂_c + eps)], not E[σ̂].
            self.grad_planned = float(allocation_value(src, G, "update", **conv).sum())
        self.G = torch.as_tensor(G, dtype=torch.int64, device=batch.p.device)

    def _mean_age(self, step: int) -> float:
        """Mean age (steps before ``step``) of the answers in the counts, by their weights."""
        cfg = self.cfg
        span = min(step, cfg.logged_window) if cfg.logged_window else step
        if span <= 0:
            return 0.0
        a = np.arange(1, span + 1, dtype=np.float64)
        w = 2.0 ** (-(a - 1) / cfg.logged_half_life) if cfg.logged_half_life else np.ones_like(a)
        return float(w @ a / w.sum())

    def _forecast(self, src, G_prev: np.ndarray, step: int):
        """The estimate moved to the middle of the plan's period along its expected updates."""
        from scipy.special import expit, logit

        from ..allocation import allocation_value
        from ..posterior import BetaPosterior

        cfg = self.cfg
        ahead = (cfg.replan_every - 1) / 2.0
        if isinstance(src, BetaPosterior):
            ahead += self._mean_age(step)
            p = src.mean
        else:
            p = src
        if ahead <= 0:
            return src
        kind = "dr_grpo" if cfg.method == "dr_grpo" else "update"
        m = allocation_value(p, G_prev, kind, ddof=cfg.ddof, eps=cfg.eps)
        pf = expit(logit(np.clip(p, 1e-12, 1 - 1e-12)) + (cfg.allocation_lr or cfg.lr) * ahead * m)
        if not isinstance(src, BetaPosterior):
            return pf
        s = src.a + src.b
        return BetaPosterior(np.maximum(pf * s, 1e-12), np.maximum((1.0 - pf) * s, 1e-12), src.prior)

    def _greso_plan(self, step: int, idx, batch: Batch) -> np.ndarray:
        """group_size for every prompt, 0 for one silent in its last greso_visits visits (unless explored)."""
        cfg = self.cfg
        quiet = (self.streak[idx] >= cfg.greso_visits).cpu().numpy()
        rng = np.random.default_rng([sub_seed(cfg.seed, STREAM_GRESO), step])
        explore = rng.random(quiet.size) < cfg.greso_explore
        G = np.where(quiet & ~explore, 0, cfg.group_size).astype(np.int64)
        if not G.any():  # a step samples something: GRESO keeps its batch full by drawing more prompts
            G[:] = cfg.group_size
        return torch.as_tensor(G, dtype=torch.int64, device=batch.p.device)

    def state_dict(self) -> dict:
        return {"k_cum": self.k_cum.cpu(), "n_cum": self.n_cum.cpu(), "ring": None if self.ring is None else self.ring.cpu(),
                "streak": self.streak.cpu(),
                "G": None if self.G is None else self.G.cpu(),
                "planned": torch.tensor([self.value_planned, self.grad_planned], dtype=torch.float64)}

    def load_state_dict(self, state: dict) -> None:
        dev = self.k_cum.device
        self.k_cum, self.n_cum = state["k_cum"].to(dev), state["n_cum"].to(dev)
        self.ring = None if state["ring"] is None else state["ring"].to(dev)
        self.streak = state["streak"].to(dev)
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
