"""``gsd diagnose`` on the completions log TRL wrote in a training, against the exact p the run
recorded: the posterior's error and coverage, and the predicted silent fraction against TRL's.
"""

from __future__ import annotations

import numpy as np


def calibrate(trained: dict, completions_dir, *, level: float = 0.9, half_life=None) -> dict:
    """``gsd diagnose`` (:func:`gsd.diagnose.diagnose`, its defaults: empirical-Bayes prior, no
    half-life unless ``half_life`` is given) on the completions TRL wrote in :func:`train_silent`
    (``completions_dir``), against the exact p the run recorded.

    Returns
    -------
    dict
        Over the groups of steps ≥ 2 whose prompt had rollouts before: ``mae`` (mean absolute
        difference of the posterior mean before the step and the exact p at the step), ``coverage``
        (share of exact p inside the posterior's equal-tailed ``level`` interval), ``mae_run_mean``
        (the same posterior mean against the prompt's exact p averaged over the steps before: what
        pooled counts estimate);
        ``groups`` (how many); per step ``silent_measured``, ``silent_pred`` (diagnose's) and
        ``silent_exact`` (mean of p^G + (1−p)^G at the exact p) with ``r2_pred`` and ``r2_exact``
        (each as a prediction of the measured fraction, no refit); ``k_matches`` (at every step
        the groups' k diagnose read, as a multiset, are those the reward function returned).
    """
    from ...core.posterior import BetaPosterior
    from ...core.silent import silent_rate
    from ...diagnose import diagnose
    from ...simulator.ledger import r_squared

    dx = diagnose(completions_dir, half_life=half_life)
    g = dx.groups
    labels = dx.prompts["prompt"].to_numpy()
    x = np.array([int(str(lab)[1:]) for lab in labels])[g["prompt"].to_numpy()]
    step = g["step"].to_numpy()
    P = np.array([s["p"] for s in trained["steps"]])  # steps × prompts, exact before each generation
    exact = P[step - 1, x]
    keep = (step >= 2) & (g["n_before"].to_numpy() > 0)
    lo, hi = BetaPosterior(g["a"].to_numpy(), g["b"].to_numpy(), (np.nan, np.nan)).interval(level)
    mean_before = (np.cumsum(P, 0) - P) / np.maximum(np.arange(len(P)), 1)[:, None]
    err = np.abs(g["p_before"].to_numpy() - exact)
    # per step, the multiset of k the reward function returned against the one diagnose read
    truth_k = np.concatenate([np.sort(s["k"]) for s in trained["steps"]])
    got_k = np.concatenate([np.sort(g["k"].to_numpy()[step == t]) for t in range(1, len(P) + 1)])
    st = dx.steps
    G = trained["G"]
    silent_exact = [float(np.mean(silent_rate(np.asarray(s["p"])[s["groups"]], G))) for s in trained["steps"]]
    measured = st["silent_frac"].tolist()
    return {
        "level": level,
        "groups": int(keep.sum()),
        "mae": float(err[keep].mean()),
        "coverage": float(((lo <= exact) & (exact <= hi))[keep].mean()),
        "mae_run_mean": float(np.abs(g["p_before"].to_numpy() - mean_before[step - 1, x])[keep].mean()),
        "k_matches": bool(truth_k.size == got_k.size and np.array_equal(truth_k, got_k)),
        "silent_measured": measured,
        "silent_pred": st["silent_pred"].tolist(),
        "silent_exact": silent_exact,
        "r2_pred": r_squared(measured, st["silent_pred"].tolist()),
        "r2_exact": r_squared(measured, silent_exact),
        "half_life": dx.summary["half_life"],
    }
