"""Implicit objectives, difficulty weighting and gradient-budget shares (DESIGN §1.3, §1.5).

In the large-G limit Dr.GRPO ascends the success rate p (logit gradient p(1−p)) and GRPO
ascends the variance-stabilising objective 2·arcsin√p (logit gradient sqrt(p(1−p))): relative
to Dr.GRPO, GRPO weights a prompt by w(p) = 1/sqrt(p(1−p)), which grows at both extremes.
"""

from __future__ import annotations

import numpy as np

from ._validate import InputError, _show, as_group_size, as_probability
from .methods import method_spec
from .update import expected_update

__all__ = [
    "arcsin_objective",
    "difficulty_weight",
    "large_group_weight",
    "budget_share",
    "extreme_mask",
    "medium_mask",
    "decile_index",
    "decile_shares",
]


def arcsin_objective(p, *, normalized: bool = False):
    """GRPO's implicit objective 2·arcsin(√p) (DESIGN §1.3); ``normalized`` gives (2/π)·arcsin√p ∈ [0, 1].

    Its derivative in p is 1/sqrt(p(1−p)) = :func:`difficulty_weight`, and in the logit z it is
    sqrt(p(1−p)), the large-G GRPO update.
    """
    p = as_probability(p)
    value = 2.0 * np.arcsin(np.sqrt(p))
    return value / np.pi if normalized else value


def difficulty_weight(p):
    """w(p) = 1/sqrt(p(1−p)): GRPO's weight on a prompt relative to Dr.GRPO (DESIGN §1.3).

    2 at p = 1/2, inf at p ∈ {0, 1}.
    """
    p = as_probability(p)
    with np.errstate(divide="ignore"):
        return 1.0 / np.sqrt(p * (1.0 - p))


def large_group_weight(p, method: str):
    """Large-G per-prompt update: sqrt(p(1−p)) for the methods that divide by the group std
    (GRPO, DAPO), p(1−p) for the others (Dr.GRPO, RLOO); see :mod:`gsd.methods`."""
    spec = method_spec(method)
    p = as_probability(p)
    v = p * (1.0 - p)
    return np.sqrt(v) if spec.divides_by_std else v


def _weights(p, method, G, ddof=0, eps=0.0):
    if G is None:
        return large_group_weight(p, method)
    G = as_group_size(G, minimum=2)
    return expected_update(p, G, method, ddof=ddof, eps=eps)


def budget_share(p, selected, *, method: str = "grpo", G=None, ddof: int = 0, eps: float = 0.0):
    """Share of the gradient budget that the prompts in ``selected`` receive (DESIGN §1.3).

    share = Σ_{j ∈ selected} m(p_j) / Σ_j m(p_j), with m the large-G weight (``G=None``, the
    paper's choice on real data: sqrt(p(1−p)) for GRPO, p(1−p) for Dr.GRPO) or the exact
    finite-G expected update :func:`gsd.update.expected_update` for an integer ``G``, with the
    std convention ``ddof``/``eps`` that GRPO and DAPO divide by (paper: 0, 0; ignored for
    ``G=None``, where the convention no longer matters).

    ``selected`` is a boolean mask of p's shape.
    """
    p = np.atleast_1d(as_probability(p))
    mask = np.asarray(selected)
    if mask.dtype != np.bool_:
        raise InputError(f"selected must be a boolean mask, got dtype {mask.dtype}")
    if mask.shape != p.shape:
        raise InputError(f"selected must have p's shape {p.shape}, got {mask.shape}")
    w = _weights(p, method, G, ddof, eps)
    total = w.sum()
    if total <= 0:
        raise InputError(f"p carries no gradient at all (every p in {{0, 1}}): {_show(p)}")
    return float(w[mask].sum() / total)


def extreme_mask(p):
    """The paper's "extreme" prompts: 0 < p < 0.1 or 0.9 < p < 1 (DESIGN §1.5)."""
    p = as_probability(p)
    return ((p > 0) & (p < 0.1)) | ((p > 0.9) & (p < 1))


def medium_mask(p):
    """The paper's "medium" prompts: 0.4 ≤ p ≤ 0.6 (DESIGN §1.5)."""
    p = as_probability(p)
    return (p >= 0.4) & (p <= 0.6)


def decile_index(p):
    """Decile bin of each p: [0, 0.1) → 0, …, [0.9, 1] → 9."""
    p = as_probability(p)
    return np.minimum((p * 10).astype(np.int64), 9)


def decile_shares(p, *, method: str = "grpo", G=None, ddof: int = 0, eps: float = 0.0):
    """Budget share of each of the ten deciles of p (sums to 1); see :func:`budget_share`."""
    p = np.atleast_1d(as_probability(p)).ravel()
    w = _weights(p, method, G, ddof, eps)
    total = w.sum()
    if total <= 0:
        raise InputError(f"p carries no gradient at all (every p in {{0, 1}}): {_show(p)}")
    return np.bincount(decile_index(p), weights=w, minlength=10) / total
