"""Uniform group sizes: the plan that gives every prompt that can carry a gradient the same G (``gsd plan
--budget``'s default, :func:`uniform_plan`), and the value per rollout of every uniform G beside the
allocated plan at the same budget (:func:`uniform_group_size_advice`).

:func:`budget_plan` is the one definition of the default plan that ``gsd plan --budget`` and
``gsd diagnose --budget`` share: :func:`uniform_plan` for ``rule="uniform"``, else the allocator of
:mod:`gsd.allocation.solver` with that value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from ..validation import as_ddof, as_eps
from .solver import Allocation, BudgetProblem, allocate, allocate_group_sizes, budget_arg, grid_args, skip_arg
from .values import ALLOCATION_VALUES, allocation_value, as_source

if TYPE_CHECKING:  # pandas loads inside the function that builds the advice's DataFrame
    import pandas as pd

__all__ = [
    "DEFAULT_PLAN",
    "PLAN_RULES",
    "uniform_plan",
    "budget_plan",
    "UniformAdvice",
    "uniform_group_size_advice",
    "allocate_with_advice",
]

#: What ``gsd plan --budget --value`` takes: ``uniform`` (:func:`uniform_plan`) or a value.
PLAN_RULES = ("uniform", *ALLOCATION_VALUES)
#: ``gsd plan --budget``'s default: uniform G at the budget.  At equal generations no plan from
#: logged counts at the budget's rollouts per prompt beat uniform G in the allocation comparison,
#: and the ``update`` plan lost to it on U-shaped populations (docs/allocation_comparison.md).
DEFAULT_PLAN = "uniform"


def uniform_plan(
    p_or_posterior, budget, *, g_min=2, g_max=512, step=1, skip: bool = True, ddof: int = 0, eps: float = 0.0
) -> Allocation:
    """The same group size for every prompt that can carry a gradient: ``gsd plan --budget``'s default.

    Parameters
    ----------
    p_or_posterior, budget, g_min, g_max, step
        The prompts (rates or posteriors), the rollouts per step and the grid, as in
        :func:`allocate_group_sizes`.
    skip : bool
        Skip the prompts that are silent for sure: a known rate of exactly 0 or 1 (a posterior
        never is).  With ``skip=False`` every prompt is served.
    ddof, eps : int, float
        The std convention of the reported ``value``, E[σ̂] at each prompt's G
        (:func:`allocation_value` with ``"update"``).

    Returns
    -------
    Allocation
        ``value_name`` ``"uniform"``: every served prompt gets G = the largest grid size with
        n_served·G ≤ budget (at most g_max); when the budget cannot give every served prompt
        g_min, the first budget // g_min of them (input order) get g_min and the rest 0.  The
        rollouts left over (budget − n_served·G) are not spent.  ``exact`` is True and
        ``multiplier`` NaN: the plan maximises no value.

    Notes
    -----
    Why a uniform default: at equal generations a plan at the budget's rollouts per prompt
    redistributes one step's rollouts by the counts it has, and those go stale as the policy
    moves; in the allocation comparison no such plan beat uniform G, and on a U-shaped population
    the ``update`` plan lost to it (docs/allocation_comparison.md).  What does help is the budget
    per step: ``--advice`` lists the value per rollout of every uniform G.

    Examples
    --------
    >>> plan = uniform_plan([0.02, 0.5, 1.0, 0.3], 32, g_max=16)
    >>> plan.group_size.tolist(), plan.spent
    ([10, 10, 0, 10], 30)
    """
    budget = budget_arg(budget)
    g_min, g_max, step = grid_args(g_min, g_max, step)
    skip = skip_arg(skip)
    kind, src = as_source(p_or_posterior)
    shape = src.shape if kind == "point" else src[0].shape
    if kind == "point":
        surely_silent = (src == 0.0) | (src == 1.0)
    else:
        surely_silent = np.zeros(shape, dtype=bool)
    served = ~surely_silent if skip else np.ones(shape, dtype=bool)
    n = int(served.sum())
    if budget < g_min:
        raise InputError(f"budget must be >= g_min ({g_min}) to serve any prompt, got budget={budget}")
    G = np.zeros(shape, dtype=np.int64)
    if n:
        per = budget // n
        if per >= g_min:
            G[served] = min(g_max, g_min + (per - g_min) // step * step)
        else:
            first = np.flatnonzero(served.ravel())[: budget // g_min]
            G.ravel()[first] = g_min
    value = allocation_value(p_or_posterior, G, "update", ddof=ddof, eps=eps)
    return Allocation(
        group_size=G,
        value=value,
        total=float(value.sum()),
        budget=budget,
        spent=int(G.sum()),
        multiplier=math.nan,
        exact=True,
        gap_bound=0.0,
        envelope=False,
        envelope_sizes=np.empty(0, dtype=np.int64),
        value_name="uniform",
        grid=(g_min, g_max, step, bool(skip)),
        ddof=int(as_ddof(ddof)),
        eps=float(as_eps(eps)),
    )


def budget_plan(p_or_posterior, budget, rule: str = DEFAULT_PLAN, **kwargs) -> Allocation:
    """The plan ``gsd plan --budget`` and ``gsd diagnose --budget`` make by default (one definition for both):
    :func:`uniform_plan` for ``rule="uniform"`` (:data:`DEFAULT_PLAN`), else :func:`allocate_group_sizes` with
    that value.  ``kwargs``: the grid and std options of either.

    Examples
    --------
    >>> budget_plan([0.02, 0.5, 1.0, 0.3], 32, g_max=16).group_size.tolist()
    [10, 10, 0, 10]
    """
    if rule == "uniform":
        return uniform_plan(p_or_posterior, budget, **kwargs)
    if rule not in ALLOCATION_VALUES:
        raise InputError(f"rule must be one of {PLAN_RULES}, got {rule!r}")
    return allocate_group_sizes(p_or_posterior, budget, value=rule, **kwargs)


@dataclass(frozen=True)
class UniformAdvice:
    """Uniform group sizes against the allocated plan at the same budget.

    Attributes
    ----------
    curve : DataFrame
        One row per grid G: ``G``, ``rollouts`` (n_prompts·G), ``uniform_value`` (Σ V(p_i, G)),
        ``value_per_rollout``, ``allocated_value`` (the allocator at the same budget),
        ``gain`` (allocated / uniform) and ``uniform_rollouts_to_match`` (the smallest uniform
        budget on the grid whose value reaches the allocated one; NaN beyond g_max) with
        ``compute_ratio`` = that budget / n_prompts·G.
    best_G : int
        The uniform G with the largest value per rollout.
    budget : int or None
        The budget asked about (None: not given).
    at_budget : dict
        At ``budget``: the largest uniform G it affords, its value, the allocated value and
        their ratio (empty when no budget was given).
    """

    curve: pd.DataFrame
    best_G: int
    budget: int | None
    at_budget: dict


def uniform_group_size_advice(
    p_or_posterior,
    budget=None,
    *,
    value: str = "update",
    g_min=2,
    g_max=512,
    step=1,
    ddof: int = 0,
    eps: float = 0.0,
    lr: float | None = None,
    horizon: int | None = None,
) -> UniformAdvice:
    """Value per rollout of every uniform G, the best one, and the allocated plan beside it.

    This compares uniform G with an allocated plan by one step's value; it is not the advice.  Which G
    (and which batch and learning rate) a run should use is :func:`gsd.core.advice.group_size_advice`'s
    and :func:`gsd.core.advice.batch_advice`'s answer, the one every report prints.

    The arguments are those of :func:`allocate_group_sizes` (``ddof``, ``eps``: the trainer's std
    convention for the ``update`` and ``progress`` values).

    Examples
    --------
    >>> adv = uniform_group_size_advice([0.05, 0.5, 0.9], value="update", g_max=32, budget=30)
    >>> adv.best_G, adv.at_budget["uniform_G"], round(adv.at_budget["gain"], 4)
    (2, 10, 1.005)
    >>> bool((adv.curve.gain >= 1 - 1e-12).all())  # the allocator never does worse than uniform
    True
    """
    prob = BudgetProblem(p_or_posterior, value, g_min, g_max, step, True, ddof, eps, lr, horizon)
    return _advise(prob, budget)


def allocate_with_advice(
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
) -> tuple[Allocation, UniformAdvice]:
    """:func:`allocate_group_sizes` and :func:`uniform_group_size_advice` at one budget, the
    value table computed once (``gsd plan --budget`` prints both).  The same arguments; the
    advice always allows skipping, as :func:`uniform_group_size_advice` does.

    Examples
    --------
    >>> plan, adv = allocate_with_advice([0.05, 0.5, 0.9], 30, g_max=32)
    >>> plan.total == allocate_group_sizes([0.05, 0.5, 0.9], 30, g_max=32).total, adv.at_budget["uniform_G"]
    (True, 10)
    """
    budget = budget_arg(budget)
    prob = BudgetProblem(p_or_posterior, value, g_min, g_max, step, skip, ddof, eps, lr, horizon)
    adv = (
        prob if prob.skip else BudgetProblem(None, value, g_min, g_max, step, True, ddof, eps, lr, horizon, reuse=prob)
    )
    return allocate(prob, budget), _advise(adv, budget)


def _advise(prob, budget) -> UniformAdvice:
    """:func:`uniform_group_size_advice` on a built problem that allows skipping."""
    import pandas as pd

    grid = prob.x[1:].astype(np.int64)
    uniform = prob.counts @ prob.table_full[:, 1:]
    rollouts = prob.n * grid
    allocated = prob.totals(rollouts)
    # Smallest uniform budget reaching the allocated value (uniform value is nondecreasing in G).
    reach = np.searchsorted(np.maximum.accumulate(uniform), allocated * (1 - 1e-12), side="left")
    match = np.where(reach < grid.size, rollouts[np.minimum(reach, grid.size - 1)], np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        curve = pd.DataFrame(
            {
                "G": grid,
                "rollouts": rollouts,
                "uniform_value": uniform,
                "value_per_rollout": uniform / rollouts,
                "allocated_value": allocated,
                "gain": np.where(uniform > 0, allocated / uniform, np.nan),
                "uniform_rollouts_to_match": match,
                "compute_ratio": match / rollouts,
            }
        )
    best = int(grid[np.argmax(curve.value_per_rollout.to_numpy())])
    at = {}
    if budget is not None:
        budget = budget_arg(budget)
        affordable = grid[grid * prob.n <= budget]
        alloc_total = float(prob.totals([budget])[0]) if budget >= prob.g_min else 0.0
        if affordable.size:
            gu = int(affordable[-1])
            uv = float(uniform[grid == gu][0])
            at = {
                "budget": budget,
                "uniform_G": gu,
                "uniform_value": uv,
                "allocated_value": alloc_total,
                "gain": alloc_total / uv if uv > 0 else math.nan,
            }
        else:
            at = {
                "budget": budget,
                "uniform_G": None,
                "uniform_value": math.nan,
                "allocated_value": alloc_total,
                "gain": math.nan,
            }
    return UniformAdvice(curve=curve, best_G=best, budget=budget, at_budget=at)
