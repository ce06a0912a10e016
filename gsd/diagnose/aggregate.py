"""The diagnosis's sums over its predicted group table, fed one chunk of whole steps at a time.

Everything the step table, the prompt table, the calibration and the run's summary need of the
groups is a sum: per step (a chunk holds whole steps, so a step's sum is over the same groups in
the same order whichever way the table was cut) or per prompt (summed in row order with
``np.add.at``, as ``np.bincount`` sums the whole table).  Run totals are ``math.fsum`` of the
per-step sums.  The whole table fed as one chunk and the same table fed as chunks in step order
(:func:`gsd.diagnose.counted.diagnose_counted`: one run of steps at a time, the groups then
dropped) therefore give the same numbers bit for bit, from O(steps + prompts) memory.
"""

from __future__ import annotations

import math

import numpy as np

from ..core.forgetting import decay
from ..io.frames import Columns, group_sums

__all__ = ["GroupSums", "step_sums", "solve_rate_bin", "DIFFICULTY_BINS"]

#: Bins of a group's solve rate k/G: exactly 0, four interior quarters, exactly 1.
DIFFICULTY_BINS = ("0", "(0, ¼]", "(¼, ½]", "(½, ¾]", "(¾, 1)", "1")


def solve_rate_bin(r) -> np.ndarray:
    """The :data:`DIFFICULTY_BINS` index of each solve rate k/G in [0, 1]."""
    r = np.asarray(r, np.float64)
    return np.where(r == 0, 0, np.where(r == 1, 5, 1 + np.minimum(3, np.ceil(r * 4) - 1))).astype(int)


def step_sums(g: Columns) -> tuple[np.ndarray, dict]:
    """Per step of a predicted group table: the sums the step table, the calibration and the
    figure are made of (a per-group figure that is NaN adds nothing)."""
    multi = g["G"] >= 2
    made = g["generated"] if "generated" in g else g["G"]  # the generation: a padding trainer's rows left out
    silent = g["silent"].astype(bool)

    def on_multi(x):
        return np.nan_to_num(np.where(multi, x, 0.0), nan=0.0)

    q = on_multi(g["silent_pred"])
    with np.errstate(invalid="ignore", divide="ignore"):
        solve = g["k"] / np.where(g["n"] > 0, g["n"], np.nan)
    seen = multi & (g["n_before"] > 0)
    binary = g["binary_silent"].astype(bool)
    # The figure's solve-rate bins, over groups of two or more with a solve rate.
    rated = multi & np.isfinite(solve)
    bin_of = solve_rate_bin(np.where(rated, solve, 0.0))
    bins = {f"bin{i}": rated & (bin_of == i) for i in range(len(DIFFICULTY_BINS))}
    return group_sums(
        g["step"],
        {
            "groups": multi,
            "singletons": ~multi,
            "rollouts": made,
            "new_prompts": g["n_before"] == 0,
            "multi_rollouts": np.where(multi, made, 0),
            "silent_groups": silent,
            "q": q,
            "qvar": q * (1.0 - q),
            "all_wrong": silent & (g["k"] == 0),
            "all_right": silent & (g["k"] == g["n"]),
            "wasted_rollouts": np.where(silent, made, 0),
            "sigma": on_multi(g["sigma"]),
            "sigma_pred": on_multi(g["sigma_pred"]),
            "scale_pred": on_multi(g["scale_pred"]),
            "fidelity_plugin": on_multi(g["fidelity_plugin"]),
            "solve": on_multi(solve),
            "bsilent": multi & binary,
            "seen": seen,
            "seen_x": seen & binary,
            "seen_q": np.where(seen, q, 0.0),
            **bins,
        },
    )


class GroupSums:
    """The sums of a predicted group table fed in chunks of whole steps, in step order (:meth:`add`).

    ``prompts``: the number of prompt codes; ``half_life`` and ``last_step`` (the table's last
    step): the prompt table's forgetting weights 2^(−(last_step − step)/half_life)."""

    def __init__(self, prompts: int, half_life=None, last_step: int = 0):
        self.half_life, self.last_step = half_life, int(last_step)
        self.parts: list = []
        self.prompt: dict[str, np.ndarray] = {c: np.zeros(prompts, np.int64) for c in ("n", "k", "steps", "silent")}
        if half_life is not None:
            self.prompt |= {"n_eff": np.zeros(prompts), "k_eff": np.zeros(prompts)}
        self.predicted = False  # some group has a prediction (not all NaN)
        self.silence_is_binary = True  # every group's silence is its all-right / all-wrong

    def add(self, g: Columns) -> None:
        """Add a chunk of whole steps (later than every step added before)."""
        self.parts.append(step_sums(g))
        p = np.asarray(g["prompt"], np.int64)
        np.add.at(self.prompt["n"], p, g["n"])
        np.add.at(self.prompt["steps"], p, g["G"] >= 2)
        np.add.at(self.prompt["silent"], p, g["silent"])
        k = np.nan_to_num(g["k"], nan=0.0)
        np.add.at(self.prompt["k"], p, k.astype(np.int64))
        if self.half_life is not None:
            w = decay(self.last_step - g["step"], self.half_life)
            np.add.at(self.prompt["n_eff"], p, w * g["n"])
            np.add.at(self.prompt["k_eff"], p, w * k)
        self.predicted |= not bool(np.isnan(g["silent_pred"]).all())
        self.silence_is_binary &= bool(np.array_equal(g["silent"], g["binary_silent"]))

    def sums(self) -> tuple[np.ndarray, dict]:
        """(steps, their sums) over the chunks added."""
        steps = np.concatenate([s for s, _ in self.parts])
        return steps, {c: np.concatenate([x[c] for _, x in self.parts]) for c in self.parts[0][1]}

    def steps(self) -> Columns:
        """The step table (:func:`gsd.diagnose.tables.step_columns`)."""
        step, s = self.sums()
        n = np.where(s["groups"] > 0, s["groups"], np.nan)  # NaN for a step without any group
        with np.errstate(invalid="ignore", divide="ignore"):
            out = {
                "step": step,
                "groups": s["groups"],
                "singletons": s["singletons"],
                "rollouts": s["rollouts"],
                "new_prompts": s["new_prompts"],
                "mean_group_size": s["multi_rollouts"] / n,
                "silent_groups": s["silent_groups"],
                "silent_frac": s["silent_groups"] / n,
                "silent_pred": s["q"] / n,
                "silent_pred_sd": np.sqrt(s["qvar"]) / n,
                "all_wrong": s["all_wrong"],
                "all_right": s["all_right"],
                "wasted_rollouts": s["wasted_rollouts"],
                "wasted_share": s["wasted_rollouts"] / s["rollouts"],
                "effective_gradient_ratio": (s["multi_rollouts"] - s["wasted_rollouts"]) / s["rollouts"],
                "sigma_mean": s["sigma"] / n,
                "sigma_pred": s["sigma_pred"] / n,
                "fidelity": s["sigma_pred"] / np.where(s["scale_pred"] > 0, s["scale_pred"], np.nan),
                "fidelity_plugin": s["fidelity_plugin"] / n,
                "solve_rate": s["solve"] / n,
            }
        if not self.predicted:  # no right/wrong: only what was measured
            for c in ("silent_pred", "silent_pred_sd", "all_wrong", "all_right", "sigma_mean", "sigma_pred"):
                out[c] = np.full(step.size, np.nan)
            for c in ("fidelity", "fidelity_plugin", "solve_rate"):
                out[c] = np.full(step.size, np.nan)
        return out

    def difficulty(self) -> tuple[np.ndarray, np.ndarray]:
        """Per step, the share of groups (G ≥ 2) whose solve rate k/G falls in each of
        :data:`DIFFICULTY_BINS`: (steps, shares of shape (steps, 6)); steps without a rated group
        left out."""
        step, s = self.sums()
        counts = np.stack([s[f"bin{i}"] for i in range(len(DIFFICULTY_BINS))], axis=1).astype(np.float64)
        has = counts.sum(axis=1) > 0
        return step[has], counts[has] / counts[has].sum(axis=1, keepdims=True)

    def calibration(self) -> dict:
        """How well the predicted probabilities of a right/wrong-silent group match what happened."""
        if not self.predicted:
            return {}
        step, s = self.sums()
        multi = s["groups"] > 0
        expected, measured = math.fsum(s["q"].tolist()), int(s["bsilent"].sum())
        sd = math.sqrt(math.fsum(s["qvar"].tolist()))
        per_x, per_q = s["bsilent"][multi] / s["groups"][multi], s["q"][multi] / s["groups"][multi]
        corr = (
            float(np.corrcoef(per_x, per_q)[0, 1])
            if per_x.size > 2 and np.std(per_x, ddof=1) > 0 and np.std(per_q, ddof=1) > 0
            else float("nan")
        )
        seen = int(s["seen"].sum())
        return {
            "silent_groups_measured": float(measured),
            "silent_groups_predicted": expected,
            "z": (measured - expected) / sd if sd > 0 else float("nan"),
            "mean_abs_step_diff": float(np.abs(per_x - per_q).mean()),
            "step_corr": corr,
            "seen_before_measured": int(s["seen_x"].sum()) / seen if seen else float("nan"),
            "seen_before_predicted": math.fsum(s["seen_q"].tolist()) / seen if seen else float("nan"),
        }

    def totals(self) -> dict:
        """The run's totals: groups, singletons, rollouts, silent groups, wasted rollouts, rollouts of
        groups of two or more, and the sums of the predicted silence, σ̂ and large-group update."""
        _, s = self.sums()
        out: dict = {c: int(s[c].sum()) for c in ("groups", "singletons", "rollouts", "silent_groups")}
        out |= {c: int(s[c].sum()) for c in ("wasted_rollouts", "multi_rollouts")}
        out |= {c: math.fsum(s[c].tolist()) for c in ("q", "sigma_pred", "scale_pred")}
        return out
