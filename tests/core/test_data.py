"""Loading the shipped histogram and a user's per-problem file."""

import json
from fractions import Fraction
from math import comb

import numpy as np
import pandas as pd
import pytest

import gsd
from gsd.io.data import load_solve_rates


def test_histogram_totals():
    h = gsd.load_histogram()
    assert len(h) == 65 and h["count"].sum() == 215_608
    p = gsd.load_bigmath()
    assert np.isclose(p.mean(), (h.k * h["count"]).sum() / 64 / 215_608)


def _histogram_text(k=None, p_hat=None, count=None, columns=("k", "p_hat", "count")):
    k = list(range(5)) if k is None else k
    p_hat = [f"{x / 4:.6f}" for x in range(5)] if p_hat is None else p_hat
    count = [3, 0, 7, 1, 2] if count is None else count
    cols = {"k": k, "p_hat": p_hat, "count": count}
    return "\n".join([",".join(columns)] + [",".join(str(cols[c][i]) for c in columns) for i in range(len(k))]) + "\n"


def test_bigmath_reader_agrees_with_the_pandas_one(tmp_path):
    """load_bigmath reads the histogram without pandas: same numbers as expanding load_histogram."""
    for path in (None, tmp_path / "h.csv"):
        if path is not None:  # columns in another order, a blank line
            path.write_text(_histogram_text(columns=("count", "k", "p_hat")).replace("\n", "\n\n", 1))
        h = gsd.load_histogram(path)
        want_k = np.repeat(h["k"].to_numpy(), h["count"].to_numpy())
        p, k = gsd.load_bigmath(path, with_k=True)
        np.testing.assert_array_equal(k, want_k)
        np.testing.assert_array_equal(p, want_k / h["k"].max())
        assert k.dtype == np.int64


@pytest.mark.parametrize(
    "text, match",
    [
        (_histogram_text(columns=("k", "count")), "lacks columns"),
        (_histogram_text(k=[0, 2, 1, 3, 4]), "once each"),
        (_histogram_text(k=[0, 1, 2, 3, "x"]), "not a number"),
        (_histogram_text(p_hat=[0, 0.25, 0.5, 0.75, 0.9]), "p_hat"),
        (_histogram_text(count=[3, -1, 7, 1, 2]), "negative"),
        (_histogram_text(count=[3, "nan", 7, 1, 2]), "non-finite"),
        (_histogram_text(count=[3, "inf", 7, 1, 2]), "non-finite"),
    ],
)
def test_bad_histograms_are_rejected_by_both_readers(tmp_path, text, match):
    path = tmp_path / "h.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        gsd.load_bigmath(path)
    with pytest.raises(ValueError, match=match):
        gsd.load_histogram(path)


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
def test_per_problem_file_formats(tmp_path, fmt):
    df = pd.DataFrame({"problem": ["a", "b", "c", "d"], "llama8b_solve_rate": [0.0, 0.25, None, 1.0]})
    path = tmp_path / f"rates.{fmt}"
    if fmt == "csv":
        df.to_csv(path, index=False)
    elif fmt == "parquet":
        df.to_parquet(path)
    else:
        path.write_text("\n".join(json.dumps(r) for r in df.to_dict(orient="records")))
    np.testing.assert_array_equal(load_solve_rates(path), [0.0, 0.25, 1.0])


def test_bad_files(tmp_path):
    with pytest.raises(ValueError, match="path"):
        load_solve_rates(tmp_path / "missing.csv")
    bad = tmp_path / "x.csv"
    pd.DataFrame({"other": [0.1]}).to_csv(bad, index=False)
    with pytest.raises(ValueError, match="column"):
        load_solve_rates(bad)
    pd.DataFrame({"llama8b_solve_rate": [0.1, 1.5]}).to_csv(bad, index=False)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        load_solve_rates(bad)
    pd.DataFrame({"llama8b_solve_rate": ["x"]}).to_csv(bad, index=False)
    with pytest.raises(ValueError, match="non-numeric"):
        load_solve_rates(bad)
    txt = tmp_path / "a.txt"
    txt.write_text("1")
    with pytest.raises(ValueError, match="unsupported"):
        load_solve_rates(txt)


def test_subsampled_silent_rate_exact_fractions():
    for k in (0, 1, 5, 32, 63, 64):
        for G in (1, 4, 8, 64):
            want = Fraction(comb(k, G) + comb(64 - k, G), comb(64, G))
            assert float(gsd.silent_rate_subsampled(k, 64, G)) == pytest.approx(float(want), rel=1e-12, abs=1e-300)
