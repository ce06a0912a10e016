"""`gsd diagnose --json` on logs written by TRL 1.16.0's own GRPOTrainer (tiny model, CPU): every
step's groups, silent fraction and wasted rollouts equal what the reward functions recorded."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("trl", reason="the tests against the real TRL need trl==1.16.0 (make install)")

from gsd.cli import main  # noqa: E402

from .real_trainers import diagnose_json, steps_of, trl_run  # noqa: E402

PROMPTS = [f"q{i} w1 w2" for i in range(8)]
# Some prompts never right, some always, some in between: silent and live groups every step.
P = [0.0, 1.0, 0.5, 0.2, 0.8, 0.0, 1.0, 0.5]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each set-up trained once (about 3-6 s each after TRL's import)."""
    root = tmp_path_factory.mktemp("trl")
    chat = [[{"role": "system", "content": "w9 w8"}, {"role": "user", "content": f"q{i} w1"}] for i in range(8)]
    dup = list(PROMPTS)
    dup[3] = dup[2]  # one prompt text twice in the dataset: two groups of G per step
    setups = {
        "plain": dict(prompts=PROMPTS),
        "num_iterations": dict(prompts=PROMPTS, num_iterations=2),
        "steps_per_generation": dict(prompts=PROMPTS, batch=8, steps_per_generation=2),
        "logging_steps": dict(prompts=PROMPTS, logging_steps=3, max_steps=10),
        "duplicates": dict(prompts=dup),
        "weights": dict(prompts=PROMPTS, second_reward=True, weights=(1.0, 0.5)),
        "chat": dict(prompts=chat),
        "unscorable": dict(prompts=PROMPTS, unscorable=5),
        "eval": dict(prompts=PROMPTS, eval_strategy="steps", eval_steps=2, per_device_eval_batch_size=16),
        # Rewards equal only up to float32 rounding, and real contrasts beside them.
        "graded": dict(prompts=PROMPTS, values=GRADED),
        "scale_none": dict(prompts=PROMPTS, scale_rewards="none", loss_type="dr_grpo"),
        "scale_batch": dict(prompts=PROMPTS, scale_rewards="batch"),
        # Group 0: every reward None; group 1: one scorable row; group 2: two.
        "all_none": dict(prompts=PROMPTS, none_rows={0, 1, 2, 3, 4, 5, 6, 8, 9}),
    }
    runs = {name: (root / name, trl_run(root / name, p=P, **kw)) for name, kw in setups.items()}
    # A run resumed from an earlier checkpoint: the first attempt logged steps 1-8 and saved
    # checkpoint-5; the second resumed from it and stopped at step 6, leaving 7 and 8 behind.
    out = root / "resumed"
    first = trl_run(out, p=P, prompts=PROMPTS, max_steps=8, save_strategy="steps", save_steps=5)
    second = trl_run(
        out, p=P, prompts=PROMPTS, max_steps=6, save_strategy="steps", save_steps=5, resume=out / "checkpoint-5"
    )
    runs["resumed"] = (out, (first, second))
    # Two runs written into one output_dir, with different group sizes: the second, shorter one
    # rewrote steps 1-2; steps 3-4 are the first run's.
    out = root / "two_runs"
    first = trl_run(out, p=P, prompts=PROMPTS, G=4, max_steps=4)
    second = trl_run(out, p=P, prompts=PROMPTS, G=8, max_steps=2, seed=1)
    runs["two_runs"] = (out, (first, second))
    return runs


GRADED = [
    (0.3, 0.1 + 0.2),
    (0.0, 1e-8),
    (0.0, 1.0),
    (0.25, 0.75),
    (0.7, 0.7),
    (0.5, 0.5 + 1e-9),
    (0.2, 0.6),
    (1 / 3, 1 / 3 + 1e-12),
]


def test_plain_run_is_exact(capsys, runs):
    out, truth = runs["plain"]
    data = diagnose_json(capsys, out)
    assert steps_of(data) == truth.per_step()
    s = data["summary"]
    assert s["repeated_steps"] == [] and s["missing_steps"] == [] and s["incomplete_groups"] == 0
    assert s["group_size"] == 4 and "blocks of 4" in s["group_by"]
    # TRL's own frac_reward_zero_std (trainer_state.json) is the measured silence.
    assert [x["trainer_silent_frac"] for x in data["steps"]] == [x["silent_frac"] for x in data["steps"]]


@pytest.mark.parametrize("setup", ["num_iterations", "steps_per_generation"])
def test_each_generation_counted_once(capsys, runs, setup):
    out, truth = runs[setup]
    data = diagnose_json(capsys, out)
    want = truth.per_step()
    assert sorted(want) == [1, 3]  # two generations for four optimizer steps
    assert steps_of(data) == want
    s = data["summary"]
    assert s["repeated_steps"] == [2, 4] and s["rollouts"] == 2 * 16
    assert any("repeat the previous step's generation" in w for w in s["warnings"])


def test_logging_gaps_are_listed(capsys, runs):
    out, truth = runs["logging_steps"]
    data = diagnose_json(capsys, out)
    logged = steps_of(data)
    assert sorted(logged) == [3, 6, 9, 10]
    assert logged == truth.per_step(steps=logged)  # exact on what was written
    s = data["summary"]
    assert s["missing_steps"] == [1, 2, 4, 5, 7, 8] and s["of"] == "the logged rollouts"
    # TRL's own frac_reward_zero_std at a logging step averages every generation since the last
    # log, the unwritten ones too (float32 on TRL's side).
    every = truth.per_step()
    previous = 0
    for row in data["steps"]:
        window = [every[t][1] for t in range(previous + 1, row["step"] + 1)]
        assert row["trainer_silent_frac"] == pytest.approx(sum(window) / len(window), abs=1e-6)
        previous = row["step"]
    assert any("have no log file" in w for w in s["warnings"])


def test_duplicate_prompt_texts_stay_two_groups(capsys, runs):
    out, truth = runs["duplicates"]
    data = diagnose_json(capsys, out)
    assert steps_of(data) == truth.per_step()
    assert data["summary"]["prompts"] == 7 and data["summary"]["groups"] == 16


def test_weighted_rewards(capsys, runs):
    out, truth = runs["weights"]
    data = diagnose_json(capsys, out, "--reward", "correct+0.5*fmt")
    assert steps_of(data) == truth.per_step()
    assert [x["trainer_silent_frac"] for x in data["steps"]] == [x["silent_frac"] for x in data["steps"]]
    assert data["summary"]["reward"] == "correct + 0.5*fmt"
    default = diagnose_json(capsys, out)  # weights 1: said, since TRL does not log reward_weights
    assert default["summary"]["reward"] == "correct + fmt"
    assert any("reward_weights" in w for w in default["summary"]["warnings"])


def test_conversational_prompts(capsys, runs):
    out, truth = runs["chat"]
    data = diagnose_json(capsys, out, "--out", out / "dx")
    assert steps_of(data) == truth.per_step()
    import pandas as pd

    labels = sorted(pd.read_parquet(out / "dx" / "prompts.parquet")["prompt"])
    assert labels == sorted(f"q{i} w1" for i in range(8))  # the last user message, not the JSON


def test_evaluation_steps_left_out(capsys, runs):
    out, truth = runs["eval"]
    data = diagnose_json(capsys, out)
    s = data["summary"]
    assert s["eval_steps"] == [2, 4]
    assert steps_of(data) == truth.per_step(steps={1, 3})  # the files of steps 2 and 4 hold evaluation rows
    assert any("evaluation" in w for w in s["warnings"])


def test_warnings_are_printed(capsys, runs):
    out, _ = runs["logging_steps"]
    rc = main(["diagnose", "--no-progress", str(out)])
    text = capsys.readouterr().out
    assert rc == 0 and "WARNING: 6 of the 10 steps have no log file" in text and "of the logged rollouts" in text


@pytest.mark.parametrize("setup", ["unscorable", "all_none"])
def test_unscorable_rows_stay_in_their_group(capsys, runs, setup):
    out, truth = runs[setup]
    data = diagnose_json(capsys, out)
    # TRL keeps the rows in their block, out of its mean and std: a group with fewer than two
    # scorable rows has no std and is not zero-std, and it still counts as a group.
    assert steps_of(data) == truth.per_step()
    s = data["summary"]
    assert s["incomplete_groups"] == 0 and s["bad_rows"] == 0
    assert s["unscorable_rollouts"] == 4 * (16 // 5 if setup == "unscorable" else 9)  # 4 generations
    assert [x["trainer_silent_frac"] for x in data["steps"]] == [x["silent_frac"] for x in data["steps"]]
    assert all(x["groups"] == 4 for x in data["steps"])
    # The None rows do not make the right/wrong log graded: posteriors and predictions are kept,
    # counted on the scored rows only (TRL's own rows: n = G minus the rows it could not score).
    assert s["rewards_as"].startswith("binary rewards (0/1); ") and "unscorable" in s["rewards_as"]
    assert s["prior"] is not None and all(x["silent_pred"] is not None for x in data["steps"])
    from gsd.diagnose import diagnose

    dx = diagnose(out, progress=False)
    scored = {step: sum(int(np.isfinite(g).sum()) for g in groups) for step, groups in truth.generations()}
    assert dx.groups.groupby("step")["n"].sum().to_dict() == scored
    right = sum(int(np.nansum(groups)) for _, groups in truth.generations())
    assert int(dx.prompts["right"].sum()) == right and np.isfinite(dx.prompts["p_mean"]).all()


def test_graded_rewards_equal_up_to_rounding(capsys, runs):
    out, truth = runs["graded"]
    data = diagnose_json(capsys, out)  # no threshold: the measured figures
    assert steps_of(data) == truth.per_step()
    # TRL's own frac_reward_zero_std: its float32 arithmetic, reproduced.
    assert [x["trainer_silent_frac"] for x in data["steps"]] == [x["silent_frac"] for x in data["steps"]]
    assert 0 < data["summary"]["silent_frac"] < 1
    assert not any("reward_weights" in w for w in data["summary"]["warnings"])
    # --out draws the figure without right/wrong.
    diagnose_json(capsys, out, "--out", out / "dx")
    assert (out / "dx" / "diagnose.png").is_file()


@pytest.mark.parametrize("setup,scale", [("plain", "group"), ("scale_none", "none"), ("scale_batch", "batch")])
def test_the_update_follows_the_logged_advantages(capsys, runs, setup, scale):
    import numpy as np
    import pandas as pd

    from gsd.diagnose import diagnose

    out, truth = runs[setup]
    data = diagnose_json(capsys, out)
    assert steps_of(data) == truth.per_step()
    s = data["summary"]
    assert s["advantage_check"]["scale"] == scale and s["update_convention"]["scale"] == scale
    assert f"scale_rewards={scale!r}" in s["update_convention"]["from"]
    # The measured update per unit contrast is the one TRL applied (its logged advantages).
    dx = diagnose(out, progress=False)
    frames = [pd.read_parquet(f) for f in sorted((out / "completions").glob("completions_*.parquet"))]
    df = pd.concat(frames, ignore_index=True)
    right = df["correct"].to_numpy().reshape(-1, 4)
    applied = (df["advantage"].to_numpy().reshape(-1, 4) * right).sum(axis=1) / 4
    g = dx.groups.sort_values(["step", "prompt"]).reset_index(drop=True)
    labels = dx.prompts["prompt"].to_numpy()
    want = (
        pd.DataFrame({"step": df["step"].to_numpy()[::4], "prompt": df["prompt"].to_numpy()[::4], "applied": applied})
        .sort_values(["step", "prompt"])
        .reset_index(drop=True)
    )
    got = (
        pd.DataFrame({"step": g["step"], "prompt": labels[g["prompt"]], "sigma": g["sigma"]})
        .sort_values(["step", "prompt"])
        .reset_index(drop=True)
    )
    assert len(want) == len(got)
    np.testing.assert_allclose(got["sigma"], want["applied"], rtol=1e-5, atol=1e-6)
    if scale == "batch":  # TRL's frac_reward_zero_std then tests the batch's std, not each group's
        assert any("scale_rewards='batch'" in w for w in s["warnings"])


def test_a_resumed_run_leaves_the_first_attempts_later_steps_out(capsys, runs):
    out, (first, second) = runs["resumed"]
    data = diagnose_json(capsys, out)
    want = {**first.per_step(steps={1, 2, 3, 4, 5}), **second.per_step(steps={6})}
    assert steps_of(data) == want
    assert data["summary"]["excluded_steps"] == [7, 8]
    assert any(w.startswith("steps 7, 8") and "left out" in w for w in data["summary"]["warnings"])
    # The trainer state alone says so too (file times lost, e.g. a copy that reset them).
    import os

    for f in (out / "completions").glob("*.parquet"):
        os.utime(f, (0, 0))
    again = diagnose_json(capsys, out)
    assert steps_of(again) == want and again["summary"]["excluded_steps"] == [7, 8]
    assert any("beyond the run's trainer_state.json (global_step 6)" in w for w in again["summary"]["warnings"])


def test_two_runs_in_one_folder_are_not_mixed(capsys, runs):
    out, (first, second) = runs["two_runs"]
    data = diagnose_json(capsys, out)
    assert steps_of(data) == second.per_step()
    s = data["summary"]
    assert s["excluded_steps"] == [3, 4] and s["group_size"] == 8


@pytest.mark.parametrize("global_step", ["6", None, 6.5, [6]])
def test_a_trainer_state_of_the_wrong_type_is_said(capsys, runs, tmp_path, global_step):
    """global_step written as a string (or null, a fraction, a list) in the run's trainer_state.json:
    the left-over check it drives is off, and the report says so (it never switches off silently)."""
    import json
    import os
    import shutil

    out, _ = runs["resumed"]
    copy = tmp_path / "resumed"
    shutil.copytree(out, copy)
    for f in (copy / "completions").glob("*.parquet"):
        os.utime(f, (0, 0))  # the file times cannot tell: only the trainer state could
    state_path = copy / "trainer_state.json"
    state = json.loads(state_path.read_text())
    state["global_step"] = global_step
    state["log_history"][0]["frac_reward_zero_std"] = "0.5"
    state_path.write_text(json.dumps(state))
    data = diagnose_json(capsys, copy)
    warnings = data["summary"]["warnings"]
    assert any(f"global_step is {global_step!r}" in w and "check for log files beyond" in w for w in warnings)
    assert any("1 log_history entr(ies) hold a frac_reward_zero_std that is not a finite number" in w for w in warnings)


@pytest.mark.parametrize(
    "name",
    [
        "plain", "num_iterations", "steps_per_generation", "logging_steps", "duplicates", "weights", "chat",
        "unscorable", "eval", "graded", "scale_none", "scale_batch", "all_none", "resumed", "two_runs",
    ],
)  # fmt: skip
def test_streamed_counts_equal_the_whole_log(runs, name):
    """TRL's logs are counted file by file (never whole): the counts, the counted log and the
    streamed diagnosis equal the whole-log reader's, field by field, on every real run."""
    from diagnose.test_counts import assert_same

    from gsd.diagnose.counts import count_partial

    out, _ = runs[name]
    assert "arranged" in count_partial(out, progress=False)[0].meta  # streamed, not read whole
    assert_same(out)
    if name == "graded":
        assert_same(out, threshold=0.5)
