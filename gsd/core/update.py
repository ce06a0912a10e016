"""Expected update size of each method and the fidelity of a finite group.

See :ref:`theory-update` and :ref:`theory-law`.

For a Bernoulli-logit policy (one logit z per prompt, p = sigmoid(z)) the score of answer y is
y − p, so s̄₊ − s̄₋ = 1 and the per-prompt logit gradient equals the method's function of σ:

    m_Dr(p, G)   = E[σ²] = p(1−p)(1 − 1/G)
    m_GRPO(p, G) = E[σ² / (σ_c + eps)]          (= E[σ] with the paper's ddof 0, eps 0)
                 = Σ_k Binom(k; G, p) · sqrt(k(G−k))/G
    m_DAPO(p, G) = m_GRPO / (1 − P_silent)       (E[σ | not silent], unlimited redraws)

σ is the population std of the group (σ = sqrt(k(G−k))/G); σ_c = σ·sqrt(G/(G − ddof)) is the
std a trainer divides by.  The GRPO sum has no closed form: it is evaluated exactly by
:func:`gsd.core.binomial.symmetric_expectation`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from ..validation import (
    MAX_EXACT_GROUP_SIZE,
    MAX_GROUP_SIZE,
    InputError,
    as_ddof,
    as_eps,
    as_group_size,
    as_probability,
    as_unit_interval,
    broadcast,
    numpy_result,
)
from .arrays import FloatOrTensor, as_float64, is_tensor, namespace
from .binomial import symmetric_expectation
from .methods import METHOD_SPECS, method_spec
from .methods import UPDATE_METHODS as _ALL_METHODS
from .silent import minor_rate, nonsilent_from_minor

__all__ = [
    "UPDATE_METHODS",
    "CLOSED_FORMS",
    "ClosedForm",
    "closed_form",
    "expected_update",
    "fidelity",
    "fidelity_law",
    "grpo_term",
    "method_update",
    "noisy_update",
]

#: Methods understood by :func:`expected_update` (every method of :mod:`gsd.core.methods`).
UPDATE_METHODS = _ALL_METHODS


@functools.lru_cache(maxsize=None)
def grpo_term(ddof: int, eps: float):
    """f(k, G) = σ² / (σ_c + eps), with 0 for a silent group (k ∈ {0, G}).

    σ = sqrt(k(G−k))/G is the population std of the group's rewards and σ_c the std the trainer
    divides by (σ·sqrt(G/(G−ddof))).  In the paper's convention (ddof 0, eps 0) f is σ itself,
    returned as such (σ²/σ would round twice).  The one source of the GRPO term for the exact
    expectations of :func:`expected_update`, the allocation values of :mod:`gsd.allocation` and
    the simulator's ledger on its device (k, G: numpy arrays or torch tensors).  One function
    object per (ddof, eps) (cached), so that tables built from it (:mod:`gsd.core.chebyshev`) are
    found again.
    """

    def f(k, G):
        xp = namespace(G)
        G = as_float64(G)
        sigma = xp.sqrt(k * (G - k)) / G
        if not ddof and not eps:
            return sigma
        sigma_c = sigma * xp.sqrt(G / (G - ddof)) if ddof else sigma
        with np.errstate(invalid="ignore", divide="ignore"):
            val = sigma * sigma / (sigma_c + eps)
        return xp.where(sigma > 0, val, 0.0)

    return f


_grpo_term = grpo_term  # the name other branches import


def noisy_update(m: FloatOrTensor, p: FloatOrTensor, q: FloatOrTensor, nu: float):
    """The update at verifier noise ν from the noiseless one at the reward rate q: m(q, G)
    times the expected contrast (1 − 2ν)·p(1−p)/(q(1−q)); 0 where q(1−q) = 0."""
    xp = namespace(m)
    v = q * (1.0 - q)
    with np.errstate(invalid="ignore", divide="ignore"):
        return m * xp.where(v > 0, (1.0 - 2.0 * nu) * p * (1.0 - p) / xp.where(v > 0, v, 1.0), 0.0)


_noisy = noisy_update


def _dr_grpo_update(p, G, Gf, f, expectation, max_draws):
    """E[σ²] = p(1−p)(1 − 1/G)."""
    return p * (1.0 - p) * (1.0 - 1.0 / Gf)


def _rloo_update(p, G, Gf, f, expectation, max_draws):
    """E[G/(G−1)·σ²] = p(1−p), for every G ≥ 2."""
    return p * (1.0 - p) + 0.0 * Gf  # the broadcast shape of p and G


def _grpo_update(p, G, Gf, f, expectation, max_draws):
    """E[f(k, G)], summed exactly over k ~ Binom(G, p)."""
    return expectation(p, G, f)


def _dapo_update(p, G, Gf, f, expectation, max_draws):
    """E[f | not silent], times 1 − P_silent^D when at most D draws are made."""
    m = expectation(p, G, f)
    xp = namespace(m)
    q = nonsilent_from_minor(minor_rate(p), G)
    Gb = G + xp.zeros_like(q, dtype=xp.int64)
    one_odd = f(xp.ones_like(Gb), Gb)  # p → 0: a kept group has exactly one odd answer
    with np.errstate(invalid="ignore", divide="ignore"):
        cond = xp.where(q > 0, m / xp.where(q > 0, q, 1.0), one_odd)
    if max_draws is None:
        return cond
    with np.errstate(divide="ignore"):  # q rounds to 1 when silence is negligible: log1p(−1) = −inf is right
        kept = -xp.expm1(max_draws * xp.log1p(-q))  # 1 − P_silent^D
    return cond * kept


class ClosedForm(NamedTuple):
    """How :func:`expected_update` computes a method's m(p, G)."""

    update: Callable  # (p, G, G as float, f, expectation, max_draws) -> m(p, G)
    min_group: int  # the smallest group size the method is defined at


#: The expected update of each method of :data:`gsd.core.methods.METHOD_SPECS`, by name.  A method
#: without an entry is refused by name (never given another method's formula).
CLOSED_FORMS: dict[str, ClosedForm] = {
    "grpo": ClosedForm(_grpo_update, min_group=1),
    "dr_grpo": ClosedForm(_dr_grpo_update, min_group=1),
    "dapo": ClosedForm(_dapo_update, min_group=2),  # a group of one is always silent
    "rloo": ClosedForm(_rloo_update, min_group=2),  # leave-one-out needs another answer
}


def closed_form(method: str) -> ClosedForm:
    """The :class:`ClosedForm` of ``method``; :class:`gsd.InputError` naming it when it is not a
    method of :data:`gsd.core.methods.METHOD_SPECS` or has no closed form here."""
    method_spec(method, tuple(METHOD_SPECS))
    form = CLOSED_FORMS.get(method)
    if form is None:
        raise InputError(
            f"method {method!r} has no closed form for its expected update in gsd.core.update.CLOSED_FORMS "
            f"(those with one: {', '.join(CLOSED_FORMS)})"
        )
    return form


def method_update(
    p: FloatOrTensor, G: FloatOrTensor, method: str, ddof: int, eps: float, max_draws: FloatOrTensor, expectation
):
    """m_method(p, G) from checked, broadcast p and G (numpy arrays or torch tensors, float64
    and int64), without verifier noise.  ``expectation(p, G, f)``: the exact E[f(k, G)] over
    k ~ Binom(G, p) in p's library (:func:`gsd.core.binomial.symmetric_expectation` for numpy).
    The formula is the method's entry of :data:`CLOSED_FORMS`.
    """
    Gf = as_float64(G) if is_tensor(G) else G  # 1/G of an int64 tensor would be float32
    return closed_form(method).update(p, G, Gf, grpo_term(ddof, eps), expectation, max_draws)


_method_update = method_update


@numpy_result
def expected_update(
    p: ArrayLike,
    G: ArrayLike,
    method: str = "grpo",
    *,
    ddof: int = 0,
    eps: float = 0.0,
    max_draws: ArrayLike | None = None,
    verifier_noise: float = 0.0,
):
    r"""Expected per-prompt logit update of a Bernoulli-logit policy, exact.

    Parameters
    ----------
    p : array_like
        Probability of a right answer, in [0, 1].
    G : array_like of int
        Group size, ≥ 1 (≥ 2 for ``"dapo"`` and ``"rloo"``); at most 10^9 for ``"grpo"`` and
        ``"dapo"`` (exact sums) and 2^53 for the closed forms.  Broadcasts with ``p``.
    method : {"grpo", "dr_grpo", "dapo", "rloo"}, optional
        ``"grpo"`` (default): :math:`\mathbb{E}[\sigma^2/(\sigma_c + \epsilon)]`;
        ``"dr_grpo"``: :math:`\mathbb{E}[\sigma^2]`; ``"dapo"``: GRPO's, conditioned on a
        non-silent group; ``"rloo"``: :math:`\mathbb{E}[\tfrac{G}{G-1}\sigma^2] = p(1-p)`, the
        large-G Dr.GRPO update at every G.
    ddof : {0, 1}, optional
        The std GRPO and DAPO divide by (the paper: 0).
    eps : float, optional
        Added to that std (the paper: 0).
    max_draws : int, optional
        DAPO only.  None (default): redraw until a group carries signal.  An integer D: a
        silent group is redrawn up to D draws in all and then gets no update, which multiplies
        the update by :math:`1 - P_{\text{silent}}^D`.
    verifier_noise : float, optional
        ν ∈ [0, 0.5), the probability that the verifier flips each reward (default 0).

    Returns
    -------
    numpy.ndarray or float
        :math:`m_{\text{method}}(p, G)`, of the broadcast shape.

    Notes
    -----
    With one logit per prompt the contrast :math:`\bar s_+ - \bar s_-` is exactly 1, so the
    update of a group is the method's power of σ and (:ref:`theory-update`)

    .. math::

        m_{\text{Dr}} = p(1-p)\Big(1 - \frac1G\Big), \qquad
        m_{\text{GRPO}} = \sum_{k=0}^{G} \binom{G}{k} p^k (1-p)^{G-k} \frac{\sqrt{k(G-k)}}{G}, \qquad
        m_{\text{DAPO}} = \frac{m_{\text{GRPO}}}{1 - P_{\text{silent}}} ,

    :math:`m_{\text{GRPO}}` for the paper's ddof 0 and eps 0.  The sum has no closed form; it
    is evaluated exactly over the binomial terms that carry mass, so G up to 10^5 stays cheap.

    With verifier noise the rewards are Bernoulli(q), :math:`q = p(1-\nu) + (1-p)\nu`, the
    expected contrast becomes :math:`(1-2\nu)\,p(1-p)/(q(1-q))` and

    .. math::

        m_{\text{method}}(p, G; \nu) = m_{\text{method}}(q, G)\,\frac{(1-2\nu)\,p(1-p)}{q(1-q)} .

    At p ∈ {0, 1} every group is silent: GRPO and Dr.GRPO give 0; DAPO with unlimited redraws
    gives its limit as p → 0 (a kept group then has exactly one odd answer,
    :math:`\sigma = \sqrt{G-1}/G`), and 0 with a finite ``max_draws``.

    G is at most 10^9 for ``"grpo"`` and ``"dapo"`` (exact sums over k, whose window of
    ~24·sqrt(G p(1−p)) terms stays a few MB) and 2^53 for the closed forms ``"dr_grpo"`` and
    ``"rloo"``; a larger G raises :class:`gsd.InputError`.

    Examples
    --------
    >>> float(gsd.expected_update(0.05, 8))             # E[sigma]
    0.11747047522186338
    >>> float(gsd.expected_update(0.05, 8, "dr_grpo"))  # p(1-p)(1 - 1/G)
    0.0415625
    >>> float(gsd.expected_update(0.05, 8, "dapo", max_draws=4))
    0.28140476694700145
    """
    nu = 0.0
    if verifier_noise:
        nu = float(as_unit_interval(verifier_noise, "verifier_noise"))
        if nu >= 0.5:
            raise InputError(
                f"verifier_noise must lie in [0, 0.5) (at 0.5 the reward carries no information), got {verifier_noise!r}"
            )
    form = closed_form(method)
    ddof = as_ddof(ddof)
    eps = as_eps(eps)
    p = as_probability(p)
    exact = method_spec(method).divides_by_std  # E[σ²/σ] is summed over k: bounded G keeps it cheap
    G = as_group_size(G, minimum=form.min_group, maximum=MAX_EXACT_GROUP_SIZE if exact else MAX_GROUP_SIZE)
    p, G = broadcast(p=p, G=G)
    if ddof and (G <= ddof).any():
        raise InputError(f"ddof={ddof} needs G >= {ddof + 1}, got G={G.min()}")
    D = None if max_draws is None or not method_spec(method).redraws_silent else as_group_size(max_draws, "max_draws")
    q = p * (1.0 - nu) + (1.0 - p) * nu if nu else p
    m = method_update(q, G, method, ddof, eps, D, symmetric_expectation)
    return noisy_update(m, p, q, nu) if nu else m


@numpy_result
def fidelity(p: ArrayLike, G: ArrayLike):
    r"""Fidelity of a group of G answers to the large-group GRPO update, exact.

    Parameters
    ----------
    p : array_like
        Probability of a right answer, in [0, 1].
    G : array_like of int
        Group size, 1 ≤ G ≤ 10^9 (the exact sum's limit).  Broadcasts with ``p``.

    Returns
    -------
    numpy.ndarray or float
        φ(p, G) ∈ [0, 1): the fraction of the large-group update that a group of G keeps on
        average (the paper's convention, ddof 0 and eps 0); 0 at p ∈ {0, 1}, where every
        group is silent.

    Notes
    -----
    .. math::

        \varphi(p, G) = \frac{m_{\text{GRPO}}(p, G)}{\sqrt{p(1-p)}} \longrightarrow 1
        \quad (G \to \infty) .

    φ is nondecreasing in G: :math:`\sigma = f(\bar r)` with :math:`f(x) = \sqrt{x(1-x)}`
    concave, and the mean of G + 1 draws is the conditional expectation of the mean of a random
    G-subset of them, so by Jensen's inequality :math:`\mathbb{E} f(\bar r_{G+1}) \ge
    \mathbb{E} f(\bar r_G)`; the tests also check it by brute force.  Compare
    :func:`fidelity_law`, the paper's approximation (:ref:`theory-law`).

    Examples
    --------
    >>> gsd.fidelity(0.05, [8, 64])
    array([0.53899151, 0.94510408])
    """
    p, G = broadcast(p=as_probability(p), G=as_group_size(G, maximum=MAX_EXACT_GROUP_SIZE))
    m = symmetric_expectation(p, G, grpo_term(0, 0.0))
    scale = np.sqrt(p * (1.0 - p))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(scale > 0, m / np.where(scale > 0, scale, 1.0), 0.0)


@numpy_result
def fidelity_law(p: ArrayLike, G: ArrayLike, *, extrapolate: bool = False):
    r"""The paper's group-size law: the delta-method approximation of the fidelity.

    Parameters
    ----------
    p : array_like
        Probability of a right answer, in [0, 1].
    G : array_like of int
        Group size, 1 ≤ G ≤ 2^53.
    extrapolate : bool, optional
        Return the formula everywhere (−inf at p ∈ {0, 1}), for sums that need the law's own
        prediction even where it is no fidelity (the simulator's ledger).  Default False.

    Returns
    -------
    numpy.ndarray or float
        :math:`1 - 1/(8 G p (1-p))`, or NaN where the law has no meaning (see Notes).

    Notes
    -----
    Expanding :math:`\mathbb{E}[\sqrt{\sigma^2}]` to second order around the mean of
    :math:`\sigma^2` gives (:ref:`theory-law`)

    .. math::

        \varphi(p, G) \approx 1 - \frac{1}{8\,G\,p(1-p)} .

    The law is asymptotic in :math:`G p (1-p)`: it overstates φ for hard prompts (p = 0.05,
    G = 64: 0.959 against the exact 0.945, :func:`fidelity`) and is negative, hence
    meaningless, below :math:`G p(1-p) = 1/8`.  There (p ∈ {0, 1} included) it returns NaN,
    and at G = 1 as well: a group of one is always silent, φ = 0, while the formula can give
    up to 1/2.  Use :func:`fidelity` there.

    Examples
    --------
    >>> gsd.fidelity_law(0.05, [8, 64])
    array([0.67105263, 0.95888158])
    >>> gsd.fidelity_law([0.5, 0.05], [1, 2])  # no meaning: G = 1, G p(1-p) < 1/8
    array([nan, nan])
    """
    p, G = broadcast(p=as_probability(p), G=as_group_size(G))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # x = 0 or subnormal: −inf
        law = _law(p, G)
    if extrapolate:
        return law
    return np.where((8.0 * G * p * (1.0 - p) >= 1.0) & (G >= 2), law, np.nan)


def _law(p, G):
    """1 − 1/(8·G·p(1−p)), the law's formula everywhere (numpy arrays or torch tensors)."""
    x = G * p * (1.0 - p)
    return 1.0 - 1.0 / (8.0 * x)
