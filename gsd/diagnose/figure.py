"""The diagnosis figure: silent fraction measured vs predicted, difficulty over time, waste."""

from __future__ import annotations

import numpy as np

from ..plotstyle import COLORS, new_figure, save_figure, styled
from .aggregate import DIFFICULTY_BINS, solve_rate_bin

__all__ = ["diagnosis_figure", "difficulty_histogram", "DIFFICULTY_BINS"]


def difficulty_histogram(groups):
    """Per step, the share of groups (G ≥ 2) whose solve rate k/G falls in each of
    :data:`DIFFICULTY_BINS`; returns (steps, shares of shape (steps, 6))."""
    g = groups[groups["G"] >= 2]
    r = (g["k"] / g["n"].where(g["n"] > 0)).to_numpy()
    g, r = g[np.isfinite(r)], r[np.isfinite(r)]  # graded rewards without a threshold have no k
    idx = solve_rate_bin(r)
    steps, sidx = np.unique(g["step"].to_numpy(), return_inverse=True)
    counts = np.zeros((steps.size, len(DIFFICULTY_BINS)))
    np.add.at(counts, (sidx, idx), 1)
    return steps, counts / counts.sum(axis=1, keepdims=True)


@styled
def diagnosis_figure(dx, path=None):
    """Three panels over the steps: (a) silent fraction, measured vs predicted (±2 sd band);
    (b) the distribution of the groups' solve rates k/G; (c) wasted share, effective-gradient
    ratio and fidelity.  Saved to ``path`` when given (returns the path), else returned."""
    st = dx.steps[dx.steps["groups"] > 0]
    fig, (ax1, ax2, ax3) = new_figure(3, width=13.0, height=3.3)
    x = st["step"].to_numpy()
    ax1.plot(x, st["silent_frac"], color=COLORS["data"], marker="o", ms=2.5, lw=1.0, label="measured")
    ax1.plot(x, st["silent_pred"], color=COLORS["grpo"], label="predicted (posterior before the step)")
    band = 2 * st["silent_pred_sd"]
    ax1.fill_between(x, st["silent_pred"] - band, st["silent_pred"] + band, color=COLORS["grpo"], alpha=0.2, lw=0)
    ax1.set(xlabel="step", ylabel="silent groups", title="(a) silent fraction", ylim=(0, 1))
    ax1.legend(loc="best")

    steps, shares = dx.difficulty
    colors = ["#3b4cc0", "#7b9ff9", "#c0d4f5", "#f2cbb7", "#ee8468", "#b40426"]
    ax2.set(xlabel="step", ylabel="share of groups", title="(b) solve rate of the groups", ylim=(0, 1))
    if steps.size:
        ax2.stackplot(
            steps,
            shares.T,
            colors=colors,
            labels=[f"k/G = {b}" if b in "01" else f"k/G in {b}" for b in DIFFICULTY_BINS],
        )
        ax2.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=7)
    else:
        ax2.text(
            0.5,
            0.5,
            "graded rewards: no right/wrong\n(give --threshold T)",
            ha="center",
            va="center",
            transform=ax2.transAxes,
        )

    ax3.plot(x, st["wasted_share"], color=COLORS["dr_grpo"], label="wasted share of rollouts")
    ax3.plot(x, st["effective_gradient_ratio"], color=COLORS["dapo"], label="effective-gradient ratio")
    ax3.plot(x, st["fidelity"], color=COLORS["grpo"], ls="--", label="fidelity φ (predicted)")
    ax3.set(xlabel="step", ylabel="share", title="(c) where the generation went", ylim=(0, 1))
    ax3.legend(loc="best")
    if path is None:
        return fig
    return save_figure(fig, path)
