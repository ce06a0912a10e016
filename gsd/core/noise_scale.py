r"""The gradient noise scale of a run, measured from gradient norms at two batch sizes.

McCandlish et al. (2018, arXiv 1812.06162, Appendix A): with G the true gradient and Σ the covariance
of one example's gradient, a batch of B examples gives an estimate whose squared norm has

.. math::  \mathbb E\,‖G_B‖^2 = ‖G‖^2 + \operatorname{tr}(\Sigma)/B .

Two batch sizes B_small < B_big measured at the same parameters (a trainer's micro-batch and its
accumulated step) give unbiased estimates of both terms,

.. math::  \widehat{‖G‖^2} = \frac{B_{big}‖G_{big}‖^2 - B_{small}‖G_{small}‖^2}{B_{big} - B_{small}}, \qquad
           \widehat{\operatorname{tr}\Sigma} = \frac{‖G_{small}‖^2 - ‖G_{big}‖^2}{1/B_{small} - 1/B_{big}},

and the (simple) noise scale B_noise = tr(Σ)/‖G‖² is the batch at which a step's gradient is half
noise.  Its estimate is the ratio of the means over steps (the ratio of per-step estimates is not
unbiased; the paper's advice), with a delta-method interval over steps.  Here an "example" is one
generation: B counts generations per step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..errors import InputError
from ..io.numbers import step_number
from ..validation import shown

__all__ = [
    "NoiseScale",
    "noise_scale_from_norms",
    "noise_scale_from_logs",
    "grad_norms_from_log",
    "StepKnee",
    "knee_from_step_gains",
    "knee_from_ratio",
    "knee_from_gain_levels",
    "knee_from_log",
]


class _Summary:
    """A frozen dataclass's numbers as a plain dict (for JSON): ``summary()``."""

    def summary(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}  # type: ignore[attr-defined]


@dataclass(frozen=True)
class NoiseScale(_Summary):
    """B_noise = tr(Σ)/‖G‖² of a run, from :func:`noise_scale_from_norms`.

    ``b_noise`` with its interval ``b_noise_lo``, ``b_noise_hi`` (delta method over ``steps`` steps
    at ``level``; ``inf`` where the interval reaches ‖G‖² ≤ 0), ``gradient_sq`` (‖G‖²) and
    ``trace`` (tr Σ, per generation) with their standard errors, and the batch sizes in generations.
    """

    b_noise: float
    b_noise_lo: float
    b_noise_hi: float
    gradient_sq: float
    gradient_sq_se: float
    trace: float
    trace_se: float
    b_small: float
    b_big: float
    steps: int
    level: float
    interval: str = "delta method over steps (steps taken as independent)"


def _batch(name, v) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating) or not (1 <= v < 2**53):
        raise InputError(f"{name} must be a batch size in generations, a number >= 1, got {v!r}")
    return float(v)


def _norms(name, v) -> np.ndarray:
    x = _numbers(name, v, "squared norms, one per step")
    bad = ~np.isfinite(x) | (x < 0)
    if bad.any():
        raise InputError(f"{name} must hold finite squared norms >= 0, got {x[bad][:5].tolist()}")
    return x


def _numbers(name, v, what) -> np.ndarray:
    """``v`` as a flat float64 array of at least one entry; bool, text, None or a dict is an InputError."""
    x = np.asarray(v) if not isinstance(v, np.ndarray) else v
    if x.dtype.kind not in "iuf":
        raise InputError(f"{name} must hold numbers ({what}), got {shown(v)}")
    x = x.astype(np.float64).ravel()
    if x.size == 0:
        raise InputError(f"{name} holds no step")
    return x


def _level(level) -> None:
    if isinstance(level, bool) or not isinstance(level, float | int) or not (0 < level < 1):
        raise InputError(f"level must be a number in (0, 1), got {level!r}")


def _unit(largest) -> float:
    """2^e with largest/2^e in [1, 2) (1 for 0): a float64 (2^1023 at most), and dividing by it is exact."""
    return math.ldexp(1.0, math.frexp(float(largest))[1] - 1) if largest > 0 else 1.0


def noise_scale_from_norms(small_sq, big_sq, b_small, b_big, *, level: float = 0.95) -> NoiseScale:
    r"""B_noise, ‖G‖² and tr(Σ) from squared gradient norms at two batch sizes, step by step.

    Parameters
    ----------
    small_sq, big_sq : array_like of float ≥ 0, one entry per step
        ‖G_small‖² (a micro-batch's gradient, or the mean of several micro-batches' squared norms)
        and ‖G_big‖² (the step's gradient: the mean of its micro-batches), at the same parameters.
    b_small, b_big : float
        Generations in the small and the big batch (b_small < b_big).
    level : float in (0, 1)
        The interval's coverage.

    Notes
    -----
    Per step i, g_i = (b_big·big_i − b_small·small_i)/(b_big − b_small) and
    s_i = (small_i − big_i)/(1/b_small − 1/b_big) are unbiased for ‖G‖² and tr(Σ) when the micro-batches
    are independent draws at the step's parameters.  B_noise = mean(s)/mean(g); its interval is
    R ± z·sd(s_i − R·g_i)/(√n·mean(g)) (the delta method for a ratio of means, z the normal quantile;
    needs ≥ 2 steps), capped below at 0; where mean(g) ≤ 0 the gradient is not resolved from the noise
    and B_noise is ``inf``.

    Examples
    --------
    >>> ns = noise_scale_from_norms([5.0, 5.0], [3.0, 3.0], 2, 4)
    >>> ns.gradient_sq, ns.trace, ns.b_noise
    (1.0, 8.0, 8.0)
    """
    small, big = _norms("small_sq", small_sq), _norms("big_sq", big_sq)
    if small.size != big.size:
        raise InputError(f"small_sq and big_sq must hold one entry per step each, got {small.size} and {big.size}")
    bs, bb = _batch("b_small", b_small), _batch("b_big", b_big)
    if not bs < bb:
        raise InputError(f"b_small must be smaller than b_big, got b_small={b_small!r}, b_big={b_big!r}")
    _level(level)
    # In units of a power of two near the largest squared norm (exact: no rounding added): b·norm and the
    # sums of the means stay inside float64 for any finite input (1e308 overflowed to NaN), subnormal norms
    # keep their digits; B_noise is a ratio, the same in any unit, ‖G‖², tr Σ and their errors are scaled back.
    unit = _unit(max(small.max(), big.max()))
    small, big = small / unit, big / unit
    g = (bb * big - bs * small) / (bb - bs)
    s = (small - big) / (1.0 / bs - 1.0 / bb)
    n = g.size
    with np.errstate(over="ignore"):  # a ‖G‖² or tr Σ beyond float64 is inf, its B_noise still exact
        scaled = (float(g.mean()) * unit, _se(g) * unit, float(s.mean()) * unit, _se(s) * unit)
    R, lo, hi = _ratio_of_means(s, g, level)
    lo = lo if math.isnan(lo) else max(0.0, lo)  # tr Σ ≥ 0: the noise scale is never below 0
    return NoiseScale(R, lo, hi, *scaled, bs, bb, n, float(level))


def _se(x) -> float:
    """The standard error of the mean of ``x`` (NaN for one entry)."""
    return float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else math.nan


def _ratio_of_means(num, den, level) -> tuple:
    """(R, lo, hi): R = mean(num)/mean(den) with the delta-method interval R ± z·sd(num − R·den)/(√n·mean(den));
    R = ``inf`` (interval (NaN, inf)) where mean(den) ≤ 0, and hi = ``inf`` where mean(den) is not resolved
    from 0 at ``level``."""
    from scipy import stats

    d = float(den.mean())
    if d <= 0:
        return math.inf, math.nan, math.inf
    R = float(num.mean()) / d
    z = float(stats.norm.ppf(0.5 + level / 2))
    half = z * _se(num - R * den) / d
    hi = math.inf if den.size > 1 and d - z * _se(den) <= 0 else R + half
    return R, R - half, hi


def _log_history(path):
    """(the file, its ``log_history`` list) of a ``trainer_state.json`` (a file or the folder holding it)."""
    import json
    from pathlib import Path

    p = Path(path)
    if p.is_dir():
        p = p / "trainer_state.json"
    if not p.is_file():
        raise InputError(f"path: no trainer_state.json at {str(path)!r}")
    try:
        history = json.loads(p.read_text()).get("log_history", [])
    except (json.JSONDecodeError, AttributeError, UnicodeDecodeError, OSError) as e:
        raise InputError(f"path: {str(p)!r} is not a trainer_state.json ({e})") from None
    if not isinstance(history, list):
        raise InputError(f"path: {str(p)!r}: log_history must be a list of log entries, got {shown(history)}")
    return p, history


def _logged(path, keys, ok, what) -> np.ndarray:
    """The entries of ``log_history`` that hold every one of ``keys`` and a step, in step order: a
    (entries × keys) float array; a value failing ``ok`` is an InputError naming file, step and value."""
    p, history = _log_history(path)
    rows = []
    for h in history:
        if isinstance(h, dict) and "step" in h and all(h.get(k) is not None for k in keys):
            at = f"path: {str(p)!r}, log_history"
            step = step_number(h["step"], at)
            for k in keys:
                v = h[k]
                if isinstance(v, bool) or not isinstance(v, int | float) or not ok(v):
                    raise InputError(f"{at}: step {step}'s {k} must be {what}, got {shown(v)}")
            rows.append((step, [float(h[k]) for k in keys]))
    if not rows:
        raise InputError(f"path: {str(p)!r} logs no {' and '.join(keys)}")
    return np.array([v for _, v in sorted(rows, key=lambda r: r[0])])


def grad_norms_from_log(path) -> np.ndarray:
    """TRL's (transformers') logged ``grad_norm`` per optimizer step from a ``trainer_state.json`` (a file or
    the output folder holding it): the step's gradient norm before clipping, in the order of the steps.

    A step that is not an integer in [0, 2^63 − 1], or a ``grad_norm`` that is not a finite number ≥ 0
    (NaN and inf, as a step with a NaN gradient logs it; text; a bool), raises an InputError naming the
    file, the step and the value: a norm is never negative, and its square would hide the sign."""
    return _logged(path, ["grad_norm"], lambda v: 0 <= v < math.inf, "a finite number >= 0")[:, 0]


#: The keys :class:`gsd.live.trainer.GSDGRPOTrainer` logs with an objective (:func:`knee_from_log`).
GAIN_KEYS = ("gsd/gain_small", "gsd/gain_big", "gsd/gain_small_generations", "gsd/gain_big_generations")


def knee_from_log(path, *, level: float = 0.95) -> StepKnee:
    """The knee at the run's lr from the step gains a ``GSDGRPOTrainer(..., gsd_objective=f)`` logged into
    its ``trainer_state.json`` (:data:`GAIN_KEYS`: the mean gains per logged entry and their batch sizes):
    :func:`knee_from_step_gains` over the entries.  An entry is the mean over the steps it logs
    (``logging_steps``), so the ratio of means is the steps' own when every entry holds as many steps."""
    rows = _logged(path, list(GAIN_KEYS), lambda v: math.isfinite(v), "a finite number")
    sizes = {tuple(r) for r in rows[:, 2:]}
    if len(sizes) != 1:
        raise InputError(f"path: the logged step gains change batch sizes ({sorted(sizes)}): one run at one B, please")
    ((bs, bb),) = sizes
    return knee_from_step_gains(rows[:, 0], rows[:, 1], bs, bb, level=level)


def noise_scale_from_logs(small_log, big_log, b_small, b_big, *, first_steps: int = 10, level: float = 0.95):
    """B_noise from ``grad_norm`` in the ``trainer_state.json`` of two runs from the same start at two
    batch sizes (generations per step ``b_small`` < ``b_big``), over their first ``first_steps`` logged
    steps (``logging_steps=1``).

    One log is not enough: a run at one batch size gives one equation, E‖G_B‖² = ‖G‖² + tr(Σ)/B, in two
    unknowns, and ‖G‖² drifts as the run learns.  Two runs from the same weights at two batch sizes give
    two; their early steps sit at nearly the same parameters (the fewer steps, the closer, the wider the
    interval).  The steps are paired by their order; the runs are independent, so the delta-method
    interval of :func:`noise_scale_from_norms` holds.
    """
    if isinstance(first_steps, bool) or not isinstance(first_steps, int | np.integer) or first_steps < 2:
        raise InputError(f"first_steps must be an integer >= 2, got {first_steps!r}")
    s, b = grad_norms_from_log(small_log), grad_norms_from_log(big_log)
    k = min(first_steps, s.size, b.size)
    if k < 2:
        raise InputError(f"the logs hold {s.size} and {b.size} grad_norm steps: the estimate needs >= 2 in each")
    # squared in units of the largest norm: a norm of 1e200 squares beyond float64, its ratio does not
    unit = _unit(max(s[:k].max(), b[:k].max()))
    ns = noise_scale_from_norms((s[:k] / unit) ** 2, (b[:k] / unit) ** 2, b_small, b_big, level=level)
    with np.errstate(over="ignore"):
        u2 = unit * unit
        return replace(
            ns,
            gradient_sq=ns.gradient_sq * u2,
            gradient_sq_se=ns.gradient_sq_se * u2,
            trace=ns.trace * u2,
            trace_se=ns.trace_se * u2,
        )


@dataclass(frozen=True)
class StepKnee(_Summary):
    """The knee of a run at its own learning rate, from :func:`knee_from_step_gains`.

    ``knee`` (generations per step) with its interval ``knee_lo``, ``knee_hi`` (from the interval of
    ``ratio`` over ``steps`` steps at ``level``); ``gain_small``, ``gain_big``: the mean gain per step of the
    objective at ``b_small`` and ``b_big`` generations; ``ratio`` = gain_big/gain_small.
    """

    knee: float
    knee_lo: float
    knee_hi: float
    gain_small: float
    gain_big: float
    ratio: float
    b_small: float
    b_big: float
    steps: int
    level: float
    interval: str = "delta method over steps (steps taken as independent)"


def _finite(name, v) -> np.ndarray:
    x = _numbers(name, v, "one per step")
    if not np.isfinite(x).all():
        raise InputError(f"{name} must hold finite numbers, got {x[~np.isfinite(x)][:5].tolist()}")
    return x


def knee_from_ratio(ratio, b_small, b_big):
    r"""The K of McCandlish's law steps = S(1 + K/B) through two batch sizes whose gains per step are in
    ``ratio`` = gain(b_big)/gain(b_small) (broadcasts over ``ratio``):

    .. math::  \frac{1 + K/b_{small}}{1 + K/b_{big}} = r \iff K = \frac{r - 1}{1/b_{small} - r/b_{big}},

    increasing in r; 0 for r ≤ 1 (a bigger batch gains nothing per step), ``inf`` for r ≥ b_big/b_small (the
    gain per step grows as fast as the batch: every generation counts alike)."""
    r = np.asarray(ratio, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = (r - 1.0) / (1.0 / b_small - r / b_big)
    k = np.where(r <= 1.0, 0.0, np.where(r >= b_big / b_small, np.inf, k))
    k = np.asarray(np.where(np.isnan(r), np.nan, k), dtype=np.float64)
    return k.item() if k.ndim == 0 else k


def knee_from_step_gains(gain_small, gain_big, b_small, b_big, *, level: float = 0.95) -> StepKnee:
    r"""The batch at which a run at its own learning rate turns from step-limited to generation-limited,
    from what one step gains in a smooth objective Φ the run should raise, at two batch sizes.

    Parameters
    ----------
    gain_small, gain_big : array_like of float, one entry per step
        Φ(θ + δ_b) − Φ(θ) for the step δ_b the optimizer would take from its state at θ with a gradient of
        b_small generations (mean over the step's micro-batches) and of b_big generations (the step's own).
    b_small, b_big : float
        Generations in a micro-batch and in the step (b_small < b_big).
    level : float in (0, 1)
        The interval's coverage.

    Notes
    -----
    McCandlish et al. (arXiv 1812.06162) find steps to a target S(B) = S_min(1 + B_noise/B) with the
    learning rate tuned at each B; at a fixed learning rate the same form fits with a smaller knee K (the
    page "Group size in real training" measures both).  Steps go as the inverse of the mean gain per step,
    so two batch sizes measured at the same parameters give r = mean(gain_big)/mean(gain_small) =
    (1 + K/b_small)/(1 + K/b_big) and K = :func:`knee_from_ratio` (r).  r is the ratio of the means over
    steps, with the delta-method interval of :func:`noise_scale_from_norms`; K's interval is K of r's
    (K is increasing in r).  Unbiased as far as r is: the mean gain is taken over the same steps at both sizes.

    Examples
    --------
    >>> k = knee_from_step_gains([1.0, 1.0], [1.5, 1.5], 32, 64)
    >>> k.ratio, k.knee
    (1.5, 64.0)
    """
    gs, gb = _finite("gain_small", gain_small), _finite("gain_big", gain_big)
    if gs.size != gb.size:
        raise InputError(f"gain_small and gain_big must hold one entry per step each, got {gs.size} and {gb.size}")
    bs, bb = _batch("b_small", b_small), _batch("b_big", b_big)
    if not bs < bb:
        raise InputError(f"b_small must be smaller than b_big, got b_small={b_small!r}, b_big={b_big!r}")
    _level(level)
    unit = _unit(max(np.abs(gs).max(), np.abs(gb).max()))  # exact: the ratio is unit-free
    r, lo, hi = _ratio_of_means(gb / unit, gs / unit, level)
    K, K_lo, K_hi = (float(knee_from_ratio(v, bs, bb)) for v in (r, lo, hi))
    return StepKnee(K, K_lo, K_hi, float(gs.mean()), float(gb.mean()), r, bs, bb, gs.size, float(level))


def _knee_fit(mean_gains, inv_b) -> np.ndarray:
    """K = c/a of the least-squares line 1/ḡ = a + c/b through each row of ``mean_gains`` (rows × levels);
    ∞ where a row's smallest batch gains nothing (ḡ ≤ 0) or a ≤ 0 (the gain grows as fast as the batch or
    faster), 0 where c ≤ 0 (a bigger batch gains nothing more per step)."""
    g = np.atleast_2d(np.asarray(mean_gains, dtype=np.float64))
    ok = np.all(g > 0, axis=1)
    y = np.where(ok[:, None], 1.0 / np.where(g > 0, g, 1.0), np.nan)
    x = inv_b - inv_b.mean()
    c = (y - y.mean(axis=1, keepdims=True)) @ x / (x @ x)
    a = y.mean(axis=1) - c * inv_b.mean()
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.where(c <= 0, 0.0, np.where(a <= 0, np.inf, c / a))
    return np.where(ok, k, np.inf)


def knee_from_gain_levels(gains, batch_sizes, *, level: float = 0.95, resamples: int = 2000) -> StepKnee:
    r"""The knee at the run's learning rate from its step gains at several batch sizes (a step of M = 4
    micro-batches gives B/4, B/2 and B): the least-squares fit of McCandlish's law to the mean gains,

    .. math::  1/\bar g(b) = a + c/b, \qquad K = c/a,

    (steps to a target ∝ 1/ḡ = a(1 + K/b)); with two batch sizes it is :func:`knee_from_ratio` exactly.
    ``gains``: steps × levels (one column per entry of ``batch_sizes``, increasing); the interval is the
    percentile bootstrap over steps (``resamples`` draws of the steps with replacement, seed 0: the same
    interval every time).  K is ∞ where the smallest batch gains nothing on average or the gain grows as
    fast as the batch.

    Examples
    --------
    >>> k = knee_from_gain_levels([[1.0, 1.5, 2.0], [1.0, 1.5, 2.0]], [16, 32, 64])
    >>> round(k.knee, 1), k.b_small, k.b_big
    (32.0, 16.0, 64.0)
    """
    x = np.asarray(gains) if not isinstance(gains, np.ndarray) else gains
    if x.dtype.kind not in "iuf" or x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 2:
        raise InputError(f"gains must be a steps × levels table of numbers (>= 2 levels), got {shown(gains)}")
    x = x.astype(np.float64)
    if not np.isfinite(x).all():
        raise InputError(f"gains must hold finite numbers, got {x[~np.isfinite(x)][:5].tolist()}")
    b = np.array([_batch("batch_sizes", v) for v in np.ravel(batch_sizes)])
    if b.size != x.shape[1] or not (np.diff(b) > 0).all():
        raise InputError(f"batch_sizes must be increasing, one per column of gains ({x.shape[1]}), got {batch_sizes!r}")
    _level(level)
    if isinstance(resamples, bool) or not isinstance(resamples, int) or not (100 <= resamples <= 10**5):
        raise InputError(f"resamples must be an integer in [100, 100000], got {resamples!r}")
    x = x / _unit(np.abs(x).max())  # exact, and K is unit-free
    inv = 1.0 / b
    K = float(_knee_fit(x.mean(axis=0), inv)[0])
    n = x.shape[0]
    draws = np.random.default_rng(0).integers(0, n, size=(resamples, n))
    boot = _knee_fit(x[draws].mean(axis=1), inv)
    lo, hi = (float(np.quantile(boot, q, method="inverted_cdf")) for q in (0.5 - level / 2, 0.5 + level / 2))
    gs, gb = float(x[:, 0].mean()), float(x[:, -1].mean())
    unit = _unit(np.abs(np.asarray(gains, float)).max())
    ratio = gb / gs if gs > 0 else math.inf
    return StepKnee(
        K,
        lo,
        hi,
        gs * unit,
        gb * unit,
        ratio,
        float(b[0]),
        float(b[-1]),
        n,
        float(level),
        "percentile bootstrap over steps",
    )
