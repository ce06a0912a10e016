"""Expected update size of each method and the fidelity of a finite group (DESIGN §1.3, §1.4).

For a Bernoulli-logit policy (one logit z per prompt, p = sigmoid(z)) the score of answer y is
y − p, so s̄₊ − s̄₋ = 1 and the per-prompt logit gradient equals the method's function of σ:

    m_Dr(p, G)   = E[σ²] = p(1−p)(1 − 1/G)
    m_GRPO(p, G) = E[σ² / (σ_c + eps)]          (= E[σ] with the paper's ddof 0, eps 0)
                 = Σ_k Binom(k; G, p) · sqrt(k(G−k))/G
    m_DAPO(p, G) = m_GRPO / (1 − P_silent)       (E[σ | not silent], unlimited redraws)

σ is the population std of the group (σ = sqrt(k(G−k))/G); σ_c = σ·sqrt(G/(G − ddof)) is the
std a trainer divides by.  The GRPO sum has no closed form: it is evaluated exactly by
:func:`gsd._binomial.symmetric_expectation`.
"""

from __future__ import annotations

import numpy as np

from ._binomial import symmetric_expectation
from ._validate import InputError, as_ddof, as_eps, as_group_size, as_probability, as_unit_interval
from .methods import UPDATE_METHODS as _ALL_METHODS
from .silent import _minor, _nonsilent, _silent

__all__ = ["UPDATE_METHODS", "expected_update", "fidelity", "fidelity_law"]

#: Methods understood by :func:`expected_update` (every method of :mod:`gsd.methods`).
UPDATE_METHODS = _ALL_METHODS


def _grpo_term(ddof: int, eps: float):
    """f(k, G) = σ² / (σ_c + eps), with 0 for a silent group (k ∈ {0, G})."""

    def f(k, G):
        G = G.astype(np.float64)
        sigma = np.sqrt(k * (G - k)) / G
        sigma_c = sigma * np.sqrt(G / (G - ddof)) if ddof else sigma
        with np.errstate(invalid="ignore", divide="ignore"):
            val = sigma * sigma / (sigma_c + eps)
        return np.where(sigma > 0, val, 0.0)

    return f


def expected_update(p, G, method: str = "grpo", *, ddof: int = 0, eps: float = 0.0, max_draws=None, verifier_noise: float = 0.0):
    """Expected per-prompt logit update m_method(p, G) of a Bernoulli-logit policy (DESIGN §1.3).

    Parameters
    ----------
    p : success probability, array-like in [0, 1]
    G : group size, integer ≥ 1 (≥ 2 for ``"dapo"`` and ``"rloo"``)
    method : ``"grpo"`` (E[σ²/(σ_c+eps)]), ``"dr_grpo"`` (E[σ²] = p(1−p)(1−1/G), exact),
        ``"dapo"`` (GRPO's, conditioned on a non-silent group), or ``"rloo"``
        (E[G/(G−1)·σ²] = p(1−p), exactly the large-G Dr.GRPO update at every G).
    ddof, eps : the std convention GRPO and DAPO divide by (paper: 0, 0).
    max_draws : DAPO only.  ``None`` gives E[σ | not silent] (redraw until a group carries
        signal).  An integer D gives the per-prompt expectation when a silent group is redrawn
        up to D draws in all and then gets zero update: m_DAPO · (1 − P_silent^D).

    verifier_noise : ν ∈ [0, 0.5), the probability that the verifier flips each reward.  The
        rewards are then Bernoulli(q), q = p(1−ν) + (1−p)ν, and given them an answer is right
        with probability p(1−ν)/q (reward 1) or pν/(1−q) (reward 0); the logit score is y − p,
        so the expected contrast s̄₊ − s̄₋ is (1−2ν)·p(1−p)/(q(1−q)) for every group and

            m_method(p, G; ν) = m_method(q, G) · (1−2ν)·p(1−p) / (q(1−q)),

        which is m_method(p, G) at ν = 0.

    At p ∈ {0, 1} every group is silent: GRPO and Dr.GRPO give 0; DAPO with unlimited redraws
    gives its limit as p → 0 (a kept group then has exactly one odd answer,
    σ = sqrt(G−1)/G), and 0 with a finite ``max_draws``.
    """
    if verifier_noise:
        nu = float(as_unit_interval(verifier_noise, "verifier_noise"))
        if nu >= 0.5:
            raise InputError(f"verifier_noise must lie in [0, 0.5) (at 0.5 the reward carries no information), got {verifier_noise!r}")
        p = as_probability(p)
        q = p * (1.0 - nu) + (1.0 - p) * nu
        m = expected_update(q, G, method, ddof=ddof, eps=eps, max_draws=max_draws)
        v = q * (1.0 - q)
        with np.errstate(invalid="ignore", divide="ignore"):
            return m * np.where(v > 0, (1.0 - 2.0 * nu) * p * (1.0 - p) / np.where(v > 0, v, 1.0), 0.0)
    if method not in UPDATE_METHODS:
        raise InputError(f"method must be one of {UPDATE_METHODS}, got {method!r}")
    ddof = as_ddof(ddof)
    eps = as_eps(eps)
    p = as_probability(p)
    G = as_group_size(G, minimum=2 if method in ("dapo", "rloo") else 1)
    if ddof and (G <= ddof).any():
        raise InputError(f"ddof={ddof} needs G >= {ddof + 1}, got G={G.min()}")
    if method == "dr_grpo":
        return p * (1.0 - p) * (1.0 - 1.0 / G)
    if method == "rloo":
        return np.broadcast_to(p * (1.0 - p), np.broadcast_shapes(p.shape, G.shape)).copy()
    f = _grpo_term(ddof, eps)
    m = symmetric_expectation(p, G, f)
    if method == "grpo":
        return m
    # DAPO: E[f | not silent].
    a = _minor(p)
    q = _nonsilent(a, G)
    Gb = np.broadcast_to(G, q.shape)
    one_odd = f(np.ones_like(Gb), Gb)
    with np.errstate(invalid="ignore", divide="ignore"):
        cond = np.where(q > 0, m / np.where(q > 0, q, 1.0), one_odd)
    if max_draws is None:
        return cond
    D = as_group_size(max_draws, "max_draws")
    with np.errstate(divide="ignore"):  # q rounds to 1 when silence is negligible: log1p(−1) = −inf is right
        kept = -np.expm1(D * np.log1p(-q))  # 1 − P_silent^D
    return cond * kept


def fidelity(p, G):
    """φ(p, G) = m_GRPO(p, G) / sqrt(p(1−p)) (DESIGN §1.4), exact.

    The fraction of the large-group GRPO update that a group of G keeps on average (paper's
    convention: ddof 0, eps 0).  0 ≤ φ < 1, and φ → 1 as G → ∞.  φ is nondecreasing in G:
    σ = f(r̄) with f(x) = sqrt(x(1−x)) concave, and the mean of G+1 draws is the conditional
    expectation of the mean of a random G-subset of them, so by Jensen
    E f(r̄_{G+1}) ≥ E f(r̄_G).  (The tests check this by brute force as well.)
    At p ∈ {0, 1}: 0 (the limit, every group silent).
    """
    p = as_probability(p)
    G = as_group_size(G)
    m = symmetric_expectation(p, G, _grpo_term(0, 0.0))
    scale = np.sqrt(p * (1.0 - p))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(scale > 0, m / np.where(scale > 0, scale, 1.0), 0.0)


def fidelity_law(p, G):
    """The delta-method approximation φ ≈ 1 − 1/(8·G·p(1−p)) (DESIGN §1.4).

    Asymptotic in G·p(1−p): it overstates φ for hard prompts (p = 0.05, G = 64: 0.959 against
    the exact 0.945) and goes negative for small G·p(1−p).  −inf at p ∈ {0, 1}.
    """
    p = as_probability(p)
    G = as_group_size(G)
    with np.errstate(divide="ignore"):
        return 1.0 - 1.0 / (8.0 * G * p * (1.0 - p))
