"""Loss geometry of the objectives around GRPO (:ref:`theory-losses`).

Small differentiable torch functions, batched over leading dimensions, one module per topic:

* :mod:`~gsd.losses.temperature` — softmax with temperature, Hinton distillation and why T²;
* :mod:`~gsd.losses.kl` — forward / reverse KL, on-policy d_t, sampled estimators k1, k2, k3;
* :mod:`~gsd.losses.dpo` — DPO loss, gradient and the "preferred answer got rarer" flag;
* :mod:`~gsd.losses.surrogate` — clipped surrogate, dual clip, clip-higher, GRPO objective;
* :mod:`~gsd.losses.aggregation` — loss aggregation modes, length bias, TRL / verl presets
  (verl's clamps: ``trainer="verl"`` in :func:`kl_estimate` and :func:`grpo_objective`);
* :mod:`~gsd.losses.figures` — the seed's illustrations and the analyses, as PNG files;
* :mod:`~gsd.losses.cli` — the ``gsd losses`` command.
"""

from ..lazy import lazy_exports

# Public names and their submodule, imported on first use (torch loads only then).
_EXPORTS = {
    "temperature": (
        "softmax_t",
        "log_softmax_t",
        "soft_term",
        "soft_term_grad",
        "soft_term_grad_limit",
        "distillation_loss",
        "distillation_grad",
        "temperature_table",
    ),
    "kl": (
        "KLTerms",
        "KL_ESTIMATORS",
        "KL_TRAINERS",
        "VERL_LOG_RATIO_CLIP",
        "VERL_K3_MAX",
        "kl_divergence",
        "kl_terms",
        "forward_kl_terms",
        "reverse_kl_terms",
        "reverse_kl_per_token",
        "sequence_reverse_kl",
        "sampled_log_ratio",
        "k1",
        "k2",
        "k3",
        "kl_estimate",
        "estimator_moments",
        "sample_estimator",
        "estimator_table",
        "estimator_sweep",
    ),
    "dpo": ("dpo_gain", "dpo_margin", "dpo_loss", "dpo_loss_from_gains", "dpo_grad", "dpo_flags", "dpo_diagnostics"),
    "surrogate": (
        "OBJECTIVE_TRAINERS",
        "VERL_CLIP_RATIO_C",
        "UNCLIPPED",
        "CLIP_HIGH",
        "CLIP_LOW",
        "CLIP_DUAL",
        "clipped_surrogate",
        "clipped_surrogate_grad",
        "clip_region",
        "zero_grad_mask",
        "flat_regions",
        "grpo_objective",
    ),
    "aggregation": (
        "AGG_MODES",
        "AggPreset",
        "TRL_LOSS_TYPES",
        "VERL_AGG_MODES",
        "VERL_LEGACY_AGG_MODES",
        "aggregate",
        "aggregate_as",
        "per_token_weight",
        "token_weights",
        "sequence_weights",
        "trainer_table",
    ),
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
