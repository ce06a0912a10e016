"""Reading a log imports no pandas: each of pandas's functions the reader used is replaced, and each
replacement is checked here against pandas itself (the oracle, still installed for the tables) and
against a direct computation in plain Python."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gsd.diagnose.assemble import in_pairs
from gsd.diagnose.load import read_csv
from gsd.diagnose.parse import numeric_column
from gsd.integrations import areal, verl
from gsd.integrations.columns import text_to_numbers
from gsd.io.arrow_arrays import from_numpy, text_array, to_numpy, valid
from gsd.io.hashing import combine_hashes, hash_numbers, hash_text

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)  # any text UTF-8 can hold


# -- the prompt hash: SipHash-2-4 (pandas's key) and SplitMix64's finaliser


def _siphash24(data: bytes, key: bytes = b"0123456789123456") -> int:
    """SipHash-2-4 written out from its paper (Aumasson & Bernstein), one byte string at a time."""
    mask = (1 << 64) - 1

    def rotl(x, r):
        return ((x << r) | (x >> (64 - r))) & mask

    def rounds(v, n):
        for _ in range(n):
            v[0] = (v[0] + v[1]) & mask
            v[1] = rotl(v[1], 13) ^ v[0]
            v[0] = rotl(v[0], 32)
            v[2] = (v[2] + v[3]) & mask
            v[3] = rotl(v[3], 16) ^ v[2]
            v[0] = (v[0] + v[3]) & mask
            v[3] = rotl(v[3], 21) ^ v[0]
            v[2] = (v[2] + v[1]) & mask
            v[1] = rotl(v[1], 17) ^ v[2]
            v[2] = rotl(v[2], 32)

    k0, k1 = int.from_bytes(key[:8], "little"), int.from_bytes(key[8:], "little")
    v = [k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D, k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573]
    tail = len(data) % 8
    words = [int.from_bytes(data[i : i + 8], "little") for i in range(0, len(data) - tail, 8)]
    words.append(int.from_bytes(data[len(data) - tail :], "little") | ((len(data) & 0xFF) << 56))
    for m in words:
        v[3] ^= m
        rounds(v, 2)
        v[0] ^= m
    v[2] ^= 0xFF
    rounds(v, 4)
    x = v[0] ^ v[1] ^ v[2] ^ v[3]
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & mask
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & mask
    x ^= x >> 31
    return x - (1 << 64) if x >= 1 << 63 else x


SPECIAL = ["", "a", "é", "日本語", "\n", "\x00", "🙂" * 3, "x" * 7, "x" * 8, "x" * 9, "y" * 255, "y" * 256, "z" * 5000]


@FAST
@given(st.lists(TEXT, max_size=30))
def test_text_hash_is_pandas_hash_array(texts):
    texts = texts + SPECIAL
    expected = pd.util.hash_array(np.array(texts, dtype=object), categorize=False).astype(np.int64)
    assert hash_text(texts).tolist() == expected.tolist()
    assert hash_text(text_array(texts)).tolist() == expected.tolist()  # from a pyarrow array too


def test_text_hash_is_siphash_written_out():
    texts = SPECIAL + ["prompt number 12", "Solve 2+2."]
    assert hash_text(texts).tolist() == [_siphash24(t.encode("utf-8")) for t in texts]


def test_text_hash_of_a_slice_and_of_a_big_batch():
    texts = [f"q{i} " * (i % 40) for i in range(3000)]  # several batches of the word table
    arr = text_array(texts).slice(7, 2000)
    assert hash_text(arr).tolist() == [_siphash24(t.encode()) for t in texts[7:2007]]
    assert hash_text([]).tolist() == []


@FAST
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=20), st.integers(0, 50))
def test_row_hash_is_pandas_hash_pandas_object(tasks, start):
    t = np.array(tasks + [0.0, -0.0, np.nan, -np.nan], np.float64)
    run = np.arange(start, start + t.size, dtype=np.int64)
    frame = pd.DataFrame({"task": t, "run": run})
    expected = pd.util.hash_pandas_object(frame, index=False).to_numpy().view(np.int64)
    assert combine_hashes(hash_numbers(t), hash_numbers(run)).tolist() == expected.tolist()


# -- numbers written as text (pandas.to_numeric, errors="coerce")

NUMBERS = [
    "True", "False", "true", "nan", "NaN", "-nan", "inf", "-Infinity", "+inf", "1e3", " 2 ", "\t3\n", "1.", ".5",
    "-0", "1e400", "1e-400", "9007199254740993", "12345678901234567890", "1_000", "0x10", "١٢", "1 2", "", "  ",
    "garbage", "1e", "+-1", "None", "N/A", "\xa01",
]  # fmt: skip
NUMBER_TEXT = st.one_of(
    st.sampled_from(NUMBERS),
    st.floats(allow_nan=True).map(repr),
    st.integers(-(10**25), 10**25).map(str),
    st.text(alphabet="0123456789+-.eE \tinfINFaN_x", max_size=12),
    TEXT,
)


def _direct_number(text: str) -> float:
    """pandas's syntax, as Python's float reads it: ASCII digits, no underscores, ASCII blanks."""
    core = text.strip(" \t\n\r\v\f")
    ok = re.fullmatch(r"[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|inf(inity)?|nan)", core, re.I | re.A)
    return float(core) if ok else float("nan")


@FAST
@given(st.lists(st.one_of(st.none(), NUMBER_TEXT), max_size=30))
def test_text_to_numbers_is_pandas_to_numeric(values):
    values = values + NUMBERS
    got = text_to_numbers(text_array(values))
    expected = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(np.float64)
    np.testing.assert_array_equal(got, expected)
    direct = np.array([np.nan if v is None else _direct_number(v) for v in values])
    np.testing.assert_array_equal(got, direct)


@FAST
@given(st.lists(st.one_of(st.none(), NUMBER_TEXT), max_size=30))
def test_reward_text_reads_booleans_and_numbers(values):
    """A reward column of text: "True"/"False"/"true"/"false" are 1/0 (verl's numpy booleans),
    anything else as pandas.to_numeric reads it."""
    values = values + NUMBERS
    words = {"True": 1.0, "False": 0.0, "true": 1.0, "false": 0.0}
    expected = [words.get(v, np.nan) if v in words else (np.nan if v is None else _direct_number(v)) for v in values]
    np.testing.assert_array_equal(numeric_column(text_array(values), "r", "f"), np.array(expected))


# -- pairs (step, group key): membership


@FAST
@given(
    st.lists(st.tuples(st.integers(-3, 3), st.integers(-(2**63), 2**63 - 1) | st.integers(0, 3)), max_size=40),
    st.lists(st.tuples(st.integers(-3, 3), st.integers(0, 3)), min_size=1, max_size=10),
)
def test_pair_membership_is_set_membership(rows, bad):
    pair = np.array(rows, np.int64).reshape(-1, 2).T
    bad_pairs = np.unique(np.array(bad, np.int64).T, axis=1)
    expected = [tuple(p) in set(map(tuple, bad_pairs.T.tolist())) for p in pair.T.tolist()]
    assert in_pairs(pair, bad_pairs).tolist() == expected


# -- verl V1 keys {uid}_{session_id}_{index}

KEY_PART = st.text(alphabet="ab_-٣\n 0123456789", max_size=8)
KEYS = st.one_of(
    st.builds(lambda u, s, i: f"{u}_{s}_{i}", KEY_PART, st.integers(0, 10**18), st.integers(0, 3)),
    st.builds(lambda u, s, i: f"{u}_{s}_{i}", st.sampled_from(["a", "b"]), st.integers(0, 2), st.integers(0, 3)),
    KEY_PART,
    st.none(),
)


def _direct_split(keys):
    """Python's re on each key, its numbers as int (0 where a digit is not ASCII)."""
    uid, session, index, ok = [], [], [], []
    for k in keys:
        m = re.match(verl.KEY_PATTERN, k) if k is not None else None
        ok.append(m is not None)
        uid.append(m.group(1) if m else "")
        session.append(int(m.group(2)) if m and m.group(2).isascii() else 0)
        index.append(int(m.group(3)) if m and m.group(3).isascii() else 0)
    return uid, session, index, ok


@FAST
@given(st.lists(KEYS, min_size=1, max_size=30))
def test_verl_keys_split_as_python_re(keys):
    uid, session, index, ok = verl.split_keys(text_array(keys))
    assert (uid.tolist(), session.tolist(), index.tolist(), ok.tolist()) == _direct_split(keys)


@FAST
@given(st.lists(KEYS, min_size=1, max_size=30))
def test_verl_members_row_keys_and_groups_against_a_direct_count(keys):
    table = pa.table({"uid": text_array(keys), "score": from_numpy(np.ones(len(keys)))})
    uid, session, index, ok = _direct_split(keys)
    if 2 * sum(ok) <= len(keys):  # a legacy dump: no V1 hooks
        assert verl.members(table) is None and verl.row_keys(table) is None and verl.group_keys(table) is None
        return
    last: dict = {}
    for u, s, i in zip(uid, session, index):
        last[(u, s)] = max(last.get((u, s), i), i)
    expected = [i == last[(u, s)] or not good for u, s, i, good in zip(uid, session, index, ok)]
    assert verl.members(table).tolist() == expected
    first: dict = {}
    codes = [first.setdefault((u, s, i), len(first)) for u, s, i in zip(uid, session, index)]
    assert verl.row_keys(table).tolist() == [c if good else -1 for c, good in zip(codes, ok)]
    hashes, key_ok = verl.group_keys(table)
    assert hashes.tolist() == [_siphash24(u.encode()) for u in uid] and key_ok.tolist() == ok
    # pandas, as the reader used it: str.extract, groupby-transform max, MultiIndex.factorize
    parts = pd.Series(np.asarray(keys, dtype=object)).astype("string").str.extract(verl.KEY_PATTERN)
    assert parts.notna().all(axis=1).tolist() == ok


# -- AReaL's task key


@FAST
@given(
    st.lists(
        st.tuples(st.one_of(st.none(), st.integers(0, 5)), st.one_of(st.none(), st.integers(0, 3))),
        min_size=1,
        max_size=25,
    )
)
def test_areal_task_keys_are_the_pandas_hashes(rows):
    task = [t for t, _ in rows]
    index = [i for _, i in rows]
    table = pa.table(
        {
            "task_id": from_numpy(np.array([t or 0 for t in task], np.int64), np.array([t is not None for t in task])),
            "sample_idx": from_numpy(
                np.array([i or 0 for i in index], np.int64), np.array([i is not None for i in index])
            ),
        }
    )
    key, ok = areal.group_keys(table)
    t = pd.to_numeric(pd.Series(task, dtype=object), errors="coerce")
    i = pd.to_numeric(pd.Series(index, dtype=object), errors="coerce")
    assert ok.tolist() == (t.notna() & i.notna()).tolist()
    tf, jf = t.fillna(-1).to_numpy(np.float64), i.fillna(-1).to_numpy(np.float64)
    pos = np.flatnonzero(ok)
    start = np.zeros(len(rows), bool)
    start[pos] = np.r_[True, (tf[pos][1:] != tf[pos][:-1]) | (jf[pos][1:] <= jf[pos][:-1])]
    start[0] = True
    frame = pd.DataFrame({"task": tf, "run": np.cumsum(start)})
    assert key.tolist() == pd.util.hash_pandas_object(frame, index=False).to_numpy().view(np.int64).tolist()


# -- CSV tables as pandas's read_csv(dtype=str, on_bad_lines="warn") reads them

CELL = st.one_of(
    st.sampled_from(["", "NA", "nan", "None", "null", "x", " y ", "1", "2.5", '"q,1"', '"a""b"', 'x"y', '"NA"']),
    st.text(alphabet="abc 123.", max_size=4),
)


@FAST
@given(
    header=st.lists(st.sampled_from(["a", "b", "a", "", "c", "a.1"]), min_size=1, max_size=4),
    rows=st.lists(st.lists(CELL, min_size=0, max_size=6), max_size=12),
)
def test_csv_reads_as_pandas_read_csv(header, rows, tmp_path_factory):
    lines = [",".join(header)] + [",".join(r) for r in rows]
    if not any(lines[0]):  # pandas needs one named column to find a header at all
        return
    text = "\n".join(lines) + "\n"
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    path.write_text(text)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            frame = pd.read_csv(io.StringIO(text), dtype=str, on_bad_lines="warn")  # the old reader's call
        except (pd.errors.EmptyDataError, pd.errors.ParserError):
            return
    skipped = [
        (int(m.group(1)), f"malformed CSV row ({m.group(2).strip()})")
        for w in caught
        for m in re.finditer(r"Skipping line (\d+): (.*)", str(w.message))
    ]
    pieces = list(read_csv(path))
    got_bad = [b for _, _, bad in pieces for b in bad]
    assert got_bad == skipped
    if not pieces:
        assert len(frame) == 0
        return
    table = pa.concat_tables([t for t, _, _ in pieces])
    frame = frame.reset_index(drop=True)
    assert table.column_names == list(frame.columns)
    expected = {c: [None if v is None or v != v else v for v in frame[c].tolist()] for c in frame.columns}
    assert table.to_pydict() == expected


def test_csv_lines_count_blank_and_quoted_lines(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('prompt,reward\n\na,1\n"b\nc",0\nd,1,9\ne\n')
    [(table, lines, bad)] = list(read_csv(path))
    assert table.to_pydict() == {"prompt": ["a", "b\nc", "e"], "reward": ["1", "0", None]}
    assert lines.tolist() == [3, 4, 7] and bad == [(6, "malformed CSV row (expected 2 fields, saw 3)")]


# -- pyarrow <-> numpy through buffers


@FAST
@given(st.lists(st.one_of(st.none(), st.floats(allow_nan=False)), max_size=20), st.integers(0, 3))
def test_arrow_numbers_round_trip(values, offset):
    present = np.array([v is not None for v in values], bool)
    arr = from_numpy(np.array([v or 0.0 for v in values], np.float64), present).slice(min(offset, len(values)))
    expected = arr.to_pylist()
    np.testing.assert_array_equal(to_numpy(arr, fill=np.nan), np.array([np.nan if v is None else v for v in expected]))
    assert valid(arr).tolist() == [v is not None for v in expected]
    flags = from_numpy(present).slice(min(offset, len(values)))
    assert to_numpy(flags).tolist() == flags.to_pylist()


@FAST
@given(st.lists(st.one_of(st.none(), TEXT), max_size=20))
def test_arrow_text_round_trip(values):
    arr = text_array(values)
    assert arr.to_pylist() == values
    assert to_numpy(arr).tolist() == values


# -- the whole read


def test_reading_each_format_imports_no_pandas(tmp_path):
    csv = tmp_path / "log.csv"
    csv.write_text("step,prompt,reward\n" + "".join(f"1,q{i % 3},{i % 2}\n" for i in range(12)))
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text(
        "".join(json.dumps({"step": 1, "prompt": f"q{i % 3}", "reward": "True"}) + "\n" for i in range(12))
    )
    code = (
        "import sys; import gsd.diagnose.readers as r\n"
        "for path, kw in [('data/example_logs/trl', {}), ('data/example_logs/verl/rollout_data', {}),\n"
        "                 ('data/example_logs/areal', {}), (sys.argv[1], {'reward': 'reward'}),\n"
        "                 (sys.argv[2], {'reward': 'reward'})]:\n"
        "    r.read_rollouts([path], **kw)\n"
        "    assert 'pandas' not in sys.modules, path\n"
        "print('ok')"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code, str(csv), str(jsonl)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


@pytest.mark.parametrize("keys", [["a", "b"], ["é" * 300]])
def test_live_tracker_hashes_as_the_reader(keys):
    """The tracker's prompt keys hash as the reader hashes the saved table's prompts."""
    from gsd.diagnose.parse import Reader

    reader = Reader("table", {"prompt": "prompt", "step": "step"}, "reward")
    hashes, ok = reader.hash_prompts(text_array(keys))
    assert ok.all() and hashes.tolist() == hash_text(keys).tolist()


def test_regular_csv_reads_alike_through_pyarrow_and_row_by_row(tmp_path):
    """A regular CSV goes through pyarrow's reader; the row-by-row reader gives the same pieces."""
    from gsd.diagnose import load

    path = tmp_path / "t.csv"
    path.write_text(
        "\ufeffstep,prompt,reward,prompt\n"
        + "".join(f'{i % 3},"q, {i}",{["1", "NA", "", " x"][i % 4]},z\n' for i in range(50))
    )
    fast = load.read_regular_csv(path)
    assert fast is not None
    assert [t.to_pydict() for t, _, _ in load.read_csv(path)] == [t.to_pydict() for t, _, _ in fast]
    slow = list(load.read_csv_rows(path))
    assert [(t.to_pydict(), lines.tolist(), bad) for t, lines, bad in fast] == [
        (t.to_pydict(), lines.tolist(), bad) for t, lines, bad in slow
    ]
    assert fast[0][0].column_names == ["step", "prompt", "reward", "prompt.1"]
    path.write_text("a,b\n1,2\n\n3,4\n")  # a blank line: not regular (its rows' lines would be off)
    assert load.read_regular_csv(path) is None
