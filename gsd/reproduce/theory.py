"""The theory figures of the paper, each with the numbers behind it (:ref:`theory-identity` to :ref:`theory-law`).

* the identity g = σ·(s̄₊ − s̄₋): Monte Carlo groups at G = 8 with random score vectors
  whose mean is offset by a baseline b — the update computed from the advantages matches the
  identity for every k and every b (advantages sum to zero, so a common offset of the scores
  cancels), and its size depends on k only through σ(k) = sqrt(k(G−k))/G;
* fidelity φ(p, G) against the law 1 − 1/(8Gp(1−p));
* the silent rate p^G + (1−p)^G against p;
* the implicit objectives p (Dr.GRPO) and 2·arcsin√p (GRPO, shown normalised to [0, 1]) and
  their logit gradients p(1−p) and sqrt(p(1−p)), with a Monte Carlo of the actual group updates
  of a Bernoulli-logit policy at G = 64;
* the difficulty weight w(p) = 1/sqrt(p(1−p)) on a log scale.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.groups import group_update, identity_terms
from ..core.silent import dapo_generation_cost, group_size_for_silent_rate, silent_rate
from ..core.update import expected_update, fidelity, fidelity_law
from ..core.weighting import arcsin_objective, difficulty_weight
from ..plotstyle import COLORS, group_size_axis, method_label, new_figure, styled

__all__ = [
    "identity_monte_carlo",
    "fidelity_curves",
    "silent_rate_curves",
    "silent_cost_table",
    "objective_curves",
    "objective_monte_carlo",
    "identity_figure",
    "fidelity_law_figure",
    "silent_rate_figure",
    "objectives_figure",
    "difficulty_weight_figure",
]


def identity_monte_carlo(
    G: int = 8, baselines=(0.0, 1.0, 5.0), *, n_draws: int = 2000, dim: int = 3, seed: int = 0
) -> pd.DataFrame:
    """Random groups with exactly k right (k = 0 … G) and scores s_i = b + N(0, I_dim).

    For each baseline b and each k, ``n_draws`` groups are drawn; the update g is computed from
    the advantages (:func:`gsd.group_update`) and compared with the identity's σ·(s̄₊ − s̄₋)
    (GRPO) and σ²·(s̄₊ − s̄₋) (Dr.GRPO).  Columns: ``baseline``, ``k``, ``sigma`` (closed form),
    ``coef_grpo``/``coef_dr_grpo`` (mean over draws of ⟨g, c⟩/⟨c, c⟩ with c = s̄₊ − s̄₋; equals
    σ resp. σ² when the identity holds; NaN for silent groups), ``max_dev_grpo``/
    ``max_dev_dr_grpo`` (largest |g − identity| over draws and coordinates), ``mean_norm_g``.
    """
    rng = np.random.default_rng(seed)
    rows = []
    for b in baselines:
        for k in range(G + 1):
            r = np.zeros((n_draws, G))
            r[:, :k] = 1.0
            r = rng.permuted(r, axis=1)
            s = b + rng.standard_normal((n_draws, G, dim))
            sigma, c = identity_terms(r, s)
            g_grpo = group_update(r, s, "grpo")
            g_dr = group_update(r, s, "dr_grpo")
            cc = (c * c).sum(-1)
            with np.errstate(invalid="ignore", divide="ignore"):
                coef_grpo = np.where(cc > 0, (g_grpo * c).sum(-1) / cc, np.nan)
                coef_dr = np.where(cc > 0, (g_dr * c).sum(-1) / cc, np.nan)
            silent = k in (0, G)
            rows.append(
                {
                    "baseline": float(b),
                    "k": k,
                    "sigma": float(np.sqrt(k * (G - k)) / G),
                    "coef_grpo": float("nan") if silent else float(np.mean(coef_grpo)),
                    "coef_dr_grpo": float("nan") if silent else float(np.mean(coef_dr)),
                    "max_dev_grpo": float(np.abs(g_grpo - sigma[:, None] * c).max()),
                    "max_dev_dr_grpo": float(np.abs(g_dr - (sigma**2)[:, None] * c).max()),
                    "mean_norm_g": float(np.linalg.norm(g_grpo, axis=-1).mean()),
                }
            )
    return pd.DataFrame(rows)


def fidelity_curves(probabilities=(0.5, 0.2), max_G: int = 256) -> pd.DataFrame:
    """φ(p, G) exact and by the law for G = 2 … max_G.  Columns ``p``, ``G``, ``exact``, ``law``."""
    G = np.arange(2, max_G + 1)
    frames = [pd.DataFrame({"p": p, "G": G, "exact": fidelity(p, G), "law": fidelity_law(p, G)}) for p in probabilities]
    return pd.concat(frames, ignore_index=True)


def silent_rate_curves(group_sizes=(4, 8, 16, 64), n_points: int = 401) -> pd.DataFrame:
    """P_silent(p, G) on a grid of p.  Columns ``p`` and one ``G=…`` column per group size."""
    p = np.linspace(0.0, 1.0, n_points)
    out = pd.DataFrame({"p": p})
    for G in group_sizes:
        out[f"G={G}"] = silent_rate(p, G)
    return out


def silent_cost_table(
    probabilities=(0.5, 0.3, 0.1, 0.05, 0.01), group_sizes=(4, 8, 16, 64), *, max_draws: int = 4, delta: float = 0.05
) -> pd.DataFrame:
    """Silent rate and DAPO's generation cost per (p, G), and the G that brings silence below δ.

    Columns ``p``, ``G``, ``silent`` (p^G + (1−p)^G), ``dapo_groups`` (expected groups drawn per
    kept group with unlimited redraws, 1/(1 − P_silent)), ``dapo_groups_capped`` (expected groups
    drawn per prompt when at most ``max_draws`` draws are made in all, as in the paper's
    campaign), ``G_for_delta`` (smallest G with P_silent(p, G) ≤ δ; depends on p only).
    """
    P, G = np.meshgrid(np.asarray(probabilities, float), np.asarray(group_sizes, int), indexing="ij")
    P, G = P.ravel(), G.ravel()
    return pd.DataFrame(
        {
            "p": P,
            "G": G,
            "silent": silent_rate(P, G),
            "dapo_groups": dapo_generation_cost(P, G),
            "dapo_groups_capped": dapo_generation_cost(P, G, max_draws=max_draws),
            "G_for_delta": group_size_for_silent_rate(P, delta),
        }
    )


def objective_curves(n_points: int = 401) -> pd.DataFrame:
    """The two implicit objectives and their logit gradients on a grid of p.

    Columns: ``p``; ``objective_dr_grpo`` = p; ``objective_grpo`` = (2/π)·arcsin√p (the
    objective 2·arcsin√p scaled to [0, 1]); ``grad_dr_grpo`` = d p/dz = p(1−p);
    ``grad_grpo`` = d(2 arcsin√p)/dz = sqrt(p(1−p)); ``weight`` = their ratio w(p).
    """
    p = np.linspace(0.0, 1.0, n_points)
    return pd.DataFrame(
        {
            "p": p,
            "objective_dr_grpo": p,
            "objective_grpo": arcsin_objective(p, normalized=True),
            "grad_dr_grpo": p * (1 - p),
            "grad_grpo": np.sqrt(p * (1 - p)),
            "weight": difficulty_weight(p),
        }
    )


def objective_monte_carlo(G: int = 64, probabilities=None, *, n_groups: int = 2000, seed: int = 1) -> pd.DataFrame:
    """Mean group update of a Bernoulli-logit policy, simulated, against the closed forms.

    For each p, ``n_groups`` groups of G rewards y ~ Bernoulli(p) are drawn; the score of an
    answer on the logit is y − p, and the update is computed from the advantages
    (:func:`gsd.group_update`).  Columns per method m ∈ {grpo, dr_grpo}: ``mc_m`` (mean),
    ``se_m`` (its standard error), ``exact_m`` (the finite-G expectation
    :func:`gsd.expected_update`), ``large_G_m`` (sqrt(p(1−p)) or p(1−p)) and ``z_m``
    ((mc − exact)/se, which should look standard normal).
    """
    p = np.linspace(0.02, 0.98, 17) if probabilities is None else np.asarray(probabilities, dtype=np.float64)
    rng = np.random.default_rng(seed)
    y = (rng.random((p.size, n_groups, G)) < p[:, None, None]).astype(np.float64)
    s = (y - p[:, None, None])[..., None]
    out = pd.DataFrame({"p": p})
    for method, large in (("grpo", np.sqrt(p * (1 - p))), ("dr_grpo", p * (1 - p))):
        g = group_update(y, s, method)[..., 0]
        mc = g.mean(axis=1)
        se = g.std(axis=1, ddof=1) / np.sqrt(n_groups)
        exact = expected_update(p, G, method)
        out[f"mc_{method}"] = mc
        out[f"se_{method}"] = se
        out[f"exact_{method}"] = exact
        out[f"large_G_{method}"] = large
        with np.errstate(invalid="ignore", divide="ignore"):
            out[f"z_{method}"] = np.where(se > 0, (mc - exact) / se, 0.0)
    return out


# --------------------------------------------------------------------------- figures
@styled
def identity_figure(mc: pd.DataFrame | None = None, G: int = 8):
    """g(k) at G = 8: σ(k) and σ²(k) with Monte Carlo coefficients at three score baselines."""
    mc = identity_monte_carlo(G) if mc is None else mc
    G = int(mc.k.max())
    k = np.arange(G + 1)
    sigma = np.sqrt(k * (G - k)) / G
    fig, ax = new_figure(width=5.0, height=3.3)
    ax.plot(k, sigma, color=COLORS["grpo"], label="GRPO  σ(k)")
    ax.plot(k, sigma**2, color=COLORS["dr_grpo"], label="Dr.GRPO  σ²(k)")
    markers = ["o", "s", "^", "v", "D"]
    baselines = sorted(mc.baseline.unique())
    for i, b in enumerate(baselines):
        sub = mc[mc.baseline == b]
        dx = (i - (len(baselines) - 1) / 2) * 0.12
        ax.plot(
            sub.k + dx,
            sub.coef_grpo,
            markers[i % 5],
            mfc="none",
            color=COLORS["grpo"],
            ms=5,
            label=f"Monte Carlo, score baseline b = {b:g}",
        )
        ax.plot(sub.k + dx, sub.coef_dr_grpo, markers[i % 5], mfc="none", color=COLORS["dr_grpo"], ms=5)
    dev = max(mc.max_dev_grpo.max(), mc.max_dev_dr_grpo.max())
    ax.set_xticks(k)
    ax.set_xlabel(f"answers right k (G = {G})")
    ax.set_ylabel(r"g along $\bar s_+ - \bar s_-$")
    ax.set_title(rf"$g = \sigma\,(\bar s_+ - \bar s_-)$;  max |g − identity| = {dev:.1e}")
    ax.legend(loc="upper center", fontsize=7, ncols=2)
    ax.set_ylim(0, 0.72)
    return fig


@styled
def fidelity_law_figure(curves: pd.DataFrame | None = None):
    """φ(p, G) exact against the law 1 − 1/(8Gp(1−p)) for p = 0.5 and 0.2."""
    curves = fidelity_curves() if curves is None else curves
    fig, ax = new_figure(width=4.8, height=3.3)
    for color, (p, sub) in zip((COLORS["grpo"], COLORS["dr_grpo"], COLORS["dapo"]), curves.groupby("p", sort=False)):
        ax.plot(sub.G, sub.exact, color=color, label=f"p = {p:g} exact")
        ax.plot(sub.G, sub.law, color=color, ls="--", lw=1.0, label=f"p = {p:g} law")
    group_size_axis(ax, [2, 4, 8, 16, 32, 64, 128, 256])
    ax.set_ylim(0.5, 1.0)
    ax.set_ylabel("fidelity φ(p, G)")
    ax.set_title("exact fidelity vs the law 1 − 1/(8Gp(1−p))")
    ax.legend(loc="lower right")
    return fig


@styled
def silent_rate_figure(curves: pd.DataFrame | None = None):
    """P_silent(p, G) = p^G + (1−p)^G against p for several G."""
    curves = silent_rate_curves() if curves is None else curves
    fig, ax = new_figure(width=4.8, height=3.3)
    cols = [c for c in curves.columns if c.startswith("G=")]
    palette = [COLORS["grpo"], COLORS["dr_grpo"], COLORS["dapo"], COLORS["extra"], COLORS["accent"]]
    for color, c in zip(palette, cols):
        ax.plot(curves.p, curves[c], color=color, label=c)
    ax.set_xlabel("success probability p")
    ax.set_ylabel(r"P(silent) = $p^G + (1-p)^G$")
    ax.set_ylim(0, 1.02)
    ax.set_title("silent groups carry no gradient")
    ax.legend(loc="upper center")
    return fig


@styled
def objectives_figure(curves: pd.DataFrame | None = None, mc: pd.DataFrame | None = None, G: int = 64):
    """Left: the implicit objectives.  Right: their logit gradients with Monte Carlo at G = 64."""
    curves = objective_curves() if curves is None else curves
    mc = objective_monte_carlo(G) if mc is None else mc
    fig, (a1, a2) = new_figure(2, width=8.6, height=3.3)
    a1.plot(curves.p, curves.objective_dr_grpo, color=COLORS["dr_grpo"], label="Dr.GRPO:  p")
    a1.plot(curves.p, curves.objective_grpo, color=COLORS["grpo"], label="GRPO:  (2/π)·arcsin√p")
    a1.set_xlabel("success probability p")
    a1.set_ylabel("objective")
    a1.set_title("implicit objectives")
    a1.legend(loc="upper left")
    for method, label in (("grpo", "√(p(1−p))"), ("dr_grpo", "p(1−p)")):
        a2.plot(curves.p, curves[f"grad_{method}"], color=COLORS[method], label=f"{method_label(method)}:  {label}")
        a2.errorbar(
            mc.p,
            mc[f"mc_{method}"],
            yerr=2 * mc[f"se_{method}"],
            fmt="o",
            mfc="none",
            color=COLORS[method],
            ms=4,
            capsize=0,
            label=f"{method_label(method)}: Monte Carlo, G = {G}",
        )
    a2.set_xlabel("success probability p")
    a2.set_ylabel("update on the logit")
    a2.set_title("their logit gradients = expected group updates")
    a2.legend(loc="upper left", fontsize=7)
    a2.set_ylim(0, 0.62)
    return fig


@styled
def difficulty_weight_figure(n_points: int = 999):
    """w(p) = 1/sqrt(p(1−p)) on a log scale: GRPO's weight relative to Dr.GRPO."""
    p = np.linspace(0.001, 0.999, n_points)
    fig, ax = new_figure(width=4.8, height=3.3)
    ax.plot(p, difficulty_weight(p), color=COLORS["grpo"])
    for q in (0.01, 0.05, 0.1, 0.5):
        w = float(difficulty_weight(q))
        ax.plot([q], [w], "o", color=COLORS["accent"])
        ax.annotate(f"w({q:g}) = {w:.2f}", (q, w), textcoords="offset points", xytext=(6, 4), fontsize=7)
    ax.axvspan(0, 0.1, color=COLORS["accent"], alpha=0.08)
    ax.axvspan(0.9, 1, color=COLORS["accent"], alpha=0.08, label="extreme prompts")
    ax.set_yscale("log")
    ticks = [2, 3, 5, 10, 20, 30]
    ax.set_yticks(ticks)
    ax.set_yticklabels([str(t) for t in ticks])
    ax.yaxis.set_minor_formatter(_null_formatter())
    ax.set_xlabel("success probability p")
    ax.set_ylabel("w(p) = 1/√(p(1−p))")
    ax.set_title("GRPO's difficulty weight relative to Dr.GRPO")
    ax.legend(loc="upper center")
    return fig


def _null_formatter():
    from matplotlib.ticker import NullFormatter

    return NullFormatter()
