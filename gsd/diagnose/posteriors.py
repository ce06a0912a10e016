"""Each group of a run, its prompt's Beta posterior before the step, and what that posterior predicts.

The first of the diagnosis's tables (:mod:`gsd.diagnose.tables` builds the step and prompt tables
and the run's summary on them): one row per group with its counts, the prompt's counts at earlier
steps (optionally forgotten with a half-life, chosen by the run's own one-step-ahead log score),
and, under the posterior those counts give, the group's probability of being silent, its expected
update and the expected large-group update.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..core.posterior import BetaPosterior
from ..io.frames import Columns, as_columns, as_frame
from ..validation import InputError
from .readers import RolloutLog

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "group_table",
    "group_columns",
    "HALF_LIVES",
    "choose_half_life",
    "one_step_log_score",
    "decay",
    "expected_scale",
    "batch_std",
    "predict_groups",
]


def group_table(log: RolloutLog, right=None, *, half_life: float | None = None) -> pd.DataFrame:
    """:func:`group_columns` as a DataFrame."""
    return as_frame(group_columns(log, right, half_life=half_life))


def group_columns(log: RolloutLog, right=None, *, half_life: float | None = None) -> Columns:
    """One row per group (the rollouts the trainer normalised together), sorted by step then prompt.

    Columns: ``step``, ``prompt`` (code), ``G`` (the group's rows), ``generated`` (those the policy
    generated: G less a padding trainer's rows), ``k`` (right answers; NaN when ``right`` is
    None), ``silent`` (G ≥ 2 and every reward of the group equal: zero std, the trainer's
    silence), ``binary_silent`` (k ∈ {0, G}); ``n_before`` and ``k_before``, the prompt's
    rollouts and right answers at earlier steps (a prompt drawn twice in one step does not see
    its sibling group); ``n_eff`` and ``k_eff``, the same counts with each earlier step weighted
    by 2^(−Δ/half_life), Δ its age in steps (equal to ``n_before`` and ``k_before`` when
    ``half_life`` is None).
    """
    if log.counted is not None:  # a log read as counts: its group table is counted already
        out = {c: np.asarray(v) for c, v in log.counted["groups"].items()}
        binary = not (out["k"].dtype.kind == "f" and np.isnan(out["k"]).any())
        if binary:
            out["k"] = out["k"].astype(np.int64)
        return _with_history(out, binary, half_life)
    from .readers import silent_groups

    grp = log.group
    n_groups = int(grp.max()) + 1
    order = np.argsort(grp, kind="stable")
    starts = np.searchsorted(grp[order], np.arange(n_groups))
    G = np.bincount(grp, minlength=n_groups).astype(np.int64)
    step = log.step[order][starts]
    prompt = log.prompt[order][starts]
    finite = np.isfinite(log.reward)
    # Rows without a finite reward stay in their group as the trainer keeps them (TRL's
    # unscorable rows); the counts and the posteriors use the scored ones.
    n = np.bincount(grp, weights=finite, minlength=n_groups).round().astype(np.int64)
    if log.silent is not None:
        silent = (G >= 2) & np.asarray(log.silent, bool)
    else:
        r = log.reward[order]
        silent = (G >= 2) & silent_groups(np.maximum.reduceat(r, starts), np.minimum.reduceat(r, starts))
    binary = right is not None
    k = (
        np.bincount(grp, weights=np.where(finite, np.asarray(right, dtype=np.float64), 0.0), minlength=n_groups)
        .round()
        .astype(np.int64)
        if binary
        else np.zeros(n_groups, np.int64)
    )
    # Rows a padding trainer put in its block (trl-cgrpo) are in G, the block, not in the generation.
    pad = (
        np.zeros(n_groups, np.int64)
        if log.padding is None
        else np.bincount(grp, weights=log.padding, minlength=n_groups).round().astype(np.int64)
    )
    out = {
        "step": step,
        "prompt": prompt,
        "G": G,
        "generated": G - pad,
        "n": n,
        "k": k,
        "silent": silent,
        "binary_silent": (n >= 2) & ((k == 0) | (k == n)) if binary else np.zeros(n_groups, bool),
    }
    return _with_history(out, binary, half_life)


def _with_history(out: dict, binary: bool, half_life) -> Columns:
    """The group table with each prompt's counts at earlier steps (``n_before``, ``k_before``, and
    ``n_eff``, ``k_eff`` discounted by ``half_life``), sorted by step then prompt; without
    right/wrong rewards ``k`` and its histories are NaN and ``binary_silent`` is ``silent``."""
    step, prompt = out["step"], out["prompt"]
    n = out["n"]
    k = out["k"] if binary else np.zeros(n.size, np.int64)
    # The prompt's counts at earlier steps, from its per-step totals (exclusive cumulative sums).
    steps_u, sidx = np.unique(step, return_inverse=True)
    pkey = prompt.astype(np.int64) * steps_u.size + sidx.ravel()
    ukey, pinv = np.unique(pkey, return_inverse=True)
    pinv = pinv.ravel()
    pprompt = ukey // steps_u.size
    pstep = steps_u[ukey % steps_u.size]
    start = np.r_[True, pprompt[1:] != pprompt[:-1]]
    seg = np.cumsum(start) - 1
    before = []
    for x in (n, k):
        tot = np.bincount(pinv, weights=x, minlength=ukey.size)
        cs = np.cumsum(tot) - tot
        before.append((cs - cs[np.flatnonzero(start)][seg]).round().astype(np.int64)[pinv])
    out = {**out, "k": k, "n_before": before[0], "k_before": before[1]}
    if half_life is None:
        out["n_eff"], out["k_eff"] = before[0].astype(np.float64), before[1].astype(np.float64)
    else:
        totals = [np.bincount(pinv, weights=x, minlength=ukey.size) for x in (n, k)]
        n_eff, k_eff = _discounted_before(np.arange(ukey.size), start, pstep, totals, half_life)
        out["n_eff"], out["k_eff"] = n_eff[pinv], k_eff[pinv]
    if not binary:
        for c in ("k", "k_before", "k_eff"):
            out[c] = np.full(n.size, np.nan)
        out["binary_silent"] = out["silent"]
    order = np.lexsort((out["prompt"], out["step"]))  # by step, then prompt; stable
    return {c: v[order] for c, v in out.items()}


#: The half-lives ``half_life="auto"`` tries (steps; None: every earlier rollout counts fully).
HALF_LIVES = (None, 64.0, 32.0, 16.0, 8.0, 4.0, 2.0, 1.0, 0.5)


def choose_half_life(log: RolloutLog, right, prior, groups: pd.DataFrame | None = None):
    r"""The half-life of :data:`HALF_LIVES` whose posteriors best predict the run's own next groups.

    Each group of a prompt seen at an earlier step is scored by the log-probability its posterior
    before the step gave to its right answers, the beta-binomial
    :math:`\log P(k \mid n, a_0 + k_\mathrm{eff}, b_0 + n_\mathrm{eff} - k_\mathrm{eff})`, summed
    over groups (a proper score of one-step-ahead predictions: no refit, nothing but the log). A
    policy that learns makes old counts stale, and a shorter half-life then predicts better; a
    fixed one is best served by counting everything. Ties keep the longer half-life.

    Returns
    -------
    (half_life, choice)
        The chosen half-life (None: no forgetting) and ``{"candidates", "log_score", "groups_scored"}``.
    """
    scores, scored = [], 0
    for h in HALF_LIVES:
        g = as_columns(groups) if (h is None and groups is not None) else group_columns(log, right, half_life=h)
        seen = (g["n"] >= 1) & (g["n_before"] > 0)
        scores.append(
            float(
                one_step_log_score(
                    g["k"][seen].astype(np.int64),
                    g["n"][seen].astype(np.int64),
                    g["k_eff"][seen].astype(np.float64),
                    g["n_eff"][seen].astype(np.float64),
                    prior,
                ).sum()
            )
        )
        scored = int(seen.sum())
    best = HALF_LIVES[int(np.argmax(scores))] if scored else None  # argmax: the first (longest) of ties
    return best, {"candidates": list(HALF_LIVES), "log_score": scores, "groups_scored": scored}


def one_step_log_score(k, n, k_eff, n_eff, prior) -> np.ndarray:
    r"""The log-probability a prompt's posterior before a group gave to the group's right answers:
    the beta-binomial :math:`\log P(k \mid n, a_0 + k_\mathrm{eff}, b_0 + n_\mathrm{eff} - k_\mathrm{eff})`,
    elementwise over broadcast arrays: :math:`-\log(n + 1) - \log B(n - k + 1, k + 1) + \log B(k + a, n - k + b)
    - \log B(a, b)`, the formula of ``scipy.stats.betabinom.logpmf`` written with
    ``scipy.special.betaln`` (scipy.stats alone costs ~50 MB of start-up memory).

    ``k`` right of ``n`` scored rollouts; ``k_eff`` and ``n_eff`` the prompt's (discounted)
    counts at earlier steps; ``prior`` (a₀, b₀).  :func:`choose_half_life` sums it over the
    groups of prompts seen before; the live :class:`gsd.live.tracker.GroupTracker`
    sums it generation by generation.

    Examples
    --------
    >>> round(float(one_step_log_score(1, 2, 0.0, 0.0, (1.0, 1.0))), 12)  # uniform: P(k = 1 | n = 2) = 1/3
    -1.098612288668
    """
    from scipy.special import betaln

    a0, b0 = prior
    k_eff = np.asarray(k_eff, np.float64)
    a, b = a0 + k_eff, b0 + (np.asarray(n_eff, np.float64) - k_eff)
    k, n = np.floor(np.asarray(k, np.float64)), np.asarray(n, np.float64)
    return -np.log(n + 1) - betaln(n - k + 1, k + 1) + betaln(k + a, n - k + b) - betaln(a, b)


def _half_life(h) -> float:
    h = float(h)
    if not (np.isfinite(h) and h > 0):
        raise InputError(f"half_life must be a finite number of steps > 0, got {h!r}")
    return h


def decay(age, half_life) -> np.ndarray:
    """2^(−age/half_life) for integer ages in steps.  The age is a difference of two steps taken
    in exact integers before it becomes a float (steps near 2^62 are 1024 apart in float64); a
    half-life so short that age/half_life overflows weighs every older step 0, without a warning."""
    h = _half_life(half_life)
    age = np.asarray(age)
    if age.dtype.kind in "iu":
        age = age.astype(np.float64)  # exact up to 2^53 steps apart, relative to 2^-53 beyond
    with np.errstate(over="ignore"):
        ratio = np.divide(age, h)
    return np.exp2(-ratio)


def _discounted_before(order, start, step, values, half_life):
    """Per group, Σ over the prompt's earlier groups of 2^(−(t − s)/half_life)·x_s, for each
    x in ``values``.  ``order`` sorts the groups by (prompt, step); ``start`` marks each
    prompt's first group in that order.

    The recurrence D_j = λ^(t_j − t_{j−1})·(D_{j−1} + x_{j−1}) runs along each prompt's groups;
    it is evaluated for every prompt at once, one pass per rank j (at most the number of steps).
    """
    n = order.size
    t = step[order]  # integers: differences taken exactly (adjacent steps near 2^62 stay 1 apart)
    first = np.flatnonzero(start)
    rank = np.arange(n) - first[np.cumsum(start) - 1]  # position of each group within its prompt
    by_rank = np.argsort(rank, kind="stable")
    bounds = np.searchsorted(rank[by_rank], np.arange(rank.max() + 2))
    outs = []
    for x in values:
        xs = x[order].astype(np.float64)
        d = np.zeros(n)
        for j in range(1, rank.max() + 1):
            rows = by_rank[bounds[j] : bounds[j + 1]]
            prev = rows - 1
            d[rows] = decay(t[rows] - t[prev], half_life) * (d[prev] + xs[prev])
        out = np.empty(n)
        out[order] = d
        outs.append(out)
    return outs


def expected_scale(a, b) -> np.ndarray:
    """E[sqrt(p(1 − p))] for p ~ Beta(a, b): B(a + ½, b + ½)/B(a, b), the expected large-group
    GRPO update (the denominator of the step's fidelity).

    Examples
    --------
    >>> round(float(expected_scale(1.0, 1.0)), 12)   # uniform p: π/8
    0.392699081699
    """
    from scipy.special import betaln

    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return np.exp(betaln(a + 0.5, b + 0.5) - betaln(a, b))


def batch_std(log: RolloutLog, groups: Columns) -> np.ndarray:
    """Per group, the sample std (ddof 1) of every finite reward of its step: TRL's
    ``scale_rewards="batch"`` divisor."""
    if log.counted is not None:
        raise InputError("scale 'batch' needs every rollout's reward: read the log with read_rollouts (gsd diagnose)")
    ok = np.isfinite(log.reward)
    steps, sidx = np.unique(log.step[ok], return_inverse=True)
    r = log.reward[ok]
    c = np.bincount(sidx, minlength=steps.size)
    m = np.bincount(sidx, weights=r, minlength=steps.size) / np.maximum(c, 1)
    ss = np.bincount(sidx, weights=(r - m[sidx]) ** 2, minlength=steps.size)
    with np.errstate(invalid="ignore", divide="ignore"):
        std = np.where(c > 1, np.sqrt(ss / (c - 1)), np.nan)
    return std[np.searchsorted(steps, groups["step"])]


def predict_groups(groups: Columns, prior, ddof: int, eps: float, scale: str = "group", batch_std=None) -> Columns:
    """Add the posterior before the step and the group's predicted statistics.

    ``sigma`` (measured) and ``sigma_pred`` (expected under the posterior) are the update per
    unit contrast in the trainer's convention: σ²/(σ_c + eps) with σ_c the ddof-``ddof`` std of the
    group (``scale="group"``; σ itself for the paper's ddof 0, eps 0), σ²/(σ_b + eps) with σ_b the
    std of the step's generation (``"batch"``, ``batch_std`` per group), σ² (``"none"``);
    ``fidelity_plugin`` is the paper's φ (ddof 0)."""
    G = groups["n"]  # the scored rows: what the trainer's mean and std see
    if prior is None:  # graded rewards without a threshold: measured figures only
        added = ("a", "b", "sigma", "p_before", "silent_pred", "sigma_pred", "scale_pred", "fidelity_plugin")
        return {**groups, **{c: np.full(G.size, np.nan) for c in added}}
    a = prior[0] + groups["k_eff"].astype(np.float64)
    b = prior[1] + (groups["n_eff"] - groups["k_eff"]).astype(np.float64)
    k = groups["k"]
    multi = G >= 2
    from ..allocation import allocation_value, expected_silent_rate
    from ..core.update import grpo_term as _grpo_term

    sigma = np.zeros(G.size)
    divisor = 1.0 if scale == "none" else (np.asarray(batch_std, np.float64) + eps if scale == "batch" else None)
    if divisor is None:
        sigma[multi] = _grpo_term(ddof, eps)(k[multi], G[multi])
    else:
        Gm = G[multi].astype(np.float64)
        sigma[multi] = k[multi] * (Gm - k[multi]) / Gm**2 / (divisor if np.ndim(divisor) == 0 else divisor[multi])
    out = {**groups, "a": a, "b": b, "sigma": sigma, "p_before": a / (a + b)}

    q = np.zeros(G.size)  # fewer than two scored rows: no std, never silent to the trainer
    es = np.zeros(G.size)
    if multi.any():
        post = BetaPosterior(a[multi], b[multi], tuple(prior))
        q[multi] = expected_silent_rate(post, G[multi])
        if divisor is None:
            es[multi] = allocation_value(post, G[multi], "update", ddof=ddof, eps=eps)  # the expected GRPO update
        else:  # E[σ²] (Dr.GRPO's update) over the group's std-free divisor
            es[multi] = allocation_value(post, G[multi], "dr_grpo") / (
                divisor if np.ndim(divisor) == 0 else divisor[multi]
            )
    out["silent_pred"] = q
    out["sigma_pred"] = es
    out["scale_pred"] = expected_scale(a, b)
    from ..core.update import fidelity

    fp = np.full(G.size, np.nan)
    if multi.any():
        fp[multi] = fidelity(out["p_before"][multi], G[multi])
    out["fidelity_plugin"] = fp
    return out
