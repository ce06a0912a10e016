"""Loading the shipped histogram and a user's per-problem file."""

import json
from fractions import Fraction
from math import comb

import numpy as np
import pandas as pd
import pytest

import gsd
from gsd.data import load_solve_rates


def test_histogram_totals():
    h = gsd.load_histogram()
    assert len(h) == 65 and h["count"].sum() == 215_608
    p = gsd.load_bigmath()
    assert np.isclose(p.mean(), (h.k * h["count"]).sum() / 64 / 215_608)


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
