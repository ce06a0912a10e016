"""A reward column of text (a TRL completions file whose ``correct`` column was rewritten as text):
numbers written as text read as numbers, text that is not a number is a bad row named with its
line and kept in its group without a reward, a missing value stays a reward TRL could not score. The file is TRL's own (the shipped
example, written by TRL 1.16's trainer), its column replaced."""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gsd.diagnose import diagnose
from gsd.resources import example_logs


@pytest.fixture
def trl_log(tmp_path):
    dest = tmp_path / "trl"
    shutil.copytree(example_logs() / "trl", dest)
    return dest


def _rewrite(path, texts):
    """The column replaced, the file's times kept: a file newer than the later steps' files would
    read as a restarted run (the reader keeps the newest attempt)."""
    stat = os.stat(path)
    table = pq.read_table(path)
    i = table.column_names.index("correct")
    table = table.set_column(i, "correct", pa.array(texts, pa.string()))
    pq.write_table(table, path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_text_that_is_not_a_number_is_a_bad_row(trl_log):
    first = sorted((trl_log / "completions").glob("*.parquet"))[0]
    before = diagnose(trl_log).summary
    n = pq.read_metadata(first).num_rows
    original = pq.read_table(first).column("correct").to_pylist()
    texts = [repr(float(v)) for v in original]
    texts[0] = "x"
    _rewrite(first, texts)
    after = diagnose(trl_log, reward="correct").summary
    assert after["bad_rows"] == 1 and before["bad_rows"] == 0
    listed = after["bad_rows_listed"][0]
    assert "correct" in str(listed) and "not a number" in str(listed)
    # the row stays in its group (TRL groups by position), without a reward
    assert (after["rollouts"], after["unscorable_rollouts"]) == (before["rollouts"], 1), (after, before)
    assert n > 1


def test_numbers_and_missing_values_as_text_are_not_bad_rows(trl_log):
    first = sorted((trl_log / "completions").glob("*.parquet"))[0]
    original = pq.read_table(first).column("correct").to_pylist()
    texts = ["1.0" if v == 1 else "0" for v in original]
    texts[0] = "None"
    _rewrite(first, texts)
    summary = diagnose(trl_log, reward="correct").summary
    assert summary["bad_rows"] == 0 and summary["unscorable_rollouts"] == 1
