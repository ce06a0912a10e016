"""DAPO consistency check: is a logged "all 32 samples right" curve the all-correct branch of
the silent mass under a difficulty distribution that sharpens during training?

DAPO logs, along training, the fraction of evaluation prompts answered right in all of their
n = 32 samples.  Under the closed form of :ref:`theory-silent` that fraction is the all-correct half of
the silent mass, E[p^n], taken over the current solve rates.  This module fits the simplest
model that connects the two and reports how much of the curve it explains.

The model
---------
*Difficulty.*  A distribution of initial solve rates p (by default the shipped Big-Math p̂;
any per-problem file works).  Only its histogram matters: it is stored as distinct values and
weights.

*Warping.*  Training is summarised by one competence / temperature T ≥ 1 that warps every
solve rate the same way, p → p^(1/T): T = 1 is the initial model, T → ∞ solves every problem
that was ever solved.  The warp keeps the ordering of problems and keeps 0 and 1 fixed.  The
logged fraction at competence T is

    F(T) = E_p[(p^(1/T))^n] = E_p[p^(n/T)],

increasing in T from E[p^n] (T = 1) towards P(p > 0).

*Competence curve.*  T rises from 1 at ``start_step`` and saturates with one timescale τ:

    T(t) = 1 + (T∞ − 1)·(1 − exp(−(t − start_step)/τ)).

*Plateau pin.*  T∞ is not fitted: it is fixed by the plateau the run reached, the mean of
the last ``plateau_points`` (8) logged values, by solving F(T∞) = plateau with
:func:`scipy.optimize.brentq` (on log T).  If the run has not saturated by its end the pin
under-states T∞; the fit reports ``saturation`` = 1 − exp(−t_max/τ̂) so that this can be seen.

*Fit.*  The one free parameter τ minimises the squared error of F(T(t)) against the logged
values (a log-spaced scan, refined by bounded Brent).  The fit reports R², the linearised
standard error of τ, and a residual bootstrap (resampled centred residuals added to the fit;
each replicate re-pins the plateau and refits τ) giving BCa intervals for R² and τ (bias-corrected
and accelerated, Efron 1987: R² is bounded by 1 and τ skewed, and the replicates of either sit off
centre around the estimate, which moves a plain percentile interval off it — even past it; the
acceleration comes from the delete-one-point jackknife of the same fit).  An interval that still
excludes its estimate, or that the replicates cannot give, is named in ``notes``.

*Generic comparison.*  Beside it, two saturating curves fitted directly with no difficulty
model: ``generic2`` y = P − a·exp(−t/b) with the same plateau pin P (two free parameters, one
more than ours) and ``generic3`` y = c + a·(1 − exp(−t/b)) (three free parameters).  A
one-parameter model that reaches the R² of these has explained the shape of the curve by the
difficulty distribution alone.

Nothing here ships third-party data: :func:`synthetic_curve` generates curves from the model
with a known τ (and Gaussian noise), which is how the fit is tested; ``gsd dapo-fit CURVE.csv``
runs it on a user's logged curve.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.interpolate import PchipInterpolator
from scipy.optimize import brentq, curve_fit, minimize_scalar

from ..plotstyle import COLORS, new_figure, styled
from ..validation import InputError, as_probability

__all__ = [
    "N_SAMPLES",
    "bca_interval",
    "PLATEAU_POINTS",
    "REFERENCE_CURVE",
    "reference_title",
    "AllCorrectModel",
    "competence",
    "DapoFit",
    "fit_all_correct_curve",
    "synthetic_curve",
    "read_curve",
    "all_correct_curve_table",
    "fit_figure",
    "all_correct_figure",
]

#: Evaluation samples per prompt in DAPO's logged metric.
N_SAMPLES = 32
#: Logged points averaged to pin the plateau.
PLATEAU_POINTS = 8
#: The generated curve the reproduction fits by default (no third-party log is shipped):
#: Big-Math difficulty, 32 samples, steps 0, 10, …, 600.
REFERENCE_CURVE = {"tau": 80.0, "T_inf": 10.0, "noise_sd": 0.005, "seed": 0}
_T_RANGE = (1e-2, 1e5)
_NODES = 4097
_CHUNK = 1 << 22


class AllCorrectModel:
    """F(T) = E_p[p^(n/T)] for one difficulty distribution, fast and exact to ~1e-9.

    The distribution is reduced to its distinct values and weights.  F is computed exactly on
    ``nodes`` points of log T over [1e-2, 1e5] once, then interpolated (monotone cubic, PCHIP)
    in log T; :meth:`exact` gives the direct sum for checking.
    """

    def __init__(self, p=None, n_samples: int = N_SAMPLES, *, nodes: int = _NODES):
        if p is None:
            from ..io.data import load_bigmath

            p = load_bigmath()
        p = as_probability(p, "difficulty").ravel()
        if not isinstance(n_samples, (int, np.integer)) or n_samples < 1:
            raise InputError(f"n_samples must be an integer >= 1, got {n_samples!r}")
        values, counts = np.unique(p, return_counts=True)
        self.values = values
        self.weights = counts / counts.sum()
        self.n_samples = int(n_samples)
        self.n_problems = int(p.size)
        #: Limits of F: T → 0 (only p = 1 counts) and T → ∞ (every p > 0 counts).
        self.floor = float(self.weights[values == 1].sum())
        self.ceiling = float(self.weights[values > 0].sum())
        self._u = np.linspace(np.log(_T_RANGE[0]), np.log(_T_RANGE[1]), nodes)
        self._F = self.exact(np.exp(self._u))
        self._interp = PchipInterpolator(self._u, self._F)

    def exact(self, T, *, power: float | None = None):
        """E_p[p^(power/T)] summed directly (power defaults to n_samples)."""
        T = np.asarray(T, dtype=np.float64)
        a = (self.n_samples if power is None else power) / T.ravel()
        out = np.empty(a.shape)
        step = max(1, _CHUNK // max(1, self.values.size))
        for i in range(0, a.size, step):  # chunks bound the temporary (rows × values) array
            out[i : i + step] = np.power(self.values[None, :], a[i : i + step, None]) @ self.weights
        return out.reshape(T.shape)

    def __call__(self, T):
        """F(T) by interpolation in log T (exact sum outside the tabulated range)."""
        T = np.asarray(T, dtype=np.float64)
        u = np.log(T)
        inside = (u >= self._u[0]) & (u <= self._u[-1])
        if inside.all():
            return self._interp(u)
        out = np.empty(T.shape)
        out[inside] = self._interp(u[inside])
        out[~inside] = self.exact(T[~inside])
        return out

    def mean_solve_rate(self, T):
        """E_p[p^(1/T)]: the mean solve rate of the warped distribution."""
        return self.exact(T, power=1.0)

    def temperature_for(self, fraction: float) -> float:
        """The competence T with F(T) = fraction (brentq on log T)."""
        fraction = float(fraction)
        lo, hi = float(self._F[0]), float(self._F[-1])
        if not (lo < fraction < hi):
            raise InputError(
                f"plateau: {fraction:.6g} is outside what the difficulty distribution can produce "
                f"for E[p^({self.n_samples}/T)] with T in [{_T_RANGE[0]:g}, {_T_RANGE[1]:g}]: "
                f"({lo:.6g}, {hi:.6g}); the share of problems with p = 1 is {self.floor:.4g} and with p > 0 "
                f"{self.ceiling:.4g}"
            )
        u = brentq(lambda x: float(self._interp(x)) - fraction, self._u[0], self._u[-1], xtol=1e-13, rtol=1e-13)
        return float(np.exp(u))


def competence(t, tau, T_inf, start_step: float = 0.0):
    """T(t) = 1 + (T∞ − 1)(1 − exp(−(t − start_step)/τ)); T = 1 before ``start_step``."""
    t = np.maximum(np.asarray(t, dtype=np.float64) - start_step, 0.0)
    return 1.0 + (T_inf - 1.0) * -np.expm1(-t / tau)


@dataclass
class DapoFit:
    """Result of :func:`fit_all_correct_curve` (see the module docstring for the model)."""

    steps: np.ndarray
    fraction: np.ndarray
    fitted: np.ndarray
    tau: float
    tau_se: float
    tau_ci: tuple
    T_inf: float
    plateau: float
    r2: float
    r2_ci: tuple
    generic2: dict
    generic3: dict
    initial_fraction: float
    saturation: float
    n_samples: int
    plateau_points: int
    start_step: float
    n_bootstrap: int
    n_bootstrap_failed: int
    confidence: float
    tau_boot_sd: float
    notes: list = field(default_factory=list)

    def summary(self) -> dict:
        """The scalar results as a JSON-ready dict."""
        return {
            "n_points": int(self.steps.size),
            "n_samples": self.n_samples,
            "plateau_points": self.plateau_points,
            "start_step": self.start_step,
            "plateau": self.plateau,
            "T_inf": self.T_inf,
            "tau": self.tau,
            "tau_se": self.tau_se,
            "tau_boot_sd": self.tau_boot_sd,
            "tau_ci": list(self.tau_ci),
            "r2": self.r2,
            "r2_ci": list(self.r2_ci),
            "generic2_r2": self.generic2["r2"],
            "generic2_r2_ci": list(self.generic2.get("r2_ci", (np.nan, np.nan))),
            "generic2_params": {k: self.generic2[k] for k in ("a", "b", "P")},
            "generic3_r2": self.generic3["r2"],
            "generic3_params": {k: self.generic3[k] for k in ("a", "b", "c")},
            "initial_fraction_model": self.initial_fraction,
            "saturation": self.saturation,
            "confidence": self.confidence,
            "n_bootstrap": self.n_bootstrap,
            "n_bootstrap_failed": self.n_bootstrap_failed,
            "notes": list(self.notes),
        }

    def table(self) -> pd.DataFrame:
        """Two-column table (quantity, value) for printing."""
        s = self.summary()
        lvl = f"{100 * self.confidence:.0f}%"
        rows = [
            ("points", s["n_points"]),
            ("plateau (mean of last points)", s["plateau"]),
            ("T_inf (pinned)", s["T_inf"]),
            ("tau", s["tau"]),
            ("tau std. error (linearised)", s["tau_se"]),
            (f"tau {lvl} bootstrap (BCa)", "[{:.4g}, {:.4g}]".format(*s["tau_ci"])),
            ("R2 (1 parameter: tau)", s["r2"]),
            (f"R2 {lvl} bootstrap (BCa)", "[{:.4g}, {:.4g}]".format(*s["r2_ci"])),
            ("R2 generic P - a exp(-t/b) (2 parameters)", s["generic2_r2"]),
            ("R2 generic c + a(1 - exp(-t/b)) (3 parameters)", s["generic3_r2"]),
            ("model fraction at T = 1 (start)", s["initial_fraction_model"]),
            ("saturation 1 - exp(-t_max/tau)", s["saturation"]),
        ]
        return pd.DataFrame(rows, columns=["quantity", "value"])

    def curve(self) -> pd.DataFrame:
        """Per-point table: step, logged fraction, model fit, generic fit, competence T."""
        return pd.DataFrame(
            {
                "step": self.steps,
                "fraction": self.fraction,
                "model": self.fitted,
                "generic2": _generic2(
                    self.steps - self.start_step, self.generic2["a"], self.generic2["b"], self.generic2["P"]
                ),
                "competence": competence(self.steps, self.tau, self.T_inf, self.start_step),
            }
        )


# --------------------------------------------------------------------------- input
def _check_curve(steps, fraction, plateau_points):
    steps = np.asarray(steps, dtype=np.float64).ravel()
    fraction = np.asarray(fraction, dtype=np.float64).ravel()
    if steps.shape != fraction.shape:
        raise InputError(f"steps and fraction must have the same length, got {steps.size} and {fraction.size}")
    for name, arr in (("step", steps), ("fraction", fraction)):
        bad = ~np.isfinite(arr)
        if bad.any():
            raise InputError(f"{name}: not a finite number at row {int(np.argmax(bad))} (NaN or inf)")
    if not isinstance(plateau_points, (int, np.integer)) or plateau_points < 1:
        raise InputError(f"plateau_points must be an integer >= 1, got {plateau_points!r}")
    if steps.size < plateau_points + 3:
        raise InputError(f"fraction: need at least {plateau_points + 3} logged points, got {steps.size}")
    if (np.diff(steps) <= 0).any():
        i = int(np.argmax(np.diff(steps) <= 0)) + 1
        raise InputError(f"step: must increase strictly, row {i} has {steps[i]:g} after {steps[i - 1]:g}")
    out = (fraction < 0) | (fraction > 1)
    if out.any():
        raise InputError(f"fraction: must lie in [0, 1], got {fraction[out][0]:g} at row {int(np.argmax(out))}")
    return steps, fraction


def read_curve(path, *, step_column: str = "step", fraction_column: str = "fraction"):
    """(steps, fraction) from a CSV (or parquet) file with those two columns."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"curve: no such file {str(path)!r}")
    try:
        df = pd.read_parquet(path) if path.suffix.lower() in (".parquet", ".pq") else pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError) as exc:
        raise InputError(f"curve: cannot read {str(path)!r} as a table ({exc.__class__.__name__})") from None
    missing = [c for c in (step_column, fraction_column) if c not in df.columns]
    if missing:
        raise InputError(f"curve: {str(path)!r} lacks column(s) {missing}; it has {list(df.columns)}")
    out = []
    for col in (step_column, fraction_column):
        values = pd.to_numeric(df[col], errors="coerce")
        bad = values.isna()
        if bad.any():
            i = int(np.argmax(bad.to_numpy()))
            raise InputError(
                f"curve: column {col!r} has a missing or non-numeric value at row {i} ({df[col].iloc[i]!r})"
            )
        out.append(values.to_numpy(np.float64))
    return out[0], out[1]


# --------------------------------------------------------------------------- fitting
def _generic2(t, a, b, P):
    return P - a * np.exp(-t / b)


def _generic3(t, a, b, c):
    return c + a * -np.expm1(-t / b)


def _r2(y, yhat):
    sst = float(((y - y.mean()) ** 2).sum())
    sse = float(((y - yhat) ** 2).sum())
    return 1.0 - sse / sst if sst > 0 else float("nan")


def _fit_generic(t, y, plateau):
    """Direct saturating fits; NaN parameters if scipy cannot fit."""
    span = max(float(t.max()), 1e-12)
    out2 = {"a": np.nan, "b": np.nan, "P": plateau, "r2": np.nan}
    try:
        (a, b), _ = curve_fit(
            lambda x, a, b: _generic2(x, a, b, plateau),
            t,
            y,
            p0=(plateau - y[0], span / 5),
            bounds=([-np.inf, span * 1e-4], [np.inf, span * 1e3]),
            maxfev=5000,
        )
        out2.update(a=float(a), b=float(b), r2=_r2(y, _generic2(t, a, b, plateau)))
    except (RuntimeError, ValueError):
        pass
    out3 = {"a": np.nan, "b": np.nan, "c": np.nan, "r2": np.nan}
    try:
        (a, b, c), _ = curve_fit(
            _generic3,
            t,
            y,
            p0=(plateau - y[0], span / 5, y[0]),
            bounds=([-np.inf, span * 1e-4, -np.inf], [np.inf, span * 1e3, np.inf]),
            maxfev=5000,
        )
        out3.update(a=float(a), b=float(b), c=float(c), r2=_r2(y, _generic3(t, a, b, c)))
    except (RuntimeError, ValueError):
        pass
    return out2, out3


def _fit_tau(model, t, y, T_inf, log_bounds):
    """τ minimising Σ(F(T(t; τ)) − y)²: log-spaced scan, then bounded Brent around the best."""
    lo, hi = log_bounds
    grid = np.linspace(lo, hi, 161)
    T = 1.0 + (T_inf - 1.0) * -np.expm1(-t[None, :] / np.exp(grid)[:, None])
    sse = ((model(T) - y[None, :]) ** 2).sum(axis=1)
    i = int(np.argmin(sse))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]

    def objective(u):
        return float(((model(competence(t, np.exp(u), T_inf)) - y) ** 2).sum())

    res = minimize_scalar(objective, bounds=(a, b), method="bounded", options={"xatol": 1e-10})
    u = res.x if res.fun <= sse[i] else grid[i]
    return float(np.exp(u))


def fit_all_correct_curve(
    steps,
    fraction,
    difficulty=None,
    *,
    n_samples: int = N_SAMPLES,
    plateau_points: int = PLATEAU_POINTS,
    start_step: float = 0.0,
    n_bootstrap: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
    model: AllCorrectModel | None = None,
) -> DapoFit:
    """Fit the competence timescale τ of a logged all-correct curve (model in the module doc).

    Parameters
    ----------
    steps, fraction : the logged curve (fraction of prompts right in all ``n_samples`` samples).
    difficulty : initial solve rates (default: the shipped Big-Math p̂), or pass ``model``.
    plateau_points : how many final points define the plateau that pins T∞.
    start_step : the step at which the difficulty distribution describes the model (T = 1).
    n_bootstrap : residual-bootstrap replicates for the intervals (0 to skip).
    """
    steps, fraction = _check_curve(steps, fraction, plateau_points)
    if not 0 < confidence < 1:
        raise InputError(f"confidence must be in (0, 1), got {confidence!r}")
    if not isinstance(n_bootstrap, (int, np.integer)) or n_bootstrap < 0:
        raise InputError(f"n_bootstrap must be an integer >= 0, got {n_bootstrap!r}")
    if model is None:
        model = AllCorrectModel(difficulty, n_samples)
    t, log_bounds = _time_axis(steps, start_step)
    span = float(t.max())
    fit_once = _Refit(model, plateau_points, log_bounds)
    plateau, T_inf, tau, fitted = fit_once(fraction, t)
    r2 = _r2(fraction, fitted)
    resid = fraction - fitted
    tau_se = _tau_standard_error(model, t, tau, T_inf, resid)
    gen2, gen3 = _fit_generic(t, fraction, plateau)
    notes = []
    if abs(T_inf - 1.0) < 1e-9:
        notes.append("the plateau equals the model's starting value: τ is not identified")
    if np.exp(log_bounds[1]) * 0.999 < tau:
        notes.append("τ ran into its upper bound (100 × the logged span): the curve is not saturating")
    taus, r2s, g2s, failed = _residual_bootstrap(fit_once, t, fitted, resid, n_bootstrap, seed)
    jack = _jackknife(fit_once, t, fraction, n_bootstrap)

    def interval(name, estimate, values, jackknife):
        return _bca_noted(name, estimate, values, jackknife, confidence, n_bootstrap, -np.expm1(-span / tau), notes)

    gen2["r2_ci"] = interval("R² of the generic curve", gen2["r2"], g2s, jack[2])
    if failed:
        notes.append(f"{failed} of {n_bootstrap} bootstrap replicates had a plateau the model cannot reach")
    tau_ci, r2_ci = interval("τ", tau, taus, jack[0]), interval("R²", r2, r2s, jack[1])
    return DapoFit(
        steps=steps,
        fraction=fraction,
        fitted=fitted,
        tau=tau,
        tau_se=tau_se,
        tau_ci=tau_ci,
        T_inf=T_inf,
        plateau=plateau,
        r2=r2,
        r2_ci=r2_ci,
        generic2=gen2,
        generic3=gen3,
        initial_fraction=float(model(1.0)),
        saturation=float(-np.expm1(-span / tau)),
        n_samples=model.n_samples,
        plateau_points=plateau_points,
        start_step=float(start_step),
        n_bootstrap=n_bootstrap,
        n_bootstrap_failed=failed,
        confidence=confidence,
        tau_boot_sd=float(np.std(taus, ddof=1)) if len(taus) > 1 else float("nan"),
        notes=notes,
    )


def _time_axis(steps, start_step):
    """Time since ``start_step`` and the log-bounds of τ's search (a hundredth of the smallest
    step gap to a hundred times the logged span)."""
    t = steps - float(start_step)
    if (t < 0).any():
        raise InputError(f"start_step: {start_step:g} is after the first logged step {steps[0]:g}")
    span = float(t.max())
    if span <= 0:
        raise InputError("step: the logged steps must span a positive range after start_step")
    dt = np.diff(np.concatenate([[0.0], t]))
    dt_min = float(dt[dt > 0].min())
    return t, (np.log(dt_min / 100.0), np.log(span * 100.0))


@dataclass(frozen=True)
class _Refit:
    """One fit of a curve y(t): pin T∞ by the mean of the last ``plateau_points`` values, then fit τ.

    Returns (plateau, T∞, τ, the fitted curve); the data's fit, each bootstrap replicate and each
    jackknife fit are this same call."""

    model: AllCorrectModel
    plateau_points: int
    log_bounds: tuple[float, float]

    def __call__(self, y, t):
        plateau = float(y[-self.plateau_points :].mean())
        T_inf = self.model.temperature_for(plateau)
        tau = _fit_tau(self.model, t, y, T_inf, self.log_bounds)
        return plateau, T_inf, tau, self.model(competence(t, tau, T_inf))


def _tau_standard_error(model, t, tau, T_inf, resid) -> float:
    """Linearised standard error of τ (Gauss–Newton, T∞ held at its pinned value): √(s² / Σ J²),
    J = ∂F/∂τ by central differences (step 1e-4·τ), s² = Σ resid² / (n − 1)."""
    h = 1e-4 * tau
    jac = (model(competence(t, tau + h, T_inf)) - model(competence(t, tau - h, T_inf))) / (2 * h)
    s2 = float((resid**2).sum()) / max(t.size - 1, 1)
    jj = float((jac**2).sum())
    return float(np.sqrt(s2 / jj)) if jj > 0 else float("inf")


def _residual_bootstrap(fit_once, t, fitted, resid, n_bootstrap, seed):
    """τ, R² and the generic curve's R² on each replicate fit + resampled centred residuals (clipped
    to [0, 1]); and how many replicates had a plateau the model cannot reach."""
    rng = np.random.default_rng(seed)
    centred = resid - resid.mean()
    taus, r2s, g2s = [], [], []
    failed = 0
    for _ in range(n_bootstrap):  # each replicate is a small 1-D refit
        y = np.clip(fitted + rng.choice(centred, size=centred.size, replace=True), 0.0, 1.0)
        try:
            p_b, Ti_b, tau_b, fit_b = fit_once(y, t)
        except ValueError:
            failed += 1
            continue
        taus.append(tau_b)
        r2s.append(_r2(y, fit_b))
        g2s.append(_fit_generic(t, y, p_b)[0]["r2"])
    return taus, r2s, g2s, failed


def _jackknife(fit_once, t, fraction, n_bootstrap):
    """τ, R² and the generic curve's R² with each point left out once (rows; NaN where the fit fails),
    which gives BCa's acceleration; no columns when there is no bootstrap."""
    jack = np.full((3, t.size if n_bootstrap else 0), np.nan)
    for i in range(jack.shape[1]):
        keep = np.arange(t.size) != i
        try:
            p_j, _, tau_j, fit_j = fit_once(fraction[keep], t[keep])
        except ValueError:
            continue
        jack[:, i] = tau_j, _r2(fraction[keep], fit_j), _fit_generic(t[keep], fraction[keep], p_j)[0]["r2"]
    return jack


def _bca_noted(name, estimate, values, jackknife, confidence, n_bootstrap, saturation, notes):
    """:func:`bca_interval`, with a note in ``notes`` when it cannot be had or excludes the estimate."""
    lo, hi = bca_interval(estimate, values, jackknife, confidence)
    if n_bootstrap and not np.isfinite(lo + hi):
        notes.append(
            f"{name}: no BCa interval (the replicates lie all on one side of the estimate, or too few "
            "of them are finite)"
        )
    elif n_bootstrap and not lo <= estimate <= hi:
        v = np.asarray(values, dtype=np.float64)
        below = float((v[np.isfinite(v)] < estimate).mean())
        notes.append(
            f"{name}: the BCa interval [{lo:.4g}, {hi:.4g}] excludes the estimate {estimate:.4g}: "
            f"{100 * below:.0f} % of the replicates lie below it, a bias the interval cannot absorb "
            f"(a plateau not yet reached biases the pinned T∞ and τ; saturation {saturation:.3f})"
        )
    return lo, hi


def bca_interval(estimate: float, replicates, jackknife, confidence: float = 0.95) -> tuple[float, float]:
    """The bias-corrected and accelerated (BCa) bootstrap interval of one statistic.

    Parameters
    ----------
    estimate : float
        The statistic on the data.
    replicates : array_like
        The statistic on each bootstrap replicate (non-finite values are left out).
    jackknife : array_like
        The statistic with each observation left out once (non-finite values are left out); its
        skewness gives the acceleration ``a = Σ d³ / (6 (Σ d²)^1.5)``, d = mean − value.
    confidence : float
        Coverage of the two-sided interval.

    Returns
    -------
    (float, float)
        The replicates' quantiles at Φ(z₀ + (z₀ + z_α)/(1 − a(z₀ + z_α))) for z_α = Φ⁻¹(α) at the
        two tails, with z₀ = Φ⁻¹ of the replicates' mid-rank share below the estimate (ties count
        half; the convention of :func:`scipy.stats.bootstrap`).  NaN where the replicates all lie
        on one side of the estimate (z₀ infinite) or fewer than two are finite.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.exponential(size=30)
    >>> reps = rng.choice(x, size=(2000, 30)).mean(axis=1)
    >>> jack = (x.sum() - x) / 29
    >>> lo, hi = bca_interval(x.mean(), reps, jack)
    >>> bool(lo < x.mean() < hi)
    True
    """
    from scipy.special import ndtr, ndtri

    theta = np.asarray(replicates, dtype=np.float64)
    theta = theta[np.isfinite(theta)]
    jack = np.asarray(jackknife, dtype=np.float64)
    jack = jack[np.isfinite(jack)]
    if theta.size < 2 or not np.isfinite(estimate):
        return float("nan"), float("nan")
    z0 = ndtri(((theta < estimate).sum() + (theta <= estimate).sum()) / (2.0 * theta.size))
    if not np.isfinite(z0):
        return float("nan"), float("nan")
    d = jack.mean() - jack if jack.size else np.zeros(1)
    ss = float((d**2).sum())
    accel = float((d**3).sum()) / (6.0 * ss**1.5) if ss > 0 else 0.0
    alpha = (1.0 - confidence) / 2
    z = ndtri(np.array([alpha, 1.0 - alpha]))
    level = ndtr(z0 + (z0 + z) / (1.0 - accel * (z0 + z)))
    lo, hi = np.percentile(theta, 100.0 * level)
    return float(lo), float(hi)


# --------------------------------------------------------------------------- synthetic data
def reference_title() -> str:
    """Title naming the reference curve's true parameters."""
    c = REFERENCE_CURVE
    return f"generated DAPO-style curve (true τ = {c['tau']:g}, T∞ = {c['T_inf']:g}, noise {c['noise_sd']:g})"


def synthetic_curve(
    difficulty=None,
    *,
    tau: float = REFERENCE_CURVE["tau"],
    T_inf: float = REFERENCE_CURVE["T_inf"],
    steps=None,
    noise_sd: float = REFERENCE_CURVE["noise_sd"],
    n_samples: int = N_SAMPLES,
    start_step: float = 0.0,
    seed: int = REFERENCE_CURVE["seed"],
    model: AllCorrectModel | None = None,
) -> pd.DataFrame:
    """A logged all-correct curve generated by the model, with known τ and T∞.

    The truth is the exact E[p^(n/T(t))]; Gaussian noise of standard deviation ``noise_sd`` is
    added and the result clipped to [0, 1].  Columns ``step``, ``fraction``, ``truth``,
    ``competence``.  Default steps: 0, 10, …, 600 (7.5 τ, so the last 8 points sit on the plateau).
    """
    if not tau > 0:
        raise InputError(f"tau must be > 0, got {tau!r}")
    if not T_inf > 0:
        raise InputError(f"T_inf must be > 0, got {T_inf!r}")
    if not noise_sd >= 0:
        raise InputError(f"noise_sd must be >= 0, got {noise_sd!r}")
    if model is None:
        model = AllCorrectModel(difficulty, n_samples)
    steps = np.arange(0.0, 601.0, 10.0) if steps is None else np.asarray(steps, dtype=np.float64)
    T = competence(steps, tau, T_inf, start_step)
    truth = model.exact(T)
    rng = np.random.default_rng(seed)
    noisy = np.clip(truth + noise_sd * rng.standard_normal(truth.shape), 0.0, 1.0)
    return pd.DataFrame({"step": steps, "fraction": noisy, "truth": truth, "competence": T})


def all_correct_curve_table(
    difficulty=None,
    *,
    n_samples: int = N_SAMPLES,
    T_max: float = 100.0,
    n_points: int = 200,
    model: AllCorrectModel | None = None,
) -> pd.DataFrame:
    """E[p^n] against the mean solve rate as the distribution is warped (T from 1 to T_max).

    Columns ``T``, ``mean_solve_rate`` (E[p^(1/T)]), ``all_correct`` (E[p^(n/T)]) and
    ``homogeneous`` ((mean solve rate)^n: what a population of identical prompts would give).
    """
    if model is None:
        model = AllCorrectModel(difficulty, n_samples)
    T = np.geomspace(1.0, T_max, n_points)
    mean = model.mean_solve_rate(T)
    return pd.DataFrame(
        {"T": T, "mean_solve_rate": mean, "all_correct": model.exact(T), "homogeneous": mean**model.n_samples}
    )


# --------------------------------------------------------------------------- figures
@styled
def fit_figure(fit: DapoFit, *, truth=None, title: str | None = None):
    """Logged curve, the one-parameter fit, the generic two-parameter fit and the plateau pin. With
    ``truth`` (the curve is :func:`synthetic_curve`'s), the points are labelled as that: the truth plus noise."""
    c = fit.curve()
    fig, ax = new_figure(width=5.4, height=3.4)
    points = "logged" if truth is None else "synthetic: truth + Gaussian noise"
    ax.plot(c.step, c.fraction, "o", ms=3, color=COLORS["data"], label=points)
    if truth is not None:
        ax.plot(c.step, truth, color=COLORS["law"], lw=1, ls=":", label="truth (synthetic)")
    ax.plot(
        c.step,
        c.model,
        color=COLORS["grpo"],
        label=rf"$E[p^{{{fit.n_samples}/T(t)}}]$, τ = {fit.tau:.3g}: R² = {fit.r2:.4f}",
    )
    ax.plot(
        c.step,
        c.generic2,
        color=COLORS["dr_grpo"],
        ls="--",
        lw=1.1,
        label=rf"generic $P - a\,e^{{-t/b}}$: R² = {fit.generic2['r2']:.4f}",
    )
    ax.axhline(
        fit.plateau,
        color=COLORS["accent"],
        lw=0.8,
        ls=":",
        label=f"plateau pin {fit.plateau:.3f} → T∞ = {fit.T_inf:.3g}",
    )
    ax.set_xlabel("training step")
    ax.set_ylabel(f"prompts right in all {fit.n_samples} samples")
    if title:
        ax.set_title(title)
    ax.legend(loc="lower right", fontsize=7)
    return fig


@styled
def all_correct_figure(
    difficulty=None, *, n_samples: int = N_SAMPLES, table: pd.DataFrame | None = None, marks=(1.0, 2.0, 5.0, 10.0, 30.0)
):
    """E[p^n] vs the mean solve rate on the warped distribution, against a homogeneous population."""
    model = None
    if table is None:
        model = AllCorrectModel(difficulty, n_samples)
        table = all_correct_curve_table(model=model)
    fig, ax = new_figure(width=4.8, height=3.4)
    ax.plot(
        table.mean_solve_rate,
        table.all_correct,
        color=COLORS["grpo"],
        label=rf"warped distribution: $E[p^{{{n_samples}/T}}]$",
    )
    ax.plot(
        table.mean_solve_rate,
        table.homogeneous,
        color=COLORS["law"],
        ls="--",
        lw=1.0,
        label=rf"identical prompts: $(\mathrm{{mean}}\ p)^{{{n_samples}}}$",
    )
    if model is not None:
        for T in marks:
            x, y = float(model.mean_solve_rate(T)), float(model.exact(T))
            ax.plot([x], [y], "o", color=COLORS["accent"], ms=3.5)
            ax.annotate(f"T={T:g}", (x, y), textcoords="offset points", xytext=(4, -11), fontsize=7)
    ax.set_xlabel(r"mean solve rate $E[p^{1/T}]$")
    ax.set_ylabel(f"share right in all {n_samples} samples")
    ax.set_title("all-correct branch of the silent mass, warped Big-Math")
    ax.legend(loc="upper left", fontsize=7)
    return fig
