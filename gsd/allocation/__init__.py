"""Spending a rollout budget: how many answers each prompt should get.

A trainer draws G_i answers for prompt i and can afford B = Σ_i G_i rollouts per step.  Each G_i
is 0 (the prompt is skipped this step) or on the grid g_min, g_min + s, …, g_max.  The default plan
gives every prompt that can carry a gradient the same G; a plan by value maximises
Σ_i V(p_i, G_i) for one of the values of a group of G answers (see :ref:`theory-allocation`).

The modules, each named for what it computes (every public name is importable from here):

* :mod:`gsd.allocation.values`: V(p, G) of each value for known p or under a posterior, at any
  (p, G) and as a table over the grid; the probability that a group is silent.
* :mod:`gsd.allocation.expectations`: the binomial and beta-binomial sums E[f(k, G)] and the beta
  moments behind the values, at one G or over a grid.
* :mod:`gsd.allocation.lookahead`: the ``horizon`` values, an H-step mean-field gain on a logit grid.
* :mod:`gsd.allocation.envelope`: the upper concave envelope of each prompt's row of values.
* :mod:`gsd.allocation.solver`: the allocator, group sizes maximising Σ V under a budget with a
  certificate (Lagrangian greedy, exact dynamic programme).
* :mod:`gsd.allocation.uniform`: uniform G, the default plan, and its value per rollout against
  the allocated plan at each budget.
"""

from ..lazy import lazy_exports

# Every public name of the module this package was, imported on first use: those of __all__, and
# those outside it that other modules use.
__getattr__, __dir__, _lazy_names = lazy_exports(
    __name__,
    {
        "expectations": ("beta_sigma", "log_beta_moment"),
        "solver": ("Allocation", "allocate_group_sizes", "concavity_violations"),
        "uniform": (
            "DEFAULT_PLAN",
            "PLAN_RULES",
            "UniformAdvice",
            "allocate_with_advice",
            "budget_plan",
            "uniform_group_size_advice",
            "uniform_plan",
        ),
        "values": (
            "ALLOCATION_VALUES",
            "HORIZON_VALUES",
            "allocation_value",
            "expected_silent_rate",
            "MAX_POSTERIOR_TERMS",
            "VALUE_FORMS",
            "TableLimit",
            "check_table_cost",
        ),
    },
)
__all__ = [
    "ALLOCATION_VALUES",
    "DEFAULT_PLAN",
    "HORIZON_VALUES",
    "PLAN_RULES",
    "Allocation",
    "UniformAdvice",
    "allocation_value",
    "allocate_group_sizes",
    "uniform_plan",
    "allocate_with_advice",
    "budget_plan",
    "expected_silent_rate",
    "uniform_group_size_advice",
    "concavity_violations",
]
