"""Group statistics, advantages and the per-prompt update (:ref:`theory-identity`).

A *group* is the G rewards of one prompt, stored along the last axis: rewards have shape
(..., G) and per-answer scores s_i = ∇θ log π(y_i | x) have shape (..., G, D). Every function
works on numpy arrays and on torch tensors (returning the same kind, on the same device), so
the simulator runs the very code the math tests check.

Conventions (explicit arguments, paper defaults):

* ``ddof``: 0 = population std (the paper), 1 = sample std (``torch.std``'s default, used by
  TRL, verl and OpenRLHF).
* ``eps``: added to the std before dividing (paper: 0).
* a silent group (all rewards equal, σ = 0) gets advantage 0 under every method, never NaN.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..validation import InputError, as_ddof, as_eps, is_torch, shown
from .arrays import FloatOrTensor
from .methods import ADVANTAGE_METHODS

__all__ = [
    "METHODS",
    "group_std",
    "is_silent",
    "advantages",
    "group_update",
    "identity_terms",
]

#: Advantage estimators understood by :func:`advantages` (derived from :mod:`gsd.core.methods`).
METHODS = ADVANTAGE_METHODS


# --------------------------------------------------------------------------- input checks
def check_rewards(rewards: FloatOrTensor, *, binary: bool = False, name: str = "rewards"):
    """Validate a (..., G) reward array; return it as float64 numpy or a float torch tensor."""
    if is_torch(rewards):
        import torch

        r = rewards if rewards.is_floating_point() else rewards.to(torch.get_default_dtype())
        if r.ndim == 0:
            raise InputError(f"{name} must have a group axis (shape (..., G)), got a scalar")
        if r.shape[-1] == 0 or r.numel() == 0:
            raise InputError(f"{name} has an empty group (shape {tuple(r.shape)})")
        if not bool(torch.isfinite(r).all()):
            raise InputError(
                f"{name} must be finite (no NaN or ±inf), got {shown(r[~torch.isfinite(r)].detach().cpu().numpy())}"
            )
        if binary and not bool(((r == 0) | (r == 1)).all()):
            bad = r[(r != 0) & (r != 1)]
            raise InputError(f"{name} must be binary (0 or 1) here, got {shown(bad.detach().cpu().numpy())}")
        return r
    try:
        r = np.asarray(rewards, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be an array of numbers of shape (..., G), got {rewards!r}") from None
    if r.ndim == 0:
        raise InputError(f"{name} must have a group axis (shape (..., G)), got the scalar {r.item()!r}")
    if r.shape[-1] == 0 or r.size == 0:
        raise InputError(f"{name} has an empty group (shape {r.shape})")
    if not np.isfinite(r).all():
        raise InputError(f"{name} must be finite (no NaN or ±inf), got {shown(r[~np.isfinite(r)])}")
    if binary:
        bad = (r != 0) & (r != 1)
        if bad.any():
            raise InputError(
                f"{name} must be binary (0 or 1) for this binary-only formula, got {shown(r[bad])}; "
                "for graded rewards use group_update (g = Cov_group(r, s) / (σ_c + eps))"
            )
    return r


_check_rewards = check_rewards  # the name other branches import


def _check_scores(scores, rewards):
    """Scores must be (..., G, D) with the rewards' (..., G) in front."""
    if is_torch(rewards) != is_torch(scores):
        raise InputError("rewards and scores must both be numpy arrays or both torch tensors")
    if is_torch(scores):
        s = scores if scores.is_floating_point() else scores.to(rewards.dtype)
    else:
        try:
            s = np.asarray(scores, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError(f"scores must be an array of numbers of shape (..., G, D), got {scores!r}") from None
    if tuple(s.shape[:-1]) != tuple(rewards.shape) or s.ndim != rewards.ndim + 1:
        raise InputError(
            f"scores must have shape rewards.shape + (D,) = {tuple(rewards.shape)} + (D,), got {tuple(s.shape)}"
        )
    if s.shape[-1] == 0:
        raise InputError("scores has an empty score dimension D = 0")
    finite = s.isfinite() if is_torch(s) else np.isfinite(s)
    if not bool(finite.all()):
        raise InputError(
            f"scores must be finite (no NaN or ±inf), got {shown(s[~finite].detach().cpu().numpy() if is_torch(s) else s[~finite])}"
        )
    return s


def _group_size_for_ddof(r, ddof: int) -> int:
    G = r.shape[-1]
    if ddof >= G:
        raise InputError(f"ddof={ddof} needs groups of at least {ddof + 1} rewards, got G={G}")
    return G


# --------------------------------------------------------------------------- statistics
def group_std(rewards: ArrayLike, *, ddof: int = 0):
    r"""Standard deviation of each group of rewards (the last axis).

    Parameters
    ----------
    rewards : array_like or torch.Tensor, shape (..., G)
        Rewards, one group per row; finite numbers.
    ddof : {0, 1}, optional
        0: population std (the paper's convention, default); 1: sample std (``torch.std``'s
        default, used by TRL, verl and OpenRLHF). Needs G > ddof.

    Returns
    -------
    numpy.ndarray or torch.Tensor, shape (...)
        The std of each group, of the input's kind (a torch tensor stays on its device).

    Notes
    -----
    .. math::

        \sigma_{\text{ddof}} = \sqrt{\frac{1}{G - \text{ddof}} \sum_i (r_i - \bar r)^2} ,

    so for binary rewards with k right out of G, :math:`\sigma_0 = \sqrt{k(G-k)}/G` and
    :math:`\sigma_1 = \sigma_0 \sqrt{G/(G-1)}` (:ref:`theory-identity`).

    Examples
    --------
    >>> gsd.group_std([[0, 1, 1, 0], [1, 1, 1, 1]])
    array([0.5, 0. ])
    >>> float(gsd.group_std([0, 1, 1, 0], ddof=1))
    0.5773502691896257
    """
    ddof = as_ddof(ddof)
    r = check_rewards(rewards)
    _group_size_for_ddof(r, ddof)
    if is_torch(r):
        return r.std(dim=-1, correction=ddof)
    return r.std(axis=-1, ddof=ddof)


def is_silent(rewards: ArrayLike):
    """Whether each group is silent: all its G rewards are equal.

    Parameters
    ----------
    rewards : array_like or torch.Tensor, shape (..., G)

    Returns
    -------
    numpy.ndarray or torch.Tensor of bool, shape (...)
        True where σ = 0 (for binary rewards: k ∈ {0, G}); such a group carries no learning
        signal (:ref:`theory-silent`).

    Examples
    --------
    >>> gsd.is_silent([[0, 0, 0], [0, 1, 0]])
    array([ True, False])
    """
    r = check_rewards(rewards)
    if is_torch(r):
        return (r == r[..., :1]).all(dim=-1)
    return (r == r[..., :1]).all(axis=-1)


def advantages(rewards: ArrayLike, method: str = "grpo", *, ddof: int = 0, eps: float = 0.0):
    r"""Group-relative advantages A_i of each reward.

    Parameters
    ----------
    rewards : array_like or torch.Tensor, shape (..., G)
        Rewards, one group per row; finite numbers (binary or graded).
    method : {"grpo", "dr_grpo", "rloo"}, optional
        The advantage estimator (default ``"grpo"``).  DAPO uses GRPO's advantages; its dynamic
        sampling acts on which groups are kept (:func:`gsd.dapo_generation_cost`).
    ddof : {0, 1}, optional
        The std GRPO divides by: 0 population (the paper, default), 1 sample.
    eps : float, optional
        Added to the std before dividing (the paper: 0).  Unused by ``"dr_grpo"`` and ``"rloo"``.

    Returns
    -------
    numpy.ndarray or torch.Tensor, shape (..., G)
        float64 for numpy input; a torch tensor of the input's dtype and device otherwise.

    Notes
    -----
    .. math::

        A_i^{\text{GRPO}} = \frac{r_i - \bar r}{\sigma_{\text{ddof}} + \epsilon}, \qquad
        A_i^{\text{Dr.GRPO}} = r_i - \bar r, \qquad
        A_i^{\text{RLOO}} = r_i - \frac{1}{G-1} \sum_{j \ne i} r_j = \frac{G}{G-1} (r_i - \bar r).

    A silent group gets :math:`A_i = 0` under every method (with eps = 0, GRPO would otherwise
    compute 0/0).  See :ref:`theory-identity` and, for the trainers' own settings,
    :func:`gsd.trainer_advantages`.

    Examples
    --------
    >>> gsd.advantages([0, 1, 1, 0])
    array([-1.,  1.,  1., -1.])
    >>> gsd.advantages([0, 1, 1, 0], "dr_grpo")
    array([-0.5,  0.5,  0.5, -0.5])
    >>> gsd.advantages([1, 1, 1])  # silent: zero, not NaN
    array([0., 0., 0.])
    """
    if method not in METHODS:
        raise InputError(f"method must be one of {METHODS}, got {method!r}")
    ddof = as_ddof(ddof)
    eps = as_eps(eps)
    r = check_rewards(rewards)
    G = r.shape[-1]
    torch_in = is_torch(r)
    centred = r - (r.mean(dim=-1, keepdim=True) if torch_in else r.mean(axis=-1, keepdims=True))
    if method == "rloo" and G < 2:
        raise InputError(f"rloo needs groups of at least 2 rewards, got G={G}")
    if method in ("dr_grpo", "rloo"):
        # Silent groups: exactly 0 (the mean of equal floats can differ from them by rounding).
        silent = is_silent(r)
        factor = G / (G - 1) if method == "rloo" else 1.0
        if torch_in:
            return (centred * factor).masked_fill(silent.unsqueeze(-1), 0.0)
        return np.where(silent[..., None], 0.0, centred * factor)
    _group_size_for_ddof(r, ddof)
    silent = is_silent(r)
    # Standardise after scaling by max|r_i − r̄|: the variance of rewards of order 1e-200
    # underflows to 0 and would turn a non-silent group into inf/NaN; scaling does not.
    if torch_in:
        import torch

        scale = centred.abs().amax(dim=-1, keepdim=True)
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        u = centred / scale
        std_u = u.std(dim=-1, correction=ddof, keepdim=True)
        # Silent groups: exactly 0 (the mean of equal floats can differ from them by rounding).
        denom_t = torch.where(silent.unsqueeze(-1), torch.ones_like(std_u), std_u + eps / scale)
        return torch.where(silent.unsqueeze(-1), torch.zeros_like(u), u / denom_t)
    scale = np.abs(centred).max(axis=-1, keepdims=True)
    scale = np.where(scale > 0, scale, 1.0)
    u = centred / scale
    std_u = u.std(axis=-1, ddof=ddof, keepdims=True)
    with np.errstate(over="ignore"):
        denom = np.where(silent[..., None], 1.0, std_u + eps / scale)
    # Silent groups: exactly 0 (the mean of equal floats can differ from them by rounding).
    return np.where(silent[..., None], 0.0, u / denom)


def group_update(rewards: ArrayLike, scores: ArrayLike, method: str = "grpo", *, ddof: int = 0, eps: float = 0.0):
    r"""The per-prompt policy-gradient estimate: the group mean of advantage times score.

    Parameters
    ----------
    rewards : array_like or torch.Tensor, shape (..., G)
        Rewards of each group (binary or graded).
    scores : array_like or torch.Tensor, shape (..., G, D)
        Score vector :math:`s_i = \nabla_\theta \log \pi(y_i \mid x)` of each answer; the same
        kind (numpy or torch) as ``rewards``.
    method, ddof, eps
        As in :func:`advantages`.

    Returns
    -------
    numpy.ndarray or torch.Tensor, shape (..., D)
        The update of each prompt.

    Notes
    -----
    On policy (importance ratio 1, no clipping active):

    .. math::

        g = \frac{1}{G} \sum_{i=1}^{G} A_i s_i
          = \frac{\mathrm{Cov}_{\text{group}}(r, s)}{\sigma_{\text{ddof}} + \epsilon} \ \text{(GRPO)},

    and for binary rewards the identity :math:`g = \sigma^2/(\sigma_c + \epsilon)\,(\bar s_+ - \bar s_-)`
    of :ref:`theory-identity` (:func:`identity_terms` gives its two factors).

    Examples
    --------
    >>> rewards = np.array([0, 1, 1, 0])
    >>> scores = np.array([[0.3], [1.1], [0.7], [-0.2]])
    >>> gsd.group_update(rewards, scores)
    array([0.425])
    >>> gsd.group_update(rewards, scores, "dr_grpo")  # sigma = 0.5 times GRPO's
    array([0.2125])
    """
    A = advantages(rewards, method, ddof=ddof, eps=eps)
    s = _check_scores(scores, A)
    if is_torch(A):
        return (A.unsqueeze(-1) * s).mean(dim=-2)
    return (A[..., None] * s).mean(axis=-2)


def identity_terms(rewards: ArrayLike, scores: ArrayLike):
    r"""The two factors of the group-standard-deviation identity, for binary rewards.

    Parameters
    ----------
    rewards : array_like or torch.Tensor, shape (..., G)
        Binary rewards (0 or 1); anything else raises :class:`gsd.InputError`, since the identity
        does not hold in this form for graded rewards.
    scores : array_like or torch.Tensor, shape (..., G, D)
        Score vector of each answer.

    Returns
    -------
    sigma : numpy.ndarray or torch.Tensor, shape (...)
        :math:`\sigma = \sqrt{k(G-k)}/G`, the population std of the rewards.
    contrast : numpy.ndarray or torch.Tensor, shape (..., D)
        :math:`\bar s_+ - \bar s_-`, the mean score of the right answers minus that of the
        wrong ones; 0 for a silent group (whose update is 0 under every method).

    Notes
    -----
    For every finite G and score dimension (:ref:`theory-identity`, the paper's central
    result [1]_):

    .. math::

        g = \frac{\sigma^2}{\sigma_c + \epsilon} (\bar s_+ - \bar s_-), \qquad
        g_{\text{GRPO}} = \sigma (\bar s_+ - \bar s_-), \qquad
        g_{\text{Dr.GRPO}} = \sigma^2 (\bar s_+ - \bar s_-).

    References
    ----------
    .. [1] Y. Y. Bay and K. A. Yearick, "GRPO, Dr. GRPO, and DAPO Are Three Operations on One
       Number: The Group-Standard-Deviation Identity", arXiv:2607.00152, 2026.

    Examples
    --------
    >>> rewards = np.array([0, 1, 1, 0])
    >>> scores = np.array([[0.3], [1.1], [0.7], [-0.2]])
    >>> sigma, contrast = gsd.identity_terms(rewards, scores)
    >>> float(sigma), contrast
    (0.5, array([0.85]))
    >>> sigma * contrast  # equals gsd.group_update(rewards, scores)
    array([0.425])
    """
    r = check_rewards(rewards, binary=True)
    s = _check_scores(scores, r)
    G = r.shape[-1]
    if is_torch(r):
        k = r.sum(dim=-1)
        sigma = (k * (G - k)).sqrt() / G
        n_pos = k.clamp(min=1).unsqueeze(-1)
        n_neg = (G - k).clamp(min=1).unsqueeze(-1)
        pos = (r.unsqueeze(-1) * s).sum(dim=-2) / n_pos
        neg = ((1 - r).unsqueeze(-1) * s).sum(dim=-2) / n_neg
        silent = ((k == 0) | (k == G)).unsqueeze(-1)
        contrast = (pos - neg).masked_fill(silent, 0.0)
        return sigma, contrast
    k = r.sum(axis=-1)
    sigma = np.sqrt(k * (G - k)) / G
    pos = (r[..., None] * s).sum(axis=-2) / np.maximum(k, 1)[..., None]
    neg = ((1 - r)[..., None] * s).sum(axis=-2) / np.maximum(G - k, 1)[..., None]
    silent = ((k == 0) | (k == G))[..., None]
    contrast = np.where(silent, 0.0, pos - neg)
    return sigma, contrast
