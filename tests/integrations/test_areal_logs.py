"""AReaL 1.0.4's own rollout dumps (``WorkflowExecutor._dump_trajectory``, driven through its
rollout loop), read by ``gsd.integrations.areal`` and ``gsd diagnose``, against the tasks' rewards
recorded in the run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("areal", reason="the tests against the real AReaL need areal==1.0.4 (make install)")

from gsd.integrations import areal  # noqa: E402

from .other_trainers import ArealRun  # noqa: E402
from .real_trainers import diagnose_json, steps_of  # noqa: E402

PROMPTS = [f"q{i} w1 w2" for i in range(6)]
P = [0.0, 1.0, 0.5, 0.3, 0.7, 0.5]


def _wired() -> bool:
    from gsd.diagnose import readers

    return "areal" in readers.FORMATS


wiring = pytest.mark.xfail(not _wired(), reason="reader registry not merged yet", strict=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One trial written by two executors (two data-parallel ranks), empty answers included:
    versions 0-2 binary (version 1 behind DAPO's filter), version 3 graded, an evaluation at 2;
    and a clean trial (no empty answers, one executor)."""
    root = tmp_path_factory.mktemp("areal")
    rank0 = ArealRun(root / "busy", empty=0.1)
    rank1 = ArealRun(root / "busy", empty=0.1, seed=1, rank=1, tasks=rank0.tasks)
    for v in range(4):
        for run, prompts in ((rank0, PROMPTS), (rank1, [p.replace("w2", "w3") for p in PROMPTS])):
            run.step(v, prompts, P, dynamic_filter=v == 1, graded=v == 3)
    rank0.step(2, PROMPTS, [1 - x for x in P], is_eval=True)
    clean = ArealRun(root / "clean", seed=2)
    for v in range(3):
        clean.step(v, PROMPTS, P)
    for run in (rank0, rank1, clean):
        run.close()
    return {"busy": rank0, "clean": clean}


def _rows(folder: Path):
    """The dump's rows under ``folder`` (a ``rollout/`` folder) with their file."""
    return [(path, json.loads(line)) for path in sorted(folder.rglob("*.jsonl")) if areal.is_log_file(path)
            for line in path.read_text().splitlines()]


def _tables(folder: Path):
    """Per version: the module's groups (task file, prompt) as arrays of (group, sample_idx, reward)."""
    out = {}
    for path, row in _rows(folder):
        out.setdefault(areal.step_of(path), []).append((path.name, row[areal.PROMPT_COL], row[areal.INDEX_COL],
                                                        row[areal.DEFAULT_REWARD], row[areal.STEP_COL]))
    tables = {}
    for v, rows in out.items():
        keys = [(f, p) for f, p, *_ in rows]
        codes = {k: i for i, k in enumerate(dict.fromkeys(keys))}
        group = np.array([codes[k] for k in keys])
        assert all(r[4] == v for r in rows)  # the row's tail_version is its folder
        tables[v] = (group, np.array([r[2] for r in rows]), np.array([r[3] for r in rows], float), len(codes))
    return tables


def _measured(tables):
    out = {}
    for v, (group, index, reward, n) in tables.items():
        ok, _ = areal.complete_groups(index, group, n)
        silent = areal.zero_std(reward, group, n)
        sizes = np.bincount(group, minlength=n)
        out[v] = (int(ok.sum()), float(silent[ok].mean()), int(sizes[ok & silent].sum()))
    return out


def test_the_module_finds_the_writers_groups(runs):
    for name, run in runs.items():
        tables = _tables(run.log_dir / "rollout")
        assert _measured(tables) == run.per_step(), name
        incomplete = sum(int((~areal.complete_groups(i, g, n)[0]).sum()) for g, i, _, n in tables.values())
        assert incomplete == run.incomplete()
        assert {areal.complete_groups(i, g, n)[1] for g, i, _, n in tables.values()} == {run.G}
    assert runs["busy"].incomplete() > 0  # the empty answers did happen
    # Two executors numbered their tasks alike and appended to the same files.
    files = [p for p in (runs["busy"].log_dir / "rollout").rglob("*.jsonl")]
    assert all(len(p.read_text().splitlines()) > runs["busy"].G for p in files if p.stem == "0")


def test_paths_and_the_evaluation_dump(runs):
    log = runs["busy"].log_dir
    train = sorted((log / "rollout").rglob("*.jsonl"))
    evals = sorted((log / "eval-rollout").rglob("*.jsonl"))
    assert train and evals and all(areal.is_log_file(p) for p in train + evals)
    assert {areal.step_of(p) for p in train} == {0, 1, 2, 3} and {areal.step_of(p) for p in evals} == {2}
    assert all(areal.is_validation_folder(p.parent) for p in evals)
    assert not any(areal.is_validation_folder(p.parent) for p in train)
    assert not areal.is_log_file(log.parent.parent / "tokenizer" / "tokenizer.json")
    # Every key AReaL writes that is not the reward is named as such.
    keys = set(_rows(log / "rollout")[0][1])
    assert keys - set(areal.NOT_REWARD) == {areal.DEFAULT_REWARD}


def test_rejected_tasks_are_dumped(runs):
    run = runs["busy"]
    rejected = [k for k, t in run.tasks.items() if not t[4]]
    assert rejected and all(run.tasks[k][0] == 1 for k in rejected)
    dumped = {(p.parent.name, int(p.stem)) for p, _ in _rows(run.log_dir / "rollout")}
    assert all(("1", task) in dumped for _, task in rejected)


def test_zero_std_is_areal_normalization_of_a_silent_group():
    import torch
    from areal.api.cli_args import NormConfig
    from areal.utils.data import Normalization

    r = np.array([[0.1] * 4, [0.2, 0.2, 0.2, 0.2 + 2**-20], [1, 1, 0, 1], [0.7] * 4], dtype=np.float32)
    adv = Normalization(NormConfig(mean_level="group", std_level="group", group_size=4))(torch.tensor(r.ravel()))
    silent = areal.zero_std(r.ravel(), np.repeat(np.arange(4), 4), 4)
    assert silent.tolist() == [True, False, False, True]
    assert (adv.reshape(4, 4)[torch.tensor(silent)] == 0).all() and (adv.reshape(4, 4)[torch.tensor(~silent)] != 0).any(1).all()


def test_complete_groups_refuses_a_negative_index():
    with pytest.raises(ValueError, match="sample_idx"):
        areal.complete_groups([0, -1], [0, 0], 1)


@wiring
def test_diagnose_reads_the_training_dump(capsys, runs):
    for name, run in runs.items():
        data = diagnose_json(capsys, run.log_dir)
        assert steps_of(data) == run.per_step(), name
        assert data["summary"]["incomplete_groups"] == run.incomplete()
    assert any("eval-rollout" in w for w in diagnose_json(capsys, runs["busy"].log_dir)["summary"]["warnings"])


@wiring
def test_diagnose_update_follows_areal_convention(capsys, runs):
    data = diagnose_json(capsys, runs["clean"].log_dir / "rollout")
    assert data["summary"]["update_convention"] == {"ddof": areal.DDOF, "eps": areal.EPS, "from": "areal"}
