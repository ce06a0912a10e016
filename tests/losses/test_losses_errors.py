"""Catalogue of bad inputs: each raises ValueError naming the argument (and the value, for scalars)."""

import pytest
import torch

import gsd.losses as L

Z = torch.tensor([[1.0, 0.0, -1.0]], dtype=torch.float64)
V = torch.tensor([[0.0, 1.0, 0.0]], dtype=torch.float64)
Q = [0.5, 0.2, 0.3]
P = [0.6, 0.3, 0.1]
LOSS = torch.zeros(2, 3, dtype=torch.float64)
MASK = torch.ones(2, 3)

CASES = [
    # temperature / distillation
    ("T = 0", lambda: L.softmax_t([2.0, 0.0], T=0), ["T", "0"]),
    ("T < 0", lambda: L.softmax_t([2.0, 0.0], T=-1.0), ["T", "-1.0"]),
    ("T = inf", lambda: L.soft_term(Z, V, T=float("inf")), ["T", "inf"]),
    ("T in distillation", lambda: L.distillation_loss(Z, V, [0], T=0.0), ["T", "0.0"]),
    ("lambda > 1", lambda: L.distillation_loss(Z, V, [0], lam=1.5), ["lam", "1.5"]),
    ("lambda < 0", lambda: L.distillation_grad(Z, V, [0], lam=-0.1), ["lam", "-0.1"]),
    ("logit shapes", lambda: L.distillation_loss(Z, torch.zeros(1, 4), [0]), ["student_logits", "teacher_logits"]),
    ("target range", lambda: L.distillation_loss(Z, V, [3]), ["target"]),
    ("target shape", lambda: L.distillation_loss(Z, V, [0, 1]), ["target"]),
    ("target dtype", lambda: L.distillation_loss(Z, V, [0.5]), ["target"]),
    ("NaN logits", lambda: L.softmax_t([float("nan"), 0.0]), ["logits", "NaN"]),
    ("scalar logits", lambda: L.softmax_t(1.0), ["logits"]),
    # distributions
    ("sum != 1", lambda: L.kl_divergence([0.5, 0.4], [0.5, 0.5]), ["p", "sum"]),
    ("sum just off", lambda: L.kl_divergence([0.5, 0.5 + 1e-5], [0.5, 0.5]), ["p", "sum"]),
    ("negative probability", lambda: L.kl_divergence([0.5, 0.5], [1.2, -0.2]), ["q", "negative"]),
    ("distribution shapes", lambda: L.kl_divergence([0.5, 0.5], [1 / 3] * 3), ["p", "q", "shape"]),
    ("student not a distribution", lambda: L.reverse_kl_per_token([0.5, 0.6, 0.1], P), ["student"]),
    ("teacher negative", lambda: L.forward_kl_terms([1.1, -0.1], [0.5, 0.5]), ["teacher"]),
    ("mask shape", lambda: L.reverse_kl_per_token([Q, Q], [P, P], mask=[1, 1, 1]), ["mask"]),
    ("mask values", lambda: L.sequence_reverse_kl([Q, Q], [P, P], mask=[1, 2]), ["mask"]),
    ("token range", lambda: L.sampled_log_ratio([Q], [P], [3]), ["tokens"]),
    ("token shape", lambda: L.sampled_log_ratio([Q], [P], [0, 1]), ["tokens"]),
    ("estimator kind", lambda: L.estimator_moments(Q, P, "k4"), ["kind", "k4"]),
    ("log-prob > 0", lambda: L.k3(torch.tensor([0.5]), torch.tensor([-1.0])), ["logq"]),
    ("log-prob shapes", lambda: L.k1(torch.zeros(3), torch.zeros(4)), ["logq", "logp"]),
    ("sample count", lambda: L.sample_estimator(Q, P, "k1", 0), ["n", "0"]),
    # DPO
    ("beta = 0", lambda: L.dpo_loss(-1.0, -2.0, -1.0, -1.0, beta=0.0), ["beta", "0.0"]),
    ("beta < 0", lambda: L.dpo_loss_from_gains(1.0, 0.0, beta=-0.5), ["beta", "-0.5"]),
    ("beta in grad", lambda: L.dpo_grad(1.0, 0.0, beta=0), ["beta"]),
    ("DPO shapes", lambda: L.dpo_loss_from_gains(torch.zeros(2), torch.zeros(3)), ["gain_chosen", "gain_rejected"]),
    ("DPO four shapes", lambda: L.dpo_margin(torch.zeros(2), torch.zeros(2), torch.zeros(3), 0.0), ["ref_chosen"]),
    # clipped surrogate
    ("eps = 0", lambda: L.clipped_surrogate(1.0, 1.0, eps_low=0.0), ["eps_low", "0.0"]),
    ("eps = 1", lambda: L.clipped_surrogate(1.0, 1.0, eps_low=1.0), ["eps_low", "1.0"]),
    ("eps_high > 1", lambda: L.clipped_surrogate(1.0, 1.0, eps_high=1.5), ["eps_high", "1.5"]),
    ("eps negative", lambda: L.zero_grad_mask(1.0, 1.0, eps_low=-0.2), ["eps_low", "-0.2"]),
    ("eps array", lambda: L.clip_region(1.0, 1.0, eps_low=[0.1, 0.2]), ["eps_low"]),
    ("dual clip <= 1", lambda: L.clipped_surrogate(1.0, -1.0, dual_clip=1.0), ["dual_clip", "1.0"]),
    ("ratio shapes", lambda: L.clipped_surrogate(torch.ones(3), torch.ones(2)), ["ratio", "advantage"]),
    ("negative ratio", lambda: L.clipped_surrogate(-0.5, 1.0), ["ratio"]),
    ("flat regions advantage", lambda: L.flat_regions(float("nan")), ["advantage"]),
    ("GRPO beta < 0", lambda: L.grpo_objective(torch.zeros(1, 2), torch.zeros(1, 2), [1.0], beta=-0.1), ["beta"]),
    ("GRPO missing ref", lambda: L.grpo_objective(torch.zeros(1, 2), torch.zeros(1, 2), [1.0], beta=0.1), ["logp_ref"]),
    ("GRPO old shape", lambda: L.grpo_objective(torch.zeros(1, 2), torch.zeros(1, 3), [1.0]), ["logp_old"]),
    (
        "GRPO advantage shape",
        lambda: L.grpo_objective(torch.zeros(2, 3), torch.zeros(2, 3), [1.0, 2.0, 3.0, 4.0]),
        ["advantages"],
    ),
    # aggregation
    ("unknown mode", lambda: L.aggregate(LOSS, MASK, "seq-sum"), ["mode", "seq-sum"]),
    ("unknown rows", lambda: L.aggregate(LOSS, MASK, "seq-mean-token-mean", rows="some"), ["rows", "some"]),
    ("mask values", lambda: L.aggregate(LOSS, 0.5 * MASK), ["mask"]),
    ("loss/mask shapes", lambda: L.aggregate(LOSS, torch.ones(2, 4)), ["loss", "mask"]),
    ("mask rank", lambda: L.aggregate(torch.zeros(3), torch.ones(3)), ["mask"]),
    ("norm = 0", lambda: L.aggregate(LOSS, MASK, "token-sum-norm", norm=0), ["norm", "0"]),
    ("negative lengths", lambda: L.per_token_weight([3.0, -1.0]), ["lengths"]),
    ("framework", lambda: L.aggregate_as(LOSS, MASK, "openrlhf", "grpo"), ["framework", "openrlhf"]),
    ("trl name", lambda: L.aggregate_as(LOSS, MASK, "trl", "token-mean"), ["token-mean"]),
    (
        "dr_grpo needs max length",
        lambda: L.aggregate_as(LOSS, MASK, "trl", "dr_grpo"),
        ["norm", "max_completion_length"],
    ),
]


@pytest.mark.parametrize("label, call, words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_value_error(label, call, words):
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    for word in words:
        assert word in message, f"{label}: {word!r} missing from {message!r}"
