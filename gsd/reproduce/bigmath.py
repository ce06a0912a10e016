"""The Big-Math analysis: how much of a real difficulty distribution is silent, and where
GRPO and Dr.GRPO spend their gradient budget (:ref:`theory-paper`).

Input is one solve rate per problem.  By default that is the shipped histogram of Big-Math
(215,608 problems, p̂ = k/64 from 64 rollouts of Llama-3.1-8B-Instruct); a user's per-problem
file works the same way (:func:`load_difficulty`).

What is computed
----------------
* shares of problems never solved (p̂ = 0), always solved (p̂ = 1) — those are silent at
  every G — and the mean solve rate;
* the expected silent rate at G = 4 … 64, two ways: the closed form averaged over problems,
  mean_j [p̂_j^G + (1 − p̂_j)^G], and exact subsampling of the logged rollouts, mean_j of the
  hypergeometric [C(k_j, G) + C(n − k_j, G)] / C(n, G).  The two differ because p̂ is itself
  a noisy estimate: the closed form treats p̂ as the truth, subsampling does not look beyond
  the n answers that were actually drawn;
* the share of the gradient budget held by the paper's extreme (0 < p̂ < 0.1 or 0.9 < p̂ < 1)
  and medium (0.4 ≤ p̂ ≤ 0.6) prompts and by each decile of p̂, under GRPO and Dr.GRPO, with the
  large-G weights sqrt(p(1−p)) and p(1−p) (the paper's choice) and with the exact finite-G
  expected updates at G = 8.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..core.silent import silent_rate, silent_rate_subsampled
from ..core.weighting import budget_share, decile_index, decile_shares, extreme_mask, medium_mask
from ..io import data as _data
from ..plotstyle import COLORS, group_size_axis, method_label, new_figure, styled

__all__ = [
    "Difficulty",
    "load_difficulty",
    "GROUP_SIZES",
    "FINITE_G",
    "population_shares",
    "silent_rates",
    "budget_shares",
    "decile_table",
    "summary",
    "histogram_figure",
    "silent_figure",
    "decile_figure",
]

#: Group sizes at which the silent rate is reported.
GROUP_SIZES = (4, 8, 16, 32, 64)
#: The finite group size used beside the large-G budget shares.
FINITE_G = 8
_METHODS = ("dr_grpo", "grpo")


@dataclass(frozen=True)
class Difficulty:
    """One solve rate per problem, plus the rollout counts behind it when they are known.

    ``k`` (int64, same length as ``p``) and ``n`` are set when every p̂ is (up to rounding) a
    multiple of 1/n; exact subsampling needs them.  ``n_rounded`` counts problems whose p̂·n
    was not an integer and was rounded to the nearest count (the real Big-Math file has six
    rates on a /9 grid).
    """

    p: np.ndarray
    k: np.ndarray | None = None
    n: int | None = None
    source: str = "shipped Big-Math histogram"
    n_rounded: int = 0
    notes: list = field(default_factory=list)

    @property
    def size(self) -> int:
        return int(self.p.size)


def load_difficulty(
    path=None,
    *,
    column: str = _data.BIGMATH_COLUMN,
    n_rollouts: int = _data.BIGMATH_ROLLOUTS,
    max_off_grid: float = 1e-3,
) -> Difficulty:
    """The difficulty distribution to analyse.

    ``path=None``: the shipped Big-Math histogram (exact counts k out of 64).  A file whose
    columns are ``k, p_hat, count`` is read as such a histogram; any other parquet/CSV/JSONL
    file is read per problem from ``column``.  For a per-problem file the counts k = p̂·n are
    recovered when at most a fraction ``max_off_grid`` of the rates lie off the 1/n grid
    (those are rounded and counted); otherwise ``k`` is None and subsampling is skipped.
    """
    if path is None:
        p, k = _data.load_bigmath(with_k=True)
        return Difficulty(p=p, k=k, n=_data.BIGMATH_ROLLOUTS)
    if _is_histogram(path):
        hist = _data.load_histogram(path)
        p, k = _data.load_bigmath(path, with_k=True)
        return Difficulty(p=p, k=k, n=int(hist["k"].max()), source=f"histogram {path}")
    p = _data.load_solve_rates(path, column)
    scaled = p * n_rollouts
    k = np.rint(scaled)
    off = np.abs(scaled - k) > 1e-6
    src = f"{path} (column {column})"
    if off.mean() > max_off_grid:
        return Difficulty(
            p=p,
            source=src,
            notes=[
                f"{int(off.sum())} of {p.size} rates are not multiples of 1/{n_rollouts}: exact subsampling skipped"
            ],
        )
    notes = [f"{int(off.sum())} rates off the 1/{n_rollouts} grid rounded to the nearest count"] if off.any() else []
    return Difficulty(p=p, k=k.astype(np.int64), n=n_rollouts, source=src, n_rounded=int(off.sum()), notes=notes)


def _is_histogram(path) -> bool:
    from pathlib import Path

    path = Path(path)
    if path.suffix.lower() != ".csv" or not path.is_file():
        return False
    try:
        head = pd.read_csv(path, nrows=0)
    except (ValueError, UnicodeError, OSError):  # not a readable CSV: load_solve_rates says so by name
        return False
    return {"k", "p_hat", "count"} <= set(head.columns)


def _as_difficulty(d) -> Difficulty:
    if d is None:
        return load_difficulty()
    if isinstance(d, Difficulty):
        return d
    p = np.asarray(d, dtype=np.float64).ravel()
    return Difficulty(p=p, source="array")


def population_shares(d=None) -> dict:
    """Share of problems never solved, always solved, silent at every G; mean solve rate."""
    d = _as_difficulty(d)
    p = d.p
    return {
        "n_problems": d.size,
        "never_solved": float(np.mean(p == 0)),
        "always_solved": float(np.mean(p == 1)),
        "silent_at_every_G": float(np.mean((p == 0) | (p == 1))),
        "mean_solve_rate": float(p.mean()),
    }


def silent_rates(d=None, group_sizes=GROUP_SIZES) -> pd.DataFrame:
    """Expected share of silent groups at each G: closed form and exact subsampling.

    Columns ``G``, ``closed_form`` (mean of p̂^G + (1 − p̂)^G), ``subsampled`` (mean of the
    hypergeometric probability; NaN where G > n or the counts are unknown) and ``difference``
    (closed form − subsampled).
    """
    d = _as_difficulty(d)
    rows = []
    for G in group_sizes:  # a handful of group sizes: each line is vectorised over problems
        closed = float(silent_rate(d.p, G).mean())
        if d.k is not None and G <= d.n:
            sub = float(silent_rate_subsampled(d.k, d.n, G).mean())
        else:
            sub = float("nan")
        rows.append({"G": int(G), "closed_form": closed, "subsampled": sub, "difference": closed - sub})
    return pd.DataFrame(rows)


def budget_shares(d=None, *, G: int = FINITE_G) -> pd.DataFrame:
    """Gradient-budget share of extreme, medium and other prompts, per method and weighting.

    One row per (method, weighting) with weighting ``"large_G"`` (the paper's) or ``"G=8"``
    (exact finite-G expected update).  Columns ``extreme``, ``medium``, ``other`` (sum to 1)
    and ``n_extreme``/``n_medium`` (how many prompts each set holds).
    """
    d = _as_difficulty(d)
    p = d.p
    ext, med = extreme_mask(p), medium_mask(p)
    rows = []
    for method in _METHODS:
        for label, g in (("large_G", None), (f"G={G}", G)):
            e = budget_share(p, ext, method=method, G=g)
            m = budget_share(p, med, method=method, G=g)
            rows.append(
                {
                    "method": method,
                    "weighting": label,
                    "extreme": e,
                    "medium": m,
                    "other": 1.0 - e - m,
                    "n_extreme": int(ext.sum()),
                    "n_medium": int(med.sum()),
                }
            )
    return pd.DataFrame(rows)


def decile_table(d=None, *, G: int = FINITE_G) -> pd.DataFrame:
    """Share of prompts and of the gradient budget in each decile of p̂ (each column sums to 1).

    Columns ``decile`` (0 = [0, 0.1) … 9 = [0.9, 1]), ``lo``, ``hi``, ``prompts`` and one budget
    column per method and weighting: ``grpo``, ``dr_grpo`` (large G) and ``grpo_G8``,
    ``dr_grpo_G8`` (finite G).
    """
    d = _as_difficulty(d)
    p = d.p
    out = pd.DataFrame({"decile": np.arange(10), "lo": np.arange(10) / 10, "hi": np.arange(1, 11) / 10})
    out["prompts"] = np.bincount(decile_index(p), minlength=10) / p.size
    for method in _METHODS:
        out[method] = decile_shares(p, method=method)
        out[f"{method}_G{G}"] = decile_shares(p, method=method, G=G)
    return out


def summary(d=None, *, group_sizes=GROUP_SIZES, G: int = FINITE_G) -> dict:
    """Every Big-Math number at once: population shares, silent rates, budget and decile shares.

    The headline numbers (the paper's targets) are under ``headline``: ``silent_G8_closed_form``,
    ``silent_G8_subsampled``, ``extreme_share_dr_grpo`` and ``extreme_share_grpo`` (large-G
    weights), ``medium_share_dr_grpo``/``medium_share_grpo``.
    """
    d = _as_difficulty(d)
    silent = silent_rates(d, group_sizes)
    budget = budget_shares(d, G=G)
    deciles = decile_table(d, G=G)

    def share(method, col, weighting="large_G"):
        row = budget[(budget.method == method) & (budget.weighting == weighting)]
        return float(row[col].iloc[0])

    at = silent.set_index("G")
    headline = {
        f"silent_G{G}_closed_form": float(at.loc[G, "closed_form"])
        if G in at.index
        else float(silent_rate(d.p, G).mean()),
        f"silent_G{G}_subsampled": float(at.loc[G, "subsampled"]) if G in at.index else float("nan"),
        "extreme_share_dr_grpo": share("dr_grpo", "extreme"),
        "extreme_share_grpo": share("grpo", "extreme"),
        "medium_share_dr_grpo": share("dr_grpo", "medium"),
        "medium_share_grpo": share("grpo", "medium"),
        f"extreme_share_grpo_G{G}": share("grpo", "extreme", f"G={G}"),
        f"extreme_share_dr_grpo_G{G}": share("dr_grpo", "extreme", f"G={G}"),
    }
    return {
        "source": d.source,
        "rollouts_per_problem": d.n,
        "notes": list(d.notes),
        "population": population_shares(d),
        "headline": headline,
        "silent_rates": silent,
        "budget_shares": budget,
        "deciles": deciles,
    }


# --------------------------------------------------------------------------- figures
@styled
def histogram_figure(d=None, *, G: int = FINITE_G):
    """Histogram of p̂ (one bar per count k when the counts are known), with the expected
    silent probability p̂^G + (1 − p̂)^G of each bar on a second axis."""
    d = _as_difficulty(d)
    fig, ax = new_figure(width=6.0, height=3.2)
    if d.k is not None:
        counts = np.bincount(d.k, minlength=d.n + 1)
        x = np.arange(d.n + 1) / d.n
        width = 1.0 / d.n
    else:
        counts, edges = np.histogram(d.p, bins=64, range=(0, 1))
        x = 0.5 * (edges[1:] + edges[:-1])
        width = edges[1] - edges[0]
    ax.bar(x, counts, width=width * 0.9, color=COLORS["grpo"], alpha=0.75, label="problems")
    ax.set_xlabel("solve rate p̂")
    ax.set_ylabel("problems")
    ext = ((x > 0) & (x < 0.1)) | ((x > 0.9) & (x < 1))
    ax.bar(
        x[ext], counts[ext], width=width * 0.9, color=COLORS["accent"], alpha=0.85, label="extreme (0<p̂<0.1, 0.9<p̂<1)"
    )
    ends = (x == 0) | (x == 1)
    ax.bar(
        x[ends], counts[ends], width=width * 0.9, color=COLORS["law"], alpha=0.9, label="p̂ ∈ {0, 1}: silent at every G"
    )
    ax2 = ax.twinx()
    grid = np.linspace(0, 1, 401)
    ax2.plot(grid, silent_rate(grid, G), color=COLORS["dr_grpo"], lw=1.2, label=f"P(silent), G={G}")
    ax2.set_ylim(0, 1.02)
    ax2.set_ylabel(f"P(silent) at G = {G}")
    ax2.grid(False)
    mean_silent = float(silent_rate(d.p, G).mean())
    ax.set_title(f"{d.size:,} problems; expected silent at G = {G}: {100 * mean_silent:.1f} %")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper center")
    return fig


@styled
def silent_figure(d=None, group_sizes=(2, 4, 8, 16, 32, 64)):
    """Expected silent share against G: closed form on p̂ and exact subsampling of the rollouts."""
    d = _as_difficulty(d)
    tab = silent_rates(d, group_sizes)
    fig, ax = new_figure(width=4.6, height=3.2)
    ax.plot(
        tab.G, 100 * tab.closed_form, "o-", color=COLORS["grpo"], label=r"closed form  mean $\hat p^G+(1-\hat p)^G$"
    )
    if tab.subsampled.notna().any():
        ax.plot(
            tab.G,
            100 * tab.subsampled,
            "s--",
            color=COLORS["dr_grpo"],
            label=f"exact subsampling of the {d.n} rollouts",
        )
    floor = 100 * population_shares(d)["silent_at_every_G"]
    ax.axhline(floor, color=COLORS["law"], lw=1, ls=":", label=f"p̂ ∈ {{0, 1}}: {floor:.1f} %")
    group_size_axis(ax, tab.G)
    ax.set_ylabel("silent groups (%)")
    ax.set_ylim(0, None)
    ax.set_title(f"Expected share of silent groups against G ({d.size:,} problems)", fontsize=9)
    ax.legend()
    return fig


@styled
def decile_figure(d=None, *, G: int = FINITE_G):
    """Share of prompts and of the gradient budget per decile of p̂: GRPO vs Dr.GRPO.

    Bars: the paper's large-G weights; markers: exact expected updates at finite G.
    """
    tab = decile_table(d, G=G)
    fig, ax = new_figure(width=6.0, height=3.2)
    x = tab.decile.to_numpy()
    w = 0.27
    ax.bar(x - w, 100 * tab.prompts, width=w, color=COLORS["law"], alpha=0.6, label="prompts")
    for off, method in ((0.0, "dr_grpo"), (w, "grpo")):
        ax.bar(
            x + off,
            100 * tab[method],
            width=w,
            color=COLORS[method],
            alpha=0.8,
            label=f"{method_label(method)} budget (large G)",
        )
        ax.plot(
            x + off,
            100 * tab[f"{method}_G{G}"],
            "D",
            color="black",
            ms=3,
            label=f"finite G = {G}" if method == "grpo" else None,
        )
    ax.set_xticks(x)
    ax.set_xticklabels([f"{lo:.1f}–{hi:.1f}" for lo, hi in zip(tab.lo, tab.hi)], rotation=35, fontsize=7)
    ax.set_xlabel("decile of solve rate p̂")
    ax.set_ylabel("share (%)")
    ax.set_title("Share of the prompts and of the gradient budget, per decile of the solve rate p̂", fontsize=9)
    ax.legend(ncols=2)
    return fig
