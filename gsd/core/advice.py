"""How fast a run learns at each uniform group size: expected progress per generation and per second.

The question a user has is "which G makes my run learn fastest per generation, and per second of my
trainer's time?".  For right/wrong rewards the expected gradient of one group is a multiple of the
large-group one (see :ref:`theory-speed`):

    GRPO (std-normalised advantages):  E[g] = φ(G, p)·∇(2·arcsin√p),   φ = E[σ̂]/√(p(1−p)),
    Dr.GRPO (no std):                  E[g] = (1 − 1/G)·∇p,

and with a loss averaged over the step's tokens (TRL's, for one-token answers) a step's expected
gradient is the *mean* over its groups.  What the user holds fixed then decides the answer:

``hold="prompts"``
    n prompts per step, n·G generations per step: a fixed generation budget buys 1/(n·G) steps per
    generation, so a larger G buys fewer, better-averaged steps.
``hold="generations"``
    B generations per step shared by B/G prompts: every G takes the same number of steps.

and so does the optimiser:

``optimizer="sgd"``
    progress per step = lr·S, S = mean_i w_i·φ(G, p_i) the step's expected gain of the objective
    (w_i = p_i(1−p_i) for one logit per prompt: S = mean_i √(p_i(1−p_i))·E[σ̂_i], the ``gain`` value of
    :func:`gsd.allocation_value`; Dr.GRPO: mean_i p_i(1−p_i)·E[σ̂_i²], ``dr_gain``).
``optimizer="adam"``
    Adam divides each coordinate by the root of its second moment, so a step moves by ≈ lr·S/√(S² + ν·N)
    with N = mean_i E[Σ_j A_ij²]/(n·G²) the variance of the step's mean gradient per unit score variance
    (a non-silent group of population-std advantages has Σ_j A_j² = G, a silent one 0) and ν the
    variance of one answer's score along the objective, relative to the gain; ν = ∞ (the default) is
    the noise-dominated regime of a language model, where the step is ≈ lr·S/√(ν·N).

A cost model turns steps into seconds: seconds per step = t_step + t_prompt·(prompts per step) +
t_rollout·(generations per step), where t_prompt is what a prompt costs once however many answers
share its prefill.  :func:`fit_step_cost` fits it from several runs' step times
(:func:`step_times_from_log` reads TRL's ``step_time`` and verl's ``timing_s/step``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from ..errors import InputError
from ..io.frames import Columns, as_frame
from ..validation import MAX_EXACT_GROUP_SIZE, as_ddof, as_eps, as_group_size
from .binomial import symmetric_expectation, unique_pairs
from .posterior import BetaPosterior
from .step_cost import StepCost, fit_step_cost, step_times_from_log

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "HOLDS",
    "OPTIMIZERS",
    "SPEED_METHODS",
    "DEFAULT_OPTIMIZER",
    "DEFAULT_G_GRID",
    "StepCost",
    "GroupSizeAdvice",
    "group_size_advice",
    "advice_headline",
    "step_noise_terms",
    "BatchAdvice",
    "batch_advice",
    "fit_step_cost",
    "step_times_from_log",
]

#: What a comparison of group sizes holds fixed per step.
HOLDS = ("prompts", "generations")
#: The optimisers the model has: plain SGD, or Adam's per-coordinate normalisation.
OPTIMIZERS = ("sgd", "adam")
#: The updates modelled, each with its own objective: GRPO moves 2·arcsin√p, Dr.GRPO moves p.
SPEED_METHODS = ("grpo", "dr_grpo")
#: The optimiser assumed when none is named: Adam, the default of TRL's and verl's trainers (AdamW).
DEFAULT_OPTIMIZER = "adam"
#: Group sizes compared when none are given.
DEFAULT_G_GRID = tuple(range(2, 65))
#: The largest batch :func:`batch_advice` advises (generations per step): 2^53, where float64 stops
#: counting by ones.
MAX_BATCH = 2**53
#: The largest run lr :func:`batch_advice` takes (it advises the run's lr at every B); lr·√(2^53) stays
#: below float64's largest number (1.8e308), so a user's own √B scaling of it cannot overflow either.
MAX_LR = 1e300
_OBJECTIVE = {"grpo": "2*arcsin(sqrt(p))", "dr_grpo": "p"}
_VALUE = {"grpo": "gain", "dr_grpo": "dr_gain"}


@dataclass
class GroupSizeAdvice:
    """The expected speed of learning at each uniform group size (:func:`group_size_advice`).

    Attributes
    ----------
    table : DataFrame (``table_columns``: the same as numpy columns)
        One row per G: ``G``, ``prompts_per_step``, ``generations_per_step``, ``silent_rate`` (mean
        p^G + (1−p)^G), ``progress_per_step``, ``progress_per_generation``, ``seconds_per_step`` and
        ``progress_per_second`` (NaN without a cost), ``relative_per_generation`` and
        ``relative_per_second`` (to the best G).  Progress is in the run's objective (``objective``)
        per unit learning rate, averaged over the prompts; under Adam at ν = ∞ its scale is arbitrary:
        only ratios between rows mean anything.
    best_G_per_generation, best_G_per_second : int, int or None
        The G of the largest progress per generation / per second (None without a cost).
    advised_G_per_generation, advised_G_per_second : int, int or None
        The advice: the model's optimum (the same as ``best_G_*``; no tolerance is applied).
    prompts : DataFrame (``prompt_columns``: the same as numpy columns)
        One row per prompt at ``best_G_per_generation``: ``progress`` (its expected gain per step when in
        the batch), ``relative_value`` (that over the batch mean) and ``worth_rollouts``
        (relative_value ≥ 1: an average prompt in its place would not raise the step's progress).
    hold, method, optimizer, objective, score_noise, ddof, eps, cost
        The conventions the numbers are in.
    """

    table_columns: Columns
    best_G_per_generation: int
    best_G_per_second: int | None
    prompt_columns: Columns
    hold: str
    method: str
    optimizer: str
    objective: str
    score_noise: float
    ddof: int
    eps: float
    cost: StepCost | None = None
    notes: list = field(default_factory=list)
    advised_G_per_generation: int | None = None
    advised_G_per_second: int | None = None

    @cached_property
    def table(self) -> pd.DataFrame:
        """``table_columns`` as a DataFrame (built on first access: the headline needs no pandas)."""
        return as_frame(self.table_columns)

    @cached_property
    def prompts(self) -> pd.DataFrame:
        """``prompt_columns`` as a DataFrame."""
        return as_frame(self.prompt_columns)

    def convention(self) -> str:
        """One line naming what was held fixed, the optimiser and the objective."""
        held = (
            "prompts per step held fixed (generations per step = prompts x G)"
            if self.hold == "prompts"
            else "generations per step held fixed (prompts per step = generations / G)"
        )
        opt = (
            "SGD"
            if self.optimizer == "sgd"
            else (
                "Adam, noise-dominated" if math.isinf(self.score_noise) else f"Adam, score noise {self.score_noise:g}"
            )
        )
        return f"{held}; {opt}; {self.method} on mean {self.objective}"

    def summary(self) -> dict:
        """The headline as plain numbers (for JSON)."""
        t = self.table_columns
        out: dict[str, Any] = {
            "advised_G_per_generation": self.advised_G_per_generation,
            "advised_G_per_second": self.advised_G_per_second,
            "best_G_per_generation": self.best_G_per_generation,
            "best_G_per_second": self.best_G_per_second,
            "hold": self.hold,
            "method": self.method,
            "optimizer": self.optimizer,
            "objective": self.objective,
            "score_noise": None if math.isinf(self.score_noise) else self.score_noise,
            "ddof": self.ddof,
            "eps": self.eps,
            "convention": self.convention(),
            "cost": None
            if self.cost is None
            else {
                "t_step": self.cost.t_step,
                "t_prompt": self.cost.t_prompt,
                "t_rollout": self.cost.t_rollout,
                "source": self.cost.source,
            },
            "prompts_worth_rollouts": int(self.prompt_columns["worth_rollouts"].sum()),
            "prompts": int(self.prompt_columns["worth_rollouts"].size),
            "notes": list(self.notes),
        }
        candidates = {2, 4, 8, 16, self.best_G_per_generation, self.advised_G_per_generation}
        for g in sorted(g for g in candidates if g is not None):
            row = np.flatnonzero(t["G"] == g)
            if row.size:
                out.setdefault("relative_per_generation", {})[str(g)] = float(t["relative_per_generation"][row[0]])
        return out


def _choice(name, value, allowed):
    if value not in allowed:
        raise InputError(f"{name} must be one of {allowed}, got {value!r}")
    return value


def _grid(g_grid):
    g = as_group_size(g_grid, name="g_grid", minimum=2, maximum=MAX_EXACT_GROUP_SIZE)
    g = np.unique(np.atleast_1d(g).ravel())
    if g.size == 0:
        raise InputError("g_grid must hold at least one group size, got an empty grid")
    return g.astype(np.int64)


def _positive_int(name, v, hi=2**53):
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or not (1 <= v <= hi):
        raise InputError(f"{name} must be an integer in [1, {hi}], got {v!r}")
    return int(v)


def _score_noise(v):
    if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating) or math.isnan(v) or v <= 0:
        raise InputError(f"score_noise must be a number > 0 (inf: the noise-dominated limit), got {v!r}")
    return float(v)


def _square_term(ddof, eps):
    """q(k, G)/G² with q = Σ_j A_j² the advantages' sum of squares: G·σ̂²/(σ̂_c + eps)², 0 when silent."""

    def f(k, G):
        G = G.astype(np.float64)
        sigma = np.sqrt(k * (G - k)) / G
        sigma_c = sigma * np.sqrt(G / (G - ddof)) if ddof else sigma
        with np.errstate(invalid="ignore", divide="ignore"):
            q = G * sigma * sigma / (sigma_c + eps) ** 2
        return np.where(sigma > 0, q, 0.0) / (G * G)

    return f


def _dr_square_term(k, G):
    """Dr.GRPO's Σ_j A_j²/G² = σ̂²/G (advantages r − r̄, not divided by a std)."""
    G = G.astype(np.float64)
    return k * (G - k) / (G * G) / G


def _expected_squares(src, grid, method, ddof, eps):
    """E[Σ_j A_j²]/G² of every prompt (rows) at every G of the grid (columns), exact."""
    f = _dr_square_term if method == "dr_grpo" else _square_term(ddof, eps)
    if not isinstance(src, BetaPosterior):
        p = np.asarray(src, dtype=np.float64).ravel()
        return symmetric_expectation(p[:, None], grid[None, :], f)
    from ..allocation import beta_sigma

    a, b = src.a.ravel(), src.b.ravel()
    first, inverse = unique_pairs(a, b)
    aa = np.repeat(a[first], grid.size)
    bb = np.repeat(b[first], grid.size)
    gg = np.tile(grid, first.size)
    return beta_sigma(aa, bb, gg, f).reshape(first.size, grid.size)[inverse]


def group_size_advice(
    p_or_posterior: ArrayLike | BetaPosterior,
    *,
    hold: str = "prompts",
    method: str = "grpo",
    optimizer: str = DEFAULT_OPTIMIZER,
    g_grid: ArrayLike = DEFAULT_G_GRID,
    cost: StepCost | None = None,
    prompts_per_step: int | None = None,
    generations_per_step: int | None = None,
    score_noise: float = math.inf,
    ddof: int = 0,
    eps: float = 0.0,
) -> GroupSizeAdvice:
    """Expected progress per generation and per second of every uniform G, exact, and the best G.

    Parameters
    ----------
    p_or_posterior : array_like of float in [0, 1], or BetaPosterior
        The prompts the run draws from (their solve rates, or posteriors from
        :func:`gsd.posterior_from_counts`); the expectation over a posterior is exact.
    hold : {"prompts", "generations"}
        What a step holds fixed as G changes: its prompts (``prompts_per_step``, default the number
        of prompts given) or its generations (``generations_per_step``, required with a cost).
    method : {"grpo", "dr_grpo"}
        GRPO (advantages divided by the group's std; objective 2·arcsin√p) or Dr.GRPO (not divided;
        objective p).
    optimizer : {"adam", "sgd"}
        Adam (default: TRL's and verl's AdamW) normalises a step by its noise; SGD does not.
    g_grid : array_like of int ≥ 2
        The uniform group sizes compared (default 2 … 64).
    cost : StepCost, optional
        Seconds per step (:func:`fit_step_cost`); without it the per-second columns are NaN.
    score_noise : float
        Adam only: ν, one answer's score variance relative to the gain (default ∞, the noise-dominated
        limit; then the scale of progress is arbitrary and only its ratios between G are meaningful).
    ddof, eps : int, float
        The std GRPO divides by (0: population, the paper's; TRL and verl: 1, and eps 1e-4 / 1e-6).

    Notes
    -----
    With n prompts and n·G generations per step, V_i(G) the prompt's expected one-step gain
    (:func:`gsd.allocation_value` ``gain`` / ``dr_gain``: √(p(1−p))·E[σ̂] and p(1−p)·E[σ̂²] for one
    logit per prompt), S = mean_i V_i(G) and N = mean_i E[Σ_j A_ij²]/(n·G²):

    .. math::

        \\text{per step} = S \\;(\\text{SGD}), \\quad S/\\sqrt{S^2 + \\nu N} \\;(\\text{Adam}), \\quad
        \\text{per generation} = \\text{per step}/(nG), \\quad \\text{per second} = \\text{per step}/t(n, nG),

    with n = B/G under ``hold="generations"``.  Under SGD and ``hold="prompts"`` the best G maximises
    mean_i V_i(G)/G; at p = 1/2, V(2)/2 = 1/16 against V(8)/8 ≈ 0.0290, so G = 2 learns ≈ 2.2× faster
    per generation.  See :ref:`theory-speed`.

    Examples
    --------
    >>> adv = group_size_advice([0.1, 0.5, 0.9], optimizer="sgd", g_grid=[2, 4, 8, 16])
    >>> adv.best_G_per_generation
    2
    >>> round(float(adv.table.relative_per_generation.iloc[2]), 4)  # G = 8 against G = 2
    0.4995
    >>> group_size_advice([0.1, 0.5, 0.9], hold="generations", optimizer="sgd", g_grid=[2, 8]).best_G_per_generation
    8
    """
    hold = _choice("hold", hold, HOLDS)
    method = _choice("method", method, SPEED_METHODS)
    optimizer = _choice("optimizer", optimizer, OPTIMIZERS)
    ddof, eps = as_ddof(ddof), float(as_eps(eps))
    nu = _score_noise(score_noise)
    if cost is not None and not isinstance(cost, StepCost):
        raise InputError(
            f"cost must be a StepCost (gsd.core.advice.StepCost or fit_step_cost), got {type(cost).__name__}"
        )
    grid = _grid(g_grid)
    src = _prompts_of(p_or_posterior)
    notes: list[str] = []
    prompts = _prompts_per_step(
        hold, grid, _n_prompts(src), prompts_per_step, generations_per_step, cost, optimizer, nu, notes
    )
    generations = prompts * grid
    gain, per_step = _progress_per_step(src, grid, prompts, method, optimizer, nu, ddof, eps)
    per_gen = per_step / generations
    from ..allocation import expected_silent_rate

    silent = _silent_table(src, grid, expected_silent_rate).mean(axis=0)
    seconds = cost.seconds(prompts, generations) if cost is not None else np.full(grid.size, np.nan)
    per_sec = per_step / seconds
    best_gen = int(grid[np.argmax(per_gen)])
    best_sec = int(grid[np.nanargmax(per_sec)]) if cost is not None else None
    with np.errstate(divide="ignore", invalid="ignore"):
        table = {
            "G": grid,
            "prompts_per_step": prompts,
            "generations_per_step": generations,
            "silent_rate": silent,
            "progress_per_step": per_step,
            "progress_per_generation": per_gen,
            "seconds_per_step": seconds,
            "progress_per_second": per_sec,
            "relative_per_generation": per_gen / per_gen.max(),
            "relative_per_second": per_sec / np.nanmax(per_sec) if cost is not None else np.full(grid.size, np.nan),
        }
    if not (per_gen.max() > 0):  # refused by name: every G ties at 0, and 0/0 would fill the table
        raise InputError(
            "p_or_posterior: every prompt is silent for sure (p = 0 or 1, or so near that its progress is 0 in "
            "float64): no group size makes progress, so there is no group size to advise"
        )
    return GroupSizeAdvice(
        table_columns=table,
        best_G_per_generation=best_gen,
        best_G_per_second=best_sec,
        advised_G_per_generation=best_gen,
        advised_G_per_second=best_sec,
        prompt_columns=_prompt_values(gain[:, int(np.argmax(per_gen))]),
        hold=hold,
        method=method,
        optimizer=optimizer,
        objective=_OBJECTIVE[method],
        score_noise=nu,
        ddof=ddof,
        eps=eps,
        cost=cost,
        notes=notes,
    )


def _prompts_of(p_or_posterior):
    """The prompts as one flat BetaPosterior or one flat array of solve rates."""
    if isinstance(p_or_posterior, BetaPosterior):
        return BetaPosterior(p_or_posterior.a.ravel(), p_or_posterior.b.ravel(), p_or_posterior.prior)
    from ..validation import as_probability

    return np.atleast_1d(as_probability(p_or_posterior, "p_or_posterior")).ravel()


def _n_prompts(src) -> int:
    n = src.a.size if isinstance(src, BetaPosterior) else src.size
    if n == 0:
        raise InputError("p_or_posterior holds no prompt")
    return int(n)


def _prompts_per_step(hold, grid, n_prompts, prompts_per_step, generations_per_step, cost, optimizer, nu, notes):
    """Prompts per step at each G: fixed under ``hold="prompts"``, B/G under ``hold="generations"``."""
    if hold == "prompts":
        n = _positive_int("prompts_per_step", prompts_per_step if prompts_per_step is not None else n_prompts)
        if generations_per_step is not None:
            raise InputError("generations_per_step is for hold='generations'; hold='prompts' takes prompts_per_step")
        return np.full(grid.size, float(n))
    if prompts_per_step is not None:
        raise InputError("prompts_per_step is for hold='prompts'; hold='generations' takes generations_per_step")
    if generations_per_step is None:
        if cost is not None or (optimizer == "adam" and not math.isinf(nu)):
            raise InputError("hold='generations' with a cost or a finite score_noise needs generations_per_step")
        generations_per_step = int(n_prompts * grid.max())  # the ordering of G does not depend on it
    B = _positive_int("generations_per_step", generations_per_step)
    if B < grid.max():
        raise InputError(f"generations_per_step ({B}) must hold at least one group of the largest G ({grid.max()})")
    if np.any(B % grid):
        notes.append("generations_per_step is not a multiple of every G: prompts per step B/G taken as a fraction")
    return B / grid


def _progress_per_step(src, grid, prompts, method, optimizer, nu, ddof, eps):
    """(V_i(G), prompts × grid: each prompt's exact one-step gain; the step's expected progress per G:
    S under SGD, S/√(S² + νN) under Adam)."""
    from ..allocation import allocation_value

    if isinstance(src, BetaPosterior):
        gain = _posterior_table(src, grid, _VALUE[method], ddof, eps)
    else:
        gain = allocation_value(src[:, None], grid[None, :], _VALUE[method], ddof=ddof, eps=eps)
    S = gain.mean(axis=0)
    if optimizer == "sgd":
        return gain, S
    N = _expected_squares(src, grid, method, ddof, eps).mean(axis=0) / prompts
    with np.errstate(divide="ignore", invalid="ignore"):
        per_step = S / np.sqrt(N) if math.isinf(nu) else S / np.sqrt(S * S + nu * N)
    return gain, np.where(N > 0, per_step, 0.0)


def _prompt_values(col) -> Columns:
    """Per prompt at the best G: its expected gain, that over the batch mean, and whether it beats an average prompt."""
    mean = col.mean()
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = col / mean if mean > 0 else np.zeros_like(col)
    return {"progress": col, "relative_value": rel, "worth_rollouts": rel >= 1.0}


def _posterior_table(post, grid, value, ddof, eps):
    """allocation_value under posteriors, prompts × grid (each distinct posterior once)."""
    from ..allocation import allocation_value

    first, inverse = unique_pairs(post.a, post.b)
    sub = BetaPosterior(np.repeat(post.a[first], grid.size), np.repeat(post.b[first], grid.size), post.prior)
    vals = allocation_value(sub, np.tile(grid, first.size), value, ddof=ddof, eps=eps)
    return vals.reshape(first.size, grid.size)[inverse]


def _silent_table(src, grid, expected_silent_rate):
    if isinstance(src, BetaPosterior):
        first, inverse = unique_pairs(src.a, src.b)
        sub = BetaPosterior(np.repeat(src.a[first], grid.size), np.repeat(src.b[first], grid.size), src.prior)
        return expected_silent_rate(sub, np.tile(grid, first.size)).reshape(first.size, grid.size)[inverse]
    return expected_silent_rate(src[:, None], grid[None, :])


# --------------------------------------------------------------------------- the noise scale and the batch
def step_noise_terms(p_or_posterior, g_grid=DEFAULT_G_GRID, *, method: str = "grpo", ddof: int = 0, eps: float = 0.0):
    r"""Signal S(G) and noise per generation c_N(G) of a step, exact under the prompts' rates or posteriors.

    .. math::  S(G) = \operatorname{mean}_i V_i(G), \qquad
               c_N(G) = \operatorname{mean}_i \mathbb E\Big[\sum_j A_{ij}^2\Big] / G,

    V_i the prompt's expected one-step gain (``gain``: √(p(1−p))·E[σ̂]; Dr.GRPO ``dr_gain``) and A_ij
    the advantages of its group of G.  A step of B generations has expected gradient S and noise
    variance ν·c_N/B along the objective (ν the unknown score noise of one answer), so its noise scale is

    .. math::  B_{noise}(G) = \nu\, c_N(G) / S(G)^2 ,

    the batch at which a step is half noise (McCandlish et al. 2018): under Adam a step moves
    ≈ lr/√(1 + B_noise/B).  Returns ``{"G", "signal", "noise"}`` (numpy arrays over the grid).

    Examples
    --------
    >>> t = step_noise_terms([0.5], [2])
    >>> float(t["signal"][0]), float(t["noise"][0])  # V = 1/2·E[σ̂] = 1/8; E[Σ A²] = G·P(not silent) = 1
    (0.125, 0.5)
    """
    method = _choice("method", method, SPEED_METHODS)
    ddof, eps = as_ddof(ddof), float(as_eps(eps))
    grid = _grid(g_grid)
    src = _prompts_of(p_or_posterior)
    _n_prompts(src)
    gain, _ = _progress_per_step(src, grid, np.ones(grid.size), method, "sgd", math.inf, ddof, eps)
    noise = _expected_squares(src, grid, method, ddof, eps).mean(axis=0) * grid
    return {"G": grid, "signal": gain.mean(axis=0), "noise": noise}


@dataclass
class BatchAdvice:
    """Generations per step B, G within B and the learning rate with B (:func:`batch_advice`).

    ``B_per_generation``: the knee B = B_noise(G) (McCandlish's critical batch: there a run takes 2×
    the fewest steps and 2× the fewest generations; below it, steps grow; above it, generations), rounded
    to a multiple of G; ``B_per_second``: B* = √(t_step·B_noise/t_rollout) minimising the time to a target
    under t(B) = t_step + t_rollout·B (None without a cost); each with its interval from the measured
    noise scale's.  ``G``: the G of the least B_noise(G) (the fewest steps and generations at any B) among those whose
    group fits the batch it advises (G ≤ B_noise(G)); the smallest G of the grid when none does.
    ``lr_*``: the run's lr at every B (TRL's GRPOTrainer with Adam, docs/group_size_training.md: the
    lr acted alike at every B from 32 to 256 generations per step, and scaling it down as √B below the
    run's B cost 1.5–2.0× the generations; the earlier rule lr × √(B/B_run) is withdrawn).  The knee is
    McCandlish's critical batch at a learning rate tuned at each B; for a run at a fixed lr the measured
    knee sat below it (1.8–13× on eight measured curves), so ``B_per_generation`` is then an upper bound;
    from a :class:`~gsd.core.noise_scale.StepKnee` (``run["source"]`` "step gains") it is the knee at the
    run's own lr (within 2× of the measured knee on five curves of six, the page "Group size in real training").
    ``table_columns``:
    per G, ``b_noise`` and ``relative_steps`` (steps at the advised B against the advised G's).
    """

    G: int
    B_per_generation: int
    B_per_generation_interval: tuple
    B_per_second: int | None
    B_per_second_interval: tuple | None
    lr_per_generation: float | None
    lr_per_second: float | None
    b_noise: float
    b_noise_interval: tuple
    score_noise: float
    score_noise_interval: tuple
    level: float
    run: dict
    table_columns: Columns
    cost: StepCost | None
    method: str
    notes: list = field(default_factory=list)

    def convention(self) -> str:
        r = self.run
        lr = f", lr {r['lr']:g}" if r.get("lr") is not None else ""
        if r.get("source") == "step gains":
            return (
                f"B in generations per step, G answers per prompt; the knee at the run's lr from its step gains at "
                f"B = {r['B']} and B/2, G = {r['G']}{lr}; the run's lr at every B; {self.method}"
            )
        return (
            f"B in generations per step, G answers per prompt; noise scale measured at the run's B = {r['B']}, "
            f"G = {r['G']}{lr}; the run's lr at every B; the knee at a tuned lr (an upper bound at a fixed lr); "
            f"{self.method}"
        )

    def summary(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("table_columns", "cost")}
        out["cost"] = (
            None
            if self.cost is None
            else {k: getattr(self.cost, k) for k in ("t_step", "t_prompt", "t_rollout", "source")}
        )
        out["convention"] = self.convention()
        return out


def _interval(x, name):
    lo, hi = (float(v) for v in x)
    if not (0 <= lo <= hi) or math.isnan(hi):
        raise InputError(f"{name} must be an interval 0 <= lo <= hi, got {x!r}")
    return lo, hi


def _per_second(cost: StepCost, G: int, knee, as_B, notes: list):
    """B* = √(t_step·B_noise/t_rollout) at G with its interval, or (None, None) and a note saying why not."""
    a = cost.t_rollout + cost.t_prompt / G
    with np.errstate(over="ignore", divide="ignore"):
        b = np.sqrt(cost.t_step * knee / a) if a > 0 else np.full(3, np.inf)
    if not (a > 0 and cost.t_step > 0):
        notes.append("per second: the cost has no fixed part or no per-generation part, so no finite optimum")
    elif not b[0] <= MAX_BATCH:
        notes.append(f"per second: the optimum B* = {b[0]:.3g} is beyond 2^53 generations per step")
    else:
        return as_B(b[0]), (float(b[1]), float(b[2]))
    return None, None


def _measured_knee(noise) -> tuple:
    """(knee, lo, hi, level, source) of ``noise``: a NoiseScale (gradient norms), a StepKnee (step gains)
    or (b_noise, lo, hi)."""
    from .noise_scale import NoiseScale, StepKnee

    if isinstance(noise, NoiseScale):
        return noise.b_noise, noise.b_noise_lo, noise.b_noise_hi, noise.level, "gradient norms"
    if isinstance(noise, StepKnee):
        lo = 0.0 if math.isnan(noise.knee_lo) else noise.knee_lo
        return noise.knee, lo, noise.knee_hi, noise.level, "step gains"
    try:
        bn, lo, hi = (float(v) for v in noise)
    except (TypeError, ValueError):
        raise InputError(f"noise must be a NoiseScale, a StepKnee or (b_noise, lo, hi), got {noise!r}") from None
    return bn, lo, hi, math.nan, "gradient norms"


def batch_advice(
    p_or_posterior,
    noise,
    *,
    generations_per_step: int,
    group_size: int,
    lr: float | None = None,
    cost: StepCost | None = None,
    g_grid=DEFAULT_G_GRID,
    method: str = "grpo",
    ddof: int = 0,
    eps: float = 0.0,
) -> BatchAdvice:
    r"""The joint advice: B, G and lr, per generation and per second, from the run's measured noise scale.

    Parameters
    ----------
    p_or_posterior
        The prompts (rates or posteriors), as in :func:`group_size_advice`.
    noise : NoiseScale, StepKnee or (b_noise, lo, hi)
        B_noise measured in the run (:func:`gsd.core.noise_scale.noise_scale_from_norms`, the live
        :func:`gsd.live.noise_scale.gradient_noise_callback`), at its ``generations_per_step`` and ``group_size``;
        or the knee at the run's own lr from its step gains (:func:`gsd.core.noise_scale.knee_from_step_gains`,
        the live callback with an objective), which the held-out curves support (the page "Group size in real
        training"): it takes B_noise's place.
    lr : float, optional
        The run's learning rate: the advised lr at every B (see :class:`BatchAdvice`).
    cost : StepCost, optional
        Seconds per step (:func:`fit_step_cost`); t(B) = t_step + (t_rollout + t_prompt/G)·B.

    Notes
    -----
    ν = B_noise,run·S(G_run)²/c_N(G_run) (:func:`step_noise_terms`) carries the measurement to every G:
    B_noise(G) = ν·c_N(G)/S(G)².  With the lr tuned at each B, steps = S_min(1 + B_noise/B) and generations
    = E_min(1 + B/B_noise) (McCandlish et al. 2018, their eq. 2.11); time = steps·t(B) is least at
    B* = √(t_step·B_noise/t_rollout).  Both advised B are the model's optimum (no tolerance); the
    intervals are the noise scale's carried through (both scale with B_noise).
    """
    bn, lo, hi, level, source = _measured_knee(noise)
    if not (math.isfinite(bn) and bn > 0):
        raise InputError(f"noise: B_noise must be finite and > 0 to advise a batch, got {bn!r}")
    lo, hi = _interval((lo, hi), "noise's interval")
    B_run = _positive_int("generations_per_step", generations_per_step)
    G_run = _positive_int("group_size", group_size, hi=MAX_EXACT_GROUP_SIZE)
    if lr is not None and (isinstance(lr, bool) or not (isinstance(lr, int | float) and 0 < lr <= MAX_LR)):
        raise InputError(f"lr must be a number in (0, {MAX_LR:g}], got {lr!r}")
    if cost is not None and not isinstance(cost, StepCost):
        raise InputError(f"cost must be a StepCost, got {type(cost).__name__}")
    grid = np.union1d(_grid(g_grid), [G_run]) if G_run >= 2 else _grid(g_grid)
    t = step_noise_terms(p_or_posterior, grid, method=method, ddof=ddof, eps=eps)
    per = np.where(t["signal"] > 0, t["noise"] / np.where(t["signal"] > 0, t["signal"], 1.0) ** 2, np.inf)
    run = int(np.flatnonzero(grid == G_run)[0]) if G_run in grid else None
    if run is None or not np.isfinite(per[run]):
        raise InputError(f"group_size {G_run}: the prompts carry no signal at that G (every prompt silent for sure)")
    nu = bn / per[run]
    # the G of the least B_noise(G) among those whose group fits the batch it advises (G ≤ B_noise(G))
    with np.errstate(over="ignore"):  # a B_noise(G) beyond float64 is inf: that G fits
        fits = grid <= bn * per / per[run]
    best = int(np.argmin(np.where(fits, per, np.inf))) if fits.any() else 0
    G = int(grid[best])
    scale = per[best] / per[run]  # B_noise(G)/B_noise(G_run): ν cancels
    with np.errstate(over="ignore"):
        knee = np.array([bn, lo, hi]) * scale
    if not knee[0] <= MAX_BATCH:
        raise InputError(
            f"noise: B_noise = {bn:g} advises B = {knee[0]:.3g} generations per step at G = {G}, beyond "
            f"{MAX_BATCH:.3g} (2^53: no batch holds that many)"
        )

    def as_B(x):
        return int(G * max(1, round(x / G)))

    notes: list = []
    B_sec, sec_iv = (None, None) if cost is None else _per_second(cost, G, knee, as_B, notes)
    lr_of = (lambda B: None) if lr is None else (lambda B: float(lr))
    B_gen = as_B(knee[0])
    return BatchAdvice(
        G=G,
        B_per_generation=B_gen,
        B_per_generation_interval=(float(knee[1]), float(knee[2])),
        B_per_second=B_sec,
        B_per_second_interval=sec_iv,
        lr_per_generation=lr_of(B_gen),
        lr_per_second=None if B_sec is None else lr_of(B_sec),
        b_noise=float(bn),
        b_noise_interval=(lo, hi),
        score_noise=float(nu),
        score_noise_interval=(lo / per[run], hi / per[run]),
        level=float(level),
        run={"B": B_run, "G": G_run, "lr": lr, "source": source},
        table_columns={
            "G": grid,
            "b_noise": nu * per,
            "relative_steps": (1 + nu * per / B_gen) / (1 + knee[0] / B_gen),
        },
        cost=cost,
        method=method,
        notes=notes,
    )


# --------------------------------------------------------------------------- the cost model from logs
#: The widest line :func:`advice_headline` writes (a terminal of 100 columns).
HEADLINE_WIDTH = 100


def advice_headline(advice) -> str:
    """The advised setting in two lines of at most :data:`HEADLINE_WIDTH` characters: what to set, then
    its convention. Every report of ``gsd`` (diagnose, scalars, plan --advice) opens with it.

    ``advice`` is a :class:`GroupSizeAdvice` or its :meth:`GroupSizeAdvice.summary` (the JSON form a
    report keeps). Line 1 names the advised uniform G per generation and, beside it, how much slower
    the two G nearest it learn (their ``relative_per_generation``: progress per generation over the best G's);
    line 2 the convention the numbers are in (what was held fixed, the optimiser, the objective) and
    the advised G per second when a step cost was given.

    >>> adv = group_size_advice([0.2, 0.5, 0.7], prompts_per_step=3)
    >>> print(advice_headline(adv))
    Advised: uniform G = 2 answers per prompt (fastest per generation; G = 4: 0.86x; G = 8: 0.65x)
      convention: prompts per step held fixed; Adam; grpo on mean 2*arcsin(sqrt(p))
    """
    import textwrap

    if isinstance(advice, BatchAdvice) or (isinstance(advice, dict) and "B_per_generation" in advice):
        return _batch_headline(advice.summary() if isinstance(advice, BatchAdvice) else advice)
    s = advice.summary() if isinstance(advice, GroupSizeAdvice) else dict(advice)
    best = s.get("advised_G_per_generation")
    if best is None:
        return "Advised: no group size (the advice could not be computed for this run)"
    rel = {int(g): float(r) for g, r in (s.get("relative_per_generation") or {}).items() if int(g) != int(best)}
    near = sorted(sorted(rel, key=lambda g: abs(math.log(g / int(best))))[:2])  # the two G nearest the advised
    others = "".join(f"; G = {g}: {rel[g]:.2f}x" for g in near)
    first = f"Advised: uniform G = {best} answers per prompt (fastest per generation{others})"
    held = "prompts per step" if s.get("hold") == "prompts" else "generations per step"
    opt = {"adam": "Adam", "sgd": "SGD"}.get(str(s.get("optimizer")), str(s.get("optimizer")))
    if s.get("optimizer") == "adam" and s.get("score_noise") is not None:
        opt += f" (score noise {s['score_noise']:g})"
    second = f"convention: {held} held fixed; {opt}; {s.get('method')} on mean {s.get('objective')}"
    if s.get("advised_G_per_second") is not None:
        second += f"; per second of the step cost: G = {s['advised_G_per_second']}"
    lines = textwrap.wrap(first, HEADLINE_WIDTH, subsequent_indent="  ", break_on_hyphens=False)
    lines += textwrap.wrap(
        second, HEADLINE_WIDTH, initial_indent="  ", subsequent_indent="    ", break_on_hyphens=False
    )
    return "\n".join(lines)


def _batch_headline(s: dict) -> str:
    """:func:`advice_headline` of a :class:`BatchAdvice` (or its summary): B, G and lr per generation (and per
    second), then the convention, each wrapped to :data:`HEADLINE_WIDTH`."""
    import textwrap

    def lr(x):
        return "" if x is None else f", lr {x:.3g}"

    lo, hi = s["B_per_generation_interval"]
    knee = "K from the step gains" if (s.get("run") or {}).get("source") == "step gains" else "B = B_noise"
    lvl = s.get("level")
    level = f" at {lvl:.0%}" if isinstance(lvl, float) and math.isfinite(lvl) else ""
    first = (
        f"Advised: B = {s['B_per_generation']} generations per step, G = {s['G']}{lr(s['lr_per_generation'])} "
        f"(per generation: the knee {knee}, {lo:.0f}–{hi:.0f}{level})"
    )
    if s.get("B_per_second") is not None:
        lo, hi = s["B_per_second_interval"]
        first += f"; per second B = {s['B_per_second']}{lr(s['lr_per_second'])} ({lo:.0f}–{hi:.0f})"
    lines = textwrap.wrap(first, HEADLINE_WIDTH, subsequent_indent="  ", break_on_hyphens=False)
    lines += textwrap.wrap(
        f"convention: {s['convention']}",
        HEADLINE_WIDTH,
        initial_indent="  ",
        subsequent_indent="    ",
        break_on_hyphens=False,
    )
    return "\n".join(lines)
