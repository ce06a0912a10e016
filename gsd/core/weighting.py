"""Implicit objectives, difficulty weighting and gradient-budget shares (:ref:`theory-update`).

In the large-G limit Dr.GRPO ascends the success rate p (logit gradient p(1−p)) and GRPO
ascends the variance-stabilising objective 2·arcsin√p (logit gradient sqrt(p(1−p))): relative
to Dr.GRPO, GRPO weights a prompt by w(p) = 1/sqrt(p(1−p)), which grows at both extremes.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..validation import MAX_EXACT_GROUP_SIZE, MAX_GROUP_SIZE, InputError, as_group_size, as_probability, shown
from .arrays import FloatOrTensor, namespace
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


def arcsin_objective(p: ArrayLike, *, normalized: bool = False):
    r"""GRPO's implicit objective, the variance-stabilising transform of p.

    Parameters
    ----------
    p : array_like
        Probability of a right answer, in [0, 1].
    normalized : bool, optional
        If True, divide by π so that the value lies in [0, 1].

    Returns
    -------
    numpy.ndarray or float
        :math:`F(p) = 2 \arcsin\sqrt p` (or :math:`F(p)/\pi`).

    Notes
    -----
    .. math::

        F'(p) = \frac{1}{\sqrt{p(1-p)}} = w(p), \qquad
        \frac{\mathrm d F}{\mathrm d z} = \sqrt{p(1-p)} ,

    so in the large-G limit GRPO ascends F while Dr.GRPO ascends p (:ref:`theory-update`).

    Examples
    --------
    >>> gsd.arcsin_objective([0, 0.5, 1])
    array([0.        , 1.57079633, 3.14159265])
    """
    p = as_probability(p)
    value = 2.0 * np.arcsin(np.sqrt(p))
    return value / np.pi if normalized else value


def difficulty_weight(p: ArrayLike):
    r"""GRPO's weight on a prompt relative to Dr.GRPO's (the difficulty weight).

    Parameters
    ----------
    p : array_like
        Probability of a right answer, in [0, 1].

    Returns
    -------
    numpy.ndarray or float
        :math:`w(p)`: 2 at p = 1/2, growing at both extremes, inf at p ∈ {0, 1}.

    Notes
    -----
    .. math::

        w(p) = \frac{1}{\sqrt{p(1-p)}} ,

    the ratio of the large-G updates :math:`\sqrt{p(1-p)}` (GRPO) and :math:`p(1-p)`
    (Dr.GRPO); its square sets the group size a prompt needs (:ref:`theory-law`).

    Examples
    --------
    >>> gsd.difficulty_weight([0.5, 0.05])
    array([2.        , 4.58831468])
    """
    p = as_probability(p)
    with np.errstate(divide="ignore"):
        return 1.0 / np.sqrt(p * (1.0 - p))


def large_group_weight(p: ArrayLike, method: str):
    r"""Per-prompt update of a method in the large-group limit.

    Parameters
    ----------
    p : array_like
        Probability of a right answer, in [0, 1].
    method : str
        A method of :mod:`gsd.core.methods` (``"grpo"``, ``"dr_grpo"``, ``"dapo"``, ``"rloo"``).

    Returns
    -------
    numpy.ndarray or float
        :math:`\sqrt{p(1-p)}` for the methods that divide by the group std (GRPO, DAPO),
        :math:`p(1-p)` for the others (Dr.GRPO, RLOO).

    Examples
    --------
    >>> float(gsd.large_group_weight(0.05, "dr_grpo"))
    0.0475
    """
    return large_group_factor(as_probability(p), method_spec(method).divides_by_std)


def large_group_factor(p: FloatOrTensor, divides_by_std: bool, out: FloatOrTensor = None):
    """sqrt(p(1−p)) or p(1−p) (numpy arrays or torch tensors), in one new array (or in ``out``,
    a numpy array of p's shape): a simulator step calls this on 10^5 prompts, where every fresh
    temporary costs page faults (:mod:`gsd.io.heap`)."""
    v = 1.0 - p if out is None else np.subtract(1.0, p, out=out)
    v *= p  # (1 − p)·p, the bits of p·(1 − p)
    if not divides_by_std:
        return v
    return np.sqrt(v, out=v) if isinstance(v, np.ndarray) else namespace(v).sqrt(v)


_large_group = large_group_factor  # the name other branches import


def _weights(p, method, G, ddof=0, eps=0.0):
    if G is None:
        return large_group_weight(p, method)
    # E[σ²/σ] (the methods that divide by the std) is an exact sum, bounded in G; E[σ²] is closed
    G = as_group_size(
        G, minimum=2, maximum=MAX_EXACT_GROUP_SIZE if method_spec(method).divides_by_std else MAX_GROUP_SIZE
    )
    return expected_update(p, G, method, ddof=ddof, eps=eps)


def budget_share(
    p: ArrayLike,
    selected: ArrayLike,
    *,
    method: str = "grpo",
    G: ArrayLike | None = None,
    ddof: int = 0,
    eps: float = 0.0,
):
    r"""Share of the gradient budget that a set of prompts receives.

    Parameters
    ----------
    p : array_like
        Solve rates of all the prompts, in [0, 1].
    selected : array_like of bool
        Mask of p's shape: the prompts whose share is wanted (e.g. :func:`extreme_mask`).
    method : str, optional
        ``"grpo"`` (default), ``"dr_grpo"``, ``"dapo"`` or ``"rloo"``.
    G : int, optional
        None (default): the large-G weights, the paper's choice on real data
        (:func:`large_group_weight`); an integer: the exact finite-G expected update
        (:func:`gsd.expected_update`), 2 ≤ G ≤ 10^9 for the methods that divide by the std
        (exact sums) and ≤ 2^53 for the others.
    ddof, eps : optional
        The std convention GRPO and DAPO divide by at finite G (the paper: 0, 0).

    Returns
    -------
    float
        The share, in [0, 1].

    Notes
    -----
    .. math::

        \mathrm{share}_m(B) = \frac{\sum_{j \in B} m(p_j, G)}{\sum_j m(p_j, G)} .

    On Big-Math the paper's extreme prompts receive 13.9 % under Dr.GRPO and 24.7 % under GRPO
    (:ref:`theory-paper`).

    Examples
    --------
    >>> p = np.array([0.05, 0.5, 0.95])
    >>> gsd.budget_share(p, gsd.extreme_mask(p))
    0.46574911961722804
    >>> gsd.budget_share(p, gsd.extreme_mask(p), method="dr_grpo")
    0.2753623188405798
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
        raise InputError(f"p carries no gradient at all (every p in {{0, 1}}): {shown(p)}")
    return float(w[mask].sum() / total)


def extreme_mask(p: ArrayLike):
    """The paper's "extreme" prompts: 0 < p < 0.1 or 0.9 < p < 1 (:ref:`theory-paper`).

    Examples
    --------
    >>> gsd.extreme_mask([0.0, 0.05, 0.5, 0.95])
    array([False,  True, False,  True])
    """
    p = as_probability(p)
    return ((p > 0) & (p < 0.1)) | ((p > 0.9) & (p < 1))


def medium_mask(p: ArrayLike):
    """The paper's "medium" prompts: 0.4 ≤ p ≤ 0.6 (:ref:`theory-paper`).

    Examples
    --------
    >>> gsd.medium_mask([0.05, 0.4, 0.6])
    array([False,  True,  True])
    """
    p = as_probability(p)
    return (p >= 0.4) & (p <= 0.6)


def decile_index(p: ArrayLike):
    """Decile bin of each p: [0, 0.1) → 0, …, [0.9, 1] → 9.

    Examples
    --------
    >>> gsd.decile_index([0, 0.05, 0.1, 0.95, 1.0])
    array([0, 0, 1, 9, 9])
    """
    p = as_probability(p)
    return np.minimum((p * 10).astype(np.int64), 9)


def decile_shares(p: ArrayLike, *, method: str = "grpo", G: ArrayLike | None = None, ddof: int = 0, eps: float = 0.0):
    """Budget share of each of the ten deciles of p (sums to 1); see :func:`budget_share`.

    Examples
    --------
    >>> gsd.decile_shares([0.05, 0.5, 0.95]).round(3)
    array([0.233, 0.   , 0.   , 0.   , 0.   , 0.534, 0.   , 0.   , 0.   , 0.233])
    """
    p = np.atleast_1d(as_probability(p)).ravel()
    w = _weights(p, method, G, ddof, eps)
    total = w.sum()
    if total <= 0:
        raise InputError(f"p carries no gradient at all (every p in {{0, 1}}): {shown(p)}")
    return np.bincount(decile_index(p), weights=w, minlength=10) / total
