r"""What a run's per-step scalars can say about its silent groups, and what they cannot.

From a scalar log (:func:`gsd.diagnose.scalars.read_scalars`):

* **the trainer's own silent fraction** per logged step: TRL's ``frac_reward_zero_std`` (the share
  of groups whose rewards had zero std, averaged over the generations since the previous log).
  verl 0.9.1 logs none for GRPO: only the mean score ``critic/score/mean``;
* **the wasted rollouts**: Σ over logged steps of (silent fraction × generations in the interval ×
  groups per generation × G).  Exact when G, the groups per generation and the generations per
  interval are known (TRL's config in a TensorBoard or W&B log gives them; ``--group-size`` /
  ``--groups`` otherwise); the generations per interval follow TRL's schedule, a generation every
  ``steps_per_generation × num_iterations`` micro-batches of ``gradient_accumulation_steps`` per step
  (one per step by default);
* **a lower bound** from the mean reward alone: :math:`\hat m^G + (1-\hat m)^G` (Jensen: p^G + (1−p)^G
  is convex) — the most a tool reading only the mean reward can honestly say;
* **the difficulty fit** (:mod:`gsd.core.difficulty_fit`): per step, the Beta whose mean and zero-std
  fraction are the logged ones, its prediction of the silent fraction at other group sizes, and a
  parametric-bootstrap interval when the groups per step are known.

Rewards are taken as right/wrong (0/1): the mean reward is then E[p].  A graded reward's mean is
not, and the fit is then meaningless (a mean outside [0, 1] is refused; one inside cannot be told apart).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from ..io.numbers import count_array, fraction_array, step_array

if TYPE_CHECKING:
    from ..core.difficulty_fit import DifficultyFit

__all__ = [
    "REWARD_KEYS",
    "SILENT_KEYS",
    "EVICTED_KEY",
    "FAIL_ON_EXIT",
    "ScalarDiagnosis",
    "diagnose_scalars",
    "alerts",
    "fail_on_status",
    "parse_fail_on",
]

#: The mean-reward metric of each writer, in the order looked for.
REWARD_KEYS = ("reward", "train/reward", "critic/score/mean", "reward/mean", "mean_reward")
#: The trainer's zero-std (silent) fraction, in the order looked for.
SILENT_KEYS = ("frac_reward_zero_std", "train/frac_reward_zero_std")
DEFAULT_PREDICT = (4, 16, 32)
#: verl V1's DAPO filter (``algorithm.filter_groups``): groups evicted at a step, logged only when some were.
EVICTED_KEY = "training/filter_groups/evicted_samples"
#: Groups that passed the filter beyond the batch and were discarded (logged only when some were).
SURPLUS_KEY = "training/filter_groups/discarded_surplus_samples"


@dataclass
class ScalarDiagnosis:
    """``steps``: one row per logged step (pandas DataFrame); ``summary``: the run's figures (dict);
    ``fit``: the :class:`gsd.core.difficulty_fit.DifficultyFit` of the steps (None without both moments)."""

    steps: object
    summary: dict
    fit: object = None
    notes: list = field(default_factory=list)


def _pick(columns, given, keys, what):
    if given is not None:
        if given not in columns:
            raise InputError(f"{what} {given!r} is not a metric of the log: {sorted(columns)[:20]}")
        return given
    return next((k for k in keys if k in columns), None)


def _config_int(config, key):
    v = config.get(key)
    number = isinstance(v, (int, float)) and not isinstance(v, bool)
    return int(v) if number and float(v).is_integer() and v > 0 else None


def _generations(steps: np.ndarray, config: dict):
    """Generations in each logged interval (previous logged step, step], from TRL's schedule, and
    whether the schedule was read from the config (else: one generation per step, TRL's default)."""
    from ..integrations.trl_alerts import TRL_SCHEDULE, trl_generations

    settings = [_config_int(config, k) for k in TRL_SCHEDULE]
    prev = np.concatenate([[0], steps[:-1]])
    return trl_generations(prev, steps, *settings), all(settings)


def diagnose_scalars(
    log,
    *,
    fmt: str = "auto",
    step_col=None,
    reward=None,
    silent=None,
    group_size=None,
    groups=None,
    predict=DEFAULT_PREDICT,
    level: float = 0.9,
    draws: int = 200,
    seed: int = 0,
    noise=None,
    run_lr: float | None = None,
) -> ScalarDiagnosis:
    """The silent fraction, wasted rollouts and difficulty fit a scalar log supports (module docstring).

    Parameters
    ----------
    log : str, Path or ScalarLog
        A path (read with :func:`~gsd.diagnose.scalars.read_scalars` and ``fmt``, ``step_col``) or a log.
    reward, silent : str, optional
        The mean-reward and zero-std-fraction metrics (default: the first of :data:`REWARD_KEYS`,
        :data:`SILENT_KEYS` in the log).
    group_size : int, optional
        G, answers per group (default: the config's ``num_generations``).
    groups : int, optional
        Groups per generation (default: the config's ``generation_batch_size / num_generations``).
    predict : sequence of int
        Group sizes to predict the silent fraction at (the fit; default 4, 16, 32).
    level, draws, seed
        The bootstrap interval's level, replicates (0: no interval) and seed.
    noise : NoiseScale or (b_noise, lo, hi), optional
        The run's measured noise scale at its generations per step (groups × G): with it the summary's
        ``batch_advice`` (:func:`gsd.core.advice.batch_advice` over the population fitted at the advice's
        step) names B, G and the learning rate (``run_lr``, the run's).
    """
    import pandas as pd

    from ..validation import as_group_size
    from .scalars import ScalarLog, read_scalars

    if not isinstance(log, ScalarLog):
        log = read_scalars(log, fmt=fmt, step_col=step_col)
    r_key, z_key = _metrics(log, reward, silent)
    G, G_from, n, n_from = _run_shape(log.config or {}, group_size, groups)
    Gs = np.atleast_1d(as_group_size(predict, "predict", 1, 10**9)) if predict is not None else np.array([], np.int64)
    series = _logged_series(log.metrics, r_key, z_key, n, log.source)
    steps, m, z, drawn = series.steps, series.mean_reward, series.silent_frac, series.groups_drawn
    z_key, dapo = series.silent_key, series.dapo
    notes = [*log.notes, *series.notes]
    bad = np.isfinite(m) & ((m < 0) | (m > 1))
    binary = not bad.any()
    if not binary:
        notes.append(
            f"mean reward outside [0, 1] at {int(bad.sum())} steps (e.g. {float(m[bad][0])!r}): the "
            "rewards are not right/wrong, so no lower bound and no fit"
        )
    out = pd.DataFrame({"step": steps, "mean_reward": m, "silent_frac": z})
    gens, scheduled = _generations(steps, log.config or {})
    out["generations"] = gens
    summary = {
        "format": log.fmt,
        "source": log.source,
        "reward_metric": r_key,
        "silent_metric": z_key,
        "group_size": G,
        "group_size_from": G_from,
        "groups_per_generation": n,
        "groups_from": n_from,
        "logged_steps": len(out),
        "last_step": int(steps[-1]) if len(steps) else None,
    }
    if z_key is None and not dapo:
        notes.append(_no_silent_note(log))
    waste = _silent_and_waste(z, gens, scheduled, drawn, G, n)
    out = out.assign(**waste.columns())
    summary.update(waste.summary())
    notes += waste.notes
    fit = None
    if G and binary and r_key:
        from ..core.silent import silent_rate

        out["silent_lower_bound"] = np.where(np.isfinite(m), silent_rate(np.where(np.isfinite(m), m, 0.5), G), np.nan)
    if G and binary and r_key and z_key and not dapo:
        moments = _moment_fit(m, z, G, Gs, n, steps, level=level, draws=draws, seed=seed, batch=(noise, run_lr))
        out = out.assign(**moments.columns)
        summary["fit_status"] = moments.status_counts
        summary.update(moments.advice.summary())
        notes += moments.notes
        fit = moments.fit
    elif z_key and r_key and not G:
        notes.append("no lower bound and no fit: give --group-size (G)")
    summary["notes"] = notes
    return ScalarDiagnosis(steps=out, summary=summary, fit=fit, notes=notes)


def _no_silent_note(log) -> str:
    """What the report says of a log without a usable zero-std fraction: one whose every value was
    text (left out, counted by the reader) is not a log without one."""
    unread = [k for k in SILENT_KEYS if getattr(log, "dropped", {}).get(k)]
    if unread:
        return (
            f"the zero-std fraction {unread[0]!r} holds no number ({log.dropped[unread[0]]} values left out): "
            "the silent share and the wasted rollouts are not in it"
        )
    return (
        f"the log holds no zero-std fraction ({log.fmt} logs none"
        + (": verl 0.9.1 logs only the mean score for GRPO" if log.fmt == "verl" else "")
        + "): the silent share and the wasted rollouts are not in it; the lower bound from the mean "
        "reward is all that can be said"
    )


def _metrics(log, reward, silent) -> tuple[str | None, str | None]:
    """The mean-reward and zero-std-fraction metrics of the log (given, or the first of the known
    names it holds); an InputError when it holds neither."""
    r_key = _pick(log.metrics.columns, reward, REWARD_KEYS, "reward")
    z_key = _pick(log.metrics.columns, silent, SILENT_KEYS, "silent")
    if r_key is None and z_key is None:
        raise InputError(
            f"{log.source}: no mean reward ({', '.join(REWARD_KEYS)}) nor zero-std fraction "
            f"({', '.join(SILENT_KEYS)}) in the log; name them with --reward / --silent"
        )
    return r_key, z_key


@dataclass(frozen=True)
class LoggedSeries:
    """The logged rows the diagnosis reads: their steps, mean reward and silent fraction (NaN where
    not logged) and the silent fraction's metric; with verl's DAPO filter (``dapo``) the silent
    share of the groups drawn, and those groups per row (``groups_drawn``, else None), with notes."""

    steps: np.ndarray
    mean_reward: np.ndarray
    silent_frac: np.ndarray
    silent_key: str | None
    groups_drawn: np.ndarray | None
    dapo: bool
    notes: tuple[str, ...]


def _logged_series(df, r_key, z_key, n, source) -> LoggedSeries:
    """The rows with a mean reward or a silent fraction (every row of a DAPO-filter log)."""
    dapo = z_key is None and EVICTED_KEY in df.columns
    rows = df if dapo else df[[c for c in (r_key, z_key) if c is not None]].dropna(how="all")
    steps = step_array(rows.index.to_numpy(), f"{source}: steps")
    m = rows[r_key].to_numpy(dtype=float) if r_key else np.full(len(rows), np.nan)
    z = fraction_array(rows[z_key], f"{source}: {z_key}") if z_key else np.full(len(rows), np.nan)
    if not dapo:
        return LoggedSeries(steps, m, z, z_key, None, False, ())
    f = _dapo_filter_rows(rows, n)
    return LoggedSeries(steps, f.mean_reward, f.silent_frac, f.silent_key, f.groups_drawn, True, f.notes)


def _run_shape(config: dict, group_size, groups):
    """(G, where it came from, groups per generation, where it came from): the options first, then
    TRL's config (``num_generations``, ``generation_batch_size``) or verl's nested one
    (``actor_rollout_ref.rollout.n``, ``data.train_batch_size``, as its Tracking hands it to W&B)."""
    from ..validation import as_scalar_group_size

    G_from = "option" if group_size is not None else None
    G = as_scalar_group_size(group_size, "group_size", minimum=2, maximum=10**9) if group_size is not None else None
    actor = config.get("actor_rollout_ref")
    rollout = actor.get("rollout") if isinstance(actor, dict) else None
    data = config.get("data") if isinstance(config.get("data"), dict) else {}
    if G is None and _config_int(config, "num_generations"):
        G, G_from = _config_int(config, "num_generations"), "config num_generations"
    elif G is None and isinstance(rollout, dict) and _config_int(rollout, "n"):
        G, G_from = _config_int(rollout, "n"), "config actor_rollout_ref.rollout.n"
    n_from = "option" if groups is not None else None
    n = as_scalar_group_size(groups, "groups", minimum=1, maximum=10**9) if groups is not None else None
    gb = _config_int(config, "generation_batch_size")
    if n is None and gb and G and gb % G == 0:
        n, n_from = gb // G, "config generation_batch_size / num_generations"
    elif n is None and _config_int(data, "train_batch_size") and G_from != "config num_generations":
        n, n_from = _config_int(data, "train_batch_size"), "config data.train_batch_size"
    return G, G_from, n, n_from


@dataclass(frozen=True)
class DapoRows:
    """What verl V1's DAPO filter logs say per logged row: the mean reward (NaN: the trained groups'
    mean is not E[p] of the groups drawn), the silent share of the groups drawn and its name (NaN and
    None without the groups per step), the groups drawn (None likewise), and the notes."""

    mean_reward: np.ndarray
    silent_frac: np.ndarray
    silent_key: str | None
    groups_drawn: np.ndarray | None
    notes: tuple[str, ...]


def _dapo_filter_rows(rows, n) -> DapoRows:
    """verl V1's DAPO filter logs the groups it evicted (all rewards equal), only at steps that
    evicted."""
    evicted = np.nan_to_num(count_array(rows[EVICTED_KEY], EVICTED_KEY), nan=0.0)
    # groups that passed the filter beyond the batch, discarded (V1's sync ReplayBuffer): drawn, not silent
    surplus = (
        np.nan_to_num(count_array(rows[SURPLUS_KEY], SURPLUS_KEY), nan=0.0)
        if SURPLUS_KEY in rows.columns
        else np.zeros(len(rows))
    )
    z, z_key, drawn, notes = np.full(len(rows), np.nan), None, None, []
    if n:
        drawn = evicted + n + surplus
        z = evicted / drawn
        z_key = f"{EVICTED_KEY} / (groups + evicted + surplus)"
    else:
        notes.append(
            f"verl's DAPO filter evicted {evicted.sum():.0f} silent groups; the silent share needs "
            "--groups (data.train_batch_size, the groups trained per step)"
        )
    if surplus.any():
        notes.append(
            f"{surplus.sum():.0f} groups passed the filter beyond the batch and were discarded "
            f"({SURPLUS_KEY}): drawn, not silent, not trained"
        )
    # the mean score is the trained groups' (no silent one among them): not E[p] of the groups drawn
    notes.append(
        "verl's filter_groups (DAPO): the mean score is the trained groups' only, so no lower bound and no fit"
    )
    return DapoRows(np.full(len(rows), np.nan), z, z_key, drawn, tuple(notes))


@dataclass(frozen=True)
class WasteAccount:
    """The run's silent share and wasted rollouts (:func:`_silent_and_waste`).  ``rollouts``,
    ``wasted_exact``, ``groups_drawn`` and ``wasted_per_step`` (per logged row) are None unless G and
    the groups per generation are known; every figure is None when no silent fraction is logged."""

    silent_share: float | None = None
    silent_share_weights: str | None = None
    wasted_share: float | None = None
    wasted_rollouts: float | None = None
    rollouts: int | None = None
    wasted_exact: bool | None = None
    groups_drawn: np.ndarray | None = None
    wasted_per_step: np.ndarray | None = None
    notes: tuple[str, ...] = ()

    def columns(self) -> dict:
        """The step table's columns it adds: the groups drawn and the wasted rollouts per logged row."""
        if self.groups_drawn is None:
            return {}
        return {"groups_drawn": self.groups_drawn, "wasted_rollouts": self.wasted_per_step}

    def summary(self) -> dict:
        """The summary's keys, in the order of ``gsd scalars --json``."""
        if self.silent_share is None:
            return {"silent_share": None, "wasted_share": None, "wasted_rollouts": None}
        out = {"silent_share": self.silent_share, "silent_share_weights": self.silent_share_weights}
        if self.rollouts is None:
            return {**out, "wasted_share": self.wasted_share, "wasted_rollouts": self.wasted_rollouts}
        return {
            **out,
            "wasted_rollouts": self.wasted_rollouts,
            "rollouts": self.rollouts,
            "wasted_share": self.wasted_share,
            "wasted_exact": self.wasted_exact,
        }


def _silent_and_waste(z, gens, scheduled: bool, drawn, G, n) -> WasteAccount:
    """The run's silent share and wasted rollouts (exact when G, the groups and the schedule are known)."""
    seen = np.isfinite(z)
    if not seen.any():
        return WasteAccount()
    w = gens[seen].astype(float)
    share = float((z[seen] * w).sum() / w.sum()) if w.sum() > 0 else float(z[seen].mean())
    weights = (
        "generations per logged interval, from the config's schedule"
        if scheduled
        else "logged steps covered (one generation per step, TRL's default)"
    )
    if not (G and n):
        note = (
            "wasted share = silent share (every group has G rollouts); the count of wasted rollouts needs "
            "--group-size and --groups (groups per generation)"
        )
        return WasteAccount(share, weights, wasted_share=share, notes=(note,))
    groups_drawn = gens * n if drawn is None else drawn
    wasted = z * groups_drawn * G
    wasted_rollouts = float(np.nansum(wasted[seen]))
    rollouts = int(groups_drawn[seen].sum() * G)
    exact = bool(scheduled or drawn is not None)
    if drawn is not None:
        w = groups_drawn[seen].astype(float)  # the share of the groups drawn, over the run
        share = float((z[seen] * w).sum() / w.sum())
        weights = "groups drawn per step (trained + evicted + discarded surplus)"
    notes = (
        ()
        if exact
        else (
            "wasted rollouts assume one generation per step (TRL's default); the log does not hold "
            "the schedule (gradient_accumulation_steps, steps_per_generation, num_iterations)",
        )
    )
    return WasteAccount(
        share,
        weights,
        wasted_share=wasted_rollouts / rollouts if rollouts else None,
        wasted_rollouts=wasted_rollouts,
        rollouts=rollouts,
        wasted_exact=exact,
        groups_drawn=groups_drawn,
        wasted_per_step=wasted,
        notes=notes,
    )


@dataclass(frozen=True)
class FitAdvice:
    """The group-size advice for the population fitted at ``advice_step`` (:func:`_advice`); every
    field None when no step has a proper Beta."""

    advised_group_size: int | None = None
    advice_step: int | None = None
    convention: str | None = None
    relative_per_generation: dict[int, float] | None = None
    advice: dict | None = None  # the advice's own summary (GroupSizeAdvice.summary), for its headline
    batch_advice: dict | None = None  # BatchAdvice.summary with the run's noise scale (else None)

    def summary(self) -> dict:
        """The summary's keys, in the order of ``gsd scalars --json``."""
        out: dict = {"advised_group_size": self.advised_group_size, "advice_step": self.advice_step}
        if self.convention is not None:
            out["advice_convention"] = self.convention
            out["advice_relative_per_generation"] = self.relative_per_generation
            out["advice"] = self.advice
        if self.batch_advice is not None:
            out["batch_advice"] = self.batch_advice
        return out


@dataclass(frozen=True)
class MomentFit:
    """The Beta fitted per step (``fit``), the step table's columns it adds (in their order), the
    count of each fit status, the advice and the notes."""

    fit: DifficultyFit
    columns: dict[str, np.ndarray]
    status_counts: dict[str, int]
    advice: FitAdvice
    notes: tuple[str, ...]


def _moment_fit(m, z, G, Gs, n, steps, *, level, draws, seed, batch=(None, None)) -> MomentFit:
    """The Beta fitted per step to the two logged moments, its predictions at ``Gs`` (with a bootstrap
    interval when the groups per generation are known) beside the pooled-p ones, and the advice."""
    from ..core.difficulty_fit import beta_from_moments, silent_interval
    from ..core.silent import silent_rate

    fit = beta_from_moments(m, z, G)
    columns = {"fit_status": fit.status, "beta_a": fit.a, "beta_b": fit.b}
    if Gs.size:
        pred = fit.silent_at(Gs[:, None])
        pooled = silent_rate(np.where(np.isfinite(m), m, 0.5), Gs[:, None])
        interval = silent_interval(fit, Gs, n, level=level, draws=draws, seed=seed) if n and draws else None
        for i, g in enumerate(Gs.tolist()):
            columns[f"silent_at_{g}"] = pred[i]
            if interval is not None:
                columns[f"silent_at_{g}_lo"], columns[f"silent_at_{g}_hi"] = interval[0][:, i], interval[1][:, i]
            columns[f"pooled_at_{g}"] = np.where(np.isfinite(m), pooled[i], np.nan)
    status_counts = {s: int((fit.status == s).sum()) for s in np.unique(fit.status)}
    notes = (
        ("no interval on the fit's predictions: give --groups (groups per generation)",)
        if Gs.size and n is None
        else ()
    )
    return MomentFit(fit, columns, status_counts, _advice(fit, steps, n, G, *batch), notes)


def _advice(fit, steps, groups, G=None, noise=None, run_lr=None) -> FitAdvice:
    """The group-size advice (:func:`gsd.group_size_advice`, its defaults: prompts per step held,
    Adam) for the population fitted at the last step with a proper Beta: the population a next run
    would start from. Per-step averages cannot say which prompts; only which uniform G.  With the run's
    ``noise`` scale, the batch advice (:func:`gsd.core.advice.batch_advice`) for the same population, at
    the run's generations per step (``groups`` × ``G``)."""
    from ..core.advice import batch_advice, group_size_advice

    proper = np.flatnonzero(np.isfinite(fit.kappa) & (fit.kappa > 0))
    if proper.size == 0:
        return FitAdvice()
    i = int(proper[-1])
    adv = group_size_advice(fit.population(i), prompts_per_step=groups)
    rel = adv.table.set_index("G")["relative_per_generation"]
    advised = adv.advised_G_per_generation
    assert advised is not None  # a proper population has an advised G
    batch = None
    if noise is not None:
        if not groups or not G:
            raise InputError(
                "--noise-scale needs the run's generations per step: give --groups (groups per generation) "
                "and --group-size where the log's config does not say them"
            )
        batch = batch_advice(
            fit.population(i), noise, generations_per_step=int(groups) * int(G), group_size=int(G), lr=run_lr
        ).summary()
    return FitAdvice(
        int(advised),
        int(steps[i]),
        f"hold={adv.hold}, optimizer={adv.optimizer}, method={adv.method}",
        {int(g): float(v) for g, v in rel.items() if int(g) in (2, 4, 8, 16)},
        adv.summary(),
        batch,
    )


def alerts(summary: dict, steps, rules) -> list:
    """The rules of ``--fail-on`` that the run breaks: (metric, op, threshold, value) for each.

    ``silent`` is the largest logged per-step silent fraction, ``wasted`` the run's wasted share.  A rule
    whose metric the log does not hold is broken too, with value None: a CI gate that cannot check must
    not pass."""
    found: list[tuple[str, str, float, float | None]] = []
    for metric, op, thr in rules:
        if metric == "silent":
            col = np.asarray(steps["silent_frac"], dtype=float) if "silent_frac" in steps else np.array([])
            value = float(np.nanmax(col)) if np.isfinite(col).any() else None
        else:
            value = summary.get("wasted_share")
        if value is None or (isinstance(value, float) and math.isnan(value)):
            found.append((metric, op, thr, None))
        elif (value > thr) if op == ">" else (value >= thr):
            found.append((metric, op, thr, value))
    return found


#: Exit status of ``gsd scalars`` / ``gsd diagnose`` when a ``--fail-on`` rule holds (2 is bad input).
FAIL_ON_EXIT = 3


def fail_on_status(summary: dict, steps, rules, command: str) -> int:
    """:data:`FAIL_ON_EXIT` with one line on stderr per broken rule (:func:`alerts`), else 0."""
    import sys

    broken = alerts(summary, steps, rules)
    for metric, op, thr, value in broken:
        said = "not in the log: cannot be checked" if value is None else f"{metric} is {value:.4g}"
        print(f"gsd {command}: --fail-on {metric}{op}{thr:g}: {said}", file=sys.stderr)
    return FAIL_ON_EXIT if broken else 0


def parse_fail_on(text: str):
    """``'silent>0.5,wasted>=0.3'`` → [('silent', '>', 0.5), ('wasted', '>=', 0.3)]; an InputError naming
    ``--fail-on`` and the part it cannot read.  Metrics: silent, wasted; thresholds in [0, 1]."""
    import re

    rules = []
    for part in str(text).split(","):
        part = part.strip()
        match = re.fullmatch(r"(silent|wasted)\s*(>=|>)\s*([0-9.eE+-]+)", part)
        if not match:
            raise InputError(
                f"--fail-on {text!r}: cannot read {part!r} (expected METRIC>X or METRIC>=X, "
                "METRIC silent or wasted, X in [0, 1], joined by commas)"
            )
        try:
            thr = float(match.group(3))
        except ValueError:
            raise InputError(f"--fail-on {text!r}: {match.group(3)!r} is not a number") from None
        if not (math.isfinite(thr) and 0.0 <= thr <= 1.0):
            raise InputError(f"--fail-on {text!r}: threshold {match.group(3)} must be in [0, 1] (a fraction)")
        rules.append((match.group(1), match.group(2), thr))
    return rules
