"""The ``gsd transformer-train`` experiment: the three methods of :data:`~.training.METHODS` trained
by TRL from one initial model per seed, ``gsd diagnose`` calibrated on their logs, the hardest
quarter of the prompts followed, and the update measured against each group's σ; its table and figure.
"""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...extras import require_trl
from .calibration import calibrate
from .sigma import sigma_update
from .task import build_task
from .training import METHODS, train_silent

#: Sizes of :func:`run_training`: (prompts, steps, groups of each prompt per step, seeds, σ draws).
TRAIN_RUN_SIZES = {"full": (32, 30, 4, 3, 100), "fast": (16, 8, 2, 1, 10)}


def run_training(*, fast: bool = False, G: int = 8, lr: float = 1e-3, log=None, out=None) -> dict:
    """The three methods of :data:`~.training.METHODS` trained by TRL from one initial model per seed (its
    own pretraining and TRL's seed), equal generations per step; each writes TRL's completions
    log, which :func:`calibrate` diagnoses; then :func:`sigma_update` on seed 0's initial model.

    ``out``: a new folder that keeps each training's TRL logs, ``out/seed{seed}/{method}/`` (TRL's
    ``output_dir``: ``completions/`` and ``trainer_state.json``), for ``gsd diagnose``; by default
    they go to a temporary folder.

    Returns ``runs`` (per seed, per method: :func:`train_silent`'s result with ``calibration``),
    ``hardest`` (per seed, the prompts of the lowest quarter of initial exact p), ``quartile``
    (per method and seed, the mean exact p of those prompts per step, the final after the last
    step), and ``sigma``.
    """
    import contextlib
    import copy
    import tempfile
    from pathlib import Path

    require_trl("TRL's trainings of a tiny transformer")
    n_prompts, steps, copies, seeds, draws = TRAIN_RUN_SIZES["fast" if fast else "full"]
    if out is not None:
        from ...io.atomic import make_folder

        keep = Path(out)
        if keep.exists() and (not keep.is_dir() or any(keep.iterdir())):
            raise InputError(
                f"out {str(out)!r} exists and is not an empty folder: give a new one (TRL's logs of "
                "another run there would be mixed with these)"
            )
        make_folder(keep)
    out_folder, out = (
        out,
        {
            "G": G,
            "lr": lr,
            "n_prompts": n_prompts,
            "steps": steps,
            "copies": copies,
            "runs": {},
            "hardest": {},
            "quartile": {m: {} for m in METHODS},
        },
    )
    for seed in range(seeds):
        task = build_task(n_prompts, seed=seed)
        initial = copy.deepcopy(task)
        p0 = task.solve_rates()
        hard = np.argsort(p0, kind="stable")[: n_prompts // 4]
        out["hardest"][seed] = hard.tolist()
        out["runs"][seed] = {}
        for method in METHODS:
            where = (
                tempfile.TemporaryDirectory()
                if out_folder is None
                else contextlib.nullcontext(str(Path(out_folder) / f"seed{seed}" / method))
            )
            with where as tmp:
                t = train_silent(
                    copy.deepcopy(initial),
                    method,
                    G=G,
                    copies=copies,
                    steps=steps,
                    lr=lr,
                    seed=seed,
                    completions_dir=tmp,
                )
                t["calibration"] = calibrate(t, tmp)
                t["calibration_auto"] = calibrate(t, tmp, half_life="auto")  # gsd diagnose --half-life auto
            out["runs"][seed][method] = t
            traj = [float(np.mean(np.asarray(s["p"])[hard])) for s in t["steps"]] + [
                float(np.mean(np.asarray(t["p_final"])[hard]))
            ]
            out["quartile"][method][seed] = traj
            if log:
                c = t["calibration"]
                log(
                    f"seed {seed} {method}: hardest quarter {traj[0]:.3f} → {traj[-1]:.3f}; diagnose MAE "
                    f"{c['mae']:.3f}, coverage {c['coverage']:.2f}, silent R² {c['r2_pred']:.2f}"
                )
        if seed == 0:
            sigma_task = initial
    out["sigma"] = sigma_update(sigma_task, G=G, draws=draws)
    return out


def train_figure(result: dict):
    """Three panels: the hardest quarter's mean exact p per step per method; diagnose's predicted
    silent fraction against TRL's and the exact-p closed form (seed 0, GRPO); the mean projected
    update per k against the σ-term, sequence- and token-level."""
    from ...plotstyle import COLORS, method_label, new_figure, styled

    @styled
    def make():
        fig, axes = new_figure(3, width=13.0, height=3.6)
        axes = np.atleast_1d(axes)
        col = {"grpo": COLORS["grpo"], "dr_grpo": COLORS["dr_grpo"], "skip": COLORS["dapo"]}
        for m, per_seed in result["quartile"].items():
            a = np.array(list(per_seed.values()))
            x = np.arange(a.shape[1])
            axes[0].plot(x, a.mean(0), color=col[m], label="gsd skip sampler" if m == "skip" else method_label(m))
            if len(a) > 1:
                axes[0].fill_between(x, a.min(0), a.max(0), color=col[m], alpha=0.15)
        axes[0].set_xlabel("training step")
        axes[0].set_ylabel("mean exact p, hardest quarter")
        axes[0].legend(loc="upper left")
        c = result["runs"][0]["grpo"]["calibration"]
        st = np.arange(1, len(c["silent_measured"]) + 1)
        axes[1].plot(st, c["silent_measured"], "o", ms=3, color=COLORS["data"], label="TRL's groups (measured)")
        axes[1].plot(st, c["silent_pred"], color=COLORS["accent"], label=f"gsd diagnose (R² {c['r2_pred']:.2f})")
        axes[1].plot(st, c["silent_exact"], ls="--", color=COLORS["law"], label=f"exact p (R² {c['r2_exact']:.2f})")
        axes[1].set_xlabel("training step")
        axes[1].set_ylabel("silent fraction (GRPO, seed 0)")
        axes[1].legend(loc="best")
        s = result["sigma"]
        for lt, color in (("dr_grpo", COLORS["dr_grpo"]), ("grpo", COLORS["grpo"])):
            bk = [b for b in s[lt]["by_k"] if b["n"] > 0]
            axes[2].plot(
                [b["x"] for b in bk],
                [b["y"] for b in bk],
                "o",
                ms=4,
                color=color,
                label=f"loss_type={lt!r}: slope {s[lt]['slope']:.2f}",
            )
        xmax = max(b["x"] for b in s["dr_grpo"]["by_k"])
        axes[2].plot([0, xmax], [0, xmax], ls="--", color=COLORS["law"], lw=0.8, label="identity")
        axes[2].set_xlabel("σ̂₀²/(σ̂₁ + 1e-4) of the group")
        axes[2].set_ylabel("update along ∇p · p(1−p)/‖∇p‖², mean per k")
        axes[2].legend(loc="upper left")
        fig.suptitle(f"TRL 1.16.0 training on a tiny Qwen2, {result['n_prompts']} prompts, G = {result['G']}")
        return fig

    return make()


def training_table(result: dict):
    """One row per (seed, method) of :func:`run_training`: the hardest quarter's mean exact p at
    the start and after the last step, and diagnose's calibration (its defaults, and with
    ``half_life="auto"``: the ``*_auto`` columns and the half-life it chose)."""
    import pandas as pd

    rows = []
    for seed, runs in result["runs"].items():
        for method, t in runs.items():
            c, q = t["calibration"], result["quartile"][method][seed]
            rows.append(
                {
                    "seed": seed,
                    "method": method,
                    "hardest_p0": q[0],
                    "hardest_final": q[-1],
                    "mae": c["mae"],
                    "mae_run_mean": c["mae_run_mean"],
                    "coverage": c["coverage"],
                    "silent_r2_diagnose": c["r2_pred"],
                    "silent_r2_exact": c["r2_exact"],
                    **(
                        {f"{k}_auto": t["calibration_auto"][k] for k in ("half_life", "mae", "coverage", "r2_pred")}
                        if "calibration_auto" in t
                        else {}
                    ),
                    "skipped": sum(t.get("skipped", [0])),
                }
            )
    return pd.DataFrame(rows)
