"""Small rollout logs in each format, with the rows they hold as a plain DataFrame."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from gsd.integrations.trl import write_step as write_trl_step
from gsd.integrations.verl import write_step as write_verl_step

STEPS = 5
PROMPTS = 300


def rollouts(seed=0, prompts=PROMPTS, steps=STEPS, graded=False, fixed_group_size=None):
    """One row per rollout: step, prompt, right, score (graded: right·0.8 + U(0, 0.2)).

    Each step draws ~80 % of the prompts (so some are missing on some steps) with a group
    size from {4, 8, 16}, chosen per step and, for a tenth of the prompts, per prompt; or
    ``fixed_group_size`` for all (as TRL draws).
    """
    rng = np.random.default_rng(seed)
    p = rng.beta(0.5, 0.7, prompts)
    frames = []
    for step in range(1, steps + 1):
        drawn = np.flatnonzero(rng.random(prompts) < 0.8)
        G = np.full(drawn.size, rng.choice([4, 8, 16]))
        odd = rng.random(drawn.size) < 0.1
        G[odd] = rng.choice([4, 8, 16], size=int(odd.sum()))
        if fixed_group_size:
            G[:] = fixed_group_size
        pid = np.repeat(drawn, G)
        right = (rng.random(pid.size) < p[pid]).astype(int)
        score = right * 0.8 + rng.uniform(0, 0.2, pid.size) if graded else right.astype(float)
        frames.append(
            pd.DataFrame(
                {
                    "step": step,
                    "prompt": [f"What is {i} + {i}? Think step by step." for i in pid],
                    "right": right,
                    "score": score,
                }
            )
        )
    return pd.DataFrame(pd.concat(frames, ignore_index=True)), p


def write_verl(folder, df, *, malformed_step=None, extra=True):
    """verl dump of ``df``; with ``malformed_step``, line 3 of that file is broken JSON.
    Returns the (file, line) of the broken line."""
    bad = None
    for step, part in df.groupby("step"):
        path = write_verl_step(
            folder,
            step,
            part["prompt"].to_numpy(),
            part["score"].to_numpy(),
            outputs="some answer",
            extra={"acc": part["right"].astype(bool).to_numpy()} if extra else None,
        )
        if step == malformed_step:
            lines = path.read_text().splitlines(keepends=True)
            lines.insert(2, '{"input": "broken", "score": 1.0, "step": \n')
            path.write_text("".join(lines))
            bad = (path, 3)
    return bad


def write_trl(folder, df, *, names=("accuracy_reward", "format_reward")):
    """TRL completions of ``df``: the first reward function gives ``score``, the second 0.5 for all."""
    for step, part in df.groupby("step"):
        rewards = {names[0]: part["score"].to_numpy()}
        for extra in names[1:]:
            rewards[extra] = np.full(len(part), 0.5)
        write_trl_step(folder, step, part["prompt"].to_numpy(), rewards, completions="answer")


def direct_steps(df, right="right", reward=None):
    """Per-step numbers computed directly with pandas from the rows; a group is silent when its
    ``reward`` values are all equal (default: all right or all wrong)."""
    g = (
        df.groupby(["step", "prompt"])
        .agg(size=(right, "size"), sum=(right, "sum"), distinct=(reward or right, "nunique"))
        .reset_index()
    )
    multi = g["size"] >= 2
    g["silent"] = multi & (g["distinct"] == 1)
    g["multi"] = multi
    g["wasted"] = g["size"].where(g["silent"], 0)
    s = g.groupby("step").agg(
        groups=("multi", "sum"), rollouts=("size", "sum"), silent=("silent", "sum"), wasted=("wasted", "sum")
    )
    s["silent_frac"] = s["silent"] / s["groups"]
    return s.reset_index()


@pytest.fixture
def verl_log(tmp_path):
    df, p = rollouts()
    bad = write_verl(tmp_path / "rollout_data", df, malformed_step=2)
    return tmp_path / "rollout_data", df, bad


@pytest.fixture
def jsonl_lines():
    def read(path):
        return [json.loads(x) for x in path.read_text().splitlines()]

    return read
