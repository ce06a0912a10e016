"""`gsd diagnose --json` on dumps written by verl 0.9.1's own code (batch balancing and
`_write_generations`), with the uid groups as the truth."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("verl", reason="the tests against the real verl need verl==0.9.1 (make install)")


from .real_trainers import VerlRun, diagnose_json, steps_of  # noqa: E402

PROMPTS = [f"q{i} w1 w2" for i in range(6)]
P = [0.0, 1.0, 0.5, 0.3, 0.7, 0.5]


def dump(folder, steps=3, prompts=PROMPTS, **kw):
    run = VerlRun(folder)
    for step in range(1, steps + 1):
        run.step(step, prompts, P[: len(prompts)] if len(prompts) <= len(P) else P + P, **kw)
    run.close()
    return run


def test_balanced_dump_is_grouped_by_text(capsys, tmp_path):
    run = dump(tmp_path / "rollout_data")
    data = diagnose_json(capsys, tmp_path / "rollout_data")
    assert steps_of(data) == run.per_step()
    assert data["summary"]["warnings"] == [] and "same input text" in data["summary"]["group_by"]


def test_duplicate_texts_merge_unless_a_group_column_is_logged(capsys, tmp_path):
    prompts = PROMPTS + [PROMPTS[2]]  # one text twice in the dataset
    run = dump(tmp_path / "rollout_data", prompts=prompts, extra_index=True)
    exact = diagnose_json(capsys, tmp_path / "rollout_data", "--group-col", "index")
    assert steps_of(exact) == run.per_step()
    merged = diagnose_json(capsys, tmp_path / "rollout_data")
    assert {s["step"]: s["groups"] for s in merged["steps"]} == {1: 6, 2: 6, 3: 6}
    assert any("probably duplicated prompts merged" in w and "--group-col" in w for w in merged["summary"]["warnings"])


def test_graded_scores_and_a_boolean_extra(capsys, tmp_path):
    run = dump(tmp_path / "rollout_data", graded=True)
    graded = diagnose_json(capsys, tmp_path / "rollout_data")  # no threshold: measured figures only
    assert steps_of(graded) == run.per_step()
    assert graded["summary"]["prior"] is None
    # verl dumps numpy booleans as "True"/"False": read as 1/0.
    acc = diagnose_json(capsys, tmp_path / "rollout_data", "--reward", "acc")
    assert acc["summary"]["rewards_as"] == "binary rewards (0/1)" and acc["summary"]["bad_rows"] == 0
    assert acc["summary"]["rollouts"] == graded["summary"]["rollouts"]


def test_a_null_score_makes_its_group_incomplete(capsys, tmp_path):
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    run = dump(tmp_path / "rollout_data", steps=2)
    path = tmp_path / "rollout_data" / "2.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    target = rows[5]["input"]
    scores = [None if i == 5 else r["score"] for i, r in enumerate(rows)]
    RayPPOTrainer._write_generations(
        [r["input"] for r in rows],
        [r["output"] for r in rows],
        [r["gts"] for r in rows],
        scores,
        {"acc": [r["acc"] for r in rows]},
        str(tmp_path / "rollout_data"),
        2,
    )
    data = diagnose_json(capsys, tmp_path / "rollout_data")
    lost = PROMPTS.index(target)
    assert steps_of(data) == run.per_step(drop={2: {f"2-{lost}"}})
    assert data["summary"]["incomplete_groups"] == 1 and data["summary"]["bad_rows"] == 1


def test_the_training_dump_is_read_not_the_validation_one(capsys, tmp_path):
    run = dump(tmp_path / "run" / "rollout_data")
    val = VerlRun(tmp_path / "run" / "validation_data", seed=1)
    for step in (0, 2):
        val.step(step, PROMPTS, [1 - x for x in P])
    val.close()
    data = diagnose_json(capsys, tmp_path / "run")
    assert steps_of(data) == run.per_step()
    assert any("validation" in w and "rollout_data" in w for w in data["summary"]["warnings"])


def _verl_advantages(scores, uids):
    """verl 0.9.1's own compute_grpo_outcome_advantage on the scores as its trainer holds them (a
    float32 token-level reward, the score on the last token)."""
    import numpy as np
    import torch
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    rewards = torch.tensor(scores, dtype=torch.float32).unsqueeze(1)
    adv, _ = compute_grpo_outcome_advantage(rewards, torch.ones_like(rewards), np.asarray(uids, dtype=object))
    return adv[:, 0].numpy()


def _no_contrast(adv, uids):
    """Per uid, whether verl gave every member the same advantage (nothing pushes one against another)."""
    return {u: bool(len({float(a) for a, v in zip(adv, uids) if v == u}) == 1) for u in dict.fromkeys(uids)}


SCORE_SETS = [
    [1.0, 0.99999999],
    [0.7] * 8,
    [0.1] * 7,
    [0.1 + 0.2, 0.3, 0.3],
    [0.0, 1e-8],
    [0.0, 1e-30, 0.0],
    [1.0, 1.0 + 2**-23],
    [0.25] * 4,
    [0.5, 0.5, 0.5, 0.50000001],
    [3.0, 3.0000002],
]


def test_silence_is_verls_float32_arithmetic(capsys, tmp_path):
    """Groups verl's float32 arithmetic sees as all equal (1.0 beside 0.99999999) are silent, the
    others not: against verl's own advantage function on the same scores, and through a dump
    written by verl's own writer."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    from gsd.integrations.verl import zero_std

    uids = [f"g{i}" for i, group in enumerate(SCORE_SETS) for _ in group]
    scores = [s for group in SCORE_SETS for s in group]
    truth = _no_contrast(_verl_advantages(scores, uids), uids)
    assert truth["g0"] and truth["g1"] and not truth["g4"] and not truth["g6"]  # the cases the set is for
    code = np.array([int(u[1:]) for u in uids])
    assert zero_std(np.array(scores), code, len(SCORE_SETS)).tolist() == list(truth.values())
    prompts = [f"q{u[1:]} w1 w2" for u in uids]
    RayPPOTrainer._write_generations(
        prompts, ["a"] * len(uids), ["w1"] * len(uids), scores, {}, str(tmp_path / "rollout_data"), 1
    )
    data = diagnose_json(capsys, tmp_path / "rollout_data")
    assert data["steps"][0]["groups"] == len(SCORE_SETS)
    assert data["steps"][0]["silent_frac"] == pytest.approx(np.mean(list(truth.values())))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.lists(
            st.sampled_from([0.0, 1e-8, 0.1, 0.2, 0.3, 0.1 + 0.2, 0.7, 0.99999999, 1.0, 1.0 + 1e-7, 2.5, -1.0]),
            min_size=2,
            max_size=9,
        ),
        min_size=1,
        max_size=6,
    )
)
def test_zero_std_is_verls_no_contrast(groups):
    from gsd.integrations.verl import zero_std

    uids = [f"g{i}" for i, g in enumerate(groups) for _ in g]
    scores = [s for g in groups for s in g]
    truth = _no_contrast(_verl_advantages(scores, uids), uids)
    code = np.array([int(u[1:]) for u in uids])
    assert zero_std(np.array(scores), code, len(groups)).tolist() == list(truth.values())
