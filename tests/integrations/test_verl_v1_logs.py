"""`gsd diagnose --json`, no flags, on dumps of verl 0.9.1's default (V1) trainer: its own
TransferQueue, ReplayBuffer and `_log_rollout_data` on the CPU, the truth from the keys."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("verl", reason="the tests against the real verl need verl==0.9.1 (make install)")
pytest.importorskip("transfer_queue", reason="verl's V1 trainer needs transferqueue==0.1.11 (make install)")

from .real_trainers import diagnose_json, steps_of  # noqa: E402
from .verl_v1 import VerlV1Run, start_transfer_queue  # noqa: E402

PROMPTS = [f"q{i} w1 w2" for i in range(6)]
P = [0.0, 1.0, 0.5, 0.3, 0.7, 0.5]


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """Every V1 set-up dumped once: one Ray and TransferQueue for all of them."""
    root = tmp_path_factory.mktemp("verl_v1")
    stop = start_transfer_queue()
    try:
        runs = {}
        plain = VerlV1Run(root / "plain" / "rollout_data")
        for step in (1, 2, 3):
            plain.step(step, PROMPTS, P)
        runs["plain"] = plain
        twice = VerlV1Run(root / "twice" / "rollout_data", seed=1)
        for step in (1, 2):
            twice.step(step, PROMPTS + [PROMPTS[2]], P + [P[2]])  # one prompt text twice in each step
        runs["twice"] = twice
        multi = VerlV1Run(root / "multi" / "rollout_data", seed=2)
        for step in (1, 2):
            multi.step(step, PROMPTS, P, outputs=[1, 3, 2])  # multi-turn sessions: several outputs
        runs["multi"] = multi
        dapo = VerlV1Run(root / "dapo" / "rollout_data", seed=3)
        for step in (1, 2):
            dapo.step(step, PROMPTS, P, filter_groups=True)
        runs["dapo"] = dapo
        # A run restarted in the same folder from its step-2 checkpoint: the first attempt wrote
        # steps 1-5, the second rewrote 3 and 4 and stopped; the first attempt's step 5 stays.
        first = VerlV1Run(root / "resumed" / "rollout_data", seed=4)
        for step in range(1, 6):
            first.step(step, PROMPTS, P)
        for f in (root / "resumed" / "rollout_data").glob("*.jsonl"):  # the first attempt ran an hour earlier
            st = f.stat()
            os.utime(f, (st.st_atime - 3600, st.st_mtime - 3600))
        second = VerlV1Run(root / "resumed" / "rollout_data", seed=5)
        for step in (3, 4):
            second.step(step, PROMPTS, P)
        runs["resumed"] = (first, second)
        for run in (plain, twice, multi, dapo, first, second):
            run.close()
    finally:
        stop()
    return root, runs


def test_plain_v1_dump_is_exact(capsys, dumps):
    root, runs = dumps
    data = diagnose_json(capsys, root / "plain")
    assert steps_of(data) == runs["plain"].per_step()
    s = data["summary"]
    assert "uid" in s["group_by"] and s["warnings"] == [] and s["silent_observable"] is True
    assert s["rows"] == s["sessions"] == 3 * 6 * 4 and s["groups"] == 18


def test_one_prompt_text_twice_is_two_groups(capsys, dumps):
    root, runs = dumps
    data = diagnose_json(capsys, root / "twice")
    assert steps_of(data) == runs["twice"].per_step()
    assert all(x["groups"] == 7 for x in data["steps"]) and data["summary"]["prompts"] == 6
    assert not any("merged" in w for w in data["summary"]["warnings"])
    # --group-col uid names V1's own key: read its uid part, as with no flag.
    assert steps_of(diagnose_json(capsys, root / "twice", "--group-col", "uid")) == runs["twice"].per_step()


def test_a_multi_output_session_counts_once(capsys, dumps):
    root, runs = dumps
    data = diagnose_json(capsys, root / "multi")
    assert steps_of(data) == runs["multi"].per_step()
    s = data["summary"]
    sessions = 2 * 6 * 4
    outputs = 2 * 6 * (1 + 3 + 2 + 1)  # sessions 0..3 have 1, 3, 2, 1 outputs
    assert s["sessions"] == sessions and s["rows"] == outputs and s["extra_outputs"] == outputs - sessions
    assert any("final output" in w for w in s["warnings"])


def test_filtered_groups_are_not_called_zero_silent(capsys, dumps):
    root, runs = dumps
    dapo = runs["dapo"]
    assert sum(dapo.evicted.values()) > 0  # verl's ReplayBuffer did evict silent groups
    data = diagnose_json(capsys, root / "dapo")
    assert steps_of(data) == dapo.per_step()  # exact on what was dumped: the trained groups
    s = data["summary"]
    assert s["silent_observable"] is False and s["silent_frac"] is None and s["silent_frac_dumped"] == 0.0
    assert any("filter_groups" in w and "evicted_samples" in w for w in s["warnings"])
    from gsd.cli import main

    capsys.readouterr()
    assert main(["diagnose", "--no-progress", str(root / "dapo")]) == 0
    text = capsys.readouterr().out
    assert "not in the log" in text and "0.0 % measured" not in text


def test_dapo_evictions_in_verls_metric_log(capsys, dumps, tmp_path, monkeypatch):
    """The ReplayBuffer's own per-step metrics, written by verl's file logger: `gsd scalars` reads the
    silent share of the groups drawn as evicted / (trained + evicted + discarded surplus), against every
    group generated."""
    import numpy as np
    from verl.trainer.ppo.v1.replay_buffer import DAPO_FILTERED_REWARD_COUNTS_KEY
    from verl.utils.tracking import Tracking

    from gsd.cli import main

    root, runs = dumps
    dapo = runs["dapo"]
    path = tmp_path / "metrics.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(path))
    tracker = Tracking(project_name="gsd", experiment_name="dapo", default_backend="file")
    for step in sorted(dapo.metrics):
        metrics = {**dapo.metrics[step], "critic/score/mean": 0.5}
        metrics.pop(DAPO_FILTERED_REWARD_COUNTS_KEY, None)  # as V1's fit loop does before self.logger.log
        tracker.log(metrics, step=step)
    tracker.finish()
    capsys.readouterr()
    rc = main(["scalars", "--json", str(path), "--groups", str(len(PROMPTS)), "--group-size", str(dapo.n)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    data = json.loads(out)
    got = {s["step"]: s["silent_frac"] for s in data["steps"]}
    want = {step: float(np.mean([max(g) == min(g) for g in groups])) for step, groups in dapo.generated.items()}
    assert got == pytest.approx(want, abs=1e-12)
    silent_groups = sum(max(g) == min(g) for groups in dapo.generated.values() for g in groups)
    assert data["summary"]["wasted_rollouts"] == pytest.approx(silent_groups * dapo.n)
    assert "fit_status" not in data["summary"]  # the mean score is the trained groups': no fit


def test_a_restarted_run_leaves_the_first_attempts_later_steps_out(capsys, dumps):
    root, runs = dumps
    first, second = runs["resumed"]
    data = diagnose_json(capsys, root / "resumed")
    assert steps_of(data) == {**first.per_step(steps={1, 2}), **second.per_step()}
    assert data["summary"]["excluded_steps"] == [5]
    assert any(w.startswith("steps 5:") and "left out" in w for w in data["summary"]["warnings"])


def test_steps_come_from_the_rows_whatever_the_file_name(capsys, dumps, tmp_path):
    root, runs = dumps
    rows = []
    for f in sorted((root / "plain" / "rollout_data").glob("*.jsonl")):
        rows += f.read_text().splitlines()
    dump = tmp_path / "rollouts.jsonl"  # every step in one file, under a name verl does not use
    dump.write_text("\n".join(rows) + "\n")
    data = diagnose_json(capsys, dump, "--format", "verl")
    assert steps_of(data) == runs["plain"].per_step()
    assert json.loads(rows[0])["uid"].count("_") >= 2
