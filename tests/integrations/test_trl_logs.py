"""`gsd diagnose --json` on logs written by TRL 1.16.0's own GRPOTrainer (tiny model, CPU): every
step's groups, silent fraction and wasted rollouts equal what the reward functions recorded."""

from __future__ import annotations


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
    }
    return {name: (root / name, trl_run(root / name, p=P, **kw)) for name, kw in setups.items()}


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


def test_unscorable_rows_stay_out_of_their_group(capsys, runs):
    out, truth = runs["unscorable"]
    data = diagnose_json(capsys, out)
    assert steps_of(data) == truth.per_step()  # silence over the scorable rows, as TRL normalises
    s = data["summary"]
    assert s["incomplete_groups"] == 0 and s["bad_rows"] == 4 * 16 // 5  # every 5th row of 16, 4 generations
    assert all("returned None" in b for b in s["bad_rows_listed"])
    assert [x["trainer_silent_frac"] for x in data["steps"]] == [x["silent_frac"] for x in data["steps"]]
