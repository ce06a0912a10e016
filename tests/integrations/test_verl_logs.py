"""`gsd diagnose --json` on dumps written by verl 0.9.1's own code (batch balancing and
`_write_generations`), with the uid groups as the truth."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("verl", reason="the tests against the real verl need verl==0.9.1 (make install)")


from .real_trainers import VerlRun, diagnose_json, steps_of  # noqa: E402

PROMPTS = [f"q{i} w1 w2" for i in range(6)]
P = [0.0, 1.0, 0.5, 0.3, 0.7, 0.5]


def dump(folder, steps=3, prompts=PROMPTS, **kw):
    run = VerlRun(folder)
    for step in range(1, steps + 1):
        run.step(step, prompts, P[:len(prompts)] if len(prompts) <= len(P) else P + P, **kw)
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
    RayPPOTrainer._write_generations([r["input"] for r in rows], [r["output"] for r in rows], [r["gts"] for r in rows],
                                     scores, {"acc": [r["acc"] for r in rows]}, str(tmp_path / "rollout_data"), 2)
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
