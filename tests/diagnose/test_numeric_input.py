"""The numeric-input layer (gsd.io.numbers) and the readers that go through it: steps are integers in
int64's range or a named error (never a wrap), counts and fractions are range-checked, values that are
not numbers are counted and said; the cases of issue 44 each a test."""

from __future__ import annotations

import errno
import json
import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gsd
from gsd import InputError
from gsd.cli import main
from gsd.diagnose.scalar_diagnosis import diagnose_scalars
from gsd.diagnose.scalars import read_scalars
from gsd.io.numbers import (
    INT64_MAX,
    DroppedValues,
    count_array,
    fraction_array,
    metric_value,
    seconds_value,
    step_array,
    step_number,
)


# ------------------------------------------------------------------------------- the layer itself
@given(
    st.one_of(
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.booleans(),
        st.none(),
        st.text(max_size=5),
        st.lists(st.integers(0, 3), max_size=2),
    )
)
def test_step_number_accepts_exactly_the_int64_integers(value):
    """Against the definition: a non-bool real that equals an integer in [0, 2^63 − 1], computed
    exactly with Python's unbounded ints (a float is an exact dyadic rational)."""
    real = isinstance(value, (int, float)) and not isinstance(value, bool)
    exact = real and math.isfinite(value) and float(value).is_integer() if isinstance(value, float) else real
    ok = exact and 0 <= int(value) <= 2**63 - 1
    if ok:
        got = step_number(value, "where")
        assert type(got) is int and got == int(value)
    else:
        with pytest.raises(InputError, match="where: the step must be an integer"):
            step_number(value, "where")


@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=6))
def test_step_array_never_wraps_a_uint64(values):
    arr = np.array(values, dtype=np.uint64)
    if max(values) <= INT64_MAX:
        assert step_array(arr, "col").tolist() == values
    else:
        with pytest.raises(InputError, match=str(max(v for v in values if v > INT64_MAX))[:6]):
            step_array(arr, "col")


@pytest.mark.parametrize(
    "values, said",
    [
        (np.array([1e300]), "1e+300"),
        (np.array([2.0**63]), "9.223372036854776e+18"),
        (np.array([1.5]), "1.5"),
        (np.array([-5, 1, 2]), "-5"),
        (np.array([np.nan]), "nan"),
        (np.array([np.inf]), "inf"),
    ],
)
def test_step_array_refuses_by_name(values, said):
    with pytest.raises(InputError, match=f"col: the step must be an integer.*got {re.escape(said)}"):
        step_array(values, "col")


@given(st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10)), max_size=6))
def test_counts_and_fractions_against_their_definitions(values):
    a = np.array(values, dtype=np.float64)
    counts_ok = all(math.isnan(v) or (math.isfinite(v) and v >= 0 and float(v).is_integer()) for v in a.tolist())
    frac_ok = all(math.isnan(v) or 0 <= v <= 1 for v in a.tolist())
    for fn, ok, said in ((count_array, counts_ok, "counts must be"), (fraction_array, frac_ok, "a fraction must")):
        if ok:
            np.testing.assert_array_equal(fn(a, "what"), a)
        else:
            with pytest.raises(InputError, match=f"what: {said}"):
                fn(a, "what")


def test_metric_values_and_the_dropped_tally():
    assert metric_value(0.5) == 0.5 and metric_value(3) == 3.0 and math.isnan(metric_value(float("nan")))
    for bad in ("0.5", True, [0.5], {"a": 1}, None):
        assert metric_value(bad) is None
    d = DroppedValues()
    assert d.take("k", "x") is None and d.take("k", [1]) is None and d.take("k", 0.25) == 0.25
    assert d.counts == {"k": 2} and d.notes() == ["2 values of 'k' left out: not a number (e.g. 'x')"]
    for bad in ("1", None, True, -1.0, float("inf"), float("nan")):
        with pytest.raises(InputError, match="w: seconds must be"):
            seconds_value(bad, "w")


# ------------------------------------------------------------------------------- the scalar readers
def _trl_state(tmp_path, history):
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": history}))
    return path


@pytest.mark.parametrize("step, said", [(2**63, "9223372036854775808"), (1e20, "1e+20"), (-5, "-5"), (None, "None")])
def test_trl_steps_beyond_int64_are_named_not_wrapped(tmp_path, step, said):
    """Issue 44: TRL step 2^63 read as −2^63, step 1e20 an OverflowError."""
    path = _trl_state(tmp_path, [{"step": 1, "reward": 0.5}, {"step": step, "reward": 0.5}])
    with pytest.raises(InputError, match=rf"log_history\[1\]: the step must be an integer.*{re.escape(said)}"):
        read_scalars(path)


def test_table_steps_beyond_int64_are_named(tmp_path):
    """Issue 44: a table step of 1e300 and a parquet uint64 2^64 − 1 (read as −1)."""
    import pandas as pd

    csv = tmp_path / "log.csv"
    csv.write_text("step,frac_reward_zero_std\n1,0.5\n1e300,0.25\n")
    with pytest.raises(InputError, match=r"column .step.: the step must be an integer.*1e\+300"):
        read_scalars(csv)
    parquet = tmp_path / "log.parquet"
    pd.DataFrame({"step": np.array([1, 2**64 - 1], np.uint64), "frac_reward_zero_std": [0.5, 0.25]}).to_parquet(parquet)
    with pytest.raises(InputError, match="18446744073709551615"):
        read_scalars(parquet)


@pytest.mark.parametrize("bad", ["0.5", True, [0.5]])
def test_trl_values_that_are_not_numbers_are_counted_and_said(tmp_path, bad):
    """Issue 44: TRL frac_reward_zero_std of "0.5", true, [0.5] were dropped without a word."""
    path = _trl_state(
        tmp_path,
        [
            {"step": 1, "frac_reward_zero_std": 0.5, "reward": 0.5},
            {"step": 2, "frac_reward_zero_std": bad, "reward": 0.5},
        ],
    )
    log = read_scalars(path)
    assert log.dropped == {"frac_reward_zero_std": 1}
    assert any("1 value of 'frac_reward_zero_std' left out: not a number" in n for n in log.notes)
    assert log.metrics["frac_reward_zero_std"].tolist()[0] == 0.5 and math.isnan(log.metrics["frac_reward_zero_std"][2])


def test_every_value_not_a_number_is_said_as_such(tmp_path):
    """The report no longer says the log "holds no zero-std fraction" when it holds one of text."""
    path = _trl_state(tmp_path, [{"step": s, "frac_reward_zero_std": "0.5", "reward": 0.5} for s in (1, 2)])
    notes = diagnose_scalars(path).notes
    assert any("'frac_reward_zero_std' holds no number (2 values left out)" in n for n in notes)
    assert not any("holds no zero-std fraction" in n for n in notes)


def test_one_text_cell_keeps_its_column(tmp_path):
    """Issue 44: one text cell dropped a whole table column."""
    csv = tmp_path / "log.csv"
    csv.write_text("step,frac_reward_zero_std,reward,run\n1,0.5,0.4,a\n2,oops,0.5,a\n3,0.25,0.6,a\n")
    log = read_scalars(csv)
    z = log.metrics["frac_reward_zero_std"]
    assert z[1] == 0.5 and math.isnan(z[2]) and z[3] == 0.25
    assert log.dropped == {"frac_reward_zero_std": 1}
    assert any("columns without a number left out: run" in n for n in log.notes)
    summary = diagnose_scalars(log).summary
    # step 2 logged a reward but no zero-std value: its interval is left out, steps 1 and 3 weigh one each
    assert summary["silent_share"] == (0.5 + 0.25) / 2


def test_negative_steps_and_counts_are_refused(tmp_path):
    """Issue 44: steps −5, 1, 2 gave a silent share of −2.5 and −160 wasted rollouts; verl's
    evicted_samples = −40 a silent fraction of 5.0."""
    csv = tmp_path / "log.csv"
    csv.write_text("step,frac_reward_zero_std\n-5,0.5\n1,0.5\n2,0.5\n")
    with pytest.raises(InputError, match="the step must be an integer.*-5"):
        diagnose_scalars(csv, group_size=4, groups=8)
    verl = tmp_path / "verl.jsonl"
    key = "training/filter_groups/evicted_samples"
    verl.write_text(
        "\n".join(json.dumps({"step": s, "data": {key: -40, "critic/score/mean": 0.5}}) for s in (1, 2)) + "\n"
    )
    with pytest.raises(InputError, match=f"{key}: counts must be integers >= 0, got -40"):
        diagnose_scalars(verl, group_size=4, groups=8)
    csv.write_text("step,frac_reward_zero_std\n1,0.5\n2,1.5\n")
    with pytest.raises(InputError, match="frac_reward_zero_std: a fraction must lie in"):
        diagnose_scalars(csv)


# ------------------------------------------------------------------------------- timing logs
@pytest.mark.parametrize(
    "row, said",
    [
        ({"step": 1, "step_time": "2.5"}, "step_time: seconds must be"),
        ({"step": None, "step_time": 2.5}, "the step must be an integer"),
        ({"step": 2**64, "step_time": 2.5}, "the step must be an integer"),
        ({"step": 1, "step_time": -1.0}, "seconds must be"),
    ],
)
def test_step_times_from_log_reads_through_the_layer(tmp_path, row, said):
    """Issue 44: a string step_time or a null step raised ValueError / TypeError."""
    from gsd.core.advice import step_times_from_log

    path = _trl_state(tmp_path, [{"step": 0, "step_time": 1.0}, row])
    with pytest.raises(InputError, match=said):
        step_times_from_log(path)
    verl = tmp_path / "timing.jsonl"
    verl.write_text(json.dumps({"step": 1, "data": {"timing_s/step": "7"}}) + "\n")
    with pytest.raises(InputError, match=r"line 1 timing_s/step: seconds must be"):
        step_times_from_log(verl)


# ------------------------------------------------------------------------------- degenerate advice
def test_advice_for_a_population_that_is_silent_for_sure_is_refused(tmp_path, capsys):
    """Issue 44: every p 0 or 1 gave "G = 4 at nanx" and a summary with NaN (not JSON)."""
    with pytest.raises(InputError, match="every prompt is silent for sure"):
        gsd.group_size_advice([0.0, 1.0, 1.0, 0.0])
    assert gsd.group_size_advice([0.0, 1.0, 0.5]).summary()["advised_G_per_generation"] >= 2  # one live prompt
    assert main(["plan", "--p", "0,1,1", "--budget", "64", "--advice"]) == 2
    assert "every prompt is silent for sure" in capsys.readouterr().err


# ------------------------------------------------------------------------------- OS errors
def test_example_logs_names_dest_on_os_errors(tmp_path, capsys, monkeypatch):
    """Issue 44: a 250-character DEST and a full disk let an OSError through."""
    long = tmp_path / ("d" * 256)
    assert main(["example-logs", str(long)]) == 2
    assert "cannot write" in capsys.readouterr().err
    ok = tmp_path / ("e" * 250)  # within the limit: copied (the staging name is short)
    assert main(["example-logs", str(ok)]) == 0 and (ok / "trl").is_dir()
    import shutil

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(shutil, "copy2", full)
    dest = tmp_path / "full"
    assert main(["example-logs", str(dest)]) == 2
    err = capsys.readouterr().err
    assert "No space left on device" in err and str(dest) in err
    assert not dest.exists() and not list(tmp_path.glob(".*.tmp"))


# ------------------------------------------------------------------------------- text
def test_a_lone_surrogate_in_a_prompt_is_one_prompt_not_an_error(tmp_path, capsys):
    """Issue 44: a lone surrogate in a JSONL prompt raised UnicodeEncodeError."""
    from gsd.io.arrow_arrays import text_array

    assert text_array(["a\ud800", None, "b"]).to_pylist() == ["a\\ud800", None, "b"]
    log = tmp_path / "s.jsonl"
    rows = [("a\ud800", 1), ("a\ud800", 0), ("b", 1), ("b", 1)]
    log.write_text("".join(json.dumps({"prompt": q, "step": 0, "reward": r}) + "\n" for q, r in rows))
    assert main(["diagnose", str(log), "--reward-column", "reward", "--no-progress", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["rows"] == 4 and summary["bad_rows"] == 0 and summary["silent_frac"] == 0.5


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_rollout_steps_out_of_range_are_bad_rows_named(tmp_path, suffix):
    """Issue 44 (the rollout readers): a step of 1e20, −3, 2.5 or a uint64 2^64 − 1 is a bad row
    named with its line (its group left out, counted), never wrapped into another step; the
    steps that are integers in range are read exactly, 2^63 − 1 included (not in JSONL beside a
    float step: pyarrow reads the column as floats, exact below 2^53 only)."""
    import pandas as pd

    from gsd.diagnose import read_rollouts

    top = 2**53 - 1 if suffix == ".jsonl" else 2**63 - 1
    good = [(1, f"q{i % 2}", float(i % 3 == 0)) for i in range(8)] + [(top, "q0", 1.0), (top, "q0", 0.0)]
    bad = {".jsonl": [1e20, -3, 2.5], ".csv": ["1e20", "-3", "2.5"], ".parquet": [2**64 - 1]}[suffix]
    rows = good + [(s, "q9", 1.0) for s in bad]
    df = pd.DataFrame(rows, columns=["step", "prompt", "score"])
    path = tmp_path / f"t{suffix}"
    if suffix == ".parquet":
        df["step"] = df["step"].astype(np.uint64)
        df.to_parquet(path, index=False)
    elif suffix == ".csv":
        df.astype({"step": str}).to_csv(path, index=False)
    else:
        path.write_text("".join(json.dumps({"step": s, "prompt": p, "score": r}) + "\n" for s, p, r in rows))
    log = read_rollouts(path, fmt="table", reward="score", progress=False)
    assert log.bad_count == len(bad)
    lines = (
        [len(good) + 2 + i for i in range(len(bad))]
        if suffix == ".csv"
        else [len(good) + 1 + i for i in range(len(bad))]
    )
    assert [(b.line, b.reason) for b in log.bad_rows] == [(n, "step is missing or not an integer") for n in lines]
    assert sorted(set(log.step.tolist())) == [1, top]
