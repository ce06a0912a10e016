"""`gsd diagnose` on the log of trl-cgrpo 0.2.0's own ``CGRPOTrainer`` (a ``GRPOTrainer`` subclass
that stops sampling a prompt early and pads its block with empty, reward-less rows), on TRL 1.16.0:
the padding rows stay in their block as the trainer keeps them, and are not counted as generation.

The truth is recorded inside the run: the trainer's own ``_padded_rows`` flags, read in its
``_calculate_rewards`` (where it marks those rows NaN), and the rewards its reward function returned.
trl-cgrpo declares ``trl<1.15``; it is installed without its dependencies (``pip install --no-deps
trl-cgrpo==0.2.0``) and runs on TRL 1.16.0 unchanged.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

pytest.importorskip("trl", reason="the tests against the real TRL need trl==1.16.0 (make install)")
pytest.importorskip("trl_cgrpo", reason="needs trl-cgrpo==0.2.0 (pip install --no-deps trl-cgrpo==0.2.0)")

from .real_trainers import diagnose_json, tiny_model, tokenizer  # noqa: E402

P = [0.0, 1.0, 0.5, 0.2]
G = 8


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from datasets import Dataset
    from trl_cgrpo import CGRPOConfig, CGRPOTrainer

    out = tmp_path_factory.mktemp("cgrpo")
    rng = random.Random(0)
    truth = []  # per generation: (padded flags, rewards returned)
    returned = []

    class Recorded(CGRPOTrainer):
        def _calculate_rewards(self, inputs, prompts, completions, ids):
            rewards = super()._calculate_rewards(inputs, prompts, completions, ids)
            if self.model.training:
                truth.append((np.array(self._padded_rows, bool), np.array(returned[-1], float)))
            return rewards

    def correct(prompts, completions, p, **kw):
        r = [float(rng.random() < q) for q in p]
        returned.append(r)
        return r

    def verifier(completions, p, **kw):  # the stopping rule's pass/fail
        return [rng.random() < p for _ in completions]

    prompts = [f"q{i} w1 w2" for i in range(len(P))]
    ds = Dataset.from_dict({"prompt": prompts, "p": P})
    args = CGRPOConfig(
        output_dir=str(out),
        use_cpu=True,
        use_vllm=False,
        max_completion_length=3,
        report_to=[],
        budget_grid=[2, 4, 8],
        num_generations=G,
        per_device_train_batch_size=G * len(P),
        max_steps=3,
        log_completions=True,
        num_completions_to_print=0,
        seed=0,
        learning_rate=1e-3,
        loss_type="dapo",
        score="pass_rate",
        logging_steps=1,
        save_strategy="no",
    )
    trainer = Recorded(
        model=tiny_model(0),
        reward_funcs=[correct],
        args=args,
        train_dataset=ds,
        processing_class=tokenizer(),
        calibration_dataset=ds,
        verifier=verifier,
    )
    trainer.train()
    trainer.save_state()
    return out, truth, trainer


def test_padding_rows_are_not_generation(capsys, run):
    out, truth, trainer = run
    data = diagnose_json(capsys, out)
    s = data["summary"]
    padded = sum(int(pad.sum()) for pad, _ in truth)
    assert padded > 0 and s["padding_rows"] == padded and s["unscorable_rollouts"] == 0
    assert s["rewards_as"] == "binary rewards (0/1)"
    want = {}
    for step, (pad, r) in enumerate(truth, start=1):
        real = (~pad).reshape(-1, G).sum(axis=1)
        # TRL leaves the padding out of the group's std: silent when the real rows agree.
        blocks = np.where(pad, np.nan, r).reshape(-1, G)
        silent = np.nanmax(blocks, axis=1) == np.nanmin(blocks, axis=1)
        want[step] = (len(real), float(silent.mean()), int(real.sum()), int(real[silent].sum()))
    got = {x["step"]: (x["groups"], x["silent_frac"], x["rollouts"], x["wasted_rollouts"]) for x in data["steps"]}
    assert got == want
    # The trainer's own accounting: cgrpo/mean_k (real answers per prompt) and frac_reward_zero_std.
    logged = [h for h in trainer.state.log_history if "cgrpo/mean_k" in h]
    assert [x["mean_group_size"] for x in data["steps"]] == [h["cgrpo/mean_k"] for h in logged]
    assert [x["trainer_silent_frac"] for x in data["steps"]] == [x["silent_frac"] for x in data["steps"]]
    assert s["rollouts"] == sum(int((~pad).sum()) for pad, _ in truth) < len(truth) * G * len(P)
    assert any("padding, not generation" in w for w in s["warnings"])


def test_without_the_trainer_state_the_rows_count_as_generated(capsys, run, tmp_path):
    """Without trainer_state.json nothing says the trainer padded: the rows are TRL's unscorable
    answers (generated, no reward), as for any GRPOTrainer."""
    import shutil

    out, truth, _ = run
    shutil.copytree(out / "completions", tmp_path / "completions")
    s = diagnose_json(capsys, tmp_path)["summary"]
    assert s["padding_rows"] == 0 and s["unscorable_rollouts"] == sum(int(pad.sum()) for pad, _ in truth)
    assert s["rollouts"] == len(truth) * G * len(P)


def test_streamed_counts_equal_the_whole_log(run, tmp_path):
    """The padded run counted file by file equals the whole-log reader's, field by field, with its
    trainer state (padding) and without (the rows are unscorable answers)."""
    import shutil

    from diagnose.test_counts import assert_same

    out, _, _ = run
    assert_same(out)
    shutil.copytree(out / "completions", tmp_path / "completions")
    assert_same(tmp_path)
