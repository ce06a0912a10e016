"""gsd — the group-standard-deviation identity for binary-reward RL (GRPO, Dr.GRPO, DAPO).

For right/wrong rewards the per-prompt update of all three methods is a function of one
number, the group's reward std σ = sqrt(k(G−k))/G:  g = σ²/(σ_c + eps)·(s̄₊ − s̄₋).
GRPO divides by σ, Dr.GRPO does not, DAPO drops the groups where σ = 0.  See :ref:`theory-identity`.
"""

from .lazy import install_moved_modules, lazy_exports

# Public names and the submodule that defines each.  They are imported on first use (PEP 562),
# so ``import gsd`` (and every ``gsd`` command) loads numpy, scipy, pandas or torch only when a
# name that needs them is touched.
_EXPORTS = {
    "errors": ("InputError", "MissingExtra"),
    "core.advice": (
        "StepCost",
        "GroupSizeAdvice",
        "group_size_advice",
        "fit_step_cost",
        "step_times_from_log",
        "BatchAdvice",
        "batch_advice",
        "advice_headline",
        "step_noise_terms",
    ),
    "core.noise_scale": (
        "NoiseScale",
        "noise_scale_from_norms",
        "noise_scale_from_logs",
        "StepKnee",
        "knee_from_step_gains",
        "knee_from_ratio",
        "knee_from_gain_levels",
    ),
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
    "io.data": ("load_bigmath", "load_histogram", "load_solve_rates"),
    "core.groups": ("METHODS", "advantages", "group_std", "group_update", "identity_terms", "is_silent"),
    "core.groupsize": (
        "DEFAULT_MAX_GROUP_SIZE",
        "EXCEEDS_MAX",
        "group_size_law",
        "median_group_size",
        "plan_group_sizes",
        "required_group_size",
    ),
    "core.posterior": ("BetaPosterior", "fit_beta_prior", "posterior_from_counts"),
    "core.silent": (
        "UNREACHABLE",
        "dapo_generation_cost",
        "group_size_for_silent_rate",
        "nonsilent_rate",
        "silent_rate",
        "silent_rate_subsampled",
    ),
    "core.trainers": ("CONVENTIONS", "convention_gap", "multi_reward_advantages", "trainer_advantages"),
    "core.update": ("UPDATE_METHODS", "expected_update", "fidelity", "fidelity_law"),
    "core.weighting": (
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

# Modules that moved in 0.2 (the core math into gsd.core, the plumbing into gsd.io, the command line
# into gsd.cli): their old import paths still work for one release, with a DeprecationWarning.
MOVED_MODULES = {
    "gsd.groups": "gsd.core.groups",
    "gsd.silent": "gsd.core.silent",
    "gsd.update": "gsd.core.update",
    "gsd.groupsize": "gsd.core.groupsize",
    "gsd.weighting": "gsd.core.weighting",
    "gsd.posterior": "gsd.core.posterior",
    "gsd.trainers": "gsd.core.trainers",
    "gsd.methods": "gsd.core.methods",
    "gsd.difficulty_fit": "gsd.core.difficulty_fit",
    "gsd.speed": "gsd.core.advice",
    "gsd.atomic": "gsd.io.atomic",
    "gsd.lock": "gsd.io.lock",
    "gsd.hashing": "gsd.io.hashing",
    "gsd.heap": "gsd.io.heap",
    "gsd.progress": "gsd.io.progress",
    "gsd.frames": "gsd.io.frames",
    "gsd.arrow_arrays": "gsd.io.arrow_arrays",
    "gsd.data": "gsd.io.data",
    "gsd.tables": "gsd.io.input_tables",
    "gsd.cli_support": "gsd.cli.support",
    "gsd.cli_core": "gsd.core.cli",
    "gsd.cli_allocation": "gsd.allocation.cli",
}
install_moved_modules(MOVED_MODULES)

__version__ = "0.1.0"
