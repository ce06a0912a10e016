"""The seed's illustrations and the loss-geometry analyses as PNG figures (:ref:`theory-losses`).

:func:`make_all` writes every figure to a folder and returns their paths; each ``fig_*``
function returns one matplotlib Figure built from the library functions (no number here is
typed in by hand except the seed's inputs). :func:`seed_examples` lists the seed's worked
numbers beside the values the package computes.

Drawn in the package's one figure style (:mod:`gsd.plotstyle`: no pyplot state, no LaTeX, one
palette) and written with :func:`gsd.plotstyle.save_figure` (atomic, small PNGs).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ..extras import require_torch

torch = require_torch("gsd.losses")

from ..plotstyle import COLORS as _PALETTE
from ..plotstyle import figures_dir, new_figure, save_figure, styled
from . import aggregation, dpo, kl, surrogate, temperature

__all__ = [
    "SEED",
    "seed_examples",
    "fig_temperature",
    "fig_forward_reverse",
    "fig_full_vocab_vs_sampled",
    "fig_dpo_cases",
    "fig_group_advantages",
    "fig_clipped_surrogate",
    "fig_clip_variants",
    "fig_t2_scaling",
    "fig_kl_estimators",
    "fig_length_weights",
    "make_all",
]

#: The seed's inputs (the worked examples of the project's source note on these objectives;
#: see docs/theory.md, section Loss geometry), the only numbers this module takes as given.
SEED: dict[str, Any] = {
    "logits": (2.0, 0.0),
    "tokens2": ("cat", "dog"),
    "teacher2": (0.8, 0.2),
    "student2": (0.4, 0.6),
    "tokens3": ("cat", "dog", "fox"),
    "student3": (0.5, 0.2, 0.3),
    "teacher3": (0.6, 0.3, 0.1),
    "dpo_cases": ((2.0, -1.0), (-1.0, -4.0)),
    "group_answers": ("3", "4", "4", "5"),
    "group_rewards": (0.0, 1.0, 1.0, 0.0),
    "eps": 0.2,
    "clip_points": ((1.0, 1.5), (-1.0, 0.5)),  # (A, rho)
}

#: What each colour stands for in these figures, from the package's one palette.
COLORS = {
    "teacher": _PALETTE["grpo"],
    "student": _PALETTE["accent"],
    "good": _PALETTE["dapo"],
    "bad": _PALETTE["dr_grpo"],
    "neutral": _PALETTE["extra"],
    "grey": _PALETTE["law"],
    "k1": _PALETTE["grpo"],
    "k2": _PALETTE["accent"],
    "k3": _PALETTE["dapo"],
}


def _t(x):
    return torch.tensor(x, dtype=torch.float64)


def _label_bars(ax, bars, fmt="{:.2f}", offset=0.02):
    for b in bars:
        h = b.get_height()
        y = h + offset if h >= 0 else h - offset
        ax.text(
            b.get_x() + b.get_width() / 2, y, fmt.format(h), ha="center", va="bottom" if h >= 0 else "top", fontsize=8
        )


def _group_advantages(rewards):
    # The lead's core function when present; otherwise the same GRPO formula (ddof 0, eps 0).
    try:
        from gsd.core.groups import advantages
    except ImportError:  # pragma: no cover - only before gsd.core.groups exists
        r = np.asarray(rewards, dtype=float)
        sd = r.std()
        return (r - r.mean()) / sd if sd > 0 else np.zeros_like(r)
    return np.asarray(advantages(np.asarray(rewards, dtype=float), "grpo", ddof=0, eps=0.0))


# --------------------------------------------------------------------------- seed illustrations
@styled
def fig_temperature():
    """Bars of softmax(logits / T) for the seed's logits (2, 0) at T = 1 and T = 2."""
    fig, axes = new_figure(2, width=6.4, height=3.0, sharey=True)
    for ax, T in zip(axes, (1.0, 2.0)):
        q = temperature.softmax_t(_t(SEED["logits"]), T).numpy()
        bars = ax.bar(SEED["tokens2"], q, color=[COLORS["teacher"], COLORS["student"]], width=0.6)
        _label_bars(ax, bars)
        ax.set_ylim(0, 1.08)
        ax.set_title(f"T = {T:g}")
        ax.grid(axis="x", visible=False)
    axes[0].set_ylabel("probability")
    fig.suptitle("Softmax with temperature: logits (2, 0)", fontsize=10)
    return fig


@styled
def fig_forward_reverse():
    """Probabilities of teacher and student, and the weights forward and reverse KL put on each token."""
    t, s = _t(SEED["teacher2"]), _t(SEED["student2"])
    fwd = kl.forward_kl_terms(t, s)
    rev = kl.reverse_kl_terms(t, s)
    x = np.arange(len(SEED["tokens2"]))
    fig, axes = new_figure(2, width=7.0, height=3.0, sharey=True)
    for ax, terms, who, color, name in (
        (axes[0], fwd, "teacher p", COLORS["teacher"], "forward KL(p ‖ q)"),
        (axes[1], rev, "student q", COLORS["student"], "reverse KL(q ‖ p)"),
    ):
        bars = ax.bar(x, terms.weight.numpy(), color=color, width=0.6)
        _label_bars(ax, bars)
        ax.set_xticks(x, SEED["tokens2"])
        ax.set_ylim(0, 1.0)
        ax.set_title(f"{name}\nweights = {who}; KL = {float(terms.contribution.sum()):.3f}")
        ax.grid(axis="x", visible=False)
    axes[0].set_ylabel("weight on log-ratio")
    fig.suptitle("Teacher (0.8, 0.2), student (0.4, 0.6): who weights the comparison", fontsize=10)
    return fig


@styled
def fig_full_vocab_vs_sampled():
    """Full-vocabulary d_t as a sum of per-token terms vs the one-sampled-token log-ratio."""
    q, p = _t(SEED["student3"]), _t(SEED["teacher3"])
    terms = kl.reverse_kl_terms(p, q)
    d_t = float(kl.reverse_kl_per_token(q, p))
    names = SEED["tokens3"]
    x = np.arange(len(names))
    one_token = kl.sampled_log_ratio(q.expand(3, 3), p.expand(3, 3), torch.arange(3)).numpy()
    fig, axes = new_figure(2, width=7.2, height=3.0, sharey=True)
    ax = axes[0]
    bars = ax.bar(x, terms.contribution.numpy(), color=COLORS["student"], width=0.6)
    _label_bars(ax, bars, "{:+.3f}")
    ax.axhline(d_t, color=COLORS["teacher"], ls="--", lw=1)
    ax.text(-0.35, d_t + 0.03, f"d_t = {d_t:.3f}", color=COLORS["teacher"], va="bottom", ha="left", fontsize=8)
    ax.set_xticks(x, names)
    ax.set_title("full vocabulary: q(v) log(q(v)/p(v))")
    ax.set_ylabel("nats")
    ax = axes[1]
    colors = [COLORS["bad"] if v < 0 else COLORS["good"] for v in one_token]
    bars = ax.bar(x, one_token, color=colors, width=0.6)
    _label_bars(ax, bars, "{:+.3f}")
    ax.axhline(d_t, color=COLORS["teacher"], ls="--", lw=1)
    ax.set_xticks(x, [f"sampled {n}\n(q = {v:.1f})" for n, v in zip(names, SEED["student3"])])
    ax.set_title("one sampled token: log(q(y)/p(y))")
    for a in axes:
        a.axhline(0, color="black", lw=0.6)
        a.grid(axis="x", visible=False)
    axes[0].set_ylim(-0.6, 1.3)
    fig.suptitle(
        "Student (0.5, 0.2, 0.3) vs teacher (0.6, 0.3, 0.1); the q-average of the right panel is d_t", fontsize=9
    )
    return fig


@styled
def fig_dpo_cases(beta: float = 1.0):
    """The seed's two DPO pairs: same margin Δ = 3 and loss, only one keeps the preferred answer up."""
    gw = _t([c[0] for c in SEED["dpo_cases"]])
    gl = _t([c[1] for c in SEED["dpo_cases"]])
    table = dpo.dpo_diagnostics(gw, gl, beta=beta)
    x = np.arange(len(table))
    fig, ax = new_figure(width=6.0, height=3.2)
    b1 = ax.bar(x - 0.18, table["gain_chosen"], width=0.34, color=COLORS["good"], label="preferred y_w: g(y_w)")
    b2 = ax.bar(x + 0.18, table["gain_rejected"], width=0.34, color=COLORS["bad"], label="rejected y_l: g(y_l)")
    _label_bars(ax, b1, "{:+.0f}", 0.1)
    _label_bars(ax, b2, "{:+.0f}", 0.1)
    ax.axhline(0, color="black", lw=0.8)
    labels = []
    for i, row in table.iterrows():
        note = "preferred got rarer (flagged)" if row["flag"] else "preferred got likelier"
        labels.append(f"case {'AB'[i]}: Δ = {row['margin']:.0f}, loss = {row['loss']:.3f}\n{note}")
    ax.set_xticks(x, labels)
    ax.set_ylabel("change in log-probability vs reference")
    ax.set_ylim(-5, 3)
    ax.legend(loc="lower left")
    ax.grid(axis="x", visible=False)
    ax.set_title(f"DPO sees only Δ = g(y_w) − g(y_l)  (β = {beta:g})")
    return fig


@styled
def fig_group_advantages():
    """GRPO on "2 + 2 ?": four answers, verifier rewards (0, 1, 1, 0), advantages (−1, 1, 1, −1)."""
    r = np.asarray(SEED["group_rewards"])
    a = _group_advantages(r)
    x = np.arange(len(r))
    fig, axes = new_figure(2, width=6.8, height=3.0)
    axes[0].bar(x, r, color=[COLORS["good"] if v else COLORS["bad"] for v in r], width=0.6)
    axes[0].axhline(r.mean(), color=COLORS["grey"], ls="--", lw=1)
    axes[0].text(3.4, r.mean(), f"mean {r.mean():.1f}", ha="right", va="bottom", fontsize=8)
    axes[0].set_title("rewards (verifier: 1 if the answer is 4)")
    axes[0].set_ylim(0, 1.2)
    bars = axes[1].bar(x, a, color=[COLORS["good"] if v > 0 else COLORS["bad"] for v in a], width=0.6)
    _label_bars(axes[1], bars, "{:+.0f}", 0.05)
    axes[1].axhline(0, color="black", lw=0.8)
    axes[1].set_ylim(-1.4, 1.4)
    axes[1].set_title(f"advantages (r − mean) / std, std = {r.std():.1f}")
    for ax in axes:
        ax.set_xticks(x, [f"answer {s}" for s in SEED["group_answers"]])
        ax.grid(axis="x", visible=False)
    return fig


def _shade_flat(ax, advantage, **kw):
    lo, hi = ax.get_xlim()
    for a, b in surrogate.flat_regions(advantage, **kw):
        ax.axvspan(max(a, lo), min(b, hi), color=COLORS["grey"], alpha=0.15, lw=0)


@styled
def fig_clipped_surrogate():
    """C(ρ) for A = +1 and A = −1 with ε = 0.2; shaded: zero-gradient (flat) regions; dots: seed points."""
    eps = SEED["eps"]
    rho = torch.linspace(0.0, 2.0, 401, dtype=torch.float64)
    fig, axes = new_figure(2, width=7.0, height=3.0)
    for ax, (A, r0) in zip(axes, SEED["clip_points"]):
        c = surrogate.clipped_surrogate(rho, A, eps_low=eps)
        ax.plot(rho, rho * A, color=COLORS["grey"], ls=":", lw=1, label="ρA (unclipped)")
        ax.plot(rho, c, color=COLORS["teacher"], lw=2, label="C = min(ρA, clip(ρ)A)")
        ax.set_xlim(0, 2)
        _shade_flat(ax, A, eps_low=eps)
        c0 = float(surrogate.clipped_surrogate(r0, A, eps_low=eps))
        ax.plot([r0], [c0], "o", color=COLORS["bad"], ms=5)
        ax.annotate(
            f"ρ = {r0:g} → C = {c0:g}".replace("-", "−"),
            (r0, c0),
            textcoords="offset points",
            xytext=(6, -14) if A > 0 else (-30, -16),
            fontsize=8,
        )
        ax.set_title(f"A = {A:+g}, ε = {eps:g}".replace("-", "−"))
        ax.set_xlabel("ratio ρ = πθ / π_old")
        ax.axhline(0, color="black", lw=0.6)
    axes[0].set_ylabel("objective (maximise)")
    axes[0].legend(loc="upper left")
    fig.suptitle("Clipped surrogate; grey = flat, zero gradient", fontsize=10)
    return fig


@styled
def fig_clip_variants():
    """Clip-higher (ε_high = 0.28 vs 0.2) for A = +1 and the dual clip (c = 3) for A = −1."""
    rho = torch.linspace(0.0, 4.0, 801, dtype=torch.float64)
    fig, axes = new_figure(2, width=7.0, height=3.0)
    ax = axes[0]
    ax.plot(
        rho,
        surrogate.clipped_surrogate(rho, 1.0, eps_low=0.2),
        color=COLORS["teacher"],
        lw=2,
        label="ε_low = ε_high = 0.2",
    )
    ax.plot(
        rho,
        surrogate.clipped_surrogate(rho, 1.0, eps_low=0.2, eps_high=0.28),
        color=COLORS["student"],
        lw=1.5,
        ls="--",
        label="clip-higher ε_high = 0.28",
    )
    ax.set_xlim(0, 2)
    ax.set_title("A = +1: clip-higher leaves room to grow")
    ax.legend(loc="upper left")
    ax = axes[1]
    ax.plot(rho, rho * -1.0, color=COLORS["grey"], ls=":", lw=1, label="ρA")
    ax.plot(
        rho,
        surrogate.clipped_surrogate(rho, -1.0, eps_low=0.2),
        color=COLORS["teacher"],
        lw=2,
        label="standard clip",
    )
    ax.plot(
        rho,
        surrogate.clipped_surrogate(rho, -1.0, eps_low=0.2, dual_clip=3.0),
        color=COLORS["student"],
        lw=1.5,
        ls="--",
        label="dual clip c = 3",
    )
    ax.set_xlim(0, 4)
    _shade_flat(ax, -1.0, eps_low=0.2, dual_clip=3.0)
    ax.set_title("A = −1: dual clip floors the loss at cA")
    ax.legend(loc="lower left")
    for a in axes:
        a.set_xlabel("ratio ρ")
        a.axhline(0, color="black", lw=0.6)
    axes[0].set_ylabel("objective (maximise)")
    return fig


# --------------------------------------------------------------------------- analyses
@styled
def fig_t2_scaling():
    """Soft-term gradient norm vs T, without and with the T² factor, and the large-T limit."""
    # Zero-mean logits of a small vocabulary (the teacher a sharpened copy plus a tilt).
    z = _t([1.5, 0.5, -0.5, -1.5])
    v = _t([2.5, -0.5, 0.2, -2.2])
    temps = [2.0**k for k in np.linspace(0, 7, 29)]
    table = temperature.temperature_table(z, v, temps)
    fig, ax = new_figure(width=5.6, height=3.4)
    ax.loglog(table["T"], table["grad_norm"], color=COLORS["bad"], lw=2, label="‖∂ KL / ∂z‖  (no T²)  ~ 1/T²")
    ax.loglog(table["T"], table["scaled_grad_norm"], color=COLORS["teacher"], lw=2, label="‖∂ T²·KL / ∂z‖")
    ax.axhline(table["limit_norm"].iloc[0], color=COLORS["grey"], ls="--", lw=1, label="limit ‖(z − v)/N‖")
    ax.set_xlabel("temperature T")
    ax.set_ylabel("gradient norm w.r.t. student logits")
    ax.set_title("Why T²: the scaled gradient tends to (z − v)/N")
    ax.legend(loc="lower left")
    return fig


@styled
def fig_kl_estimators():
    """Exact mean and spread of k1, k2, k3 (tokens from q) as p moves away from q."""
    q = _t(SEED["student3"])
    direction = _t([1.0, 0.0, -1.0])
    sweep = kl.estimator_sweep(q, direction)
    fig, axes = new_figure(2, width=7.2, height=3.0)
    ax = axes[0]
    ax.plot(sweep["kl_qp"], sweep["kl_qp"], color="black", lw=1, label="KL(q ‖ p) (target)")
    ax.plot(sweep["kl_qp"], sweep["kl_pq"], color=COLORS["grey"], lw=1, ls=":", label="KL(p ‖ q)")
    for k, ls in (("k1", "-"), ("k2", "--"), ("k3", "-.")):
        ax.plot(sweep["kl_qp"], sweep[f"mean_{k}"], color=COLORS[k], ls=ls, lw=1.8, label=f"E_q[{k}]")
    ax.set_xlabel("KL(q ‖ p)")
    ax.set_ylabel("expected estimate")
    ax.set_title("bias: k1, k3 on the diagonal, k2 off it")
    ax.legend(loc="upper left")
    ax = axes[1]
    for k, ls in (("k1", "-"), ("k2", "--"), ("k3", "-.")):
        ax.plot(sweep["kl_qp"], sweep[f"std_{k}"], color=COLORS[k], ls=ls, lw=1.8, label=k)
    ax.set_xlabel("KL(q ‖ p)")
    ax.set_ylabel("standard deviation of one sample")
    ax.set_title("spread per sampled token")
    ax.legend(loc="upper left")
    fig.suptitle("Sampled KL estimators, q = (0.5, 0.2, 0.3), p = softmax(log q + s·(1, 0, −1))", fontsize=9)
    return fig


@styled
def fig_length_weights():
    """Per-token and per-response weight of a response of length n next to responses of 50/100/200/400 tokens."""
    others = [50.0, 100.0, 200.0, 400.0]
    ns = np.arange(1, 501, dtype=float)
    lengths = _t([[n, *others] for n in ns])
    T = 512.0
    modes = (
        ("token-mean", {}, "token-mean (TRL bnpo/dapo, verl token-mean)"),
        ("seq-mean-token-mean", {}, "seq-mean-token-mean (TRL grpo)"),
        ("seq-mean-token-sum-norm", {"norm": T}, f"constant L = {T:.0f} (TRL dr_grpo)"),
    )
    colors = (COLORS["teacher"], COLORS["bad"], COLORS["good"])
    fig, axes = new_figure(2, width=7.2, height=3.0)
    for (mode, kw, label), color in zip(modes, colors):
        w = aggregation.per_token_weight(lengths, mode, **kw)[:, 0].numpy()
        axes[0].loglog(ns, w, color=color, lw=2, label=label)
        axes[1].plot(ns, w * ns, color=color, lw=2, label=label)
    axes[0].set_xlabel("length n of the response")
    axes[0].set_ylabel("weight of each of its tokens")
    axes[0].set_title("per token")
    axes[1].set_xlabel("length n of the response")
    axes[1].set_ylabel("n × weight (whole response)")
    axes[1].set_title("per response")
    axes[1].legend(loc="upper left")
    fig.suptitle("Length bias of loss aggregation (batch: this response + lengths 50, 100, 200, 400)", fontsize=9)
    return fig


#: Each figure's file name and the function that draws it, in the order make_all writes them.
FIGURES = {
    "loss_temperature.png": fig_temperature,
    "loss_forward_reverse.png": fig_forward_reverse,
    "loss_full_vocab_vs_sampled.png": fig_full_vocab_vs_sampled,
    "loss_dpo_cases.png": fig_dpo_cases,
    "loss_group_advantages.png": fig_group_advantages,
    "loss_clipped_surrogate.png": fig_clipped_surrogate,
    "loss_clip_variants.png": fig_clip_variants,
    "loss_t2_scaling.png": fig_t2_scaling,
    "loss_kl_estimators.png": fig_kl_estimators,
    "loss_length_weights.png": fig_length_weights,
}


def make_all(outdir=None) -> list[Path]:
    """Write every loss-geometry figure as ``loss_*.png`` into ``outdir`` (created if needed).

    outdir defaults to :func:`gsd.plotstyle.figures_dir` ($GSD_FIGURES_DIR, else the checkout's
    ``figures/``). Each file is written atomically. Returns the written paths, in a fixed order.
    """
    out = Path(outdir) if outdir is not None else figures_dir()
    paths = []
    for name, build in FIGURES.items():
        paths.append(save_figure(build(), out / name))
    return paths


def seed_examples():
    """The seed's worked numbers next to the package's values (pandas DataFrame).

    Columns: ``quantity``, ``computed``, ``seed`` (the rounded value the seed prints).
    """
    import pandas as pd

    q3, p3 = _t(SEED["student3"]), _t(SEED["teacher3"])
    soft1 = temperature.softmax_t(_t(SEED["logits"]), 1.0)
    soft2 = temperature.softmax_t(_t(SEED["logits"]), 2.0)
    gw, gl = SEED["dpo_cases"][0]
    gw2, gl2 = SEED["dpo_cases"][1]
    flags = dpo.dpo_flags(_t([gw, gw2]), _t([gl, gl2]))
    adv = _group_advantages(SEED["group_rewards"])
    (a1, r1), (a2, r2) = SEED["clip_points"]
    rows = [
        ("softmax((2, 0) / 1)[cat]", float(soft1[0]), 0.88),
        ("softmax((2, 0) / 1)[dog]", float(soft1[1]), 0.12),
        ("softmax((2, 0) / 2)[cat]", float(soft2[0]), 0.73),
        ("softmax((2, 0) / 2)[dog]", float(soft2[1]), 0.27),
        ("d_t = KL(q ‖ p), full vocabulary", float(kl.reverse_kl_per_token(q3, p3)), 0.157),
        ("log(q/p) at sampled cat", float(kl.sampled_log_ratio(q3[None], p3[None], torch.tensor([0]))), -0.182),
        ("DPO margin, case A (+2, −1)", gw - gl, 3.0),
        ("DPO margin, case B (−1, −4)", gw2 - gl2, 3.0),
        ("DPO flag, case A", float(flags[0]), 0.0),
        ("DPO flag, case B", float(flags[1]), 1.0),
        ("GRPO advantages (0,1,1,0) [first]", float(adv[0]), -1.0),
        ("GRPO advantages (0,1,1,0) [second]", float(adv[1]), 1.0),
        ("clipped C, A = 1, ρ = 1.5, ε = 0.2", float(surrogate.clipped_surrogate(r1, a1, eps_low=SEED["eps"])), 1.2),
        ("clipped C, A = −1, ρ = 0.5, ε = 0.2", float(surrogate.clipped_surrogate(r2, a2, eps_low=SEED["eps"])), -0.8),
    ]
    df = pd.DataFrame(rows, columns=["quantity", "computed", "seed"])
    df["agrees"] = [math.isclose(c, s, abs_tol=0.005) for c, s in zip(df["computed"], df["seed"])]
    return df
