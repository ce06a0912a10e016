r"""The two-moment difficulty fit against real TRL runs whose exact solve rates are known.

:func:`gsd.reproduce.transformer.train_silent` trains a tiny transformer with TRL's
``GRPOTrainer`` and records, per step, every prompt's exact solve rate p before the generation,
the groups drawn and TRL's logged ``frac_reward_zero_std``.  From the two scalars TRL logs per
step (the mean reward, here Σk / (groups·G), and ``frac_reward_zero_std``) the Beta fit
(:func:`gsd.core.difficulty_fit.beta_from_moments`) predicts the silent fraction at other group
sizes G′; so does the pooled estimate :math:`\hat m^{G'} + (1-\hat m)^{G'}`.  The truth is the
step's mean over its groups of :math:`p_x^{G'} + (1-p_x)^{G'}` with the exact p.
"""

from __future__ import annotations

import numpy as np

__all__ = ["fit_errors", "run"]


def fit_errors(trained: dict, G_new=(2, 4, 16, 32), *, draws: int = 200, level: float = 0.9) -> dict:
    """Per G′, the fit's and the pooled estimate's errors against the exact-p truth, over the steps of a
    :func:`~gsd.reproduce.transformer.train_silent` result.

    Returns a dict: ``G`` (the run's), ``steps``, ``status`` (count per fit status), and per G′
    ``mae_fit``, ``mae_pooled`` (mean absolute error over the steps the fit covers), ``bias_fit``,
    ``bias_pooled``, ``coverage`` (share of those steps whose bootstrap interval holds the truth),
    ``mean_truth``, ``coverage_proper`` (over the steps with a proper Beta, status ``"fit"``);
    ``at_G``: at the logged G, the pooled estimate's error against TRL's logged fraction and the exact-p
    expectation, and the logged fraction's own sampling error; ``mae_fit_or_limit_all_steps`` and
    ``mae_pooled_all_steps``: over every step, a step with no Beta scored at the family's limit (the point
    mass, which is the pooled value).
    """
    from ..core.difficulty_fit import beta_from_moments, silent_interval
    from ..core.silent import silent_rate

    G = int(trained["G"])
    rows = trained["steps"]
    n = int(trained["groups_per_step"])
    m = np.array([np.sum(r["k"]) / (len(r["k"]) * G) for r in rows])
    z = np.array([r["measured"] for r in rows])
    Gs = np.asarray(G_new)
    truth = np.array([[np.mean(silent_rate(np.asarray(r["p"])[r["groups"]], g)) for r in rows] for g in Gs])
    fit = beta_from_moments(m, z, G)
    pred = fit.silent_at(Gs[:, None])
    pooled = silent_rate(m, Gs[:, None])
    lo, hi = silent_interval(fit, Gs, n, draws=draws, level=level)
    ok = np.isfinite(pred[0])
    # where no Beta fits (ẑ at or below the pooled value: sampling noise around a near point mass), its
    # limit, the point mass at m̂, is the family's closest member: scored on every step too
    limit = np.where(np.isfinite(pred), pred, pooled)
    proper = fit.status == "fit"
    exact_G = np.array([r["exact"] for r in rows])  # mean over the step's groups of p^G + (1-p)^G, exact p
    out = {
        "G": G,
        "groups_per_step": n,
        "steps": len(rows),
        "fitted_steps": int(ok.sum()),
        "status": {s: int((fit.status == s).sum()) for s in np.unique(fit.status)},
        "mean_silent_at_G": float(z.mean()),
        # at the logged G: the pooled estimate against TRL's own fraction and against the exact-p expectation
        "at_G": {
            "mae_pooled_vs_logged": float(np.abs(silent_rate(m, G) - z).mean()),
            "mae_pooled_vs_exact": float(np.abs(silent_rate(m, G) - exact_G).mean()),
            "mae_logged_vs_exact": float(np.abs(z - exact_G).mean()),
        },
        "by_G": {},
    }
    for i, g in enumerate(Gs.tolist()):
        t, f, p = truth[i, ok], pred[i, ok], pooled[i, ok]
        out["by_G"][g] = {
            "mean_truth": float(t.mean()),
            "mae_fit": float(np.abs(f - t).mean()),
            "mae_pooled": float(np.abs(p - t).mean()),
            "bias_fit": float((f - t).mean()),
            "bias_pooled": float((p - t).mean()),
            "coverage": float(((lo[ok, i] <= t) & (t <= hi[ok, i])).mean()),
            "coverage_proper": float(
                ((lo[proper, i] <= truth[i, proper]) & (truth[i, proper] <= hi[proper, i])).mean()
            ),
            "mae_fit_or_limit_all_steps": float(np.abs(limit[i] - truth[i]).mean()),
            "mae_pooled_all_steps": float(np.abs(pooled[i] - truth[i]).mean()),
        }
    return out


def run(
    *, seeds=(0, 1), lrs=(3e-3, 1e-2), G: int = 8, steps: int = 40, copies: int = 8, n_prompts: int = 16, log=print
) -> list:
    """:func:`fit_errors` on :func:`~gsd.reproduce.transformer.train_silent` runs (GRPO) of every
    seed × learning rate (a larger rate drives more prompts to p ≈ 0 or 1: more silence)."""
    from .transformer import build_task, train_silent

    results = []
    for seed in seeds:
        for lr in lrs:
            task = build_task(n_prompts, seed=seed)
            trained = train_silent(task, "grpo", G=G, copies=copies, steps=steps, lr=lr, seed=seed)
            res = fit_errors(trained)
            res.update(seed=seed, lr=lr)
            results.append(res)
            if log:
                log(res)
    return results


if __name__ == "__main__":  # pragma: no cover
    import json
    import sys

    out = run()
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            json.dump(out, fh, indent=1)
