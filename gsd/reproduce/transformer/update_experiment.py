"""The ``gsd transformer-update`` experiment: TRL's expected update against the closed forms on
both length variants of the task, then a training of each of :data:`~.training.TRAININGS` whose
silent fraction is set beside the closed forms; its table and figures.
"""

from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...extras import require_trl
from .task import VARIANTS, build_task
from .training import TRAININGS, train_silent
from .update import LOSS_TYPES, SCALE_REWARDS, measured_update, reference

#: Monte Carlo sizes of :func:`run`: (draws, copies) per variant of the expected update, and
#: (steps, copies) of each training.
SIZES = {"full": (100, 4), "fast": (8, 4)}
TRAIN_SIZES = {"full": (40, 16), "fast": (20, 8)}


def run(
    *,
    fast: bool = False,
    G: int = 8,
    n_prompts: int = 8,
    seed: int = 0,
    variants=VARIANTS,
    train: bool = True,
    log=None,
) -> dict:
    """Both variants, every (``scale_rewards``, ``loss_type``): :func:`measured_update` on
    :func:`build_task`; then (``train``) :func:`train_silent` of each of :data:`~.training.TRAININGS` from the
    last variant's initial model, a copy made before any trainer held it.  The reproduction's
    stage and ``gsd transformer-update``.

    ``fast``: 8 draws of 4 groups per prompt (32) instead of 100 of 4 (400), trainings of 20
    steps of 8 groups per prompt instead of 40 of 16; ``variants``: a subset of
    :data:`VARIANTS`; ``log``: a callable given one line per part.
    """
    import copy

    bad = [v for v in variants if v not in VARIANTS]
    if bad or not variants:
        raise InputError(f"variants must be a non-empty subset of {VARIANTS}, got {variants!r}")
    require_trl("TRL's update on a tiny transformer")
    draws, copies = SIZES["fast" if fast else "full"]
    out = {"G": G, "n_prompts": n_prompts, "seed": seed, "draws": draws, "copies": copies, "variants": {}}
    for variant in variants:
        task = build_task(n_prompts, variant=variant, seed=seed)
        # copied before a trainer holds it: accelerate may rebind the model's forward in place
        initial = copy.deepcopy(task)
        res = measured_update(task, G=G, draws=draws, copies=copies, seed=seed)
        out["variants"][variant] = res
        if log:
            log(f"{variant}: {draws * copies} groups per prompt, mean length {res['mean_length']:.2f}")
    if train:
        steps, groups = TRAIN_SIZES["fast" if fast else "full"]
        out["training"] = {"variant": task.variant, "runs": {}}
        for method in TRAININGS:
            t = train_silent(copy.deepcopy(initial), method, G=G, copies=groups, steps=steps, seed=seed)
            out["training"]["runs"][method] = t
            if log:
                log(
                    f"training {method}: silent-fraction R² {t['r2_exact']:.3f} (exact p), "
                    f"{t['r2_pooled']:.3f} (pooled p)"
                )
    return out


def table(result: dict):
    """One row per (variant, scale_rewards, loss_type): the ratio, its interval, the reference."""
    import pandas as pd

    keys = (
        "scale_rewards",
        "loss_type",
        "reference",
        "ratio",
        "lo",
        "hi",
        "ratio_hard",
        "lo_hard",
        "hi_hard",
        "ratio_easy",
        "lo_easy",
        "hi_easy",
    )
    rows = [{"variant": v, **{k: r[k] for k in keys}} for v, res in result["variants"].items() for r in res["rows"]]
    return pd.DataFrame(rows)


def silent_figure(result: dict):
    """Per training step, TRL's ``frac_reward_zero_std`` against the mean of
    :math:`p_x^G + (1-p_x)^G` (exact p) and the pooled-p formula, one panel per method."""
    from ...plotstyle import COLORS, method_label, new_figure, styled

    @styled
    def make():
        runs = result["training"]["runs"]
        fig, axes = new_figure(len(runs), width=4.2 * len(runs), height=3.2, sharey=True)
        axes = np.atleast_1d(axes)
        for ax, (method, t) in zip(axes, runs.items()):
            st = np.arange(1, len(t["steps"]) + 1)
            ax.plot(
                st,
                [r["measured"] for r in t["steps"]],
                "o",
                ms=3,
                color=COLORS["data"],
                label="TRL frac_reward_zero_std",
            )
            ax.plot(
                st,
                [r["exact"] for r in t["steps"]],
                color=COLORS[method],
                label=f"mean p^G+(1−p)^G, exact p (R² {t['r2_exact']:.2f})",
            )
            ax.plot(
                st,
                [r["pooled"] for r in t["steps"]],
                ls="--",
                color=COLORS["law"],
                label=f"pooled p (R² {t['r2_pooled']:.2f})",
            )
            ax.set_xlabel("training step")
            ax.set_title(
                f"{method_label(method)}: scale_rewards={TRAININGS[method]['scale_rewards']!r}, "
                f"loss_type={TRAININGS[method]['loss_type']!r}",
                fontsize=8,
            )
            ax.legend(loc="lower right")
        axes[0].set_ylabel("silent fraction of the step's groups")
        fig.suptitle(
            f"Silent groups in TRL 1.16.0 training, G = {result['G']}, "
            f"{next(iter(runs.values()))['groups_per_step']} groups per step"
        )
        return fig

    return make()


def figure(result: dict):
    """Measured/closed-form ratio (95 % interval) per setting, one panel per variant."""
    from ...plotstyle import COLORS, new_figure, styled

    @styled
    def make():
        variants = list(result["variants"])
        fig, grid = new_figure(len(variants), 2, width=4.4 * len(variants), height=3.3)
        grid = np.asarray(grid).reshape(2, len(variants))
        axes, lower = grid[0], grid[1]
        colors = {"group": COLORS["grpo"], "batch": COLORS["accent"], "none": COLORS["dr_grpo"]}
        loss_colors = {
            "grpo": COLORS["grpo"],
            "bnpo": COLORS["dapo"],
            "dapo": COLORS["extra"],
            "dr_grpo": COLORS["dr_grpo"],
        }
        for ax, v in zip(lower, variants):
            res = result["variants"][v]
            p = np.array(res["p"])
            order = np.argsort(p)
            for r in res["rows"]:
                if r["scale_rewards"] != "group" or r["loss_type"] == "dapo":  # dapo: bnpo's, here
                    continue
                ax.errorbar(
                    p[order],
                    np.array(r["ratio_per_prompt"])[order],
                    yerr=np.array(r["half_width_per_prompt"])[order],
                    fmt="o-",
                    ms=3,
                    capsize=2,
                    lw=0.8,
                    color=loss_colors[r["loss_type"]],
                    label=f"loss_type={r['loss_type']!r}",
                )
            ax.axhline(1.0, color=COLORS["law"], lw=0.8, ls="--")
            ax.set_xlabel("exact solve rate p of the prompt")
            ax.set_title(f"{v}: per prompt, scale_rewards='group'")
        lower[0].set_ylabel("measured / closed form, per prompt")
        lower[0].legend(loc="upper right")
        for ax, v in zip(axes, variants):
            res = result["variants"][v]
            for j, s in enumerate(SCALE_REWARDS):
                rows = [r for r in res["rows"] if r["scale_rewards"] == s]
                x = np.array([LOSS_TYPES.index(r["loss_type"]) for r in rows]) + (j - 1) * 0.22
                y = np.array([r["ratio"] for r in rows])
                err = np.array([[r["ratio"] - r["lo"] for r in rows], [r["hi"] - r["ratio"] for r in rows]])
                ref = "Dr.GRPO" if reference(s) == "dr_grpo" else "GRPO"
                ax.errorbar(
                    x, y, yerr=err, fmt="o", ms=4, capsize=2, color=colors[s], label=f"scale_rewards={s!r} (vs {ref})"
                )
            ax.axhline(1.0, color=COLORS["law"], lw=0.8, ls="--")
            ax.set_xticks(range(len(LOSS_TYPES)), [f"{lt!r}" for lt in LOSS_TYPES])
            ax.set_xlabel("TRL loss_type")
            ax.set_title(f"{v} lengths (mean {res['mean_length']:.2f} tokens): all prompts")
        axes[0].set_ylabel("measured / closed form along ∇p")
        axes[0].legend(loc="best")
        fig.suptitle(
            f"TRL 1.16.0's update on a tiny Qwen2,\nG = {result['G']}, "
            f"{result['draws'] * result['copies']} groups per prompt"
        )
        return fig

    return make()
