"""Forward and reverse KL, on-policy distillation and sampled KL estimators (:ref:`theory-losses`).

Two families of inputs:

* full distributions — probability tensors of shape (..., V) over a vocabulary of V entries
  (checked: entries >= 0, each distribution sums to 1 within 1e-6);
* sampled tokens — the log-probabilities that two models give to the token that was actually
  sampled, tensors of any (broadcastable) shape, as trainers store them per position.

Direction matters. ``KL(a ‖ b) = Σ_v a(v) log(a(v) / b(v))``: the *first* argument weights the
comparison. With p the teacher (or reference) and q the student (or policy being trained):

* forward KL(p ‖ q) (classical distillation) weights each entry by the teacher's p(v);
* reverse KL(q ‖ p) (on-policy distillation, the GRPO penalty) weights it by the student's
  q(v), and is what you estimate from tokens the student itself sampled.

Sampled estimators, for a token y drawn from q (the sampling policy) and r = p(y)/q(y):

    k1 = log(q/p) = −log r          unbiased for KL(q ‖ p); can be negative
    k2 = ½ log²(q/p)                biased (E_q[k2] ≈ KL only when q ≈ p); always >= 0
    k3 = r − 1 − log r              unbiased for KL(q ‖ p) (E_q[r] = 1); always >= 0

(J. Schulman, "Approximating KL divergence", 2020.) In GRPO the tokens come from π_old, not
from the current πθ, so the match is exact only on-policy (ratio 1).
"""

from __future__ import annotations

from typing import NamedTuple

from ..extras import require_torch

torch = require_torch("gsd.losses")

from ..validation import InputError, as_float_tensor, as_positive, broadcast_shapes, check_distribution

__all__ = [
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
    "k3_of_log_ratio",
    "kl_estimate",
    "estimator_moments",
    "sample_estimator",
    "estimator_table",
    "estimator_sweep",
]

#: Names accepted by :func:`kl_estimate` and the estimator analyses.
KL_ESTIMATORS = ("k1", "k2", "k3")
#: ``trainer`` presets of :func:`kl_estimate` (None = the exact estimators).
KL_TRAINERS = (None, "trl", "verl")
#: verl 0.9.1 clamps log(p/q) to ±20 before k3 (``kl_penalty_forward``) and the policy log-ratio
#: log(πθ/π_old) likewise before the importance ratio (``compute_policy_loss_vanilla``).
VERL_LOG_RATIO_CLIP = 20.0
#: verl 0.9.1 clamps k3 to at most 10.
VERL_K3_MAX = 10.0


class KLTerms(NamedTuple):
    """The per-entry pieces of KL(a ‖ b) = Σ_v weight(v) · log_ratio(v)."""

    weight: torch.Tensor  # a(v): the first argument's probability
    log_ratio: torch.Tensor  # log(a(v) / b(v))
    contribution: torch.Tensor  # a(v) log(a(v)/b(v)), 0 where a(v) = 0


def _dist(x, name):
    t = as_float_tensor(x, name)
    check_distribution(t, name)
    return t


def _dist_pair(a, b, name_a, name_b):
    a = _dist(a, name_a)
    b = _dist(b, name_b)
    if a.shape != b.shape:
        raise InputError(f"{name_a} and {name_b} must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    return a, b.to(a.dtype)


def _contribution(a, b):
    # a log(a/b) with the convention 0 log(0/b) = 0; a > 0 = b gives +inf, as it should.
    return torch.special.xlogy(a, a) - torch.special.xlogy(a, b)


def kl_divergence(p, q):
    """KL(p ‖ q) = Σ_v p(v) log(p(v) / q(v)) over the last axis, shape (...,).

    p, q : probability tensors (..., V). Terms with p(v) = 0 count 0; p(v) > 0 = q(v) gives inf.
    """
    p, q = _dist_pair(p, q, "p", "q")
    return _contribution(p, q).sum(dim=-1)


def kl_terms(p, q) -> KLTerms:
    """The per-entry decomposition of KL(p ‖ q): weight p(v), log-ratio log(p/q), product."""
    p, q = _dist_pair(p, q, "p", "q")
    return KLTerms(weight=p, log_ratio=torch.log(p) - torch.log(q), contribution=_contribution(p, q))


def forward_kl_terms(teacher, student) -> KLTerms:
    """Forward KL(teacher ‖ student): each entry weighted by the teacher's probability.

    Seed (§2): teacher (0.8, 0.2), student (0.4, 0.6) → weights (0.8, 0.2) on the log-ratios
    log(p/q) = (log 2, log 1/3).
    """
    teacher, student = _dist_pair(teacher, student, "teacher", "student")
    return kl_terms(teacher, student)


def reverse_kl_terms(teacher, student) -> KLTerms:
    """Reverse KL(student ‖ teacher): each entry weighted by the student's probability.

    Seed (§2): teacher (0.8, 0.2), student (0.4, 0.6) → weights (0.4, 0.6) on log(q/p); the
    heavier weight moves from "cat" to "dog".
    """
    teacher, student = _dist_pair(teacher, student, "teacher", "student")
    return kl_terms(student, teacher)


def _mask_for(mask, shape, like):
    if mask is None:
        return None
    m = as_float_tensor(mask, "mask").to(like.dtype)
    if tuple(m.shape) != tuple(shape):
        raise InputError(f"mask must have shape {tuple(shape)} (the positions), got {tuple(m.shape)}")
    if bool(((m != 0) & (m != 1)).any()):
        raise InputError("mask must hold only 0 and 1")
    return m


def reverse_kl_per_token(student, teacher, mask=None):
    """Per-position full-vocabulary reverse KL d_t = Σ_v q_t(v) log(q_t(v) / p_t(v)).

    student, teacher : next-token distributions (..., T, V) at the same prefixes (the prefixes
    come from a response the student sampled). Returns d of shape (..., T), zeroed where the
    optional 0/1 ``mask`` (..., T) is 0. Each d_t >= 0.

    Seed (§2): q = (0.5, 0.2, 0.3), p = (0.6, 0.3, 0.1) give d_t ≈ 0.157.
    """
    q, p = _dist_pair(student, teacher, "student", "teacher")
    d = _contribution(q, p).sum(dim=-1)
    m = _mask_for(mask, d.shape, d)
    return d if m is None else d * m


def sequence_reverse_kl(student, teacher, mask=None):
    """Σ_t d_t over a sampled response: one sample of KL(q_θ ‖ p) for the whole sequence.

    Averaging it over responses sampled from the student gives the sequence-level reverse KL
    D_KL(q_θ ‖ p) = E_{y∼q_θ}[Σ_t d_t]. Shapes as :func:`reverse_kl_per_token`; returns (...,).
    """
    return reverse_kl_per_token(student, teacher, mask).sum(dim=-1)


def sampled_log_ratio(student, teacher, tokens):
    """One-sampled-token estimate log(q_t(y_t) / p_t(y_t)) at the sampled tokens, shape (..., T).

    student, teacher : (..., T, V) distributions; tokens : integer ids (..., T). Unlike d_t this
    can be negative: seed (§2), q = (0.5, 0.2, 0.3), p = (0.6, 0.3, 0.1), sampled "cat"
    (index 0) gives log(0.5/0.6) ≈ −0.182 while d_t ≈ 0.157. Its average over y ∼ q_t is d_t.
    """
    q, p = _dist_pair(student, teacher, "student", "teacher")
    if not isinstance(tokens, torch.Tensor):
        try:
            tokens = torch.as_tensor(tokens)
        except (TypeError, ValueError, RuntimeError):
            raise InputError(f"tokens must be integer token ids, got {tokens!r}") from None
    if tokens.is_floating_point() or tokens.dtype == torch.bool:
        raise InputError(f"tokens must hold integer ids, got dtype {tokens.dtype}")
    if tuple(tokens.shape) != tuple(q.shape[:-1]):
        raise InputError(f"tokens must have shape {tuple(q.shape[:-1])}, got {tuple(tokens.shape)}")
    V = q.shape[-1]
    bad = (tokens < 0) | (tokens >= V)
    if bool(bad.any()):
        raise InputError(f"tokens must lie in [0, {V}), got {tokens[bad].tolist()[:6]}")
    idx = tokens.long().unsqueeze(-1)
    return (torch.log(q.gather(-1, idx)) - torch.log(p.gather(-1, idx))).squeeze(-1)


# --------------------------------------------------------------------------- sampled estimators
def _logprob_pair(logq, logp):
    lq = as_float_tensor(logq, "logq")
    lp = as_float_tensor(logp, "logp", allow="-inf")  # the reference may give a sampled token 0: KL = inf
    broadcast_shapes(logq=lq, logp=lp)
    # A little slack: log_softmax in float32 can round a certain token to a hair above 0.
    for name, t in (("logq", lq), ("logp", lp)):
        if bool((t.detach() > 1e-6).any()):
            raise InputError(f"{name} must be log-probabilities (<= 0), got a maximum of {float(t.detach().max())!r}")
    return lq, lp.to(lq.dtype)


def k1(logq, logp):
    """k1 = log q(y) − log p(y) = log(q/p), for y sampled from q (unbiased for KL(q‖p)).

    logq : log-probability of the sampled token under the sampling policy q (the one being
    trained); logp : under the reference p. Broadcast elementwise.
    """
    lq, lp = _logprob_pair(logq, logp)
    return lq - lp


def k2(logq, logp):
    """k2 = ½ (log q(y) − log p(y))² = ½ log²(q/p), y ∼ q: >= 0, biased for KL(q‖p)."""
    lq, lp = _logprob_pair(logq, logp)
    return 0.5 * (lq - lp) ** 2


def k3(logq, logp, *, log_ratio_clip: float | None = None, max_value: float | None = None):
    """k3 = p/q − 1 − log(p/q), y ∼ q: >= 0 and unbiased for KL(q‖p) (since E_q[p/q] = 1).

    The form TRL (``beta`` > 0) and verl (``low_var_kl`` / ``k3``) use for GRPO's penalty.

    Parameters
    ----------
    logq, logp : tensor_like
        Log-probabilities of the sampled token under the sampling policy q and the reference p.
    log_ratio_clip : float, optional
        Clamp log(p/q) to [−c, c] before the formula (verl: 20).
    max_value : float, optional
        Clamp the result to at most this value (verl: 10).

    Returns
    -------
    torch.Tensor
        Elementwise k3.  Where a clamp is active its gradient is 0, as in the trainer.

    Notes
    -----
    With both clamps unset this is the exact estimator, as TRL 1.16 computes it (TRL then
    multiplies it by the importance ratio by default, ``use_bias_correction_kl=True``: see
    :func:`~gsd.losses.surrogate.grpo_objective` with ``trainer="trl"``).  verl 0.9.1
    (``kl_penalty_forward``) clamps the log-ratio to ±20 and k3 to [−10, 10];
    ``kl_estimate(..., trainer="verl")`` applies both, so k3 never exceeds 10 there.
    """
    lq, lp = _logprob_pair(logq, logp)
    d = lp - lq
    if log_ratio_clip is not None:
        c = as_positive(log_ratio_clip, "log_ratio_clip")
        d = d.clamp(-c, c)
    out = k3_of_log_ratio(d)
    if max_value is not None:
        out = out.clamp(max=as_positive(max_value, "max_value"))
    return out


def k3_of_log_ratio(log_ratio):
    """k3 = expm1(d) − d with d = log p(y) − log q(y), without input checks (the formula of
    :func:`k3`, for callers such as the simulator that build valid tensors themselves)."""
    return torch.expm1(log_ratio) - log_ratio


def kl_estimate(logq, logp, kind: str = "k3", *, trainer: str | None = None):
    """Dispatch to :func:`k1`, :func:`k2` or :func:`k3` by name, optionally as a trainer computes it.

    Parameters
    ----------
    logq, logp : tensor_like
        Log-probabilities of the sampled token under the sampling policy and the reference.
    kind : {"k1", "k2", "k3"}
        verl calls them ``kl``/``k1``, ``mse``/``k2`` and ``low_var_kl``/``k3``.
    trainer : {None, "trl", "verl"}
        None or ``"trl"``: the exact estimators (TRL 1.16 clamps nothing).  ``"verl"``: k3 with
        the log-ratio clamped to ±:data:`VERL_LOG_RATIO_CLIP` and the result to at most
        :data:`VERL_K3_MAX` (verl 0.9.1 ``kl_penalty_forward``); k1 and k2 unclamped, as there.

    Notes
    -----
    verl also offers ``abs`` and straight-through variants (``k3+``: the value of k3 with the
    gradient of k2); they are not reproduced here.
    """
    if kind not in KL_ESTIMATORS:
        raise InputError(f"kind must be one of {KL_ESTIMATORS}, got {kind!r}")
    if trainer not in KL_TRAINERS:
        raise InputError(f"trainer must be one of {KL_TRAINERS}, got {trainer!r}")
    if kind == "k3" and trainer == "verl":
        return k3(logq, logp, log_ratio_clip=VERL_LOG_RATIO_CLIP, max_value=VERL_K3_MAX)
    return {"k1": k1, "k2": k2, "k3": k3}[kind](logq, logp)


def estimator_moments(q, p, kind: str = "k3"):
    """Exact mean and variance of a sampled estimator under y ∼ q, by enumerating the vocabulary.

    E_q[k] = Σ_v q(v) k(v),  Var_q[k] = Σ_v q(v) k(v)² − E_q[k]².  q, p : (..., V); entries
    with q(v) = 0 are never sampled and do not count. Returns ``(mean, var)``, each (...,).
    """
    q, p = _dist_pair(q, p, "q", "p")
    if kind not in KL_ESTIMATORS:
        raise InputError(f"kind must be one of {KL_ESTIMATORS}, got {kind!r}")
    seen = q > 0
    # Values on unseen entries are irrelevant; give them a harmless log-probability.
    lq = torch.where(seen, torch.log(q), torch.zeros_like(q))
    lp = torch.where(seen, torch.log(p), torch.zeros_like(p))
    k = torch.where(seen, kl_estimate(lq, lp, kind), torch.zeros_like(q))
    mean = (q * k).sum(dim=-1)
    var = (q * k**2).sum(dim=-1) - mean**2
    return mean, var.clamp_min(0.0)


def sample_estimator(q, p, kind: str = "k3", n: int = 10_000, *, generator: torch.Generator | None = None):
    """n Monte-Carlo values of an estimator with tokens drawn from q: tensor (n,) for q, p of shape (V,)."""
    q, p = _dist_pair(q, p, "q", "p")
    if q.ndim != 1:
        raise InputError(f"sample_estimator takes single distributions (shape (V,)), got {tuple(q.shape)}")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise InputError(f"n must be an integer >= 1, got {n!r}")
    y = torch.multinomial(q.detach(), n, replacement=True, generator=generator)
    return kl_estimate(torch.log(q[y]), torch.log(p[y]), kind)


def estimator_table(q, p, *, n: int = 20_000, seed: int = 0):
    """k1, k2, k3 side by side for one pair of distributions, as a pandas DataFrame.

    For tokens sampled from q: the exact mean and standard deviation (enumeration), a Monte-Carlo
    mean and its standard error from ``n`` draws, the two KL directions, and the bias of each
    estimator for KL(q ‖ p). k1 and k3 have bias 0; k2 does not (and k1 takes negative values).
    """
    import pandas as pd

    q, p = _dist_pair(q, p, "q", "p")
    q, p = q.detach().double(), p.detach().double()
    gen = torch.Generator().manual_seed(seed)
    kl_qp = float(kl_divergence(q, p))
    kl_pq = float(kl_divergence(p, q))
    rows = []
    for kind in KL_ESTIMATORS:
        mean, var = estimator_moments(q, p, kind)
        draws = sample_estimator(q, p, kind, n, generator=gen)
        rows.append(
            {
                "estimator": kind,
                "exact_mean": float(mean),
                "exact_std": float(var.sqrt()),
                "mc_mean": float(draws.mean()),
                "mc_se": float(draws.std() / n**0.5),
                "min_value": float(draws.min()),
                "kl_qp": kl_qp,
                "kl_pq": kl_pq,
                "bias_for_kl_qp": float(mean) - kl_qp,
            }
        )
    return pd.DataFrame(rows).set_index("estimator")


def estimator_sweep(q, direction, scales=None):
    """Exact estimator means and standard deviations as p moves away from q (DataFrame).

    p_s = softmax(log q + s · direction) for each scale s (s = 0 gives p = q). Columns:
    ``scale``, ``kl_qp``, ``kl_pq`` and, for each of k1/k2/k3, ``mean_<k>`` and ``std_<k>``.
    Shows k1/k3 tracking KL(q‖p) exactly and k2 drifting away from it, and k3's smaller spread.
    """
    import pandas as pd

    q = _dist(q, "q").detach().double()
    d = as_float_tensor(direction, "direction").detach().double()
    if d.shape != q.shape or q.ndim != 1:
        raise InputError(f"direction must have q's shape (V,), got {tuple(d.shape)} and {tuple(q.shape)}")
    if scales is None:
        scales = torch.linspace(0.0, 3.0, 31, dtype=torch.float64).tolist()
    rows = []
    for s in scales:
        p = torch.softmax(torch.log(q) + float(s) * d, dim=-1)
        row = {"scale": float(s), "kl_qp": float(kl_divergence(q, p)), "kl_pq": float(kl_divergence(p, q))}
        for kind in KL_ESTIMATORS:
            mean, var = estimator_moments(q, p, kind)
            row[f"mean_{kind}"] = float(mean)
            row[f"std_{kind}"] = float(var.sqrt())
        rows.append(row)
    return pd.DataFrame(rows)
