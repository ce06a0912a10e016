"""Softmax with a temperature and classical (Hinton-style) distillation (:ref:`theory-losses`).

Notation: ``z`` are the student's logits, ``v`` the teacher's, both of shape (..., N) over a
vocabulary of N entries; ``q^T = softmax(z / T)`` and ``p^T = softmax(v / T)``. Every function
is a plain torch expression, batched over the leading dimensions and differentiable.

Why the T² in the mixed loss: the soft term's gradient with respect to the student logits is
(q^T − p^T) / T, and q^T − p^T itself shrinks like 1/T as both distributions flatten towards
uniform, so without a correction the soft term's pull fades like 1/T². Multiplying by T² gives
T (q^T − p^T), which tends to a fixed, T-free limit ((z − z̄) − (v − v̄)) / N: the soft term
keeps a comparable weight against the hard-label term whatever temperature is chosen.
"""

from __future__ import annotations

from ..extras import require_torch

torch = require_torch("gsd.losses")

from ..validation import InputError, as_float_tensor, as_positive, as_unit_interval

__all__ = [
    "softmax_t",
    "log_softmax_t",
    "soft_term",
    "soft_term_grad",
    "soft_term_grad_limit",
    "distillation_loss",
    "distillation_grad",
    "temperature_table",
]


def _logits(x, name):
    t = as_float_tensor(x, name, allow="-inf")  # −inf masks a token
    if t.ndim == 0:
        raise InputError(f"{name} must have a vocabulary axis (shape (..., N)), got a scalar")
    return t


def _pair(student_logits, teacher_logits):
    z = _logits(student_logits, "student_logits")
    v = _logits(teacher_logits, "teacher_logits")
    if z.shape != v.shape:
        raise InputError(
            f"student_logits and teacher_logits must have the same shape, got {tuple(z.shape)} and {tuple(v.shape)}"
        )
    return z, v.to(z.dtype)


def softmax_t(logits, T: float = 1.0):
    """Softmax with temperature over the last axis: q_i = exp(z_i / T) / Σ_j exp(z_j / T).

    T > 1 flattens the distribution, T < 1 sharpens it. Seed (§2): logits (2, 0) give
    (0.88, 0.12) at T = 1 and (0.73, 0.27) at T = 2.
    """
    T = as_positive(T, "T")
    return torch.softmax(_tempered(_logits(logits, "logits"), T), dim=-1)


def log_softmax_t(logits, T: float = 1.0):
    """log softmax(z / T) over the last axis (numerically stable)."""
    T = as_positive(T, "T")
    return torch.log_softmax(_tempered(_logits(logits, "logits"), T), dim=-1)


def _tempered(z, T: float):
    """(z − max z)/T: the same softmax as z/T, with no inf − inf when T is tiny (the one-hot limit)."""
    top = z.detach().amax(dim=-1, keepdim=True)
    if not bool(torch.isfinite(top).all()):
        raise InputError("logits: every entry of a distribution is -inf (no token is possible)")
    return (z - top) / T


def _soft_kl(z, v, T):
    # KL(p^T || q^T) from log-probabilities; xlogy keeps 0·log 0 = 0 for underflowed teacher entries.
    log_q = torch.log_softmax(_tempered(z, T), dim=-1)
    log_p = torch.log_softmax(_tempered(v, T), dim=-1)
    p = log_p.exp()
    return (torch.special.xlogy(p, p) - p * log_q).sum(dim=-1)


def soft_term(student_logits, teacher_logits, T: float = 1.0, *, scaled: bool = True):
    """The soft (teacher-matching) term T² · KL(p^T ‖ q^T), shape (...,).

    KL(p^T ‖ q^T) = Σ_i p^T_i log(p^T_i / q^T_i), teacher first (forward KL: the teacher's
    probabilities weight the comparison). ``scaled=False`` drops the T² factor.
    """
    z, v = _pair(student_logits, teacher_logits)
    T = as_positive(T, "T")
    kl = _soft_kl(z, v, T)
    return kl * T**2 if scaled else kl


def soft_term_grad(student_logits, teacher_logits, T: float = 1.0, *, scaled: bool = True):
    """Analytic gradient of the soft term with respect to the student logits, shape (..., N).

    ∂/∂z KL(p^T ‖ q^T) = (q^T − p^T) / T, so with the T² factor the gradient is T (q^T − p^T).
    """
    z, v = _pair(student_logits, teacher_logits)
    T = as_positive(T, "T")
    diff = torch.softmax(_tempered(z, T), dim=-1) - torch.softmax(_tempered(v, T), dim=-1)
    return diff * T if scaled else diff / T


def soft_term_grad_limit(student_logits, teacher_logits):
    """Large-T limit of T² × the soft-term gradient: ((z − z̄) − (v − v̄)) / N, shape (..., N).

    From softmax(z/T)_i = (1 + (z_i − z̄)/T + O(T⁻²)) / N. For zero-mean logits this is
    (z − v) / N, the gradient of the logit-matching loss (1/2N) Σ_i (z_i − v_i)².
    """
    z, v = _pair(student_logits, teacher_logits)
    n = z.shape[-1]
    zc = z - z.mean(dim=-1, keepdim=True)
    vc = v - v.mean(dim=-1, keepdim=True)
    return (zc - vc) / n


def _targets(target, lead_shape, n):
    if isinstance(target, torch.Tensor):
        y = target
    else:
        try:
            y = torch.as_tensor(target)
        except (TypeError, ValueError, RuntimeError):
            raise InputError(f"target must be integer class indices, got {target!r}") from None
    if y.is_floating_point() or y.is_complex() or y.dtype == torch.bool:
        raise InputError(f"target must hold integer class indices, got dtype {y.dtype}")
    if tuple(y.shape) != tuple(lead_shape):
        raise InputError(f"target must have the logits' leading shape {tuple(lead_shape)}, got {tuple(y.shape)}")
    bad = (y < 0) | (y >= n)
    if bool(bad.any()):
        raise InputError(f"target indices must lie in [0, {n}), got {y[bad].tolist()[:6]}")
    return y.long()


def distillation_loss(student_logits, teacher_logits, target, *, T: float = 2.0, lam: float = 0.5):
    """Hinton et al.'s mixed distillation loss per example, shape (...,).

        L = (1 − λ) · (−log q_y at T = 1)  +  λ · T² · KL(p^T ‖ q^T)

    student_logits, teacher_logits : (..., N); target : integer labels of shape (...,);
    T > 0 the temperature shared by both softmaxes; λ ∈ [0, 1] the mix. Average over examples
    yourself. Only the student receives gradients in training; the teacher's logits are
    treated as data (detach them if they come from a model).
    """
    z, v = _pair(student_logits, teacher_logits)
    T = as_positive(T, "T")
    lam = as_unit_interval(lam, "lam")
    y = _targets(target, z.shape[:-1], z.shape[-1])
    hard = -torch.log_softmax(z, dim=-1).gather(-1, y.unsqueeze(-1)).squeeze(-1)
    soft = _soft_kl(z, v, T) * T**2
    return (1.0 - lam) * hard + lam * soft


def distillation_grad(student_logits, teacher_logits, target, *, T: float = 2.0, lam: float = 0.5):
    """Analytic ∂L/∂z of :func:`distillation_loss`, shape (..., N).

        ∂L/∂z = (1 − λ)(q^(1) − e_y) + λ T (q^T − p^T)

    with e_y the one-hot label.
    """
    z, v = _pair(student_logits, teacher_logits)
    T = as_positive(T, "T")
    lam = as_unit_interval(lam, "lam")
    y = _targets(target, z.shape[:-1], z.shape[-1])
    onehot = torch.nn.functional.one_hot(y, z.shape[-1]).to(z.dtype)
    hard = torch.softmax(z, dim=-1) - onehot
    soft = T * (torch.softmax(_tempered(z, T), dim=-1) - torch.softmax(_tempered(v, T), dim=-1))
    return (1.0 - lam) * hard + lam * soft


def temperature_table(student_logits, teacher_logits, temperatures=(1, 2, 4, 8, 16, 32, 64)):
    """How the soft-term gradient scales with T, as a pandas DataFrame (one row per T).

    Columns: ``T``; ``grad_norm`` = ‖(q^T − p^T)/T‖ (no T²), ``scaled_grad_norm`` =
    ‖T (q^T − p^T)‖ (with T²), ``limit_norm`` = ‖((z − z̄) − (v − v̄))/N‖, and
    ``rel_err_to_limit`` = ‖T (q^T − p^T) − limit‖ / ‖limit‖. The unscaled column falls like
    1/T², the scaled one levels off at the limit. Norms are Euclidean over the vocabulary,
    for a single pair of logit vectors (shape (N,)).
    """
    import pandas as pd

    z, v = _pair(student_logits, teacher_logits)
    if z.ndim != 1:
        raise InputError(f"temperature_table takes one pair of logit vectors (shape (N,)), got {tuple(z.shape)}")
    z, v = z.detach().double(), v.detach().double()
    limit = soft_term_grad_limit(z, v)
    rows = []
    for T in temperatures:
        T = as_positive(T, "temperatures")
        scaled = soft_term_grad(z, v, T)
        rows.append(
            {
                "T": T,
                "grad_norm": float((scaled / T**2).norm()),
                "scaled_grad_norm": float(scaled.norm()),
                "limit_norm": float(limit.norm()),
                "rel_err_to_limit": float((scaled - limit).norm() / limit.norm()),
            }
        )
    return pd.DataFrame(rows)
