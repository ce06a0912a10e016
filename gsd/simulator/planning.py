"""The budget planner's arithmetic, in numpy: one plan of per-prompt group sizes from counts.

Both engines plan through these functions: the torch engine's :class:`~.budget.BudgetPlanner`
keeps its counts on the run's device and hands them here when it plans; the numpy engine
(:mod:`.tabular`) keeps them in :class:`CountPlanner`.  Given the same counts, the same p and
the same step, both get the same plan, bit for bit (tested).  What the modes mean is in
:mod:`.budget`'s docstring.
"""

from __future__ import annotations

import math

import numpy as np

from ..core.forgetting import decay
from .population import sub_seed

# Random streams of the planner (beside population.py's 0, 1, 2): Thompson draws and GRESO's skips.
STREAM_THOMPSON, STREAM_GRESO = 3, 4

__all__ = ["CountPlanner", "plan_sizes", "greso_sizes", "planned_sizes", "uniform_plan"]


def planned_sizes(cfg) -> range:
    """Every group size a plan of ``cfg`` may use (the advantage table needs them all)."""
    if cfg.allocation == "greso":
        return range(cfg.group_size, cfg.group_size + 1)
    return range(cfg.g_min, cfg.g_max + 1, cfg.g_step)


def uniform_plan(B: int, budget: int, g_min: int, g_max: int, g_step: int) -> np.ndarray:
    """The largest grid G the budget affords for every prompt, or g_min for as many as it affords."""
    per = budget // B
    G = np.zeros(B, dtype=np.int64)
    if per >= g_min:
        G[:] = min(g_max, g_min + (per - g_min) // g_step * g_step)
    else:
        G[: budget // g_min] = g_min
    return G


def greso_sizes(cfg, step: int, quiet: np.ndarray) -> np.ndarray:
    """group_size for every prompt, 0 for one ``quiet`` (silent in its last greso_visits visits)
    unless explored (probability greso_explore, GRESO's own stream of the run's seed)."""
    rng = np.random.default_rng([sub_seed(cfg.seed, STREAM_GRESO), step])
    explore = rng.random(quiet.size) < cfg.greso_explore
    G = np.where(quiet & ~explore, 0, cfg.group_size).astype(np.int64)
    if not G.any():  # a step samples something: GRESO keeps its batch full by drawing more prompts
        G[:] = cfg.group_size
    return G


def mean_age(cfg, step: int) -> float:
    """Mean age (steps before ``step``) of the answers in the counts, by their weights."""
    span = min(step, cfg.logged_window) if cfg.logged_window else step
    if span <= 0:
        return 0.0
    a = np.arange(1, span + 1, dtype=np.float64)
    w = decay(a - 1, cfg.logged_half_life or None)  # 0: no discount
    return float(w @ a / w.sum())


def forecast(cfg, src, G_prev: np.ndarray, step: int):
    """The estimate moved to the middle of the plan's period along its expected updates."""
    from scipy.special import expit, logit

    from ..allocation import allocation_value
    from ..core.posterior import BetaPosterior

    ahead = (cfg.replan_every - 1) / 2.0
    if isinstance(src, BetaPosterior):
        ahead += mean_age(cfg, step)
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


def plan_sizes(
    cfg, step: int, p: np.ndarray | None, k: np.ndarray | None, n: np.ndarray | None, G_prev: np.ndarray | None
) -> tuple[np.ndarray, float, float]:
    """One plan of a value of :mod:`gsd.allocation` for the batch: (G, value_planned, grad_planned).

    ``p``: the batch's true p, float64 (read for ``allocation_source = 'oracle'`` only); ``k``,
    ``n``: its logged (possibly fractional) counts; ``G_prev``: the plan in force (None before
    the first), which the forecast moves along.  value_planned is the plan's Σ of the chosen
    value, grad_planned its Σ of the expected GRPO update in the run's ddof/eps (NaN for a
    uniform plan).
    """
    from ..allocation import HORIZON_VALUES, allocate_group_sizes, allocation_value
    from ..core.posterior import BetaPosterior, fit_beta_prior

    B = (p if p is not None else k).shape[0]
    budget = cfg.budget or B * cfg.group_size
    conv = {"ddof": cfg.ddof, "eps": cfg.eps}
    if cfg.allocation_source == "oracle":
        src = p
    elif not (n > 0).any():
        src = None
    else:
        # Empirical-Bayes prior from the whole counts, rounded (discounted counts are fractional;
        # where every one rounds to 0 the prior is uniform), then the posterior of each prompt's
        # own, possibly fractional, counts.
        kr, nr = np.rint(k), np.rint(n)
        usable = nr > 0
        a0, b0 = (
            fit_beta_prior(np.minimum(kr, nr)[usable].astype(np.int64), nr[usable].astype(np.int64))
            if usable.any()
            else (1.0, 1.0)
        )
        src = BetaPosterior(a0 + k, b0 + np.maximum(n - k, 0.0), (a0, b0))
    if src is None:
        return uniform_plan(B, budget, cfg.g_min, cfg.g_max, cfg.g_step), math.nan, math.nan
    if cfg.allocation_forecast and G_prev is not None:
        src = forecast(cfg, src, G_prev, step)
    plan_src = src
    if cfg.allocation_explore == "thompson" and isinstance(src, BetaPosterior):
        rng = np.random.default_rng([sub_seed(cfg.seed, STREAM_THOMPSON), step])
        plan_src = rng.beta(src.a, src.b)
    look = {}
    if cfg.allocation in HORIZON_VALUES:
        left = cfg.steps - step
        look = {"lr": cfg.allocation_lr or cfg.lr, "horizon": int(min(cfg.horizon or left, left))}
    plan = allocate_group_sizes(
        plan_src, budget, value=cfg.allocation, g_min=cfg.g_min, g_max=cfg.g_max, step=cfg.g_step, **conv, **look
    )
    G = plan.group_size
    if not G.any():
        # Every prompt is worth 0 to the value (e.g. every draw or estimate at p = 1 to
        # rounding): nothing to rank, so the step samples uniformly rather than not at all.
        G = uniform_plan(B, budget, cfg.g_min, cfg.g_max, cfg.g_step)
    # The run's own std convention: its GRPO update is E[σ̂²/(σ̂_c + eps)], not E[σ̂].
    return G, plan.total, float(allocation_value(src, G, "update", **conv).sum())


def age_counts(cfg, step: int, k_cum, n_cum, ring):
    """Age the counts before a step's groups are added, in place (numpy arrays or torch tensors):
    discount them by the half-life, and with a window take out the counts of the step that
    leaves it; returns that ring slot, emptied, for the step's counts (None without a window)."""
    if cfg.logged_half_life:
        factor = float(decay(1, cfg.logged_half_life))
        k_cum *= factor
        n_cum *= factor
    if ring is None:
        return None
    slot = ring[step % ring.shape[0]]
    k_cum -= slot[0]
    n_cum -= slot[1]
    slot[...] = 0
    return slot


class CountPlanner:
    """The numpy engine's planner of one run: its counts as numpy arrays, plans through
    :func:`plan_sizes` / :func:`greso_sizes` (the torch engine's :class:`~.budget.BudgetPlanner`
    with host arrays)."""

    def __init__(self, cfg, n_prompts: int):
        self.cfg = cfg
        self.k_cum = np.zeros(n_prompts)
        self.n_cum = np.zeros(n_prompts)
        W = cfg.logged_window
        self.ring = np.zeros((W, 2, n_prompts)) if W else None
        self.streak = np.zeros(n_prompts, dtype=np.int64)
        self.G: np.ndarray | None = None
        self.value_planned = self.grad_planned = math.nan

    def plan(self, step: int, idx: np.ndarray | None, p: np.ndarray) -> np.ndarray:
        """The batch's group sizes (a new plan every ``replan_every`` steps); ``p``: its float64 p."""
        cfg = self.cfg
        if self.G is None or step % cfg.replan_every == 0:
            at = slice(None) if idx is None else idx
            if cfg.allocation == "greso":
                self.G = greso_sizes(cfg, step, self.streak[at] >= cfg.greso_visits)
                self.value_planned = self.grad_planned = math.nan
            else:
                self.G, self.value_planned, self.grad_planned = plan_sizes(
                    cfg, step, p, self.k_cum[at], self.n_cum[at], self.G
                )
        return self.G

    def observe(
        self, step: int, idx: np.ndarray | None, k: np.ndarray, G: np.ndarray, silent_first: np.ndarray
    ) -> None:
        """Add the step's kept groups (k right of G) to the counts; with a window, drop the counts
        of the step that leaves it (the torch planner's order of operations, so the same bits)."""
        at = slice(None) if idx is None else idx
        streak = self.streak[at]
        self.streak[at] = np.where(G > 0, np.where(silent_first, streak + 1, 0), streak)
        slot = age_counts(self.cfg, step, self.k_cum, self.n_cum, self.ring)
        if slot is not None:
            slot[0, at] = k  # the batch's prompts are distinct: an assignment is the torch planner's index_add
            slot[1, at] = G
            self.k_cum += slot[0]
            self.n_cum += slot[1]
        else:
            self.k_cum[at] += k
            self.n_cum[at] += G

    def state(self) -> dict:
        """The planner's arrays for a checkpoint (names prefixed ``planner_``)."""
        out = {
            "planner_k_cum": self.k_cum,
            "planner_n_cum": self.n_cum,
            "planner_streak": self.streak,
            "planner_planned": np.array([self.value_planned, self.grad_planned]),
        }
        if self.ring is not None:
            out["planner_ring"] = self.ring
        if self.G is not None:
            out["planner_G"] = self.G
        return out

    def load(self, ckpt: dict) -> None:
        self.k_cum = np.array(ckpt["planner_k_cum"], dtype=np.float64)
        self.n_cum = np.array(ckpt["planner_n_cum"], dtype=np.float64)
        self.streak = np.array(ckpt["planner_streak"], dtype=np.int64)
        if self.ring is not None:
            self.ring = np.array(ckpt["planner_ring"], dtype=np.float64)
        self.G = np.array(ckpt["planner_G"], dtype=np.int64) if "planner_G" in ckpt else None
        self.value_planned, self.grad_planned = (float(x) for x in ckpt["planner_planned"])
