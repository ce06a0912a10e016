"""gsd — the group-standard-deviation identity for binary-reward RL (GRPO, Dr.GRPO, DAPO).

For right/wrong rewards the per-prompt update of all three methods is a function of one
number, the group's reward std σ = sqrt(k(G−k))/G:  g = σ²/(σ_c + eps)·(s̄₊ − s̄₋).
GRPO divides by σ, Dr.GRPO does not, DAPO drops the groups where σ = 0.  See DESIGN.md §1.
"""

from .allocation import (
    ALLOCATION_VALUES,
    Allocation,
    UniformAdvice,
    allocate_group_sizes,
    allocation_value,
    concavity_violations,
    expected_silent_rate,
    uniform_group_size_advice,
)
from .data import load_bigmath, load_histogram, load_solve_rates
from .groups import METHODS, advantages, group_std, group_update, identity_terms, is_silent
from .groupsize import (
    DEFAULT_MAX_GROUP_SIZE,
    EXCEEDS_MAX,
    group_size_law,
    plan_group_sizes,
    required_group_size,
)
from .posterior import BetaPosterior, fit_beta_prior, posterior_from_counts
from .silent import (
    UNREACHABLE,
    dapo_generation_cost,
    group_size_for_silent_rate,
    nonsilent_rate,
    silent_rate,
    silent_rate_subsampled,
)
from .trainers import CONVENTIONS, convention_gap, trainer_advantages
from .update import UPDATE_METHODS, expected_update, fidelity, fidelity_law
from .weighting import (
    arcsin_objective,
    budget_share,
    decile_index,
    decile_shares,
    difficulty_weight,
    extreme_mask,
    large_group_weight,
    medium_mask,
)

__version__ = "0.1.0"

__all__ = [
    "METHODS", "UPDATE_METHODS", "UNREACHABLE", "EXCEEDS_MAX", "DEFAULT_MAX_GROUP_SIZE", "CONVENTIONS",
    "group_std", "is_silent", "advantages", "group_update", "identity_terms",
    "silent_rate", "nonsilent_rate", "silent_rate_subsampled", "group_size_for_silent_rate",
    "dapo_generation_cost",
    "expected_update", "fidelity", "fidelity_law",
    "required_group_size", "group_size_law", "plan_group_sizes",
    "arcsin_objective", "difficulty_weight", "large_group_weight", "budget_share",
    "extreme_mask", "medium_mask", "decile_index", "decile_shares",
    "trainer_advantages", "convention_gap",
    "load_bigmath", "load_histogram", "load_solve_rates",
    "BetaPosterior", "fit_beta_prior", "posterior_from_counts",
    "ALLOCATION_VALUES", "Allocation", "UniformAdvice", "allocation_value", "allocate_group_sizes",
    "expected_silent_rate", "uniform_group_size_advice", "concavity_violations",
]
