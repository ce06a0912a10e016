"""A JSONL log is read by pyarrow's reader, or line by line where a line is malformed: the two
ways give the same rows (issue 44: a 10^20 reward read fine until a malformed line elsewhere
switched the reading mode and the whole file was refused)."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import gsd.diagnose.load as load
from gsd.diagnose.counts import plan
from gsd.diagnose.options import LogOptions
from gsd.diagnose.parse import Reader, read_file

MALFORMED = ['{"prompt": "q1", "score": 1, "st', "not json at all", "[1, 2]", '{"prompt": "q2",, "score": 0}', "3"]


def parsed(path):
    """The rows of a JSONL table as the reader parses them: per row its prompt hash, step and
    reward with their validity, and the bad lines it counted."""
    files, fmt, cols, reward, _, _ = plan(path, LogOptions(fmt="table", reward="score"))
    reader = Reader(fmt, cols, reward)
    read_file(files[0], reader)
    chunks = [c for c in reader.chunks if c.hashes.size]
    cat = {
        name: np.concatenate([getattr(c, name) for c in chunks]) if chunks else np.zeros(0)
        for name in ("hashes", "prompt_ok", "steps", "step_ok", "reward")
    }
    lines = np.concatenate([c.line_numbers() for c in chunks]) if chunks else np.zeros(0, np.int64)
    return cat, lines, reader.bad_count, [b.line for b in reader.bad_rows]


def write(path, rows, malformed=()):
    """Rows as JSON lines, with the ``malformed`` (position, text) lines inserted."""
    lines = [json.dumps(r) for r in rows]
    for at, text in sorted(malformed, reverse=True):
        lines.insert(at, text)
    path.write_text("\n".join(lines) + "\n")


def same_rows(a, b):
    for name in a:
        assert np.array_equal(a[name], b[name], equal_nan=True), name


def test_a_huge_reward_beside_a_malformed_line(tmp_path):
    """Issue 44's case: a reward of 10^20 (an integer beyond int64) in one row and one malformed
    line elsewhere: the reward is read as the float 1e20 with or without the malformed line (it
    was: the file refused), the malformed line is one bad row named with its line."""
    rows = [{"prompt": f"q{i % 3}", "score": i % 2, "step": 1} for i in range(12)]
    rows[4]["score"] = 10**20
    clean, broken = tmp_path / "clean.jsonl", tmp_path / "broken.jsonl"
    write(clean, rows)
    write(broken, rows, [(8, MALFORMED[0])])
    a, _, bad_a, _ = parsed(clean)
    b, lines, bad_b, listed = parsed(broken)
    same_rows(a, b)
    assert a["reward"][4] == 1e20 and bad_a == 0
    assert bad_b == 1 and listed == [9]
    assert lines.tolist() == [*range(1, 9), *range(10, 14)]


value = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.sampled_from([0, 1, 0.5, 2**53 + 1, 10**20, -(10**20), 2**63, 2**63 - 1]),
)
row = st.fixed_dictionaries(
    {"prompt": st.sampled_from(["q1", "q2", "q3"]), "step": value, "score": value},
    optional={"extra": st.text(max_size=5)},
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(row, min_size=1, max_size=25),
    st.lists(st.tuples(st.integers(0, 30), st.sampled_from(MALFORMED)), max_size=3),
)
def test_fast_and_line_by_line_reading_agree(tmp_path_factory, rows, malformed):
    """Random rows, random malformed lines: the file read with its malformed lines (line by line)
    gives the rows of the file without them (pyarrow's reader, when it takes the file), row for
    row, each malformed line one bad row; and the Python reading of the rows (what a key of
    mixed types takes) gives the same rows as pyarrow's wherever pyarrow takes them."""
    folder = tmp_path_factory.mktemp("jsonl")
    clean, broken = folder / "clean.jsonl", folder / "broken.jsonl"
    write(clean, rows)
    malformed = [(min(at, len(rows)), text) for at, text in malformed]
    write(broken, rows, malformed)
    a, _, bad_a, _ = parsed(clean)
    b, _, bad_b, _ = parsed(broken)
    same_rows(a, b)
    assert bad_b - bad_a == len(malformed)
    python = load.arrow_json
    try:
        load.arrow_json = lambda source: None  # every file read in Python
        c, _, bad_c, _ = parsed(clean)
    finally:
        load.arrow_json = python
    same_rows(a, c)
    assert bad_c == bad_a
