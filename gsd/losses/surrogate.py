"""PPO/GRPO clipped surrogate, its flat regions, dual clip, clip-higher and the GRPO per-token
objective with a k3 penalty to the reference (:ref:`theory-losses`; DeepSeekMath eq. 3).

With ρ = πθ(y_t|s_t) / π_old(y_t|s_t) the probability ratio of a sampled token and A its
advantage, the contribution to *maximise* is

    C = min( ρ A,  clip(ρ, 1 − ε_low, 1 + ε_high) A )

* A > 0: C rises with ρ up to 1 + ε_high, then is flat at (1 + ε_high) A.
* A < 0: C is flat at (1 − ε_low) A below 1 − ε_low, then falls like ρ A.
* A = 0: C = 0 everywhere.

Where C is flat its gradient is zero: the token stops pulling the policy, although nothing stops
the real ratio from crossing the threshold (the clip is not a hard constraint).

Dual clip (Ye et al. 2020; verl ``clip_ratio_c``, default 3): for A < 0 the unclipped branch
ρ A is unbounded below as ρ grows; C_dual = max(C, c A) adds a floor, flat for ρ > c. TRL's
``delta`` (a cap min(ρ, δ) on the unclipped ratio, INTELLECT-2) gives the same function when
δ >= 1 + ε_high.

Clip-higher (DAPO): ε_high > ε_low (e.g. 0.28 vs 0.2) leaves more room for positive-advantage
tokens of low probability to grow before their gradient switches off.
"""

from __future__ import annotations

import numbers

from ..extras import require_torch

torch = require_torch("gsd.losses")

from ..validation import InputError, as_float_tensor, as_open_unit, broadcast_shapes
from .kl import VERL_LOG_RATIO_CLIP, kl_estimate

__all__ = [
    "OBJECTIVE_TRAINERS",
    "VERL_CLIP_RATIO_C",
    "UNCLIPPED",
    "CLIP_HIGH",
    "CLIP_LOW",
    "CLIP_DUAL",
    "clipped_surrogate",
    "clipped_surrogate_unchecked",
    "clipped_surrogate_grad",
    "clip_region",
    "zero_grad_mask",
    "flat_regions",
    "grpo_objective",
]

#: Codes returned by :func:`clip_region`.
UNCLIPPED, CLIP_HIGH, CLIP_LOW, CLIP_DUAL = 0, 1, 2, 3
#: ``trainer`` presets of :func:`grpo_objective` (None = the formula as written).
OBJECTIVE_TRAINERS = (None, "trl", "verl")
#: verl's default dual-clip constant ``clip_ratio_c`` (0.9.1 ``actor.yaml``; it must exceed 1).
VERL_CLIP_RATIO_C = 3.0


def _eps(x, name):
    if not isinstance(x, numbers.Real) or isinstance(x, bool):
        raise InputError(f"{name} must be a number in (0, 1), got {x!r}")
    return float(as_open_unit(x, name))


def _params(eps_low, eps_high, dual_clip):
    lo = _eps(eps_low, "eps_low")
    hi = lo if eps_high is None else _eps(eps_high, "eps_high")
    if dual_clip is not None:
        if (
            not isinstance(dual_clip, numbers.Real)
            or isinstance(dual_clip, bool)
            or not dual_clip > 1.0
            or dual_clip == float("inf")
        ):
            raise InputError(f"dual_clip must be a finite number > 1 (e.g. 3), got {dual_clip!r}")
        dual_clip = float(dual_clip)
    return lo, hi, dual_clip


def _ratio_adv(ratio, advantage):
    r = as_float_tensor(ratio, "ratio")
    a = as_float_tensor(advantage, "advantage").to(r.dtype)
    broadcast_shapes(ratio=r, advantage=a)
    if bool((r.detach() < 0).any()):
        raise InputError("ratio must be >= 0 (a ratio of probabilities)")
    return r, a


def clipped_surrogate(ratio, advantage, *, eps_low: float = 0.2, eps_high: float | None = None, dual_clip=None):
    """C = min(ρA, clip(ρ, 1−ε_low, 1+ε_high)·A), and max(C, c·A) for A < 0 if ``dual_clip=c``.

    ratio, advantage : broadcastable tensors (or numbers); ε_low, ε_high in (0, 1), ε_high
    defaults to ε_low. Returns the objective to maximise (negate it for a loss).

    Seed (§2): ε = 0.2, A = 1, ρ = 1.5 → 1.2;  A = −1, ρ = 0.5 → −0.8.
    """
    lo, hi, c = _params(eps_low, eps_high, dual_clip)
    r, a = _ratio_adv(ratio, advantage)
    out = clipped_surrogate_unchecked(r, a, lo, hi)
    if c is not None:
        out = torch.where(a < 0, torch.maximum(out, c * a), out)
    return out


def clipped_surrogate_unchecked(ratio, advantage, eps_low: float, eps_high: float):
    """min(ρA, clip(ρ, 1−ε_low, 1+ε_high)·A) without input checks (the formula of
    :func:`clipped_surrogate`, for callers such as the simulator that build valid tensors)."""
    return torch.minimum(ratio * advantage, torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * advantage)


def clip_region(ratio, advantage, *, eps_low: float = 0.2, eps_high: float | None = None, dual_clip=None):
    """Which branch of C is active, as an int64 tensor of codes.

    ``CLIP_HIGH`` (1): A > 0 and ρ > 1 + ε_high;  ``CLIP_LOW`` (2): A < 0 and ρ < 1 − ε_low;
    ``CLIP_DUAL`` (3): A < 0 and ρ > c (dual clip only);  ``UNCLIPPED`` (0) otherwise. The first
    two are the events TRL logs as ``clip_ratio/high_*`` and ``clip_ratio/low_*``.
    """
    lo, hi, c = _params(eps_low, eps_high, dual_clip)
    r, a = _ratio_adv(ratio, advantage)
    r, a = torch.broadcast_tensors(r.detach(), a.detach())
    code = torch.zeros(r.shape, dtype=torch.int64, device=r.device)
    code = torch.where((a > 0) & (r > 1.0 + hi), CLIP_HIGH, code)
    code = torch.where((a < 0) & (r < 1.0 - lo), CLIP_LOW, code)
    if c is not None:
        code = torch.where((a < 0) & (r > c), CLIP_DUAL, code)
    return code


def zero_grad_mask(ratio, advantage, *, eps_low: float = 0.2, eps_high: float | None = None, dual_clip=None):
    """Boolean mask of the points where ∂C/∂ρ = 0: a clipped branch is active, or A = 0.

    Boundaries (ρ exactly 1 ± ε or c) count as unclipped, where the one-sided derivative
    from the unclipped side is A.
    """
    code = clip_region(ratio, advantage, eps_low=eps_low, eps_high=eps_high, dual_clip=dual_clip)
    a = as_float_tensor(advantage, "advantage").detach()
    return (code != UNCLIPPED) | torch.broadcast_to(a == 0, code.shape)


def clipped_surrogate_grad(ratio, advantage, *, eps_low: float = 0.2, eps_high: float | None = None, dual_clip=None):
    """Analytic ∂C/∂ρ: A where the unclipped branch ρA is active, 0 on the flat regions."""
    zero = zero_grad_mask(ratio, advantage, eps_low=eps_low, eps_high=eps_high, dual_clip=dual_clip)
    r, a = _ratio_adv(ratio, advantage)
    a = torch.broadcast_to(a, zero.shape)
    return torch.where(zero, torch.zeros_like(a), a)


def flat_regions(advantage: float, *, eps_low: float = 0.2, eps_high: float | None = None, dual_clip=None):
    """Intervals of ρ ∈ [0, ∞) on which C is constant (zero gradient) for a fixed advantage.

    Returns a list of ``(start, end)`` pairs: A > 0 → [(1 + ε_high, inf)];
    A < 0 → [(0, 1 − ε_low)] plus (c, inf) with a dual clip; A = 0 → [(0, inf)].
    """
    lo, hi, c = _params(eps_low, eps_high, dual_clip)
    if not isinstance(advantage, numbers.Real) or isinstance(advantage, bool) or advantage != advantage:
        raise InputError(f"advantage must be a number, got {advantage!r}")
    inf = float("inf")
    if advantage > 0:
        return [(1.0 + hi, inf)]
    if advantage < 0:
        return [(0.0, 1.0 - lo)] + ([(c, inf)] if c is not None else [])
    return [(0.0, inf)]


def grpo_objective(
    logp,
    logp_old,
    advantages,
    logp_ref=None,
    *,
    eps_low: float = 0.2,
    eps_high: float | None = None,
    beta: float = 0.0,
    dual_clip=None,
    trainer: str | None = None,
):
    """GRPO's per-token objective: C(ρ_t, A) − β · k3_t, shape (..., T).

        ρ_t  = exp(log πθ(y_t) − log π_old(y_t))
        k3_t = π_ref(y_t)/πθ(y_t) − 1 − log(π_ref(y_t)/πθ(y_t))     (KL(πθ ‖ π_ref) estimate)

    logp, logp_old, logp_ref : per-token log-probabilities of the sampled tokens, (..., T);
    advantages : (...,) one per response (broadcast over its tokens) or (..., T) per token;
    β >= 0 (0 = no penalty, TRL's default; then ``logp_ref`` may be None). The per-token loss
    that trainers aggregate (see :mod:`gsd.losses.aggregation`) is the negative of this.

    ``trainer`` (see :ref:`theory-losses`):

    * None: the formula as written (TRL 1.16 with ``use_bias_correction_kl=False``);
    * ``"trl"``: TRL 1.16's ``_compute_loss`` defaults for the grpo, bnpo, dr_grpo and dapo loss
      types at ``importance_sampling_level="token"``: nothing clamped (its ``delta`` is
      ``dual_clip`` here), and ``use_bias_correction_kl=True``, so the penalty is β·ρ_t·k3_t — the
      same value on-policy (ρ = 1) but a different gradient, since ρ is differentiated too;
    * ``"verl"`` (verl 0.9.1 ``compute_policy_loss_vanilla`` with ``kl_loss_type=low_var_kl``):
      log(ρ) clamped to ±20 before exponentiating, the dual clip always on (``dual_clip``
      defaults to verl's ``clip_ratio_c`` = 3), and k3 clamped as in
      :func:`~gsd.losses.kl.kl_estimate` (log-ratio ±20, value ≤ 10).  Where a clamp is active
      the gradient is 0; the value differs from the exact one only for ``|log ρ| > 20`` with A > 0 and
      ρ < e^−20 (the dual clip, for c <= e^20, and the ε-clip already flatten the other cases)
      and where k3 > 10.
    """
    if trainer not in OBJECTIVE_TRAINERS:
        raise InputError(f"trainer must be one of {OBJECTIVE_TRAINERS}, got {trainer!r}")
    verl = trainer == "verl"
    if verl and dual_clip is None:
        dual_clip = VERL_CLIP_RATIO_C
    if not isinstance(beta, numbers.Real) or isinstance(beta, bool) or not (0.0 <= beta < float("inf")):
        raise InputError(f"beta must be a finite number >= 0, got {beta!r}")
    lp = as_float_tensor(logp, "logp")
    lo_ = as_float_tensor(logp_old, "logp_old").to(lp.dtype)
    if lo_.shape != lp.shape:
        raise InputError(f"logp and logp_old must have the same shape, got {tuple(lp.shape)} and {tuple(lo_.shape)}")
    a = as_float_tensor(advantages, "advantages").to(lp.dtype)
    if a.ndim == lp.ndim - 1 and tuple(a.shape) == tuple(lp.shape[:-1]):
        a = a.unsqueeze(-1)  # one advantage per response, shared by its tokens
    broadcast_shapes(logp=lp, advantages=a)
    log_ratio = lp - lo_
    if verl:
        log_ratio = log_ratio.clamp(-VERL_LOG_RATIO_CLIP, VERL_LOG_RATIO_CLIP)
    ratio = torch.exp(log_ratio)
    obj = clipped_surrogate(ratio, a, eps_low=eps_low, eps_high=eps_high, dual_clip=dual_clip)
    obj = torch.broadcast_to(obj, torch.broadcast_shapes(obj.shape, lp.shape))
    if beta > 0:
        if logp_ref is None:
            raise InputError("logp_ref is required when beta > 0")
        lr = as_float_tensor(logp_ref, "logp_ref").to(lp.dtype)
        if lr.shape != lp.shape:
            raise InputError(f"logp_ref must have logp's shape {tuple(lp.shape)}, got {tuple(lr.shape)}")
        kl = kl_estimate(lp, lr, "k3", trainer=trainer)
        if trainer == "trl":
            kl = kl * ratio  # TRL's use_bias_correction_kl (default True): the importance-weighted k3
        obj = obj - beta * kl
    return obj
