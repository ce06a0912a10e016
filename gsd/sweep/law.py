"""The group-size law measured in training (:ref:`theory-law`, issue 6).

For the paper's model — one logit per prompt, GRPO with the population std, plain SGD with
learning rate η, every prompt every step — a training step moves logit j by exactly
η·σ_j, σ_j = sqrt(k(G−k))/G for a group with k right answers (:ref:`theory-update`: the logit score
contrast is 1).  Dividing by the large-group update η·sqrt(p_j(1−p_j)) at the p before the step
gives a per-prompt *empirical fidelity*

::

    r_j = |Δz_j| / (η · sqrt(p_j(1−p_j))),      E[r_j | p_j] = φ(p_j, G) exactly,

so the mean of r over prompts (and steps) of a training run is an unbiased measurement of the
mean exact fidelity φ(p, G) over the same prompts, and can be set against the law
1 − 1/(8Gp(1−p)) at the same p.

Where the Δz come from.  The simulator's ledger keeps per-step sums by decile of *initial* p,
not per-prompt updates, so this module reads them from checkpoints: a run of ``steps = t``
ends with a checkpoint holding the logits after t steps (and the initial logits), and because
a run's random streams do not depend on ``steps``, runs with ``steps = t`` and ``t + 1`` (same
everything else) hold two consecutive states of one trajectory.
The shipped grid ``law_in_training`` therefore varies ``steps`` over pairs (1 alone gives the
first step).  Each measured Δz/η is checked to be one of the possible values sqrt(k(G−k))/G —
the proof that the two checkpoints are consecutive.

What the ledger adds.  Every run's ledger also has, per step, ``grad_mass`` (Σ_j ``|Δz_j|``/η here)
and ``grad_limit`` = Σ_j sqrt(p_j(1−p_j)) at the p before the step (and ``grad_law``, the law's
Σ_j sqrt(p_j(1−p_j))·(1 − 1/(8Gp_j(1−p_j)))), so grad_mass / grad_limit is the step's
*mass-weighted* fidelity — for every step of a run, not only the steps a checkpoint pair
brackets.  It is kept beside the pairs, not instead of them: a ledger has sums (by decile of
*initial* p), so it cannot give the per-prompt (unweighted) means, their standard errors from
the spread of r_j, the table by bin of the p *before* the step, or the lattice check — the
pairs can.  :func:`ledger_fidelity` reads it (``LawResult.by_step``); at the steps the pairs
measure, the two agree to rounding (the tests check it).

:func:`law_in_training` turns a finished sweep into tidy tables (by difficulty mix and G, by
bin of p, and by step from the ledgers); :func:`law_figure` draws them; :func:`run_law_sweep`
runs the grid.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.update import fidelity, fidelity_law
from ..io.atomic import entry_path
from ..plotstyle import checkout_root, fast_mode, figures_dir, new_figure, save_figure, styled
from ..resources import config_file
from ..validation import InputError
from .engine import load_results, run_sweep
from .grid import Grid, load_grid

__all__ = [
    "LawResult",
    "law_grid",
    "run_law_sweep",
    "step_updates",
    "ledger_fidelity",
    "law_in_training",
    "law_figure",
    "save_law_figure",
    "default_grid_path",
    "default_sweep_dir",
    "default_figure_path",
    "fast_mode",
    "P_BINS",
]

#: Bins of the p before the step for the by-bin table.
P_BINS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
#: Config values the exact relation |Δz| = η·σ needs (key -> allowed value).
REQUIRED_CONFIG = {
    "method": "grpo",
    "policy": "tabular",
    "optimizer": "sgd",
    "momentum": 0.0,
    "ppo_epochs": 1,
    "clip": False,
    "kl_coef": 0.0,
    "verifier_noise": 0.0,
    "ddof": 0,
    "eps": 0.0,
    "batch_size": 0,
}
_LATTICE_TOL = 1e-6


# ------------------------------------------------------------------------------ locations
def default_grid_path() -> Path:
    """The shipped grid ``law_in_training`` (:func:`gsd.resources.config_file`)."""
    return config_file("law_in_training", what="grid file")


def default_sweep_dir(fast: bool | None = None) -> Path:
    """$GSD_SWEEPS_DIR, else the checkout's ``sweeps/`` (git-ignored), else ./sweeps; then
    ``law_in_training`` (``law_in_training_fast`` for the fast grid)."""
    env = os.environ.get("GSD_SWEEPS_DIR")
    root = checkout_root()
    base = Path(env) if env else (root / "sweeps" if root else Path("sweeps"))
    return base / ("law_in_training_fast" if fast_mode(fast) else "law_in_training")


def default_figure_path(fast: bool | None = None) -> Path:
    """:func:`gsd.plotstyle.figures_dir` ($GSD_FIGURES_DIR, else the checkout's ``figures/``);
    ``law_in_training.png``, or ``law_in_training_fast.png`` in fast mode (so that a quick run
    never replaces the figure of the full grid)."""
    return figures_dir() / ("law_in_training_fast.png" if fast_mode(fast) else "law_in_training.png")


# ------------------------------------------------------------------------------ the grid
def law_grid(path=None, *, fast: bool | None = None) -> Grid:
    """The law-in-training grid; ``fast`` (default: $GSD_NOTEBOOK_FAST) shrinks it to a few
    seconds of work: 400 prompts, G ∈ {4, 16, 64}, the first step and step 5, one seed."""
    grid = load_grid(path or default_grid_path())
    if not fast_mode(fast):
        return grid
    small = {"group_size": (4, 16, 64), "steps": (1, 5, 6), "seed": (0,)}
    axes = tuple((k, small.get(k, v)) for k, v in grid.axes)
    return replace(
        grid,
        axes=axes,
        base={**grid.base, "n_prompts": 400},
        description=grid.description + " (fast: small grid)",
        text=None,
    )


def run_law_sweep(
    grid=None, out=None, *, fast: bool | None = None, backend=None, workers=None, progress: bool = True, **kwargs
):
    """Run (or finish) the law-in-training sweep; returns the :class:`~gsd.sweep.SweepResult`.

    ``backend`` defaults to ``"local"`` (a process pool), and to ``"serial"`` in fast mode, where
    starting worker processes would cost more than the tiny runs.
    """
    fast = fast_mode(fast)
    backend = backend or ("serial" if fast else "local")
    grid = grid if isinstance(grid, Grid) else law_grid(grid, fast=fast)
    out = Path(out) if out is not None else default_sweep_dir(fast)
    res = run_sweep(grid, out, backend=backend, workers=workers, progress=progress, **kwargs)
    if res.failed:
        raise RuntimeError(
            f"{len(res.failed)} run(s) of the law sweep failed: {sorted(res.failed)[:3]}; "
            f"see {out / 'events.jsonl'} and run it again to retry"
        )
    return res


# ------------------------------------------------------------------------------ measurement
def _run_folder(sweep_dir: Path, row) -> Path:
    """A results row's run folder: ``runs/<name>`` under the sweep, checked (a table naming any
    other path is not this sweep's)."""
    parts = Path(str(row["run_dir"])).parts
    if len(parts) != 2 or parts[0] != "runs":
        raise InputError(
            f"run {row['run']!r}: its run_dir {str(row['run_dir'])!r} in the results table is not "
            "runs/<name> under the sweep folder"
        )
    return entry_path(sweep_dir / "runs", parts[1], what="run")


def _read_run(run_dir: Path):
    from ..simulator.runfolder import read_logits

    with open(run_dir / "config.json", encoding="utf-8") as fh:
        cfg = json.load(fh)
    ckpt = read_logits(run_dir)
    if ckpt["step"] != int(cfg["steps"]):
        raise InputError(f"run {run_dir.name}: its checkpoint is at step {ckpt['step']}, not the final {cfg['steps']}")
    return cfg, ckpt["z_ref"], ckpt["z"]


def check_config(cfg: dict, name: str) -> None:
    """Raise InputError naming the run and the keys where ``cfg`` is not :data:`REQUIRED_CONFIG`."""
    bad = {k: cfg.get(k) for k, v in REQUIRED_CONFIG.items() if cfg.get(k) != v}
    if bad:
        raise InputError(
            f"run {name}: the law measurement needs the paper's tabular GRPO with plain SGD "
            f"({', '.join(f'{k}={v!r}' for k, v in REQUIRED_CONFIG.items())}); this run has {bad}"
        )


def update_ratios(z_before, z_after, lr, G, label):
    """Per-prompt p before the step and empirical fidelity, after checking the σ lattice."""
    p = 1.0 / (1.0 + np.exp(-z_before))
    sigma = (z_after - z_before) / lr
    kk = (sigma * G) ** 2  # = k(G − k), an integer, for an update of one GRPO step
    off = np.abs(kk - np.round(kk))
    if sigma.min() < -_LATTICE_TOL or off.max() > _LATTICE_TOL * G * G:
        raise InputError(
            f"{label}: the logit changes are not single GRPO steps (max distance to the σ lattice "
            f"{off.max():.3g}); are the two checkpoints consecutive states of one run?"
        )
    return p, np.abs(sigma) / np.sqrt(p * (1.0 - p))


def step_updates(sweep_dir, table: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (run family, measured step, prompt): the grid values (``steps`` aside),
    ``step`` (0-based index of the measured step), ``p`` before it and ``ratio`` = r_j."""
    sweep_dir = Path(sweep_dir)
    table = load_results(sweep_dir) if table is None else table
    family_keys, families = _families(table)
    frames = []
    for fam, rows in families:
        runs = {}
        for _, row in rows.iterrows():
            cfg, z0, z = _read_run(_run_folder(sweep_dir, row))
            check_config(cfg, row["run"])
            runs[int(cfg["steps"])] = (cfg, z0, z)
        pairs = []
        if 1 in runs:
            cfg, z0, z1 = runs[1]
            pairs.append((0, z0, z1, cfg))
        for t in sorted(runs):
            if t + 1 in runs:
                pairs.append((t, runs[t][2], runs[t + 1][2], runs[t + 1][0]))
        label = ", ".join(f"{k}={v}" for k, v in zip(family_keys, fam))
        for t, zb, za, cfg in pairs:
            p, ratio = update_ratios(zb, za, float(cfg["lr"]), int(cfg["group_size"]), f"{label}, step {t}")
            frame = pd.DataFrame({"step": t, "p": p, "ratio": ratio})
            for k, v in zip(family_keys, fam):
                frame.insert(len(frame.columns) - 3, k, v)
            frames.append(frame)
    if not frames:
        raise InputError("no measurable steps: the sweep needs steps = 1 or a pair t, t + 1 per family")
    return pd.concat(frames, ignore_index=True)


def _families(table: pd.DataFrame):
    """(family keys without ``steps``, [(family values, rows of the results table)])."""
    if "steps" not in table.columns:
        raise InputError("the law sweep must vary `steps` (pairs t, t+1; 1 gives the first step)")
    if (table["status"] != "complete").any():
        missing = table.loc[table["status"] != "complete", "run"].tolist()
        raise InputError(f"{len(missing)} run(s) are not complete (e.g. {missing[0]}); finish the sweep first")
    cols = list(table.columns)
    keys = cols[cols.index("run") + 1 : cols.index("status")]
    family_keys = [k for k in keys if k != "steps"]
    groups = table.groupby(family_keys, sort=False) if family_keys else [((), table)]
    return family_keys, [(fam if isinstance(fam, tuple) else (fam,), rows) for fam, rows in groups]


def ledger_fidelity(sweep_dir, table: pd.DataFrame | None = None) -> pd.DataFrame:
    """Mass-weighted fidelity of every training step, from the runs' ledgers.

    One row per (family, step) — seeds pooled as sums — with ``runs``, ``mean_p`` before the
    step (mean over the runs), ``measured`` = Σ grad_mass / Σ grad_limit, ``law`` = Σ grad_law /
    Σ grad_limit and ``exact`` = Σ grad_pred / Σ grad_limit (NaN when the runs have no closed
    forms, ``closed_form_every = 0``, as in the shipped grid).  Each family's longest run is read
    (a shorter one repeats its first steps exactly).  Raises ``ValueError`` when the ledgers
    predate the ``grad_limit`` columns."""
    from ..simulator.ledger import read_ledger

    sweep_dir = Path(sweep_dir)
    table = load_results(sweep_dir) if table is None else table
    family_keys, families = _families(table)
    pooled_keys = [k for k in family_keys if k != "seed"]
    frames = []
    for fam, rows in families:
        longest = rows.loc[rows["steps"].astype(int).idxmax()]
        ledger = read_ledger(_run_folder(sweep_dir, longest))
        if "grad_limit" not in ledger.columns:
            raise InputError(
                f"run {longest['run']}: its ledger has no grad_limit column (written by an older gsd); rerun the sweep"
            )
        frame = ledger[["step", "mean_p", "grad_mass", "grad_limit", "grad_law", "grad_pred"]].copy()
        for k, v in zip(family_keys, fam):
            frame[k] = v
        frames.append(frame)
    data = pd.concat(frames, ignore_index=True)
    keys = [*pooled_keys, "step"]
    out = (
        data.groupby(keys, sort=False)
        .agg(
            runs=("step", "size"),
            mean_p=("mean_p", "mean"),
            grad_mass=("grad_mass", "sum"),
            grad_limit=("grad_limit", "sum"),
            grad_law=("grad_law", "sum"),
            grad_pred=("grad_pred", lambda x: x.to_numpy().sum()),  # NaN stays NaN
        )
        .reset_index()
    )
    out["measured"] = out["grad_mass"] / out["grad_limit"]
    out["law"] = out["grad_law"] / out["grad_limit"]
    out["exact"] = out["grad_pred"] / out["grad_limit"]
    return _sorted(out, keys, data)


@dataclass
class LawResult:
    """Tidy tables of the law in training.

    ``by_group``: one row per (mix, measured step, G) — seeds pooled — with the prompt count
    ``n``, ``mean_p`` before the step, ``measured`` = mean r (± ``measured_se``), ``exact`` =
    mean φ(p, G), ``law`` = mean of 1 − 1/(8Gp(1−p)), and the gaps ``measured − exact`` (in
    standard errors: ``z``) and ``law − exact``.  ``by_bin``: the same per (mix, G, bin of p
    before the step), steps and seeds pooled (φ depends on p only).  ``updates``: the
    per-prompt rows they come from.  ``family_keys``: the grid keys other than steps and seed.
    ``by_step``: :func:`ledger_fidelity` — the mass-weighted fidelity of every step from the
    ledgers (empty when the ledgers predate its columns).
    """

    by_group: pd.DataFrame
    by_bin: pd.DataFrame
    updates: pd.DataFrame
    family_keys: list
    by_step: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def group_keys(self) -> list:
        return [k for k in self.family_keys if k != "group_size"] + ["step", "group_size"]

    def summary(self) -> pd.DataFrame:
        """The compact view: mix × step × G with measured / exact / law."""
        cols = [*self.group_keys, "n", "mean_p", "measured", "measured_se", "exact", "law", "z"]
        return self.by_group[cols]

    def pivot(self, value: str = "measured") -> pd.DataFrame:
        """One column per G (rows: mix × step) of ``value``."""
        keys = [k for k in self.group_keys if k != "group_size"]
        return self.by_group.pivot(index=keys, columns="group_size", values=value).loc[
            list(dict.fromkeys(self.by_group[keys].itertuples(index=False, name=None)))
        ]


def _aggregate(df: pd.DataFrame, keys: list) -> pd.DataFrame:
    g = df.groupby(keys, sort=False, observed=True)
    out = g.agg(
        n=("ratio", "size"),
        mean_p=("p", "mean"),
        measured=("ratio", "mean"),
        sd=("ratio", "std"),
        exact=("phi", "mean"),
        law=("law", "mean"),
    ).reset_index()
    out["measured_se"] = out["sd"] / np.sqrt(out["n"])
    out = out.drop(columns="sd")
    out["measured_minus_exact"] = out["measured"] - out["exact"]
    out["z"] = out["measured_minus_exact"] / out["measured_se"]
    out["law_minus_exact"] = out["law"] - out["exact"]
    return out


def law_in_training(sweep_dir, *, bins=P_BINS, table: pd.DataFrame | None = None) -> LawResult:
    """Measured per-prompt update attenuation against exact φ and the law, from a law sweep."""
    table = load_results(sweep_dir) if table is None else table
    upd = step_updates(sweep_dir, table)
    G = upd["group_size"].to_numpy()
    upd["phi"] = fidelity(upd["p"].to_numpy(), G)
    upd["law"] = fidelity_law(upd["p"].to_numpy(), G, extrapolate=True)  # the formula, as documented above
    family = [c for c in upd.columns if c not in ("step", "p", "ratio", "phi", "law", "seed")]
    if "group_size" not in family:
        raise InputError("the law sweep needs group_size among its grid keys")
    result = LawResult(by_group=pd.DataFrame(), by_bin=pd.DataFrame(), updates=upd, family_keys=family)
    keys = result.group_keys
    result.by_group = _sorted(_aggregate(upd, keys), keys, upd)
    edges = np.asarray(bins, dtype=np.float64)
    idx = np.clip(np.searchsorted(edges, upd["p"].to_numpy(), side="right") - 1, 0, len(edges) - 2)
    upd["p_lo"], upd["p_hi"] = edges[idx], edges[idx + 1]
    bin_keys = [k for k in keys if k != "step"]
    by_bin = _aggregate(upd, [*bin_keys, "p_lo", "p_hi"])
    result.by_bin = _sorted(by_bin, [*bin_keys, "p_lo"], upd)
    try:
        result.by_step = ledger_fidelity(sweep_dir, table)
    except ValueError:  # ledgers of an older gsd, without grad_limit: the pair tables stand alone
        result.by_step = pd.DataFrame()
    return result


def _sorted(df: pd.DataFrame, keys: list, reference: pd.DataFrame) -> pd.DataFrame:
    """Rows sorted by ``keys``: the non-numeric keys (mix labels) in grid order, numbers ascending."""
    cols, tmp = [], df.copy()
    for k in keys:
        if pd.api.types.is_numeric_dtype(df[k]):
            cols.append(k)
        else:
            order = {v: i for i, v in enumerate(dict.fromkeys(reference[k]))}
            tmp[f"_rank_{k}"] = df[k].map(order)
            cols.append(f"_rank_{k}")
    tmp = tmp.sort_values(cols, kind="stable")
    return tmp.drop(columns=[c for c in tmp.columns if c.startswith("_rank_")]).reset_index(drop=True)


# ------------------------------------------------------------------------------ figure
@styled
def law_figure(result: LawResult, *, mix_key: str | None = None):
    """Left panels, one per difficulty mix: fidelity against G at each measured step of
    training — measured (points, ±2 SE), exact φ (solid line), the law (dashed), one colour per
    step.  Right panel: every (mix, G, p-bin) cell, measured against exact φ (on the diagonal
    when φ is right) and the law against exact φ.  Drawn in the package's figure style
    (:mod:`gsd.plotstyle`)."""
    import matplotlib

    bg = result.by_group
    keys = [k for k in result.family_keys if k != "group_size"]
    mix_key = mix_key or (keys[0] if keys else None)
    mixes = list(dict.fromkeys(bg[mix_key])) if mix_key else [None]
    steps = sorted(bg["step"].unique())
    fig, axes = new_figure(len(mixes) + 1, width=3.7 * (len(mixes) + 1), height=3.9)
    axes = np.atleast_1d(axes)
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, mix in zip(axes[:-1], mixes):
        lows = []
        for i, step in enumerate(steps):
            rows = bg[bg["step"] == step] if mix is None else bg[(bg[mix_key] == mix) & (bg["step"] == step)]
            rows = rows.sort_values("group_size")
            if rows.empty:
                continue
            c = colors[i % len(colors)]
            G = rows["group_size"].to_numpy()
            ax.plot(G, rows["exact"], "-", color=c, lw=1.3)
            ax.plot(G, rows["law"], "--", color=c, lw=1.1, alpha=0.8)
            ax.errorbar(
                G,
                rows["measured"],
                yerr=2 * rows["measured_se"],
                fmt="o",
                color=c,
                ms=4,
                capsize=2,
                label=f"step {step}: mean p {rows['mean_p'].mean():.2f}",
            )
            lows.append(min(rows["measured"].min(), rows["exact"].min(), rows["law"].min()))
        ax.set_xscale("log", base=2)
        Gs = sorted(bg["group_size"].unique())
        ax.set_xticks(Gs, [str(int(g)) for g in Gs])
        ax.set_ylim(max(min(lows) - 0.05, -0.6), 1.02)
        ax.axhline(1.0, color="0.8", lw=0.8)
        ax.set_title(f"{mix} mix" if mix is not None else "all prompts", fontsize=10)
        ax.set_xlabel("group size G")
        ax.legend(fontsize=7, loc="lower right", title="measured (±2 SE)", title_fontsize=7)
    axes[0].set_ylabel("mean |update| / large-G update")
    axes[0].text(
        0.02,
        0.98,
        "solid: exact φ(p, G)\ndashed: law 1 − 1/(8Gp(1−p))",
        transform=axes[0].transAxes,
        va="top",
        fontsize=7,
    )
    ax = axes[-1]
    bb = result.by_bin[result.by_bin["n"] >= 100]
    ax.plot([0, 1], [0, 1], color="0.6", lw=1)
    ax.plot(bb["exact"], bb["law"], "x", ms=4, color=colors[3], label="law")
    ax.errorbar(
        bb["exact"],
        bb["measured"],
        yerr=2 * bb["measured_se"],
        fmt="o",
        ms=3,
        color="k",
        alpha=0.8,
        label="measured (±2 SE)",
    )
    ax.set_xlim(0, 1.02)
    ax.set_ylim(-0.6, 1.02)
    ax.set_xlabel("exact φ(p, G)")
    ax.set_ylabel("measured, or law")
    ax.set_title("each mix × G × bin of p (≥ 100 prompt-steps)", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(
        "The group-size law in training (tabular GRPO, lr 0.5): per-prompt logit update ÷ lr·sqrt(p(1−p)) "
        "at the p before the step",
        fontsize=10,
    )
    return fig


def save_law_figure(result: LawResult, path=None) -> Path:
    """Draw :func:`law_figure` and write it with :func:`gsd.plotstyle.save_figure` (atomic PNG,
    no timestamp); ``path`` defaults to :func:`default_figure_path`.  Returns the path."""
    return save_figure(law_figure(result), path if path is not None else default_figure_path())
