"""An alert inside a TRL run when too many groups are silent: a ``transformers.TrainerCallback``.

:class:`SilenceAlert` reads what TRL itself logs (``on_log``): ``frac_reward_zero_std``, the share
of groups whose rewards had zero std, averaged over the generations since the previous log.  From
the first logged step it checks

* ``silent``: that logged fraction, step by step;
* ``wasted``: the run's wasted share so far, Σ fraction × generations / Σ generations over the logs
  (generations per interval from the trainer's schedule: one every ``steps_per_generation ×
  num_iterations`` micro-batches, ``gradient_accumulation_steps`` per step), which equals the
  share of rollouts in silent groups (every group has G of them);

and when one exceeds its threshold it warns (:class:`SilenceWarning`, once per metric) and, with
``stop=True``, sets ``control.should_training_stop`` so that the trainer ends after that step.
Nothing it is handed stops the run: a logged value that is not a number (None, text, a list) is
skipped, and any failure inside the callback is caught; each kind is warned about once
(``RuntimeWarning``, naming the value or the error) and listed in ``problems``.
No gsd figure is needed: it works with any ``GRPOTrainer`` (and with :mod:`gsd.live`).

The class is built on first use (this module imports transformers only then).
"""

from __future__ import annotations

import math
import warnings

from ..errors import InputError
from ..io.numbers import metric_value
from ..lazy import built_on_first_use

__all__ = ["SilenceAlert", "SilenceWarning", "trl_generations"]  # noqa: F822 (SilenceAlert: built on first use)


def trl_generations(prev, step, gradient_accumulation_steps=None, steps_per_generation=None, num_iterations=None):
    """Generations TRL's ``GRPOTrainer`` makes in the optimizer steps (prev, step] (arrays broadcast).

    TRL generates when its micro-batch counter is a multiple of ``steps_per_generation ×
    num_iterations``, and a step is ``gradient_accumulation_steps`` micro-batches, so the count is
    ceil(step·ga / every) − ceil(prev·ga / every).  Without the three settings: step − prev (one
    generation per step, TRL's default ``steps_per_generation = gradient_accumulation_steps``).
    """
    settings = (gradient_accumulation_steps, steps_per_generation, num_iterations)
    if all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in settings):
        ga, every = settings[0], settings[1] * settings[2]
        return (-(-step * ga // every)) - (-(-prev * ga // every))
    return step - prev


class SilenceWarning(UserWarning):
    """A run's silent fraction or wasted share crossed the threshold given to :class:`SilenceAlert`."""


TRL_SCHEDULE = ("gradient_accumulation_steps", "steps_per_generation", "num_iterations")


def _threshold(name, value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and 0 <= value <= 1):
        raise InputError(f"{name} must be a fraction in [0, 1] or None, got {value!r}")
    return float(value)


def _build():
    from transformers import TrainerCallback

    class SilenceAlert(TrainerCallback):
        """Warn, or stop the run, when TRL's logged silent fraction or the run's wasted share crosses a threshold.

        Parameters
        ----------
        silent : float, optional
            Alert when a logged ``frac_reward_zero_std`` exceeds this fraction.
        wasted : float, optional
            Alert when the run's wasted share so far (rollouts in silent groups / rollouts) exceeds it.
        stop : bool, optional
            Also set ``control.should_training_stop`` (default False: warn only).
        metric : str, optional
            The logged key (default ``"frac_reward_zero_std"``, TRL's).

        Attributes
        ----------
        alerts : list of dict
            Every crossing: ``step``, ``metric`` ("silent" or "wasted"), ``value``, ``threshold``.
        wasted_share : float or None
            The run's wasted share so far.
        problems : list of dict
            Every log the callback could not use: ``step``, ``kind``, ``reason`` (warned once per kind).
        """

        def __init__(self, silent=None, wasted=None, *, stop: bool = False, metric: str = "frac_reward_zero_std"):
            self.silent = _threshold("silent", silent)
            self.wasted = _threshold("wasted", wasted)
            if self.silent is None and self.wasted is None:
                raise InputError("give a threshold: silent=, wasted= or both (fractions in [0, 1])")
            if not isinstance(stop, bool):
                raise InputError(f"stop must be True or False, got {stop!r}")
            if not (isinstance(metric, str) and metric):
                raise InputError(f"metric must be a logged key, got {metric!r}")
            self.stop, self.metric = stop, metric
            self.alerts, self.wasted_share, self.problems = [], None, []
            self._last, self._silent_sum, self._weight, self._warned = 0, 0.0, 0.0, set()

        def on_log(self, args, state, control, logs=None, **kwargs):
            """TRL's log hook, guarded: whatever goes wrong is warned about and training goes on."""
            try:
                self._check(args, state, control, logs)
            except Exception as exc:  # noqa: BLE001 (a callback must never end the user's training)
                self._problem(getattr(state, "global_step", None), "error", f"{type(exc).__name__}: {exc}")
            return control

        def _problem(self, step, kind, reason):
            _note_problem(self, step, kind, reason)

        def _check(self, args, state, control, logs):
            if not isinstance(logs, dict) or self.metric not in logs or any(str(k).startswith("eval_") for k in logs):
                return
            step = int(state.global_step)
            value = metric_value(logs[self.metric])
            if value is None:
                shown = repr(logs[self.metric])
                shown = shown if len(shown) <= 60 else shown[:57] + "..."
                self._problem(step, "not-a-number", f"{self.metric} = {shown} is not a number")
                return
            if not math.isfinite(value):
                self._last = step
                return
            if not 0 <= value <= 1:
                self._problem(step, "not-a-fraction", f"{self.metric} = {value!r} is not a fraction in [0, 1]")
                return
            w = trl_generations(self._last, step, *(getattr(args, k, None) for k in TRL_SCHEDULE))
            self._last = step
            if w > 0:
                self._silent_sum += value * w
                self._weight += w
            self.wasted_share = self._silent_sum / self._weight if self._weight else value
            _raise_alerts(self, step, value, control)

    SilenceAlert.__module__ = __name__
    return SilenceAlert


def _note_problem(alert, step, kind: str, reason: str) -> None:
    """Record a log the alert could not use, warning once per kind; even under
    ``warnings.simplefilter("error")`` the run goes on."""
    alert.problems.append({"step": step, "kind": kind, "reason": reason})
    if kind in alert._warned:
        return
    alert._warned.add(kind)
    try:
        warnings.warn(
            f"gsd: SilenceAlert skipped the log of step {step} ({reason}); training goes on; later "
            "logs with this problem are listed in SilenceAlert.problems without a further warning",
            RuntimeWarning,
            stacklevel=4,
        )
    except Warning:
        pass


def _raise_alerts(alert, step: int, value: float, control) -> None:
    """Record every threshold this step crosses (the step's silent fraction, the run's wasted share
    so far), warn once per kind, and ask TRL to stop when the alert stops runs."""
    for name, v, thr in (("silent", value, alert.silent), ("wasted", alert.wasted_share, alert.wasted)):
        if thr is None or v <= thr:
            continue
        alert.alerts.append({"step": step, "metric": name, "value": v, "threshold": thr})
        if name not in alert._warned:
            alert._warned.add(name)
            what = "groups silent at this step" if name == "silent" else "of the run's rollouts wasted so far"
            warnings.warn(
                f"step {step}: {v:.1%} {what} (threshold {thr:.1%})" + ("; stopping the run" if alert.stop else ""),
                SilenceWarning,
                stacklevel=4,  # this function, _check, on_log: the warning points at TRL's call
            )
        if alert.stop:
            control.should_training_stop = True


__getattr__ = built_on_first_use(__name__, {"SilenceAlert": _build})
