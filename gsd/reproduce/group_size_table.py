"""The paper's group-size table (its Table 2) and the figures around it (:ref:`theory-law`, :ref:`theory-paper`).

For a target fidelity 1 − ε and a success probability p, two group sizes are compared:

* the exact one: the smallest G ≥ 2 with φ(p, G) ≥ 1 − ε, where φ = m_GRPO(p, G)/sqrt(p(1−p))
  is summed exactly (:func:`gsd.required_group_size`, ``rule="exact"``);
* the law's: round(1/(8·ε·p(1−p))), the delta-method value the paper prints (rounded half up;
  none of the table's values is a half-integer).

φ depends on p only through p(1−p), so the row for 1 − p must equal the row for p; the table
computes both and reports whether they agree rather than assuming it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.groupsize import DEFAULT_MAX_GROUP_SIZE, EXCEEDS_MAX, UNREACHABLE, group_size_law, required_group_size
from ..core.update import fidelity, fidelity_law
from ..plotstyle import COLORS, group_size_axis, new_figure, styled
from ..validation import InputError

__all__ = [
    "FIDELITIES",
    "PROBABILITIES",
    "law_group_size",
    "group_size_table",
    "group_size_table_wide",
    "hard_prompt_check",
    "fidelity_vs_group_size_figure",
    "required_group_size_figure",
]

#: Fidelity targets of the paper's table.
FIDELITIES = (0.90, 0.95, 0.99)
#: Success probabilities of the paper's table (their complements 1 − p give the same rows).
PROBABILITIES = (0.5, 0.3, 0.1, 0.05)


def law_group_size(p, epsilon):
    """The law's group size as the paper prints it: 1/(8εp(1−p)) rounded half up, at least 2."""
    return np.maximum(2, np.floor(group_size_law(p, epsilon) + 0.5)).astype(np.int64)


def group_size_table(fidelities=FIDELITIES, probabilities=PROBABILITIES) -> pd.DataFrame:
    """Long table, one row per (fidelity, p).

    Columns: ``fidelity``, ``epsilon``, ``p``, ``G_exact`` (smallest G ≥ 2 with φ ≥ fidelity),
    ``G_exact_complement`` (the same for 1 − p), ``symmetric`` (the two agree), ``G_law``
    (round(1/(8εp(1−p)))), ``law_value`` (unrounded), ``ratio`` (G_exact / law_value),
    ``phi_at_G_exact`` and ``phi_below`` (φ at G_exact − 1, which must miss the target; NaN
    when G_exact = 2), ``law_fidelity_at_G_exact`` (what the law predicts there).
    """
    f = np.asarray(fidelities, dtype=np.float64)
    p = np.asarray(probabilities, dtype=np.float64)
    F, P = np.meshgrid(f, p, indexing="ij")
    F, P = F.ravel(), P.ravel()
    eps = 1.0 - F
    g_exact = required_group_size(P, eps, rule="exact")
    g_comp = required_group_size(1.0 - P, eps, rule="exact")
    if (g_exact == UNREACHABLE).any():
        raise InputError("probabilities: every p must lie strictly between 0 and 1")
    if (g_exact == EXCEEDS_MAX).any():
        hard = P[g_exact == EXCEEDS_MAX]
        raise InputError(
            f"probabilities: p = {float(hard[0])!r} needs a group larger than {DEFAULT_MAX_GROUP_SIZE:,} "
            "for these fidelities"
        )
    law = group_size_law(P, eps)
    below = np.where(g_exact > 2, fidelity(P, np.maximum(g_exact - 1, 1)), np.nan)
    return pd.DataFrame(
        {
            "fidelity": F,
            "epsilon": eps,
            "p": P,
            "G_exact": g_exact,
            "G_exact_complement": g_comp,
            "symmetric": g_exact == g_comp,
            "G_law": law_group_size(P, eps),
            "law_value": law,
            "ratio": g_exact / law,
            "phi_at_G_exact": fidelity(P, g_exact),
            "phi_below": below,
            "law_fidelity_at_G_exact": fidelity_law(P, g_exact),
        }
    )


def group_size_table_wide(table: pd.DataFrame | None = None) -> pd.DataFrame:
    """The table laid out like the paper's: one row per p (and 1 − p), exact | law per fidelity."""
    t = group_size_table() if table is None else table
    out = pd.DataFrame({"p": sorted(t.p.unique(), reverse=True)})
    out["1 - p"] = 1.0 - out.p
    for fid in sorted(t.fidelity.unique()):
        sub = t[t.fidelity == fid].drop_duplicates("p").set_index("p")  # a p asked twice: one row
        tag = f"{100 * fid:.0f}%"
        out[f"{tag} exact"] = out.p.map(sub.G_exact).astype(int)
        out[f"{tag} law"] = out.p.map(sub.G_law).astype(int)
    return out


def hard_prompt_check(p: float = 0.05, G: int = 64) -> dict:
    """The published check of the law on a hard prompt: φ by the law and exactly at (p, G)."""
    return {"p": p, "G": G, "law": float(fidelity_law(p, G)), "exact": float(fidelity(p, G))}


# --------------------------------------------------------------------------- figures
@styled
def fidelity_vs_group_size_figure(probabilities=(0.5, 0.1, 0.05), fidelities=FIDELITIES, max_G: int = 512):
    """φ(p, G) against G (exact, solid; law, dashed) with the table's fidelity targets."""
    G = np.unique(np.round(np.geomspace(2, max_G, 160)).astype(np.int64))
    fig, ax = new_figure(width=6.4, height=3.4)
    palette = [COLORS["grpo"], COLORS["dr_grpo"], COLORS["dapo"], COLORS["extra"]]
    for color, p in zip(palette, probabilities):
        ax.plot(G, fidelity(p, G), color=color, label=f"p = {p:g} exact")
        ax.plot(G, fidelity_law(p, G), color=color, ls="--", lw=1.0, label=f"p = {p:g} law")
        for fid in fidelities:
            g = int(required_group_size(p, 1 - fid)[()])
            if g <= max_G:
                ax.plot([g], [fidelity(p, g)], "o", color=color, ms=3.5)
    for fid in fidelities:
        ax.axhline(fid, color=COLORS["law"], lw=0.8, ls=":")
        ax.text(2.1, fid + 0.003, f"{100 * fid:.0f} %", fontsize=7, color=COLORS["law"], va="bottom")
    group_size_axis(ax, [2**i for i in range(1, int(np.log2(max_G)) + 1)])
    ax.set_ylim(0.5, 1.0)
    ax.set_ylabel("fidelity φ(p, G)")
    ax.set_title("fidelity of a group of G to the large-group GRPO update")
    fig.legend(loc="outside right center")
    return fig


@styled
def required_group_size_figure(fidelities=(0.95, 0.99), p_min: float = 0.01):
    """Smallest G reaching each fidelity, exact vs law, against p (log scale)."""
    p = np.linspace(p_min, 0.5, 120)
    fig, ax = new_figure(width=5.0, height=3.4)
    for color, fid in zip((COLORS["grpo"], COLORS["dr_grpo"]), fidelities):
        eps = 1.0 - fid
        ax.plot(p, required_group_size(p, eps), color=color, label=f"{100 * fid:.0f} % exact")
        ax.plot(p, group_size_law(p, eps), color=color, ls="--", lw=1.0, label=f"{100 * fid:.0f} % law 1/(8εp(1−p))")
        pts = np.asarray(PROBABILITIES)
        ax.plot(pts, required_group_size(pts, eps), "o", color=color, ms=3.5)
    ax.set_yscale("log")
    ax.set_xlabel("success probability p   (same for 1 − p)")
    ax.set_ylabel("required group size G")
    ax.set_title("group size needed for a fidelity target")
    ax.legend()
    return fig
