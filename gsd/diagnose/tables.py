"""What a run's rollouts say: per-step and per-prompt tables and a run summary, on the group table.

The per-group table and its predictions are :mod:`gsd.diagnose.posteriors` (re-exported here).

A *group* is the rollouts of one prompt at one step (G of them, k right).  It is *silent* when
k ∈ {0, G}: every answer got the same reward, σ = 0, and GRPO, Dr.GRPO and DAPO all learn
nothing from it (see :ref:`theory-silent`).  Groups of one rollout (G = 1) carry no group
statistic at all; they are counted apart (``singletons``) and left out of the silent fractions.

Predictions use, for each group, the Beta posterior of its prompt's solve rate built from that
prompt's rollouts at *earlier* steps only, with the run's empirical-Bayes prior (fitted once to
every prompt's totals, :func:`gsd.fit_beta_prior`):

    p | before step t  ~  Beta(a₀ + k_<t, b₀ + n_<t − k_<t),

so the prediction of step t uses nothing of step t.  Under that posterior the exact
beta-binomial sums of :mod:`gsd.allocation` (:func:`gsd.expected_silent_rate`,
:func:`gsd.allocation_value`) give the group's probability of being silent,
its expected σ̂ (the expected GRPO update of a Bernoulli-logit prompt, :ref:`theory-update`) and
the expected large-group update E[sqrt(p(1 − p))].  The step's *fidelity* is their ratio summed
over the groups drawn,

    φ_t = Σ_groups E[σ̂] / Σ_groups E[sqrt(p(1 − p))],

the share of the large-group update that the step's group sizes keep on average
(:ref:`theory-law`); ``fidelity_plugin`` is the mean of :func:`gsd.fidelity` at each group's
posterior mean instead.  The *effective-gradient ratio* is the share of the step's rollouts that
sit in a non-silent group (Knapsack RL's measure of how much of the generation carried signal).

The posterior assumes a prompt's p does not move; during training it does, so the predictions
of a fast-learning run lag (the calibration numbers of the summary say by how much).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import numpy as np

from ..allocation import DEFAULT_PLAN
from ..core.forgetting import as_half_life
from ..core.groupsize import median_group_size
from ..core.posterior import BetaPosterior, fit_beta_prior, posterior_from_counts
from ..io.frames import Columns, FrameAttribute, as_columns, as_frame, columns_of, group_sums
from ..lazy import moved_names
from ..validation import InputError
from .aggregate import GroupSums
from .posteriors import batch_std, choose_half_life, group_columns, group_table, predict_groups
from .readers import RolloutLog

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "binarise",
    "update_convention",
    "group_table",
    "group_columns",
    "step_table",
    "step_columns",
    "prompt_table",
    "prompt_columns",
    "Diagnosis",
    "diagnose_log",
    "STEP_KEYS",
    "choose_half_life",
    "prompt_verdicts",
    "VERDICT_DELTA",
    "VERDICT_PROB",
]

# Moved to gsd.core in 0.2: the old names still import, with a DeprecationWarning.
_MOVED = {
    "HALF_LIVES": ("gsd.core.forgetting", "HALF_LIVES"),
    "one_step_log_score": ("gsd.core.posterior", "one_step_log_score"),
    "expected_scale": ("gsd.core.posterior", "expected_scale"),
}
__getattr__ = moved_names(__name__, _MOVED)

#: Keys of every per-step record of ``gsd diagnose --json`` (and columns of the step table).
STEP_KEYS = ("step", "groups", "rollouts", "silent_frac", "silent_pred", "wasted_rollouts", "fidelity")


def binarise(reward, threshold=None, *, unscored: int = 0):
    """Rewards as right (1) / wrong (0), and a note on how.

    With ``threshold``: right ⇔ reward ≥ threshold.  Without: rewards must be 0/1, or take
    exactly two values (the higher one is "right", e.g. verl's −1/+1 scores); graded rewards
    need a threshold.  Rows without a finite reward (NaN: TRL's row that every reward function
    returned None for, a padding row; ±inf) are unscorable: they are left out of that decision and
    come back as 0, and the tables leave them out of every count (TRL leaves them out of the
    group's mean and std, and trains them with advantage 0).  One such row therefore never turns
    a right/wrong log into a graded one.  ``unscored``: more such rows, counted but not passed (a
    log read as counts).

    Examples
    --------
    >>> binarise([0.0, 1.0, 1.0])[0].tolist()
    [0, 1, 1]
    >>> binarise([0.0, float("nan"), 1.0])
    (array([0, 0, 1], dtype=int8), 'binary rewards (0/1); 1 unscorable row (no finite reward) left out')
    >>> binarise([-1.0, 1.0])[1]
    'two reward values: 1 counts as right, -1 as wrong'
    >>> binarise([0.2, 0.7, 0.9], threshold=0.5)[0].tolist()
    [0, 1, 1]
    """
    reward = np.asarray(reward, dtype=np.float64)
    finite = np.isfinite(reward)
    unscorable = int(finite.size - np.count_nonzero(finite)) + int(unscored)  # unscored: rows not passed
    left_out = (
        f"; {unscorable} unscorable row{'s' if unscorable > 1 else ''} (no finite reward) left out"
        if unscorable
        else ""
    )
    if threshold is not None:
        t = float(threshold)
        if not np.isfinite(t):
            raise InputError(f"threshold must be a finite number, got {threshold!r}")
        return (finite & (reward >= t)).astype(np.int8), f"reward >= {t:g} counts as right{left_out}"
    values = np.unique(reward[finite])
    if values.size <= 2 and np.all(np.isin(values, (0.0, 1.0))):
        return (finite & (reward == 1.0)).astype(np.int8), "binary rewards (0/1)" + left_out
    if values.size == 2:
        lo, hi = np.sort(values)
        return (reward == hi).astype(np.int8), f"two reward values: {hi:g} counts as right, {lo:g} as wrong{left_out}"
    if values.size == 1:
        return np.zeros(reward.size, np.int8), f"one reward value ({values[0]:g}): every group is silent{left_out}"
    if values.size == 0:
        return np.zeros(reward.size, np.int8), f"no finite reward: nothing was scored{left_out}"
    shown = ", ".join(f"{v:g}" for v in np.sort(values)[:5])
    raise InputError(
        f"rewards are graded ({values.size} distinct values: {shown}, ...): "
        "pass --threshold T to count reward >= T as right"
    )


def step_table(groups) -> pd.DataFrame:
    """:func:`step_columns` as a DataFrame."""
    return as_frame(step_columns(as_columns(groups)))


def step_columns(groups: Columns) -> Columns:
    """Per-step measured and predicted statistics from the predicted group table.

    Columns: ``step``, ``groups`` (G ≥ 2), ``singletons`` (G = 1), ``rollouts`` (all generated,
    singletons included; a padding trainer's rows are not), ``new_prompts``, ``mean_group_size``,
    ``silent_groups``, ``silent_frac``,
    ``silent_pred`` (mean predicted probability), ``silent_pred_sd`` (sd of the measured fraction
    if the predictions are right: sqrt(Σq(1−q))/groups), ``all_wrong``, ``all_right``,
    ``wasted_rollouts`` (rollouts in silent groups), ``wasted_share``,
    ``effective_gradient_ratio``, ``sigma_mean`` and ``sigma_pred`` (measured and predicted mean
    σ̂), ``fidelity``, ``fidelity_plugin``, ``solve_rate`` (mean k/G).  A per-group figure that is
    NaN (no prediction; a group without a scored row) adds nothing to its step's sum.
    """
    sums = GroupSums(int(np.max(groups["prompt"], initial=-1)) + 1)
    sums.add(groups)
    return sums.steps()


def prompt_table(log: RolloutLog, groups, prior, **options) -> pd.DataFrame:
    """:func:`prompt_columns` as a DataFrame."""
    return as_frame(prompt_columns(log, as_columns(groups), prior, **options))


def prompt_columns(
    log: RolloutLog,
    groups: Columns,
    prior,
    *,
    epsilon: float = 0.05,
    level: float = 0.9,
    budget: int | None = None,
    half_life: float | None = None,
) -> Columns:
    """Per-prompt counts, posterior and recommended group size.

    Columns: ``prompt`` (its first 80 characters), ``prompt_hash``, ``rollouts`` n, ``right`` k,
    ``steps`` (groups it had), ``silent_steps``, ``p_mean``, ``p_lo``, ``p_hi`` (equal-tailed
    ``level`` credible interval of Beta(a₀ + k, b₀ + n − k); with ``half_life`` the counts of
    each group weigh 2^(−age/half_life), its age counted from the last step), ``p_below`` and
    ``p_above`` (P(p < 0.05) and P(p > 0.95) under that posterior) with the ``verdict`` they give
    (``starved``, ``saturated``, ``learning`` or ``unsure``, :func:`prompt_verdicts`), ``group_size`` (smallest G with
    fidelity ≥ 1 − ε at ``p_mean``, :func:`gsd.required_group_size`; 0 when above its cap), and
    with ``budget`` (rollouts per step over all prompts) ``group_size_budget`` from the budget
    allocator when the package has one.
    """
    step = np.asarray(groups["step"])
    sums = GroupSums(log.labels.size, half_life, step.max() if step.size else 0)
    sums.add(groups)
    return prompts_of(log, sums.prompt, prior, epsilon=epsilon, level=level, budget=budget)


def prompts_of(log: RolloutLog, totals: dict, prior, *, epsilon: float, level: float, budget: int | None) -> Columns:
    """:func:`prompt_columns` from the per-prompt sums of :class:`gsd.diagnose.aggregate.GroupSums`."""
    n, k, steps, silent = totals["n"], totals["k"], totals["steps"], totals["silent"]
    if prior is None:  # graded rewards without a threshold: no posterior
        return {
            "prompt": log.labels.astype(str),
            "prompt_hash": log.hashes,
            "rollouts": n,
            "steps": steps,
            "silent_steps": silent,
        }
    if "n_eff" not in totals:
        post = posterior_from_counts(k, n, prior=prior)
    else:
        n_eff, k_eff = totals["n_eff"], totals["k_eff"]
        post = BetaPosterior(prior[0] + k_eff, prior[1] + n_eff - k_eff, tuple(prior))
    lo, hi = post.interval(level)
    from ..core.groupsize import required_group_size

    below, above, verdict = prompt_verdicts(post.a, post.b)
    out = {
        "prompt": log.labels.astype(str),
        "prompt_hash": log.hashes,
        "rollouts": n,
        "right": k,
        "steps": steps,
        "silent_steps": silent,
        "p_mean": post.mean,
        "p_lo": lo,
        "p_hi": hi,
        "p_below": below,
        "p_above": above,
        "verdict": verdict,
        "group_size": np.asarray(required_group_size(post.mean, epsilon)),
        "a": post.a,
        "b": post.b,
    }
    if budget is not None:
        out["group_size_budget"] = _allocate(post, budget)
    return out


#: The verdict words' solve-rate margin δ and the posterior probability they need.
VERDICT_DELTA = 0.05
VERDICT_PROB = 0.9


def prompt_verdicts(a, b, delta: float = VERDICT_DELTA, prob: float = VERDICT_PROB):
    """Each prompt's verdict from its Beta(a, b) posterior of the solve rate p, and the two tail
    probabilities it rests on, P(p < δ) and P(p > 1 − δ) (regularised incomplete beta functions):

    * ``starved``: P(p < δ) > prob — it almost never gets a right answer, its groups are all-wrong
      silent (p^G + (1 − p)^G ≥ (1 − δ)^G);
    * ``saturated``: P(p > 1 − δ) > prob — almost always right, its groups all-right silent;
    * ``learning``: P(δ ≤ p ≤ 1 − δ) > prob — right and wrong answers both come, its groups carry
      a gradient;
    * ``unsure``: none of these yet (too few rollouts for the posterior to say).

    Defaults δ = 0.05, prob = 0.9.

    >>> below, above, words = prompt_verdicts([0.5, 40.5, 8.0, 1.0], [40.5, 0.5, 8.0, 1.0])
    >>> words.tolist()
    ['starved', 'saturated', 'learning', 'unsure']
    """
    from scipy.special import betainc, betaincc

    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    below = betainc(a, b, delta)
    above = betaincc(a, b, 1.0 - delta)
    words = np.full(a.shape, "unsure", dtype=object)
    words[1.0 - below - above > prob] = "learning"
    words[above > prob] = "saturated"
    words[below > prob] = "starved"
    return below, above, words


def _allocate(post, budget):
    """Group sizes of ``gsd plan --budget``'s default plan (:func:`gsd.allocation.budget_plan`) for these posteriors."""
    from ..allocation import budget_plan

    return np.asarray(budget_plan(post, budget).group_size)


#: Group sizes ``gsd diagnose`` compares for its advice (a coarse grid: a run has up to ~10^5 distinct posteriors).
ADVICE_GRID = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
# Beyond this many beta-binomial terms (distinct posteriors × Σ (G + 1)) the advice is computed at the posterior means.
_ADVICE_TERMS = 30_000_000


def group_size_advice_for(
    post: BetaPosterior,
    prompts_per_step: int,
    *,
    scale: str = "group",
    ddof: int = 0,
    eps: float = 0.0,
    optimizer=None,
    cost=None,
    hold: str = "prompts",
    generations_per_step: int | None = None,
):
    """:func:`gsd.group_size_advice` as ``gsd diagnose`` and the live tracker give it: over the run's prompts
    (their posteriors), at its prompts per step held fixed, for its update (GRPO for a group std; Dr.GRPO's
    objective p for none or one batch std) and std convention, on :data:`ADVICE_GRID`; at the posterior means
    when the exact sums would be too many.  ``hold="generations"`` (with ``generations_per_step``): the
    same at the run's generations per step held fixed instead (TRL: ``per_device_train_batch_size``
    kept while ``num_generations`` changes)."""
    from ..core.advice import DEFAULT_OPTIMIZER, group_size_advice
    from ..core.binomial import unique_pairs

    method = "grpo" if scale == "group" else "dr_grpo"
    src: BetaPosterior | np.ndarray = post
    note: str | None = None
    if unique_pairs(post.a.ravel(), post.b.ravel())[0].size * sum(g + 1 for g in ADVICE_GRID) > _ADVICE_TERMS:
        src, note = post.mean, "computed at each prompt's posterior mean (too many distinct posteriors for exact sums)"
    grid: Sequence[int] = ADVICE_GRID
    if hold == "prompts":
        held = {"prompts_per_step": int(prompts_per_step)}
    else:  # a step of B generations holds groups of at most B (given with hold="generations")
        B = int(cast(int, generations_per_step))
        held = {"generations_per_step": B}
        grid = [g for g in ADVICE_GRID if g <= B]
    adv = group_size_advice(
        src,
        hold=hold,
        method=method,
        optimizer=optimizer or DEFAULT_OPTIMIZER,
        g_grid=grid,
        cost=cost,
        ddof=ddof,
        eps=eps,
        **held,
    )
    if note:
        adv.notes.append(note)
    return adv


class Diagnosis:
    """Everything ``gsd diagnose`` reports: the three tables (``steps``, ``prompts``, ``groups``:
    DataFrames, built on first access) and the run summary.  :meth:`columns` reads a table as
    numpy columns without pandas (what the report and the JSON use).  ``groups`` is None where
    the diagnosis streamed its group table past (:func:`gsd.diagnose.counted.diagnose_counted`);
    ``difficulty`` (per step, the shares of the solve-rate bins: the figure's) and
    ``silence_is_binary`` (every group's silence is its all-right / all-wrong) are what the
    report and the figure need of it."""

    steps = FrameAttribute()
    prompts = FrameAttribute()
    groups = FrameAttribute()

    def __init__(self, steps, prompts, groups, summary: dict, *, difficulty=None, silence_is_binary=None):
        self.steps, self.prompts, self.groups, self.summary = steps, prompts, groups, summary
        if difficulty is None or silence_is_binary is None:
            g = as_columns(groups)
            sums = GroupSums(int(np.max(g["prompt"], initial=-1)) + 1)
            sums.add(g)
            difficulty, silence_is_binary = sums.difficulty(), sums.silence_is_binary
        self.difficulty, self.silence_is_binary = difficulty, silence_is_binary

    def columns(self, table: str) -> Columns:
        """``"steps"``, ``"prompts"`` or ``"groups"`` as ``{column: ndarray}``."""
        if table not in ("steps", "prompts", "groups"):
            raise InputError(f"table must be 'steps', 'prompts' or 'groups', got {table!r}")
        if table == "groups" and self.groups is None:
            raise InputError("this diagnosis streamed its group table (to --out's groups.parquet): it keeps none")
        return columns_of(self, table)

    def __repr__(self) -> str:
        tables = ("steps", "prompts") + (("groups",) if self.groups is not None else ())
        rows = {t: len(next(iter(self.columns(t).values()), ())) for t in tables}
        return f"Diagnosis({', '.join(f'{t}: {n} rows' for t, n in rows.items())}, summary: {len(self.summary)} keys)"


def _right(reward, threshold):
    """Right/wrong for the posteriors, and how; None (and why) for graded rewards without a threshold."""
    try:
        return binarise(reward, threshold)
    except InputError as exc:
        if threshold is not None or "graded" not in str(exc):
            raise
        return None, (
            str(exc).split(":")[0] + ": the measured figures are given; predictions and posteriors need "
            "--threshold T (reward >= T counts as right)"
        )


def update_convention(fmt: str, ddof=None, eps=None, scale=None) -> dict:
    """The std convention of the expected update: what the trainer of ``fmt`` divides by (TRL:
    ddof 1, eps 1e-4; verl: ddof 1, eps 1e-6; a table: the paper's ddof 0, eps 0), unless given,
    and its ``scale``: ``"group"`` (each group's std), ``"batch"`` (one std over the step's
    generation) or ``"none"`` (no division: the update is σ², Dr.GRPO's).

    >>> update_convention("trl")
    {'ddof': 1, 'eps': 0.0001, 'scale': 'group', 'from': 'trl'}
    >>> update_convention("trl", ddof=0, eps=0.0)["from"]
    'given'
    """
    from ..core.trainers import CONVENTIONS

    conv = CONVENTIONS[fmt if fmt in CONVENTIONS else "paper"]
    if scale not in (None, "group", "batch", "none"):
        raise InputError(f"scale must be 'group', 'batch' or 'none', got {scale!r}")
    out = {
        "ddof": conv.ddof if ddof is None else ddof,
        "eps": conv.eps if eps is None else eps,
        "scale": scale or "group",
        "from": conv.name if ddof is None and eps is None else "given",
    }
    if out["ddof"] not in (0, 1):
        raise InputError(f"ddof must be 0 or 1, got {out['ddof']!r}")
    e = float(out["eps"])
    if not (np.isfinite(e) and e >= 0):
        raise InputError(f"eps must be a finite number >= 0, got {out['eps']!r}")
    out["eps"] = e
    return out


def diagnose_log(
    log: RolloutLog,
    *,
    threshold=None,
    prior="empirical-bayes",
    epsilon: float = 0.05,
    level: float = 0.9,
    budget: int | None = None,
    half_life: float | str | None = None,
    ddof: int | None = None,
    eps: float | None = None,
    scale: str | None = None,
    optimizer: str | None = None,
    cost=None,
    noise=None,
    run_lr=None,
) -> Diagnosis:
    """Per-step and per-prompt diagnosis of a run read by :func:`gsd.diagnose.read_rollouts`.

    Parameters
    ----------
    log : RolloutLog
    threshold : float, optional
        Turn the reward into right (reward ≥ threshold) / wrong for the posteriors and the
        predictions (see :func:`binarise`); default: the one the log declares, if any.  It does not change what is silent: a group is
        silent when its rewards are all equal, as the trainer sees it.  Graded rewards without
        a threshold get every measured figure and no prediction.
    prior : ``"empirical-bayes"`` (default), ``"uniform"``, ``"jeffreys"`` or (a, b)
        Prior of every prompt's solve rate; empirical Bayes fits it to the run's totals.
    epsilon : float
        Fidelity target 1 − ε of the fidelity law's group sizes (``group_size``; not the advice).
    level : float
        Level of the per-prompt credible intervals.
    budget : int, optional
        Rollouts per step to share over the prompts, by ``gsd plan --budget``'s default plan.
    optimizer, cost : optional
        The advice's optimiser (default :data:`gsd.core.advice.DEFAULT_OPTIMIZER`) and step cost
        (:class:`gsd.core.advice.StepCost`; with it the advice also gives the best G per second).
    noise, run_lr : optional
        The run's measured noise scale (a :class:`gsd.core.noise_scale.NoiseScale` or (b_noise, lo, hi),
        at its generations per step and G) and learning rate: with them the advice names B, G and lr
        (:func:`gsd.core.advice.batch_advice`).
    half_life : float, optional
        Forget old rollouts: a group s steps old weighs 2^(−s/half_life) in the posteriors (the
        solve rates move during training).  None: every earlier rollout counts fully.
    ddof, eps : optional
        The std the trainer divides by, for the measured and expected update per group
        (``sigma``, ``sigma_pred``, ``fidelity``): default the convention of the log's trainer
        (:func:`update_convention`), recorded in ``summary["update_convention"]``.
    scale : {"group", "batch", "none"}, optional
        What the advantages were divided by (:func:`update_convention`): default the scaling the
        log's advantages show (TRL), else ``"group"``.  ``"none"`` is verl's
        ``norm_adv_by_std_in_grpo=False`` and TRL's ``scale_rewards="none"``: the update is σ².

    Returns
    -------
    Diagnosis

    Raises
    ------
    InputError
        No step with a group of two or more rollouts.
    """
    given = as_half_life(half_life, auto=True)
    auto = isinstance(given, str)  # "auto": chosen below, once the prior is known
    h = None if isinstance(given, str) else given
    if threshold is None:
        threshold = log.threshold
    conv = log_convention(log, ddof, eps, scale)
    right, note = right_answers(log, threshold)
    groups = group_columns(log, right, half_life=h)
    check_groups(int((groups["G"] >= 2).sum()))
    warnings = list(log.warnings)
    if right is None:
        warnings.append(note)
    _, totals = group_sums(groups["prompt"], {"k": groups["k"], "n": groups["n"]})
    a0, b0, info = run_prior(totals, right is not None, prior, warnings)
    chosen = None
    if auto:
        h, chosen = auto_half_life(
            a0, b0, lambda hh: [groups] if hh is None else [group_columns(log, right, half_life=hh)]
        )
        if h is not None:
            groups = group_columns(log, right, half_life=h)
    step_std = batch_std(log, groups) if conv["scale"] == "batch" else None
    prior_ab = None if a0 is None else (a0, b0)
    groups = predict_groups(groups, prior_ab, conv["ddof"], conv["eps"], conv["scale"], step_std)
    sums = GroupSums(log.labels.size, h, groups["step"].max())
    sums.add(groups)
    setup = {"note": note, "conv": conv, "prior": prior_ab, "info": info, "half_life": h, "chosen": chosen}
    options = {"epsilon": epsilon, "level": level, "budget": budget}
    return conclude(log, sums, groups, setup, warnings, options, (optimizer, cost, noise, run_lr))


def check_groups(multi: int) -> None:
    """The InputError of a log without a group of two or more rollouts (``multi``: how many)."""
    if not multi:
        raise InputError(
            "no prompt has two or more rollouts in one step, so there is no group to diagnose "
            "(is the prompt column right? one rollout per prompt is not GRPO)"
        )


def conclude(log: RolloutLog, sums: GroupSums, groups, setup: dict, warnings: list, options: dict, advice) -> Diagnosis:
    """The diagnosis from the sums of its predicted group table (``groups``: the table kept, or None):
    the step and prompt tables, the calibration, the advice and the summary.  ``setup``: how the
    groups were predicted (note on rewards, convention, prior and its fit, half-life and its
    choice); ``options``: epsilon, level, budget; ``advice``: (optimizer, cost, noise, run_lr)."""
    prior_ab, h = setup["prior"], setup["half_life"]
    steps = sums.steps()
    if log.trainer_silent:
        steps["trainer_silent_frac"] = np.array([log.trainer_silent.get(int(t), np.nan) for t in steps["step"]], float)
    budget = options["budget"] if prior_ab is not None else None
    prompts = prompts_of(log, sums.prompt, prior_ab, epsilon=options["epsilon"], level=options["level"], budget=budget)
    calibration = sums.calibration()
    miss = _prediction_miss(calibration, h, setup["chosen"])
    if miss:
        warnings.append(miss)
    ran = (None,) * 5 if prior_ab is None else _run_advice(log, steps, prompts, prior_ab, setup["conv"], advice)
    a0 = None if prior_ab is None else prior_ab[0]
    summary = {
        **_read_summary(log, setup["note"], steps),
        **_measured_summary(log, sums, a0, setup["conv"]),
        "prior": _prior_summary(prior_ab, setup["info"]),
        "calibration": calibration,
        "epsilon": options["epsilon"],
        "half_life": h,
        "half_life_choice": setup["chosen"],
        "budget": options["budget"],
        "budget_plan": DEFAULT_PLAN if options["budget"] is not None else None,
        **_advice_summary(ran[0], ran[1], ran[2], ran[4] if ran[4] is not None else log.group_size, ran[3]),
        **_fidelity_law_summary(prompts, options["epsilon"]),
        "warnings": warnings,
    }
    return Diagnosis(
        steps, prompts, groups, summary, difficulty=sums.difficulty(), silence_is_binary=sums.silence_is_binary
    )


def _prior_summary(prior_ab, info: dict) -> dict | None:
    if prior_ab is None:
        return None
    a0, b0 = prior_ab
    return {"a": a0, "b": b0, "mean": a0 / (a0 + b0), "concentration": a0 + b0, **info}


def auto_half_life(a0, b0, tables):
    """``half_life="auto"``: the half-life :func:`choose_half_life` picks and its scores, over the
    group tables ``tables(half_life)`` yields (chunks of whole steps, in step order)."""
    if a0 is None:
        raise InputError(
            "half_life = 'auto' scores the posteriors' predictions of right answers: it needs "
            "right/wrong rewards (give --threshold T for graded ones)"
        )
    return choose_half_life(None, None, (a0, b0), tables=tables)


def log_convention(log: RolloutLog, ddof, eps, scale) -> dict:
    """:func:`update_convention` of the log's trainer, its ``scale`` read from the logged advantages unless given."""
    seen = log.advantage_check.get("scale") if log.advantage_check else None
    conv = update_convention(log.trainer or log.fmt, ddof, eps, scale or seen)
    if scale is not None:
        conv["from"] = f"{conv['from']}, scale {scale!r} given"
    elif seen:
        conv["from"] = f"{conv['from']}, scale_rewards={seen!r} read from the logged advantages"
    return conv


def right_answers(log: RolloutLog, threshold):
    """Right/wrong per rollout and how (:func:`_right`); a padding trainer's rows are not answers,
    so they are not counted among the unscorable ones either.  A log read as counts was counted
    with its threshold: right/wrong is known per group (an empty marker), or not (None)."""
    if log.counted is not None:
        if threshold is not None and threshold != log.counted["threshold"]:
            raise InputError(
                f"threshold: the log was counted with threshold {log.counted['threshold']!r}, not {threshold!r}: "
                "count it again with this one"
            )
        return (None if log.counted["graded"] else np.zeros(0, np.int8)), log.counted["rewards_as"]
    if log.padding is None:
        return _right(log.reward, threshold)
    answered, note = _right(log.reward[~log.padding], threshold)
    right = None
    if answered is not None:
        right = np.zeros(log.reward.size, np.int8)
        right[~log.padding] = answered
    return right, note


def run_prior(totals: dict, binary: bool, prior, warnings: list):
    """(a₀, b₀, fit information) of every prompt's prior: empirical Bayes over the prompts' totals
    (``totals``: ``k`` and ``n`` per prompt with a group), with a warning when the fit is not
    reliable; (None, None, {}) without right/wrong rewards."""
    if not binary:
        return None, None, {}
    if not (isinstance(prior, str) and prior == "empirical-bayes"):
        a0, b0 = posterior_from_counts(0, 0, prior=prior).prior
        return a0, b0, {}
    (a0, b0), info = fit_beta_prior(totals["k"], totals["n"], full_output=True)
    if info.get("at_bound") or not info.get("converged", True):
        warnings.append(
            f"the empirical-Bayes prior Beta({a0:.3g}, {b0:.3g}) "
            + ("hit the bound of its concentration" if info.get("at_bound") else "did not converge")
            + ": the run's totals barely constrain it (too few prompts seen twice, or every prompt "
            "all right / all wrong); its predictions are not reliable — try --prior uniform or jeffreys"
        )
    return a0, b0, info


def _prediction_miss(calibration: dict, half_life, chosen) -> str | None:
    """The warning when the predicted silent groups miss the measured ones by more than 3 sd."""
    if not calibration or abs(calibration.get("z", 0.0)) <= 3:
        return None
    miss = (
        f"the predicted silent groups miss the measured ones by z = {calibration['z']:+.1f} sd "
        f"({calibration['silent_groups_predicted']:.0f} predicted, {calibration['silent_groups_measured']:.0f} "
        "measured): the solve rates move during training"
    )
    if half_life is None and chosen is None:
        return miss + (
            "; let old rollouts count less: --half-life auto picks the half-life whose "
            "posteriors best predict the run's own next groups"
        )
    return (
        miss
        + ", faster than posteriors "
        + (
            "that count every earlier rollout (--half-life auto's choice)"
            if half_life is None
            else f"with a half-life of {half_life:g} steps"
        )
        + " follow (they predict from earlier steps): read the measured figures, not the predictions"
    )


def _run_advice(log: RolloutLog, steps: Columns, prompts: Columns, prior, conv: dict, options):
    """The group-size advice at the run's prompts per step (the median over steps with groups) and,
    when the run's G is known, at its generations per step; that prompts per step; and the batch advice
    when ``options`` = (optimizer, cost, noise scale, run's lr) holds a noise scale (else None); and the
    run's G (:func:`_run_group_size`)."""
    optimizer, cost, noise, run_lr = options
    n_step = int(np.median(steps["groups"][steps["groups"] > 0]))
    post = BetaPosterior(prompts["a"], prompts["b"], prior)
    common = {"scale": conv["scale"], "ddof": conv["ddof"], "eps": conv["eps"], "optimizer": optimizer, "cost": cost}
    advice = group_size_advice_for(post, n_step, **common)
    G_run = _run_group_size(log, steps)
    advice_gen = None
    if G_run is not None:
        advice_gen = group_size_advice_for(
            post, n_step, hold="generations", generations_per_step=n_step * int(G_run), **common
        )
    batch = None if noise is None else _batch_advice(G_run, steps, prompts, prior, conv, n_step, noise, run_lr, cost)
    return advice, advice_gen, n_step, batch, G_run


def _run_group_size(log: RolloutLog, steps: Columns):
    """The run's G: the reader's (TRL's num_generations, a verl dump's n) or, for a log grouped by prompt
    or by a group column, the rollouts per group when that is one integer ≥ 2 at every step with groups
    (None otherwise)."""
    if isinstance(log.group_size, int | np.integer) and log.group_size >= 2:
        return int(log.group_size)
    has = steps["groups"] > 0
    if not has.any():
        return None
    per = np.asarray(steps["rollouts"], float)[has] / np.asarray(steps["groups"], float)[has]
    G = per[0]
    return int(G) if G >= 2 and G == int(G) and (per == G).all() else None


def _read_summary(log: RolloutLog, note: str, steps: Columns) -> dict:
    """What was read: the files, the reward, how groups and silence were found, what was left out."""
    return {
        "format": log.fmt,
        "files": len(log.files),
        "reward": log.reward_name,
        "rewards_as": note,
        "silence": log.silence,
        "group_by": log.group_by,
        "group_size": log.group_size,
        "rows": log.rows + log.extra_outputs,
        "sessions": log.rows,
        "extra_outputs": log.extra_outputs,
        "unscorable_rollouts": log.unscorable_rollouts,
        "excluded_steps": list(log.excluded_steps),
        "silent_observable": bool(log.silent_observable),
        "advantage_check": log.advantage_check,
        "bad_rows": log.bad_count,
        "bad_rows_listed": [str(b) for b in log.bad_rows],
        "steps": int(steps["step"].size),
        "steps_without_groups": steps["step"][steps["groups"] == 0].tolist(),
        "repeated_steps": list(log.repeated_steps),
        "missing_steps": list(log.missing_steps),
        "eval_steps": list(log.eval_steps),
        "incomplete_groups": int(log.incomplete_groups),
        "incomplete_rollouts": int(log.incomplete_rollouts),
    }


def _measured_summary(log: RolloutLog, sums: GroupSums, a0, conv: dict) -> dict:
    """The run in a few numbers: groups, silence, waste, the effective-gradient ratio, the fidelity."""
    logged = "the logged rollouts" if log.missing_steps else "the generation"
    if not log.silent_observable:
        logged = "the trained groups (the silent ones were removed before the dump)"
    t = sums.totals()
    groups, rollouts = t["groups"], t["rollouts"]
    return {
        "of": logged,
        "prompts": int(log.labels.size),
        "groups": groups,
        "singletons": t["singletons"],
        "rollouts": rollouts,
        "silent_frac": t["silent_groups"] / groups if log.silent_observable else None,
        "silent_frac_dumped": t["silent_groups"] / groups,
        "silent_pred": t["q"] / groups if sums.predicted else float("nan"),
        "wasted_rollouts": t["wasted_rollouts"],
        "wasted_share": t["wasted_rollouts"] / rollouts,
        "effective_gradient_ratio": (t["multi_rollouts"] - t["wasted_rollouts"]) / rollouts,
        "padding_rows": log.padding_rows,
        "fidelity": t["sigma_pred"] / t["scale_pred"] if a0 is not None else float("nan"),
        "update_convention": conv,
    }


def _batch_advice(G, steps: Columns, prompts: Columns, prior, conv: dict, n_step, noise, run_lr, cost):
    """:func:`gsd.core.advice.batch_advice` at the run's generations per step (prompts per step x G), over
    the posterior means of its prompts (the exact sums over every posterior would be many), on :data:`ADVICE_GRID`."""
    from ..core.advice import batch_advice

    if G is None:
        has = steps["groups"] > 0
        per = np.asarray(steps["rollouts"], float)[has] / np.maximum(np.asarray(steps["groups"], float)[has], 1)
        sizes = f"{per.min():.3g}–{per.max():.3g} rollouts per group (mean per step)" if per.size else "no groups"
        raise InputError(
            f"--noise-scale needs one group size G for the run (B_noise is measured at the run's B and G); this "
            f"log's groups hold {sizes}: give TRL's logs or a verl dump, or keep one G per run"
        )
    post = BetaPosterior(prompts["a"], prompts["b"], prior)
    return batch_advice(
        post.mean,
        noise,
        generations_per_step=int(n_step) * int(G),
        group_size=int(G),
        lr=run_lr,
        cost=cost,
        g_grid=ADVICE_GRID,
        method="grpo" if conv["scale"] == "group" else "dr_grpo",
        ddof=conv["ddof"],
        eps=conv["eps"],
    )


def _advice_summary(advice, advice_gen, n_step, group_size, batch=None) -> dict:
    """The advice: the uniform G of the most expected progress per generation (per second with a cost), and
    B, G, lr with the run's noise scale."""
    return {
        "batch_advice": None if batch is None else batch.summary(),
        "advised_group_size": advice.advised_G_per_generation if advice is not None else None,
        "advised_group_size_per_second": advice.advised_G_per_second if advice is not None else None,
        "advice": advice.summary() | {"prompts_per_step": n_step} if advice is not None else None,
        "advice_holding_generations": (
            advice_gen.summary() | {"generations_per_step": n_step * int(group_size)}
            if advice_gen is not None
            else None
        ),
    }


def _fidelity_law_summary(prompts: Columns, epsilon: float) -> dict:
    """The fidelity law (not the advice): the G at which one group's update is within epsilon of the
    large-group limit, median over the prompts; one definition with the live tracker's
    gsd/fidelity_group_size."""
    g = median_group_size(prompts["p_mean"], epsilon) if "p_mean" in prompts else float("nan")
    return {"fidelity_group_size": g, "median_group_size_recommended": g}  # the second: a deprecated alias
