"""Group sizes per prompt that maximise the total value of a rollout budget, Σ_i V(p_i, G_i) subject
to Σ_i G_i ≤ B, with a certificate of optimality (:func:`allocate_group_sizes`).

Each G_i is 0 (the prompt is skipped this step) or on the grid g_min, g_min + s, …, g_max.  The
allocator works on the table of values of each distinct prompt (distinct p, or distinct
posterior) over the grid (:func:`gsd.allocation.values.value_table`), takes the upper concave
envelope of every row in (rollouts, value) space (:mod:`gsd.allocation.envelope`) and hands out
envelope segments by decreasing value per rollout (the Lagrangian solution), then spends the
remainder greedily.  It is exactly optimal when every segment costs the same number of rollouts
(a separable concave problem with unit costs, where the greedy is optimal); otherwise a small
plan is solved again exactly by dynamic programming, and a large one reports an upper bound on
its distance to the optimum.  See :ref:`theory-allocation`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.binomial import unique_pairs
from ..errors import InputError
from ..validation import as_ddof, as_eps, as_group_size, shown
from .envelope import envelope_mask
from .values import as_source, check_table_cost, value_spec, value_table

__all__ = ["Allocation", "allocate_group_sizes", "concavity_violations"]

# Plans the greedy cannot certify are solved exactly by dynamic programming up to this work
# (prompts × grid points × budget): a fraction of a second.
MAX_DP = 20_000_000


@dataclass(frozen=True)
class Allocation:
    """A plan: group sizes per prompt and what they buy.

    Attributes
    ----------
    group_size : ndarray of int64
        G per prompt (input shape); 0 = skipped this step.
    value : ndarray of float64
        Expected value of each prompt at its G.
    total : float
        Σ value, the objective.
    budget, spent : int
        Rollouts available and used (spent ≤ budget).
    multiplier : float
        The value per rollout of the last segment handed out (the Lagrange multiplier λ).
    exact : bool
        True when the plan is certified optimal over the grid: every envelope segment costs the
        same number of rollouts (greedy on equal-cost concave increments is optimal), or the
        Lagrangian bound is met.
    gap_bound : float
        Upper bound on (optimum − total); 0 when ``exact``.
    envelope : bool
        True when some prompt's values were not concave on the grid and the plan used their
        upper concave envelope (grid points below it are never chosen).
    envelope_sizes : ndarray of int64
        The grid G that lie below some prompt's envelope (never chosen for that prompt).
    value_name : str
    grid : tuple
        (g_min, g_max, step, skip).
    ddof, eps : int, float
        The std convention of the ``update`` and ``progress`` values.
    """

    group_size: np.ndarray
    value: np.ndarray
    total: float
    budget: int
    spent: int
    multiplier: float
    exact: bool
    gap_bound: float
    envelope: bool
    envelope_sizes: np.ndarray
    value_name: str
    grid: tuple = field(default=())
    ddof: int = 0
    eps: float = 0.0

    def summary(self) -> dict:
        """The scalars, for reports and ``--json``."""
        g = self.group_size
        return {
            "value": self.value_name,
            "budget": self.budget,
            "spent": self.spent,
            "total_value": self.total,
            "prompts": int(g.size),
            "skipped": int((g == 0).sum()),
            "mean_group_size_served": float(g[g > 0].mean()) if (g > 0).any() else 0.0,
            "multiplier": self.multiplier,
            "exact": self.exact,
            "gap_bound": self.gap_bound,
            "envelope": self.envelope,
            "envelope_sizes": self.envelope_sizes.tolist(),
            "g_min": self.grid[0],
            "g_max": self.grid[1],
            "step": self.grid[2],
            "skip": self.grid[3],
            "ddof": self.ddof,
            "eps": self.eps,
        }


def grid_args(g_min, g_max, step):
    """(g_min, g_max, step) checked: integers ≥ 1, g_min ≤ g_max, and step dividing g_max − g_min."""
    g_min = int(as_group_size(g_min, "g_min", minimum=1))
    g_max = int(as_group_size(g_max, "g_max", minimum=1))
    step = int(as_group_size(step, "step", minimum=1))
    if g_min > g_max:
        raise InputError(f"g_min must be <= g_max, got g_min={g_min} and g_max={g_max}")
    if (g_max - g_min) % step:
        raise InputError(f"step must divide g_max - g_min, got step={step} with g_min={g_min}, g_max={g_max}")
    return g_min, g_max, step


class BudgetProblem:
    """The distinct prompts, their value table on the grid, its envelope and sorted segments."""

    def __init__(self, p_or_posterior, value, g_min, g_max, step, skip, ddof, eps, lr=None, horizon=None, reuse=None):
        """``reuse``: a BudgetProblem of the same prompts, value, convention and grid (its skip may
        differ): its distinct prompts and value table are taken, not computed again."""
        self.spec = value_spec(value, ddof, eps, lr, horizon)
        self.value_name = value
        self.ddof, self.eps = as_ddof(ddof), float(as_eps(eps))
        self.g_min, self.g_max, self.step = grid_args(g_min, g_max, step)
        self.skip = skip_arg(skip)
        if reuse is not None:
            self.shape, self.inverse, self.counts, table = reuse.shape, reuse.inverse, reuse.counts, reuse.table
            self.n, self.n_types = reuse.n, reuse.n_types
            self._tabulate(table)
            return
        kind, src = as_source(p_or_posterior)
        if kind == "point":
            flat = src.ravel()
            self.shape = src.shape
            uniq, inverse, counts = np.unique(flat, return_inverse=True, return_counts=True)
            types = uniq
        else:
            a, b = (x.ravel() for x in src)
            self.shape = src[0].shape
            first, inverse = unique_pairs(a, b)
            order = np.argsort(inverse[first])
            first = first[order]
            counts = np.bincount(inverse, minlength=first.size)
            types = (a[first], b[first])
        self.inverse, self.counts = inverse.ravel(), counts.astype(np.int64)
        self.n = self.inverse.size
        self.n_types = self.counts.size
        check_table_cost(kind, self.n_types, self.g_min, self.g_max, self.step, self.spec[2])
        grid = np.arange(self.g_min, self.g_max + 1, self.step, dtype=np.int64)
        self._tabulate(value_table(kind, types, grid, self.spec))

    def _tabulate(self, table):
        """The envelope and sorted segments of the value table (distinct prompts × grid)."""
        self.table = table
        grid = np.arange(self.g_min, self.g_max + 1, self.step, dtype=np.int64)
        if self.skip:
            self.x = np.concatenate([[0], grid]).astype(np.float64)
            self.table_full = np.concatenate([np.zeros((self.n_types, 1)), table], axis=1)
        else:
            self.x = grid.astype(np.float64)
            self.table_full = table
        self.active = envelope_mask(self.x, self.table_full)
        self.envelope = not self.active.all()
        self.envelope_sizes = np.unique(np.broadcast_to(self.x, self.active.shape)[~self.active]).astype(np.int64)
        # Envelope segments, flat in row-major order (row, then increasing G).
        r, c = np.nonzero(self.active)
        same = r[1:] == r[:-1]
        self.seg_row, self.seg_start, self.seg_end = r[:-1][same], c[:-1][same], c[1:][same]
        self.seg_cost = (self.x[self.seg_end] - self.x[self.seg_start]).astype(np.int64)
        self.seg_gain = self.table_full[self.seg_row, self.seg_end] - self.table_full[self.seg_row, self.seg_start]
        slope = self.seg_gain / self.seg_cost
        useful = slope > 0  # concave rows: once a slope is ≤ 0, every later one is too
        self.seg_row, self.seg_start, self.seg_end = self.seg_row[useful], self.seg_start[useful], self.seg_end[useful]
        self.seg_cost, self.seg_gain, slope = self.seg_cost[useful], self.seg_gain[useful], slope[useful]
        # Slopes may rise along a row within the rounding tolerance of the envelope; their running
        # minimum keeps every row's segments in G order after the sort (a prompt takes a prefix).
        rank = np.arange(self.seg_row.size) - np.searchsorted(self.seg_row, self.seg_row)
        running = np.full(self.table_full.shape, np.inf)
        running[self.seg_row, rank] = slope
        self.seg_slope = np.minimum.accumulate(running, axis=1)[self.seg_row, rank]
        self.order = np.argsort(-self.seg_slope, kind="stable")  # ties keep row order, then G order
        wcost = self.seg_cost[self.order] * self.counts[self.seg_row[self.order]]
        self.cum_cost = np.cumsum(wcost)
        self.cum_gain = np.cumsum(self.seg_gain[self.order] * self.counts[self.seg_row[self.order]])
        # Equal costs certify the greedy (Gross) on the envelope; that is the grid's optimum too only
        # if no point below the envelope could be needed: one worth no more than the row's first
        # choice (V(1) = 0 at g_min = 1) never is, a pair under ddof 1 (worth sqrt(1/2) of the
        # paper's) may be when the budget cannot buy the next segment.
        harmless = self.active | (self.table_full <= self.table_full[:, :1])
        self.equal_costs = np.unique(self.seg_cost).size <= 1 and bool(harmless.all())
        self.next_seg = np.full(self.table_full.shape, -1, dtype=np.int64)
        self.next_seg[self.seg_row, self.seg_start] = np.arange(self.seg_row.size)
        self.base = 0 if self.skip else self.g_min * self.n

    def totals(self, budgets):
        """The objective of :meth:`solve` at each of ``budgets`` (ints ≥ 0), the same numbers: the
        segments taken grow with the budget, so one sweep over the sorted budgets builds every
        plan's end columns (O(segments) in all, not per budget)."""
        budgets = np.asarray(budgets, dtype=np.int64)
        out = np.empty(budgets.size)
        inexact = np.zeros(budgets.size, dtype=bool)
        end = np.zeros(self.n_types, dtype=np.int64)
        done = 0
        for i in np.argsort(budgets, kind="stable"):  # one plan per budget (the advice's grid)
            n_full = int(np.searchsorted(self.cum_cost, budgets[i] - self.base, side="right"))
            if n_full > done:
                taken = self.order[done:n_full]
                np.maximum.at(end, self.seg_row[taken], self.seg_end[taken])
                done = n_full
            _, out[i], _, _, exact, _ = self.solve(int(budgets[i]), end=end)
            inexact[i] = not exact
        # Where the greedy is not certified, :func:`allocate` solves the budget exactly when the
        # programme is small: so do these totals, all from one programme at the largest such budget
        # (its table holds the optimum within every smaller budget), or they would report a plan
        # worse than the one the allocator returns (and than uniform G, which is feasible).
        if inexact.any() and self.dp_size(int(budgets[inexact].max())) <= MAX_DP:
            best = self._dp_best(int(budgets[inexact].max()))[0]
            out[inexact] = best[budgets[inexact]]
        return out

    def solve(self, budget, end=None):
        """Per-type groups (type, end column, count), total value, spent, λ, LP bound.

        ``end``: the end column per type of the segments that fit whole (:meth:`totals` passes it)."""
        avail = budget - self.base
        n_full = int(np.searchsorted(self.cum_cost, avail, side="right"))
        if end is None:
            taken = self.order[:n_full]
            end = np.zeros(self.n_types, dtype=np.int64)
            np.maximum.at(end, self.seg_row[taken], self.seg_end[taken])
        spent_items = int(self.cum_cost[n_full - 1]) if n_full else 0
        gained = float(self.cum_gain[n_full - 1]) if n_full else 0.0
        rem = avail - spent_items
        g_type = list(range(self.n_types))
        g_end = end.tolist()
        g_count = self.counts.tolist()
        lp = gained
        lam = 0.0
        if n_full < self.order.size:
            s = self.order[n_full]
            t, cost, gain = int(self.seg_row[s]), int(self.seg_cost[s]), float(self.seg_gain[s])
            lam = float(self.seg_slope[s])
            lp += rem / cost * gain
            q = rem // cost  # < counts[t]: the item did not fit for every prompt of its type
            if q:
                g_count[t] -= q
                g_type.append(t), g_end.append(int(self.seg_end[s])), g_count.append(q)
                rem -= q * cost
                gained += q * gain
        elif n_full:
            lam = float(self.seg_slope[self.order[n_full - 1]])
        # Fix-up: spend the remainder on the best next segment that still fits.
        while rem > 0:
            gt, ge, gc = np.array(g_type), np.array(g_end), np.array(g_count)
            nxt = self.next_seg[gt, ge]
            ok = (nxt >= 0) & (gc > 0)
            ok[ok] &= self.seg_cost[nxt[ok]] <= rem
            if not ok.any():
                break
            cand = np.nonzero(ok)[0]
            best = cand[np.argmax(self.seg_slope[nxt[cand]])]
            s = nxt[best]
            cost, gain = int(self.seg_cost[s]), float(self.seg_gain[s])
            q = min(g_count[best], rem // cost)
            g_count[best] -= q
            g_type.append(g_type[best]), g_end.append(int(self.seg_end[s])), g_count.append(q)
            rem -= q * cost
            gained += q * gain
        groups = (np.array(g_type), np.array(g_end), np.array(g_count))
        base_value = float(self.counts @ self.table_full[:, 0])
        total = base_value + gained
        spent = self.base + (avail - rem)
        lp_total = base_value + lp
        exact = self.equal_costs or lp_total - total <= 1e-12 * max(abs(total), 1e-300)
        gap = 0.0 if exact else max(0.0, lp_total - total)
        return groups, total, spent, lam, exact, gap

    def dp_size(self, budget: int) -> int:
        """Work of :meth:`exact_dp`: prompts × grid points × (budget + 1)."""
        return self.n * self.x.size * (budget + 1)

    def _dp_best(self, budget: int):
        """(best, choice): best[b] the optimum within b rollouts for every b ≤ ``budget`` (-inf
        where no plan fits), choice[i, b] the grid column prompt i takes there."""
        cost = self.x.astype(np.int64)
        rows = self.table_full[self.inverse]
        width = budget + 1
        best = np.zeros(width)
        b = np.arange(width)
        choice = np.empty((self.n, width), dtype=np.int32)
        for i in range(self.n):  # the DP is sequential in prompts; bounded by MAX_DP
            prev = b[None, :] - cost[:, None]
            cand = np.where(prev >= 0, best[np.maximum(prev, 0)] + rows[i][:, None], -np.inf)
            choice[i] = np.argmax(cand, axis=0)
            best = cand[choice[i], b]
        return best, choice

    def exact_dp(self, budget: int):
        """The optimum over the grid by dynamic programming over prompts × budget (small instances).

        best[b] is the largest total of the prompts so far within b rollouts; each prompt takes
        the best of its choices (every grid point, not only the envelope's), recorded for the
        backtrack.  One vectorised max per prompt, so the cost is prompts × grid × budget.
        """
        cost = self.x.astype(np.int64)
        rows = self.table_full[self.inverse]
        best, choice = self._dp_best(budget)
        col = np.empty(self.n, dtype=np.int64)
        left = int(np.argmax(best))
        for i in range(self.n - 1, -1, -1):
            col[i] = choice[i, left]
            left -= int(cost[col[i]])
        G = cost[col]
        return G.reshape(self.shape), rows[np.arange(self.n), col].reshape(self.shape)

    def per_prompt(self, groups):
        """G and value per prompt: within a type, earlier prompts get the larger G."""
        gt, ge, gc = groups
        order = np.lexsort((-ge, gt))  # by type, then larger G first
        gt, ge, gc = gt[order], ge[order], gc[order]
        type_start = np.concatenate([[0], np.cumsum(self.counts)[:-1]])
        bounds = np.cumsum(gc)  # global positions, types in order
        srt = np.argsort(self.inverse, kind="stable")
        rank = np.empty(self.n, dtype=np.int64)
        rank[srt] = np.arange(self.n) - type_start[self.inverse[srt]]
        key = type_start[self.inverse] + rank
        grp = np.searchsorted(bounds, key, side="right")
        col = ge[grp]
        G = self.x[col].astype(np.int64)
        val = self.table_full[self.inverse, col]
        return G.reshape(self.shape), val.reshape(self.shape)


def skip_arg(skip) -> bool:
    """``skip`` checked: True or False (a numpy bool too)."""
    if not isinstance(skip, bool | np.bool_):
        raise InputError(f"skip must be True or False, got {skip!r}")
    return bool(skip)


def budget_arg(budget):
    """The budget checked: one integer ≥ 1 (not a bool)."""
    if isinstance(budget, bool):
        raise InputError(f"budget must be an integer >= 1, got {budget!r}")
    arr = as_group_size(budget, "budget", minimum=1)
    if arr.ndim:
        raise InputError(f"budget must be one integer, got {shown(arr)}")
    return int(arr)


def allocate_group_sizes(
    p_or_posterior,
    budget,
    *,
    value: str = "update",
    g_min=2,
    g_max=512,
    step=1,
    skip: bool = True,
    ddof: int = 0,
    eps: float = 0.0,
    lr: float | None = None,
    horizon: int | None = None,
) -> Allocation:
    """Group size per prompt maximising the total expected value under a rollout budget.

    Parameters
    ----------
    p_or_posterior : array_like of float in [0, 1], or BetaPosterior
        Solve rates, or posteriors from logged counts (:func:`gsd.posterior_from_counts`).
    budget : int
        Rollouts available, Σ G_i ≤ budget.
    value : {"update", "dr_grpo", "progress", "nonsilent", "knapsack"}
        What a group is worth (:func:`allocation_value`).
    g_min, g_max, step : int
        The allowed sizes g_min, g_min + step, …, g_max (step must divide g_max − g_min; a step
        of 8 matches inference batches of 8).
    skip : bool
        Allow G = 0 (the prompt is not drawn this step).  With ``skip=False`` every prompt gets
        at least g_min and the budget must cover n_prompts·g_min.
    ddof, eps : int, float
        The trainer's std convention for the ``update``, ``progress``, ``gain`` and ``horizon``
        values (:func:`allocation_value`); default the paper's, ddof 0 and eps 0.
    lr, horizon : float, int
        The per-step logit rate and the steps looked ahead, for ``horizon`` and ``dr_horizon``
        only (required there).

    Returns
    -------
    Allocation
        ``group_size`` per prompt, ``value``, ``total``, ``spent``, the multiplier λ, and the
        optimality certificate (``exact``, ``gap_bound``, ``envelope``, ``envelope_sizes``).

    Notes
    -----
    Maximises :math:`\\sum_i V(p_i, G_i)` subject to :math:`\\sum_i G_i \\le B`.  Each distinct
    prompt's values on the grid (with the point (0, 0) when skipping is allowed) are replaced by
    their upper concave envelope in (rollouts, value) space; the envelope's segments are handed
    out by decreasing value per rollout until the budget is spent, which solves the Lagrangian
    relaxation exactly, and the remainder goes greedily to the best next segment that fits.
    When every segment costs the same number of rollouts (concave rows and g_min = step, or
    ``skip=False``) and no grid point below the envelope carries value, this greedy is optimal
    (Gross, 1956).  Otherwise (unequal costs: the entry
    g_min against the step, or an envelope) a plan whose Lagrangian bound is not met is solved
    again exactly by dynamic programming when prompts × grid × budget ≤ 2·10^7, and beyond
    that ``gap_bound`` bounds its distance to the optimum (at most one segment's value).  The values of :data:`ALLOCATION_VALUES`
    are concave on the grid for g_min ≥ 2 (checked by :func:`concavity_violations`); G = 1 is
    worth 0, so g_min = 1 with skipping makes the envelope jump from 0 to 2.  With ``ddof=1`` a
    pair is worth sqrt(1/2) of the paper's value: with skipping, G = 2 lies below the chord from 0
    to 3 for ``update`` and ``progress``, and only a budget too small for 3 serves it (then by
    the exact programme).
    Cost: the table of distinct prompts × grid points (E[σ̂] by a pmf recurrence over G), one
    sort of the segments, then O(n_prompts).  See :ref:`theory-allocation`.

    Examples
    --------
    >>> plan = allocate_group_sizes([0.02, 0.5, 0.98, 0.3], 32, g_max=16)
    >>> plan.group_size.tolist(), plan.spent, plan.exact
    ([6, 9, 6, 11], 32, True)
    >>> allocate_group_sizes([0.02, 0.5, 0.98, 0.3], 32, value="nonsilent", g_max=16).group_size.tolist()
    [8, 6, 9, 9]
    """
    budget = budget_arg(budget)
    return allocate(BudgetProblem(p_or_posterior, value, g_min, g_max, step, skip, ddof, eps, lr, horizon), budget)


def allocate(prob, budget: int) -> Allocation:
    """:func:`allocate_group_sizes` on a built problem (its value table)."""
    if prob.skip and budget < prob.g_min:
        raise InputError(f"budget must be >= g_min ({prob.g_min}) to serve any prompt, got budget={budget}")
    if not prob.skip and budget < prob.base:
        raise InputError(
            f"budget must be >= n_prompts × g_min = {prob.n} × {prob.g_min} = {prob.base} "
            f"when skip=False, got budget={budget}"
        )
    groups, total, spent, lam, exact, gap = prob.solve(budget)
    G, val = prob.per_prompt(groups)
    if not exact and prob.dp_size(budget) <= MAX_DP:
        # Small enough for the exact dynamic programme over the whole grid (envelope or not).
        G, val = prob.exact_dp(budget)
        exact, gap = True, 0.0
    return Allocation(
        group_size=G,
        value=val,
        total=float(val.sum()),
        budget=budget,
        spent=int(G.sum()),
        multiplier=lam,
        exact=exact,
        gap_bound=gap,
        envelope=prob.envelope,
        envelope_sizes=prob.envelope_sizes,
        value_name=prob.value_name,
        grid=(prob.g_min, prob.g_max, prob.step, prob.skip),
        ddof=prob.ddof,
        eps=prob.eps,
    )


def concavity_violations(
    p_or_posterior,
    *,
    value="update",
    g_min=2,
    g_max=512,
    step=1,
    skip=True,
    ddof: int = 0,
    eps: float = 0.0,
    lr: float | None = None,
    horizon: int | None = None,
):
    """Where a value's increments per rollout rise along the allocation grid (non-concave rows).

    Returns a DataFrame with one row per (prompt, grid point) that lies strictly below the upper
    concave envelope of its row in (rollouts, value) space: columns ``prompt`` (index into the
    flattened input), ``G`` and ``shortfall`` (envelope minus value, relative to the value).
    Empty when every row is concave, i.e. when the greedy on single increments is optimal.

    Examples
    --------
    >>> len(concavity_violations([0.05, 0.5], value="nonsilent", g_max=64))
    0
    >>> concavity_violations([0.5], value="update", g_min=1, g_max=4).G.tolist()  # V(1) = 0
    [1]
    """
    prob = BudgetProblem(p_or_posterior, value, g_min, g_max, step, skip, ddof, eps, lr, horizon)
    x, Y, act = prob.x, prob.table_full, prob.active
    import pandas as pd  # here, not at module level: the simulator imports this module and never needs pandas

    r, c = np.nonzero(~act)
    if r.size == 0:
        return pd.DataFrame({"prompt": np.empty(0, np.int64), "G": np.empty(0, np.int64), "shortfall": np.empty(0)})
    env = np.empty(r.size)
    for_rows = np.unique(r)
    env_full = np.full(Y.shape, np.nan)
    for t in for_rows:  # only the few non-concave distinct rows
        env_full[t] = np.interp(x, x[act[t]], Y[t, act[t]])
    env = env_full[r, c]
    with np.errstate(divide="ignore", invalid="ignore"):
        short = np.where(Y[r, c] > 0, (env - Y[r, c]) / Y[r, c], np.inf)
    # Map distinct rows back to the first prompt of each type.
    first = np.full(prob.n_types, -1)
    first[prob.inverse[::-1]] = np.arange(prob.inverse.size)[::-1]
    return pd.DataFrame({"prompt": first[r], "G": x[c].astype(np.int64), "shortfall": short})
