"""The streaming counts (:mod:`gsd.diagnose.counts`) against the whole-log reader and diagnosis,
field by field, on every kind of log the reader takes; their merge against one pass."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gsd.diagnose import diagnose_log, read_rollouts
from gsd.diagnose.counted import diagnose_counted, read_counted
from gsd.diagnose.counts import Cells, Partial, count_rollouts, finish

from .conftest import rollouts, write_trl, write_verl

EXAMPLES = Path(__file__).resolve().parents[2] / "data" / "example_logs"
GROUP_COLUMNS = ("step", "prompt", "G", "generated", "n", "k", "silent", "binary_silent")
STEP_COLUMNS = ("groups", "singletons", "rollouts", "silent_groups", "silent_frac", "all_wrong", "all_right")


def assert_same(paths, threshold=None, **kw):
    """The counts equal the whole-log diagnosis's measured columns, field by field."""
    log = read_rollouts(paths, progress=False, **kw)
    d = diagnose_log(log, threshold=threshold)
    got = count_rollouts(paths, threshold=threshold, progress=False, **kw)
    for c in GROUP_COLUMNS:
        want = np.asarray(d.groups[c])
        assert np.array_equal(want, got.groups[c], equal_nan=want.dtype.kind == "f"), c
    for c in ("step", *STEP_COLUMNS, "wasted_rollouts"):
        assert np.array_equal(np.asarray(d.steps[c]), got.steps[c], equal_nan=True), c
    assert got.labels.tolist() == log.labels.tolist() and got.hashes.tolist() == log.hashes.tolist()
    assert (got.incomplete_groups, got.incomplete_rollouts) == (log.incomplete_groups, log.incomplete_rollouts)
    assert got.bad_count == log.bad_count
    graded = "graded" in (d.summary["rewards_as"] or "")
    if not graded:  # graded: the note names the values it saw
        assert got.right_rule == d.summary["rewards_as"]
    assert_same_diagnosis(d, diagnose_log(read_counted(paths, threshold=threshold, **kw)), graded)
    assert_same_streamed(paths, threshold, graded, **kw)
    return got


def assert_same_streamed(paths, threshold, graded, **kw):
    """The diagnosis streamed (its group table made run by run, predicted and summed, then kept,
    dropped or handed on) equals the whole log's, field by field, with and without forgetting."""
    for half_life in (None, 3.0, "auto") if not graded or threshold is not None else (None,):
        want = diagnose_log(read_rollouts(paths, progress=False, **kw), threshold=threshold, half_life=half_life)
        got = diagnose_counted(paths, threshold=threshold, half_life=half_life, groups=True, **kw)
        assert_same_diagnosis(want, got, graded)
        chunks = []
        dropped = diagnose_counted(paths, threshold=threshold, half_life=half_life, groups=chunks.append, **kw)
        if dropped.groups is None:  # a streamed format: the chunks are the table, in order
            table = {c: np.concatenate([g[c] for g in chunks]) for c in chunks[0]}
            pd.testing.assert_frame_equal(want.groups, pd.DataFrame(table), check_exact=True)
        for table in ("steps", "prompts"):
            pd.testing.assert_frame_equal(getattr(want, table), getattr(dropped, table), check_exact=True)
        assert want.silence_is_binary == dropped.silence_is_binary
        assert all(np.array_equal(a, b) for a, b in zip(want.difficulty, dropped.difficulty))


def assert_same_diagnosis(want, got, graded=False):
    """Two diagnoses equal: every table, column by column, and every summary field (the graded
    note, which names the distinct rewards seen, apart)."""
    for table in ("steps", "prompts", "groups"):
        pd.testing.assert_frame_equal(getattr(want, table), getattr(got, table), check_exact=True)
    a, b = dict(want.summary), dict(got.summary)
    if graded:
        a.pop("rewards_as"), b.pop("rewards_as")
        a["warnings"] = [w for w in a["warnings"] if "graded" not in w]
        b["warnings"] = [w for w in b["warnings"] if "graded" not in w]
    assert json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def test_right_rule_is_in_the_summary(tmp_path):
    df, _ = rollouts(steps=2, prompts=20)
    write_verl(tmp_path / "rollout_data", df)
    assert "rewards_as" in diagnose_log(read_rollouts(tmp_path / "rollout_data", progress=False)).summary


@pytest.mark.parametrize("name", ["verl", "areal", "trl", "rollouts.csv"])
def test_example_logs(name):
    path = EXAMPLES / name
    kw = {"reward": "r", "prompt_col": "qid", "step_col": "it"} if name.endswith(".csv") else {}
    assert_same(path, **kw)


def test_verl_legacy_with_a_malformed_line(tmp_path):
    df, _ = rollouts()
    write_verl(tmp_path / "rollout_data", df, malformed_step=2)
    assert_same(tmp_path / "rollout_data")


def test_verl_fixed_groups_place_a_malformed_line(tmp_path):
    df, _ = rollouts(fixed_group_size=8)
    write_verl(tmp_path / "rollout_data", df)
    path = tmp_path / "rollout_data" / "3.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = lines[2][: len(lines[2]) // 2] + "\n"  # a row cut short: its group is one short
    path.write_text("".join(lines))
    got = assert_same(tmp_path / "rollout_data")
    assert got.incomplete_groups == 1


def test_verl_graded_with_and_without_threshold(tmp_path):
    df, _ = rollouts(graded=True)
    write_verl(tmp_path / "rollout_data", df)
    assert np.isnan(assert_same(tmp_path / "rollout_data").groups["k"]).all()
    assert_same(tmp_path / "rollout_data", threshold=0.5)


def test_two_reward_values_and_float32_silence(tmp_path):
    df, _ = rollouts(steps=3)
    df["score"] = np.where(df["right"] == 1, 1.0, -1.0)
    df.loc[df.index[::7], "score"] = 0.99999999  # 1.0 in float32: verl's silence
    write_verl(tmp_path / "a" / "rollout_data", df)
    assert_same(tmp_path / "a" / "rollout_data")
    df["score"] = np.where(df["right"] == 1, 1.0, -1.0)
    write_verl(tmp_path / "b" / "rollout_data", df)
    assert "two reward values" in assert_same(tmp_path / "b" / "rollout_data").right_rule


def v1_rows(rng, step, prompts=6, n=4):
    rows = []
    for i in range(prompts):
        uid = f"u{step}-{i}"
        for j in range(n):
            for index in range(1 + (j == 0)):  # session 0 has two outputs: the last one counts
                rows.append({"input": f"q{i % 4}", "output": "a", "score": float(rng.random() < 0.5), "step": step,
                             "uid": f"{uid}_{j}_{index}"})  # fmt: skip
    return rows


def test_verl_v1_with_bad_keys_conflicts_and_repeats(tmp_path):
    rng = np.random.default_rng(3)
    folder = tmp_path / "rollout_data"
    folder.mkdir()
    for step in (1, 2, 3):
        rows = v1_rows(rng, step)
        if step == 2:
            rows[3]["uid"] = "malformed"  # a bad key: its prompt's groups at the step are left out
            rows.append(dict(rows[5]))  # a repeat, counted once
            rows.append({**rows[8], "score": 1.0 - rows[8]["score"]})  # a contradiction
        if step == 3:
            rows[4]["score"] = None
        (folder / f"{step}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = assert_same(folder)
    assert got.incomplete_groups > 0 and got.bad_count >= 3


def write_table(path, df):
    if path.suffix == ".csv":
        df.to_csv(path, index=False)
    elif path.suffix == ".parquet":
        df.to_parquet(path, index=False)
    else:
        df.to_json(path, orient="records", lines=True)


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_tables_in_several_pieces(tmp_path, monkeypatch, suffix):
    """A table read in pieces of 1000 rows (groups cut across pieces) with missing values and a
    group column: the merged counts are the whole read's."""
    import gsd.diagnose.load as load

    monkeypatch.setattr(load, "CHUNK_ROWS", 1000)
    df, _ = rollouts(steps=3)
    df = df.sample(frac=1.0, random_state=0).reset_index(drop=True)  # a group's rows in several pieces
    df["gid"] = df.groupby(["step", "prompt"]).ngroup() % 997
    df.loc[df.index[::301], "score"] = np.nan
    df.loc[df.index[5::499], "prompt"] = None
    df.loc[df.index[7::613], "gid"] = None
    write_table(tmp_path / f"t{suffix}", df)
    assert_same(tmp_path / f"t{suffix}", reward="score", group_col="gid")
    assert_same(tmp_path / f"t{suffix}", reward="score")


def test_trl_is_streamed_with_the_same_answer(tmp_path):
    from gsd.diagnose.counts import count_partial

    df, _ = rollouts(steps=3, fixed_group_size=8)
    write_trl(tmp_path / "out" / "completions", df)
    assert "arranged" in count_partial(tmp_path / "out", progress=False)[0].meta  # not read whole
    assert_same(tmp_path / "out")


def test_a_left_over_of_another_attempt_is_left_out(tmp_path):
    import os

    df, _ = rollouts(steps=5)
    folder = tmp_path / "rollout_data"
    write_verl(folder, df)
    for step in range(1, 6):  # steps 4-5 written first, by an earlier attempt
        t = 1_000_000 + {4: 0, 5: 10}.get(step, 100 + step * 10)
        os.utime(folder / f"{step}.jsonl", (t, t))
    got = assert_same(folder)
    assert got.steps["step"].tolist() == [1, 2, 3]


def test_no_usable_row_and_a_bad_threshold(tmp_path):
    (tmp_path / "t.csv").write_text("prompt,reward\n,1\n")
    with pytest.raises(Exception, match="no usable rollout"):
        count_rollouts(tmp_path / "t.csv", progress=False)
    with pytest.raises(Exception, match="threshold"):
        count_rollouts(tmp_path / "t.csv", threshold=float("inf"), progress=False)


def cells_of(rows):
    """Cells of rows (step, gkey, hash, reward, lost) built directly, one cell per row."""
    step, gkey, h, r, lost = (np.array(x) for x in zip(*rows))
    n = step.size
    r = np.where(lost, np.nan, r.astype(float))
    return Cells(
        step.astype(np.int64), gkey.astype(np.int64), np.where(lost, 0, h).astype(np.int64),
        (~lost).astype(np.int64), np.where(lost, np.inf, r), np.where(lost, -np.inf, r),
        (~lost).astype(np.int64), np.where(lost, 0, r >= 0.5).astype(np.int64), np.zeros(n, bool),
        np.where(lost, np.iinfo(np.int64).max, np.arange(n)), lost.astype(bool),
    )  # fmt: skip


row = st.tuples(
    st.integers(1, 3), st.integers(0, 3), st.integers(1, 4), st.sampled_from([0.0, 0.25, 0.5, 1.0]), st.booleans()
)


@settings(max_examples=200, deadline=None)
@given(st.lists(row, min_size=1, max_size=40), st.data())
def test_merge_of_any_partition_is_one_pass(rows, data):
    """Cells merged from any split of the rows into parts equal the cells of all rows at once,
    and the finished counts agree; the direct computation: per (step, gkey, hash) min, max, sum."""
    whole = Cells.merge([cells_of(rows)] * 1)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(rows)), max_size=4)))
    parts, start = [], 0
    for cut in [*cuts, len(rows)]:
        if cut > start:
            part = cells_of(rows[start:cut])
            part.first = part.first + np.where(part.first < np.iinfo(np.int64).max, start, 0)
            parts.append(part)
        start = cut
    merged = Cells.merge([Cells.merge(parts[: len(parts) // 2]), Cells.merge(parts[len(parts) // 2 :])])
    reduced = Cells.merge([whole, Cells.empty()])
    for name in Cells.ARRAYS:
        assert np.array_equal(getattr(merged, name), getattr(reduced, name)), name
    direct = {}
    for s, g, h, r, lost in rows:
        if not lost:
            lo, hi = direct.get((s, g, h), (np.inf, -np.inf))
            direct[(s, g, h)] = (min(lo, r), max(hi, r))
    kept = merged.rows > 0
    got = {(int(a), int(b), int(c)): (lo, hi) for a, b, c, lo, hi in
           zip(merged.step[kept], merged.gkey[kept], merged.hash[kept], merged.lo[kept], merged.hi[kept])}  # fmt: skip
    assert got == direct
    if any(not r[4] for r in rows) and any(r[4] is False for r in rows):
        try:
            labels = {int(r[2]): str(r[2]) for r in rows}
            a = finish(Partial.merge([Partial([p], labels) for p in parts]), "table")
            b = finish(Partial([reduced], labels), "table")
        except Exception as exc:  # no usable row once lost groups are left out: both say so
            assert "no usable rollout" in str(exc)
            return
        for c in GROUP_COLUMNS:
            assert np.array_equal(a.groups[c], b.groups[c], equal_nan=True), c


def test_block_fields_are_narrow_and_widen_before_they_overflow():
    """The block fields (TRL's) are int32 counts and int8 verdicts; a merge whose counts pass
    int32 keeps them in int64 (exact), one that fits stays narrow."""
    top = np.iinfo(np.int32).max

    def part(unscored, verdict):
        c = Cells.merge([Cells(*(np.zeros(1, t) for t in (np.int64,) * 4), np.zeros(1), np.zeros(1),
                               np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, bool),
                               np.zeros(1, np.int64), np.zeros(1, bool))])  # fmt: skip
        c.unscored, c.pad, c.verdict = (
            np.array([unscored], np.int32),
            np.zeros(1, np.int32),
            np.array([verdict], np.int8),
        )
        return c

    small = Cells.merge([part(3, 0), part(4, 1)])
    assert small.unscored.dtype == np.int32 and small.verdict.dtype == np.int8
    assert (int(small.unscored[0]), int(small.verdict[0])) == (7, 1)
    big = Cells.merge([part(top, -1), part(top, 0)])
    assert big.unscored.dtype == np.int64 and int(big.unscored[0]) == 2 * top


def test_split_is_consecutive_and_balanced():
    from gsd.diagnose.shards import split

    assert split(list("abcdefg"), 3) == [["a", "b"], ["c", "d", "e"], ["f", "g"]]
    assert split(["a"], 4) == [["a"]]
    with pytest.raises(Exception, match="shards"):
        split(["a"], 0)


@pytest.mark.ray
def test_ray_shards_equal_one_process(tmp_path):
    """A sharded table (groups split across its part files) and a verl run, counted by Ray tasks
    on a local instance: the merged counts are one process's, field by field."""
    ray = pytest.importorskip("ray")
    from gsd.diagnose.shards import count_runs, count_sharded

    df, _ = rollouts(steps=4)
    df = df.sample(frac=1.0, random_state=1).reset_index(drop=True)
    parts = tmp_path / "parts"
    parts.mkdir()
    for i, rows in enumerate(np.array_split(np.arange(len(df)), 5)):
        df.iloc[rows].to_parquet(parts / f"part-{i}.parquet", index=False)
    write_verl(tmp_path / "run" / "rollout_data", df.sort_values("step"), malformed_step=2)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        for path, kw in ((parts, {"fmt": "table", "reward": "score"}), (tmp_path / "run", {})):
            one = count_rollouts(path, progress=False, **kw)
            many = count_sharded(path, shards=3, **kw)
            for table in ("groups", "steps", "prompts"):
                a, b = getattr(one, table), getattr(many, table)
                assert a.keys() == b.keys() and all(np.array_equal(a[c], b[c], equal_nan=True) for c in a), table
            assert one.labels.tolist() == many.labels.tolist() and one.bad_count == many.bad_count
        from gsd.diagnose import diagnose

        a, b = diagnose(tmp_path / "run"), diagnose(tmp_path / "run", shards=2)
        assert_same_diagnosis(a, b)
        runs = count_runs([tmp_path / "run"])
        assert np.array_equal(
            runs[str(tmp_path / "run")].steps["silent_frac"], one.steps["silent_frac"], equal_nan=True
        )
    finally:
        ray.shutdown()


def test_count_command(tmp_path, capsys):
    """``gsd count``: the steps and totals of count_rollouts, printed and written as a set."""
    import pandas as pd

    from gsd.cli import main

    df, _ = rollouts(steps=3)
    write_verl(tmp_path / "rollout_data", df, malformed_step=2)
    assert main(["count", str(tmp_path / "rollout_data"), "--json", "--out", str(tmp_path / "out")]) == 0
    printed = json.loads(capsys.readouterr().out)
    want = count_rollouts(tmp_path / "rollout_data", progress=False)
    assert printed["steps"]["silent_frac"] == want.steps["silent_frac"].tolist()
    assert printed["summary"]["groups"] == int(want.steps["groups"].sum())
    groups = pd.read_parquet(tmp_path / "out" / "groups.parquet")
    assert all(np.array_equal(groups[c].to_numpy(), want.groups[c]) for c in GROUP_COLUMNS)
    prompts = pd.read_parquet(tmp_path / "out" / "prompts.parquet")
    assert prompts["label"].tolist() == want.labels[want.prompts["prompt"]].tolist()
    assert main(["count", str(tmp_path / "rollout_data")]) == 0
    assert "silent" in capsys.readouterr().out
    assert main(["count", str(tmp_path / "rollout_data"), "--address", "auto"]) == 2


def test_diagnose_streaming_prints_the_same_report(tmp_path, capsys):
    """``gsd diagnose`` (streamed by default) and ``--streaming``: the JSON report and the tables
    of ``--whole-log``, byte for byte and field by field."""
    from gsd.cli import main

    df, _ = rollouts(steps=4)
    write_verl(tmp_path / "rollout_data", df, malformed_step=2)
    outputs = []
    for extra in (["--whole-log"], [], ["--streaming"]):
        out = str(tmp_path / f"out{len(outputs)}")
        argv = ["diagnose", str(tmp_path / "rollout_data"), "--json", "--half-life", "auto", "--out", out, *extra]
        assert main(argv) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] == outputs[2]
    for name in ("groups", "steps", "prompts"):  # the group table written as it was made: the same rows
        a, b = (pd.read_parquet(tmp_path / out / f"{name}.parquet") for out in ("out0", "out1"))
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    with pytest.raises(SystemExit):  # one or the other
        main(["diagnose", str(tmp_path / "rollout_data"), "--whole-log", "--streaming"])
    assert sorted(p.name for p in (tmp_path / "out1").iterdir()) == sorted(
        p.name for p in (tmp_path / "out0").iterdir()
    )
    with pytest.raises(Exception, match="batch"):
        from gsd.diagnose import diagnose

        diagnose(tmp_path / "rollout_data", streaming=True, scale="batch")
