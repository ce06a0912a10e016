"""Closure with the simulator: diagnose a simulated run's rollout logs and compare with the truth.

The simulator knows every prompt's true solve rate; with ``rollout_log = "verl"`` or ``"trl"`` it
logs its rollouts as those trainers do, plus the true p as an extra key (:mod:`gsd.simulator.rollout_log`).
:func:`simulate_and_diagnose` runs it and diagnoses the log; the :class:`Closure` it returns
says how well the diagnosis recovers what the simulator knows:

* :meth:`Closure.recovery` — posterior means against the mean true p of each prompt;
* :meth:`Closure.reliability` — predicted silent probability against the measured frequency,
  by bins of the prediction (a calibration table);
* :meth:`Closure.silent_check` — the measured silent fraction of each step against the
  simulator's own ledger (they must be equal).

See :ref:`theory-logs`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..plotstyle import COLORS, fast_mode, new_figure, styled
from .readers import read_rollouts
from .tables import Diagnosis, diagnose_log

__all__ = ["Closure", "closure_config", "simulate_and_diagnose", "closure_figure"]


def closure_config(fast: bool | None = None) -> dict:
    """A simulator config for the closure: tabular GRPO on a U-shaped population, G = 8, half
    the prompts per step, lr 0.05 (a tenth of the paper's 0.5, so the solve rates drift little
    between a prompt's visits: the posteriors assume they do not move).  ``fast`` (or $GSD_NOTEBOOK_FAST): 200 prompts × 40 steps."""
    cfg = {
        "n_prompts": 2000,
        "steps": 120,
        "batch_size": 1000,
        "group_size": 8,
        "difficulty": "beta",
        "lr": 0.05,
        "rollouts": "counts",
        "device": "cpu",
        "checkpoint_every": 1000,
        "closed_form_every": 0,
    }
    if fast_mode(fast):
        cfg.update(n_prompts=200, steps=40, batch_size=100)
    return cfg


@dataclass
class Closure:
    """A simulated run, its diagnosis and the truth it is compared with."""

    run: Path
    fmt: str
    diagnosis: Diagnosis
    truth: np.ndarray  # per prompt code: mean true p over its logged rollouts
    ledger: pd.DataFrame

    def recovery(self, min_rollouts: int = 64) -> dict:
        """Posterior mean vs the mean true p, over prompts with at least ``min_rollouts``."""
        pr = self.diagnosis.prompts
        seen = (pr["rollouts"] >= min_rollouts).to_numpy()
        est, true = pr["p_mean"].to_numpy()[seen], self.truth[seen]
        return {
            "prompts": int(seen.sum()),
            "min_rollouts": min_rollouts,
            "corr": float(np.corrcoef(est, true)[0, 1]) if seen.sum() > 2 else float("nan"),
            "mean_abs_error": float(np.abs(est - true).mean()) if seen.any() else float("nan"),
        }

    def reliability(self, bins: int = 5) -> pd.DataFrame:
        """Groups binned by their predicted silent probability (quantiles): per bin the number of
        groups, the mean prediction, the measured frequency, its expected sd sqrt(Σq(1−q))/n and
        the gap in those sds (``z``)."""
        g = self.diagnosis.groups
        g = g[g["G"] >= 2]
        cut = pd.qcut(g["silent_pred"], bins, duplicates="drop")
        q = g["silent_pred"]
        t = pd.DataFrame({"bin": cut, "q": q, "qvar": q * (1 - q), "silent": g["silent"].astype(float)})
        r = t.groupby("bin", observed=True).agg(
            groups=("q", "size"), predicted=("q", "mean"), measured=("silent", "mean"), qvar=("qvar", "sum")
        )
        r["sd"] = np.sqrt(r["qvar"]) / r["groups"]
        r["z"] = (r["measured"] - r["predicted"]) / r["sd"]
        return r.drop(columns="qvar").reset_index()

    def silent_check(self) -> pd.DataFrame:
        """Per step: the diagnosis's measured silent fraction, the simulator's, and their
        prediction from the true p (the ledger's ``silent_pred``) beside the diagnosis's."""
        st = self.diagnosis.steps
        led = self.ledger
        return pd.DataFrame(
            {
                "step": st["step"].to_numpy(),
                "diagnosis": st["silent_frac"].to_numpy(),
                "simulator": led["silent_frac"].to_numpy(),
                "pred_posterior": st["silent_pred"].to_numpy(),
                "pred_true_p": led["silent_pred"].to_numpy(),
            }
        )


def simulate_and_diagnose(config: dict, out, *, fmt: str = "verl", half_life=None, progress: bool = False) -> Closure:
    """Run the simulator with a ``fmt`` rollout log into ``out`` (a finished run is reused) and
    diagnose its log."""
    from ..simulator import run_simulation
    from ..simulator.rollout_log import REWARD_NAME, TRUTH_KEY

    out = Path(out)
    run_simulation({**config, "rollout_log": fmt}, out, progress=progress)
    logs = out / "rollouts"
    log = read_rollouts(logs, fmt=fmt, reward=REWARD_NAME if fmt == "trl" else "score", progress=False)
    truth_log = read_rollouts(logs, fmt=fmt, reward=TRUTH_KEY, progress=False)
    if not np.array_equal(truth_log.hashes, log.hashes):
        raise AssertionError("the truth and the rewards were read for different prompts")  # pragma: no cover
    P = log.labels.size
    truth = np.bincount(truth_log.prompt, weights=truth_log.reward, minlength=P) / np.bincount(
        truth_log.prompt, minlength=P
    )
    from ..simulator import SimConfig

    run_cfg = SimConfig.from_dict({**config, "rollout_log": fmt})
    dx = diagnose_log(log, half_life=half_life, ddof=run_cfg.ddof, eps=run_cfg.eps)  # the run's own std
    return Closure(run=out, fmt=fmt, diagnosis=dx, truth=truth, ledger=pd.read_parquet(out / "ledger.parquet"))


@styled
def closure_figure(closure: Closure, min_rollouts: int = 64):
    """(a) posterior mean vs true p; (b) reliability of the silent predictions; (c) silent
    fraction per step: measured, predicted from the posteriors, predicted from the true p."""
    fig, (ax1, ax2, ax3) = new_figure(3, width=13.0, height=3.4)
    pr = closure.diagnosis.prompts
    seen = (pr["rollouts"] >= min_rollouts).to_numpy()
    rec = closure.recovery(min_rollouts)
    ax1.scatter(closure.truth[seen], pr["p_mean"][seen], s=4, alpha=0.5, color=COLORS["grpo"], lw=0)
    ax1.plot([0, 1], [0, 1], color=COLORS["law"], lw=0.8)
    ax1.set(
        xlabel="true p (mean over the prompt's rollouts)",
        ylabel="posterior mean",
        title=f"(a) recovered p, n ≥ {min_rollouts}: r = {rec['corr']:.3f}",
    )
    rel = closure.reliability(bins=8)
    ax2.errorbar(rel["predicted"], rel["measured"], yerr=2 * rel["sd"], fmt="o", color=COLORS["data"], ms=3)
    ax2.plot([0, 1], [0, 1], color=COLORS["law"], lw=0.8)
    ax2.set(xlabel="predicted P(silent)", ylabel="measured silent frequency", title="(b) calibration (±2 sd)")
    sc = closure.silent_check()
    ax3.plot(sc["step"], sc["diagnosis"], color=COLORS["data"], lw=1.0, label="measured")
    ax3.plot(sc["step"], sc["pred_posterior"], color=COLORS["grpo"], label="predicted, posterior before the step")
    if sc["pred_true_p"].notna().any():
        ax3.plot(sc["step"], sc["pred_true_p"], color=COLORS["accent"], ls="--", label="predicted, true p")
    ax3.set(xlabel="step", ylabel="silent groups", title="(c) silent fraction")
    ax3.legend(loc="best")
    return fig
