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

from ..core import forgetting, posterior
from ..core.posterior import BetaPosterior
from ..errors import InputError
from ..io.frames import Columns, as_columns, as_frame
from ..lazy import moved_names
from .readers import RolloutLog

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "group_table",
    "group_columns",
    "with_history",
    "History",
    "choose_half_life",
    "batch_std",
    "step_std",
    "predict_groups",
]

# Moved to gsd.core in 0.2: the old names still import, with a DeprecationWarning.
_MOVED = {
    "HALF_LIVES": ("gsd.core.forgetting", "HALF_LIVES"),
    "decay": ("gsd.core.forgetting", "decay"),
    "one_step_log_score": ("gsd.core.posterior", "one_step_log_score"),
    "expected_scale": ("gsd.core.posterior", "expected_scale"),
}
__getattr__ = moved_names(__name__, _MOVED)


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
        return with_history(out, binary, half_life)
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
    return with_history(out, binary, half_life)


class History:
    """What a run's earlier chunks of groups leave for the next (O(prompts) memory): per prompt its
    rollouts and right answers so far, and the forgetting recurrence's carried value
    D + x of its last (prompt, step) and that step (see :func:`_discounted_before`).  Chunks fed
    in step order through :func:`with_history` give the columns of the whole table, bit for bit."""

    def __init__(self, prompts: int):
        self.n = np.zeros(prompts, np.int64)
        self.k = np.zeros(prompts, np.int64)
        self.dn = np.zeros(prompts)
        self.dk = np.zeros(prompts)
        self.last = np.zeros(prompts, np.int64)
        self.seen = np.zeros(prompts, bool)


def with_history(out: dict, binary: bool, half_life, history: History | None = None) -> Columns:
    """The group table with each prompt's counts at earlier steps (``n_before``, ``k_before``, and
    ``n_eff``, ``k_eff`` discounted by ``half_life``), sorted by step then prompt; without
    right/wrong rewards ``k`` and its histories are NaN and ``binary_silent`` is ``silent``.
    ``history``: the counts of the chunks before this one (whose steps all come earlier), updated."""
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
    last = np.r_[start[1:], True]  # each prompt's last (prompt, step) in the chunk
    totals = [np.bincount(pinv, weights=x, minlength=ukey.size) for x in (n, k)]
    before = []
    for tot, carried in zip(totals, (None, None) if history is None else (history.n, history.k)):
        cs = np.cumsum(tot) - tot
        pair = (cs - cs[np.flatnonzero(start)][seg]).round().astype(np.int64)
        before.append(pair if carried is None else pair + carried[pprompt])
    out = {**out, "k": k, "n_before": before[0][pinv], "k_before": before[1][pinv]}
    if half_life is None:
        out["n_eff"], out["k_eff"] = out["n_before"].astype(np.float64), out["k_before"].astype(np.float64)
    else:
        initial = None
        if history is not None:
            first = pprompt[start]
            carry = np.where(history.seen[first], forgetting.decay(pstep[start] - history.last[first], half_life), 0.0)
            initial = [np.zeros(ukey.size), np.zeros(ukey.size)]
            for init, d in zip(initial, (history.dn, history.dk)):
                init[start] = carry * d[first]
        n_eff, k_eff = _discounted_before(np.arange(ukey.size), start, pstep, totals, half_life, initial)
        if history is not None:
            ends = pprompt[last]
            history.dn[ends] = n_eff[last] + totals[0][last]
            history.dk[ends] = k_eff[last] + totals[1][last]
        out["n_eff"], out["k_eff"] = n_eff[pinv], k_eff[pinv]
    if history is not None:
        ends = pprompt[last]
        history.n[ends] = before[0][last] + totals[0][last].round().astype(np.int64)
        history.k[ends] = before[1][last] + totals[1][last].round().astype(np.int64)
        history.last[ends] = pstep[last]
        history.seen[ends] = True
    if not binary:
        for c in ("k", "k_before", "k_eff"):
            out[c] = np.full(n.size, np.nan)
        out["binary_silent"] = out["silent"]
    order = np.lexsort((out["prompt"], out["step"]))  # by step, then prompt; stable
    return {c: v[order] for c, v in out.items()}


def choose_half_life(log: RolloutLog, right, prior, groups: pd.DataFrame | None = None, *, tables=None):
    r"""The half-life of :data:`gsd.core.forgetting.HALF_LIVES` whose posteriors best predict the run's own next groups.

    Each group of a prompt seen at an earlier step is scored by the log-probability its posterior
    before the step gave to its right answers, the beta-binomial
    :math:`\log P(k \mid n, a_0 + k_\mathrm{eff}, b_0 + n_\mathrm{eff} - k_\mathrm{eff})`, summed
    over groups (a proper score of one-step-ahead predictions: no refit, nothing but the log). A
    policy that learns makes old counts stale, and a shorter half-life then predicts better; a
    fixed one is best served by counting everything. Ties keep the longer half-life.  The sum runs
    per step, then over the steps (``math.fsum``), so that a table read in chunks of whole steps
    (``tables``: half-life → its chunks, in step order) scores exactly as the whole table.

    Returns
    -------
    (half_life, choice)
        The chosen half-life (None: no forgetting) and ``{"candidates", "log_score", "groups_scored"}``.
    """
    import math

    from ..io.frames import group_sums

    if tables is None:

        def tables(h):
            return [
                as_columns(groups) if (h is None and groups is not None) else group_columns(log, right, half_life=h)
            ]

    scores, scored = [], 0
    for h in forgetting.HALF_LIVES:
        per_step, scored = [], 0
        for g in tables(h):
            seen = (g["n"] >= 1) & (g["n_before"] > 0)
            score = posterior.one_step_log_score(
                g["k"][seen].astype(np.int64),
                g["n"][seen].astype(np.int64),
                g["k_eff"][seen].astype(np.float64),
                g["n_eff"][seen].astype(np.float64),
                prior,
            )
            per_step.append(group_sums(g["step"][seen], {"s": np.asarray(score, np.float64)})[1]["s"])
            scored += int(seen.sum())
        scores.append(math.fsum(np.concatenate(per_step).tolist()) if per_step else 0.0)
    best = forgetting.HALF_LIVES[int(np.argmax(scores))] if scored else None  # argmax: the first (longest) of ties
    return best, {"candidates": list(forgetting.HALF_LIVES), "log_score": scores, "groups_scored": scored}


def _discounted_before(order, start, step, values, half_life, initial=None):
    """Per group, Σ over the prompt's earlier groups of 2^(−(t − s)/half_life)·x_s, for each
    x in ``values``.  ``order`` sorts the groups by (prompt, step); ``start`` marks each
    prompt's first group in that order.

    The recurrence D_j = λ^(t_j − t_{j−1})·(D_{j−1} + x_{j−1}) runs along each prompt's groups;
    it is evaluated for every prompt at once, one pass per rank j (at most the number of steps).
    ``initial``: per x, D at each prompt's first group (what earlier chunks carried; default 0).
    """
    n = order.size
    t = step[order]  # integers: differences taken exactly (adjacent steps near 2^62 stay 1 apart)
    first = np.flatnonzero(start)
    rank = np.arange(n) - first[np.cumsum(start) - 1]  # position of each group within its prompt
    by_rank = np.argsort(rank, kind="stable")
    bounds = np.searchsorted(rank[by_rank], np.arange(rank.max() + 2))
    outs = []
    for i, x in enumerate(values):
        xs = x[order].astype(np.float64)
        d = np.zeros(n) if initial is None else initial[i][order]
        for j in range(1, rank.max() + 1):
            rows = by_rank[bounds[j] : bounds[j + 1]]
            prev = rows - 1
            d[rows] = forgetting.decay(t[rows] - t[prev], half_life) * (d[prev] + xs[prev])
        out = np.empty(n)
        out[order] = d
        outs.append(out)
    return outs


def batch_std(log: RolloutLog, groups: Columns) -> np.ndarray:
    """Per group, the sample std (ddof 1) of every finite reward of its step: TRL's
    ``scale_rewards="batch"`` divisor (:func:`step_std`; a log read as counts: the stds counted
    file by file, where each step is one file's)."""
    if log.counted is None:
        steps, std = step_std(log.step, log.reward)
    elif log.counted.get("step_std") is not None:
        steps, std = log.counted["step_std"]
    else:
        raise InputError("scale 'batch' needs every rollout's reward: read the log with read_rollouts (gsd diagnose)")
    return std[np.searchsorted(steps, groups["step"])]


def step_std(step, reward) -> tuple[np.ndarray, np.ndarray]:
    """(the steps with a finite reward, sorted; per step the sample std, ddof 1, of its finite
    rewards, NaN below two): mean = Σr/c, std = sqrt(Σ(r − mean)²/(c − 1)), each sum in row order."""
    ok = np.isfinite(reward)
    steps, sidx = np.unique(step[ok], return_inverse=True)
    r = reward[ok]
    c = np.bincount(sidx, minlength=steps.size)
    m = np.bincount(sidx, weights=r, minlength=steps.size) / np.maximum(c, 1)
    ss = np.bincount(sidx, weights=(r - m[sidx]) ** 2, minlength=steps.size)
    with np.errstate(invalid="ignore", divide="ignore"):
        std = np.where(c > 1, np.sqrt(ss / (c - 1)), np.nan)
    return steps, std


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
    out["scale_pred"] = posterior.expected_scale(a, b)
    from ..core.update import fidelity

    fp = np.full(G.size, np.nan)
    if multi.any():
        fp[multi] = fidelity(out["p_before"][multi], G[multi])
    out["fidelity_plugin"] = fp
    return out
