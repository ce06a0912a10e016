"""Readers: verl, TRL and plain tables give the rows that were written; bad rows are reported."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gsd.diagnose import read_rollouts
from gsd.diagnose.readers import find_log_files

from .conftest import rollouts, write_trl, write_verl


def _as_frame(log):
    return pd.DataFrame({"step": log.step, "prompt": log.labels[log.prompt], "reward": log.reward})


def _same_rows(log, df, reward="score"):
    got = _as_frame(log).sort_values(["step", "prompt", "reward"]).reset_index(drop=True)
    want = df.rename(columns={reward: "reward"})[["step", "prompt", "reward"]]
    want = want.sort_values(["step", "prompt", "reward"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)


def test_verl_rows_and_malformed_line(verl_log):
    folder, df, (bad_file, bad_line) = verl_log
    log = read_rollouts(folder)
    assert log.fmt == "verl" and log.reward_name == "score"
    _same_rows(log, df)
    assert log.bad_count == 1
    assert log.bad_rows[0].file == str(bad_file.resolve()) and log.bad_rows[0].line == bad_line
    assert "not valid JSON" in log.bad_rows[0].reason
    assert log.labels.size == df["prompt"].nunique()


def test_verl_named_key(tmp_path):
    df, _ = rollouts(graded=True)
    write_verl(tmp_path, df)
    log = read_rollouts(tmp_path, reward="acc")
    _same_rows(log, df.assign(acc=df["right"].astype(float)), reward="acc")


def test_verl_glob_and_file_list(tmp_path):
    df, _ = rollouts()
    write_verl(tmp_path, df)
    by_glob = read_rollouts(str(tmp_path / "[12].jsonl"))
    assert set(np.unique(by_glob.step)) == {1, 2}
    files = sorted(tmp_path.glob("*.jsonl"))
    assert [f.name for f in find_log_files(files)] == [f"{s}.jsonl" for s in range(1, 6)]


def _trl_total(weights, *columns):
    """TRL's reward, as its GRPOTrainer computes it: float32 rewards times float32 weights, nansum."""
    torch = pytest.importorskip("torch")
    parts = torch.tensor(np.stack([np.asarray(c, float) for c in columns], axis=1), dtype=torch.float32)
    return (parts * torch.tensor(weights, dtype=torch.float32)).nansum(dim=1).double().numpy()


def test_trl_one_sum_and_ambiguous(tmp_path):
    df, _ = rollouts(graded=True)
    write_trl(tmp_path / "out", df)
    log = read_rollouts(tmp_path / "out", reward="accuracy_reward")
    assert log.fmt == "trl"
    _same_rows(log, df.assign(score=_trl_total([1.0], df["score"])))
    both = read_rollouts(tmp_path / "out", reward="accuracy_reward+format_reward")
    _same_rows(both, df.assign(score=_trl_total([1.0, 1.0], df["score"], np.full(len(df), 0.5))))
    # By default, what TRL normalises: the sum of the reward columns, weight 1 each (TRL does not
    # log its reward_weights), said in a warning; weights are given in the expression.
    default = read_rollouts(tmp_path / "out")
    _same_rows(default, df.assign(score=_trl_total([1.0, 1.0], df["score"], np.full(len(df), 0.5))))
    assert default.reward_name == "accuracy_reward + format_reward"
    assert any("reward_weights" in w for w in default.warnings)
    weighted = read_rollouts(tmp_path / "out", reward="2*accuracy_reward - 0.5*format_reward")
    _same_rows(weighted, df.assign(score=_trl_total([2.0, -0.5], df["score"], np.full(len(df), 0.5))))
    assert weighted.reward_name == "2*accuracy_reward - 0.5*format_reward"
    assert not any("reward_weights" in w for w in weighted.warnings)
    write_trl(tmp_path / "single", df, names=("accuracy_reward",))
    _same_rows(read_rollouts(tmp_path / "single"), df.assign(score=_trl_total([1.0], df["score"])))  # found by itself


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_plain_table(tmp_path, suffix):
    df, _ = rollouts()
    table = df.rename(columns={"prompt": "qid", "score": "r", "step": "it"})[["qid", "r", "it"]]
    path = tmp_path / f"log{suffix}"
    if suffix == ".csv":
        table.to_csv(path, index=False)
    elif suffix == ".parquet":
        table.to_parquet(path)
    else:
        table.to_json(path, orient="records", lines=True)
    log = read_rollouts(path, reward="r", prompt_col="qid", step_col="it")
    assert log.fmt == "table"
    _same_rows(log, df)


def test_csv_bad_rows_reported_with_lines(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text("prompt,reward,step\na,1,1\na,0,1\na,oops,1\nb,1,1,extra\nb,0,1\nb,,1\nc,1,1\nc,1,1\n")
    log = read_rollouts(path, reward="reward")
    # a and b lost a row each: incomplete, left out whole (their 3 usable rows with them); c stays.
    assert log.rows == 2 and log.labels[log.prompt].tolist() == ["c", "c"]
    assert log.incomplete_groups == 2 and log.incomplete_rollouts == 3
    assert sorted((b.line, b.reason.split(" ")[0]) for b in log.bad_rows) == [
        (4, "reward"),
        (5, "malformed"),
        (7, "reward"),
    ]


def test_non_numeric_scores_are_reported(tmp_path):
    df, _ = rollouts(steps=1, prompts=20)
    write_verl(tmp_path, df)
    path = tmp_path / "1.jsonl"
    lines = path.read_text().splitlines()
    lines[4] = lines[4].replace('"score":', '"score":"n/a","was":')
    path.write_text("\n".join(lines) + "\n")
    log = read_rollouts(tmp_path)
    assert log.bad_count == 1 and log.bad_rows[0].line == 5
    assert "not a number" in log.bad_rows[0].reason
    # The row's group is incomplete: left out whole.
    lost = (df["prompt"] == df.iloc[4]["prompt"]).sum()
    assert log.incomplete_groups == 1 and log.incomplete_rollouts == lost - 1
    assert log.rows == len(df) - lost


@pytest.mark.parametrize(
    "case, match",
    [
        ("empty", "no rollout log file found"),
        ("missing", "neither a file"),
        ("pattern", "matches no file"),
        ("wrong-format", "format trl reads"),
        ("missing-key", "reward column 'accuracy' not found"),
        ("not-parquet", "not a readable parquet file"),
    ],
)
def test_bad_input(tmp_path, case, match):
    df, _ = rollouts(steps=2, prompts=10)
    write_verl(tmp_path / "v", df)
    (tmp_path / "empty").mkdir()
    kwargs = {}
    if case == "empty":
        target = tmp_path / "empty"
    elif case == "missing":
        target = tmp_path / "nothing-here"
    elif case == "pattern":
        target = str(tmp_path / "*.nothing")
    elif case == "wrong-format":
        target, kwargs = tmp_path / "v" / "1.jsonl", {"fmt": "trl"}
    elif case == "missing-key":
        target, kwargs = tmp_path / "v", {"reward": "accuracy"}
    else:
        target = tmp_path / "completions_00001.parquet"
        target.write_text("this is not parquet")
    with pytest.raises(ValueError, match=match):
        read_rollouts(target, **kwargs)


def test_trl_chat_prompts_and_eval_rows(tmp_path):
    system = {"role": "system", "content": "You are a careful solver."}
    chat = [[system, {"role": "user", "content": f"q{i // 4}"}] for i in range(12)]
    df = pd.DataFrame(
        {
            "mode": ["train"] * 8 + ["eval"] * 4,
            "step": 7,
            "prompt": chat,
            "completion": "a",
            "accuracy_reward": [1.0, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1],
            "advantage": 0.0,
        }
    )
    (tmp_path / "completions").mkdir()
    df.to_parquet(tmp_path / "completions" / "completions_00007.parquet")
    log = read_rollouts(tmp_path)
    assert log.rows == 8 and set(log.step) == {7}  # the evaluation rows are left out
    assert sorted(log.labels) == ["q0", "q1"]  # a conversation is labelled by its last user message
    assert log.group_size == 4 and np.bincount(log.group).tolist() == [4, 4]


def test_trl_sum_skips_functions_that_did_not_apply(tmp_path):
    df = pd.DataFrame(
        {
            "step": 1,
            "prompt": ["a"] * 4,
            "completion": "x",
            "math": [1.0, None, 0.0, None],
            "code": [None, 1.0, 0.0, None],
            "advantage": 0.0,
        }
    )
    (tmp_path / "completions").mkdir()
    df.to_parquet(tmp_path / "completions" / "completions_00001.parquet")
    log = read_rollouts(tmp_path, reward="math+code")
    # The row no function scored stays in its block, as TRL keeps it (out of the mean and std).
    assert np.array_equal(log.reward, [1.0, 1.0, 0.0, np.nan], equal_nan=True) and log.bad_count == 0
    assert log.unscorable_rollouts == 1 and np.bincount(log.group).tolist() == [4]


def test_edges_of_the_reader(tmp_path):
    """Files at the edges: each read right, or refused with one line naming the file."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from gsd import InputError

    t = pa.table(
        [pa.array(["a"] * 4), pa.array([0.0, 1, 1, 0]), pa.array([1] * 4), pa.array([0.0] * 4)],
        names=["prompt", "r", "step", "r"],
    )
    pq.write_table(t, tmp_path / "dup.parquet")
    with pytest.raises(InputError, match="dup.parquet: the column name 'r' is used by 2 columns"):
        read_rollouts(tmp_path / "dup.parquet", reward="r")
    pq.write_table(
        pa.table({"prompt": ["a"] * 4, "r": pa.array([0, 1, 1, 2**64 - 1], pa.uint64()), "step": [1] * 4}),
        tmp_path / "u64.parquet",
    )
    assert read_rollouts(tmp_path / "u64.parquet", reward="r").reward.tolist() == [0.0, 1.0, 1.0, float(2**64 - 1)]
    # pandas writes the integer steps of a float column as "1.0", "2.0"
    pd.DataFrame(
        {"prompt": ["a"] * 4 + ["b"] * 4, "r": [0, 1, 1, 0, 1, 1, 1, 1], "step": [1.0] * 4 + [2.0] * 4}
    ).to_csv(tmp_path / "f.csv", index=False)
    assert sorted(set(read_rollouts(tmp_path / "f.csv", reward="r").step.tolist())) == [1, 2]
    pd.DataFrame({"prompt": ["a"] * 4, "x": [1e308, 1e308, 0, 0], "y": [1e308, 1e308, 0, 1], "step": 1}).to_csv(
        tmp_path / "over.csv", index=False
    )
    with pytest.raises(InputError, match=r"over.csv: the reward 'x \+ y' overflows"):
        read_rollouts(tmp_path / "over.csv", reward="x+y")
    # A row whose group key is missing belongs to one of its prompt's groups of that step: both
    # of them are incomplete, the other prompt's group is whole.
    rows = [
        {"input": q, "score": s, "step": 1, "gid": g}
        for q, g in (("q1", 7), ("q1", 8), ("q2", 9))
        for s in (0, 1, 1, 0)
    ]
    rows[2]["gid"] = None
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "1.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    log = read_rollouts(tmp_path / "v", group_col="gid")
    assert log.incomplete_groups == 2 and np.bincount(log.group).tolist() == [4] and log.labels.tolist() == ["q2"]
    # A step number beyond int64 in a file name: the rows' step is used.
    (tmp_path / "t" / "completions").mkdir(parents=True)
    pd.DataFrame(
        {"step": [3] * 4, "prompt": ["a"] * 4, "completion": "x", "r": [0.0, 1, 1, 0], "advantage": 0.0}
    ).to_parquet(tmp_path / "t" / "completions" / f"completions_{10**25}.parquet")
    assert read_rollouts(tmp_path / "t", group_size=4).step.tolist() == [3] * 4


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_table_column_named_reward_is_the_reward(tmp_path, suffix):
    df = pd.DataFrame({"prompt": ["a"] * 4 + ["b"] * 4, "step": 1, "reward": [0, 1, 1, 0, 1, 1, 1, 1]})
    path = tmp_path / f"log{suffix}"
    df.to_csv(path, index=False) if suffix == ".csv" else df.to_parquet(path)
    log = read_rollouts(path)
    assert log.reward_name == "reward" and sorted(log.reward.tolist()) == sorted(df["reward"].astype(float))
