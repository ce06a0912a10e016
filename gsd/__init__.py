"""gsd — the group-standard-deviation identity for binary-reward RL (GRPO, Dr.GRPO, DAPO).

For right/wrong rewards the per-prompt update of all three methods is a function of one
number, the group's reward std σ = sqrt(k(G−k))/G:  g = σ²/(σ_c + eps)·(s̄₊ − s̄₋).
GRPO divides by σ, Dr.GRPO does not, DAPO drops the groups where σ = 0.  See :ref:`theory-identity`.
"""

from ._lazy import lazy_exports

# Public names and the submodule that defines each.  They are imported on first use (PEP 562),
# so ``import gsd`` (and every ``gsd`` command) loads numpy, scipy, pandas or torch only when a
# name that needs them is touched.
_EXPORTS = {
    "_errors": ("InputError", "MissingExtra"),
    "speed": ("StepCost", "GroupSizeAdvice", "group_size_advice", "fit_step_cost", "step_times_from_log"),
    "allocation": (
        "ALLOCATION_VALUES",
        "HORIZON_VALUES",
        "Allocation",
        "UniformAdvice",
        "allocate_group_sizes",
        "allocation_value",
        "concavity_violations",
        "expected_silent_rate",
        "uniform_group_size_advice",
        "uniform_plan",
        "DEFAULT_PLAN",
        "PLAN_RULES",
        "allocate_with_advice",
        "budget_plan",
    ),
    "data": ("load_bigmath", "load_histogram", "load_solve_rates"),
    "groups": ("METHODS", "advantages", "group_std", "group_update", "identity_terms", "is_silent"),
    "groupsize": (
        "DEFAULT_MAX_GROUP_SIZE",
        "EXCEEDS_MAX",
        "group_size_law",
        "median_group_size",
        "plan_group_sizes",
        "required_group_size",
    ),
    "posterior": ("BetaPosterior", "fit_beta_prior", "posterior_from_counts"),
    "silent": (
        "UNREACHABLE",
        "dapo_generation_cost",
        "group_size_for_silent_rate",
        "nonsilent_rate",
        "silent_rate",
        "silent_rate_subsampled",
    ),
    "trainers": ("CONVENTIONS", "convention_gap", "multi_reward_advantages", "trainer_advantages"),
    "update": ("UPDATE_METHODS", "expected_update", "fidelity", "fidelity_law"),
    "weighting": (
        "arcsin_objective",
        "budget_share",
        "decile_index",
        "decile_shares",
        "difficulty_weight",
        "extreme_mask",
        "large_group_weight",
        "medium_mask",
    ),
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)

__version__ = "0.1.0"
