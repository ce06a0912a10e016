"""Big-Math numbers against independent computations from the shipped histogram."""

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import gsd
from gsd.reproduce import bigmath

N = 64


@pytest.fixture(scope="module")
def hist():
    return gsd.load_histogram()


@pytest.fixture(scope="module")
def summary():
    return bigmath.summary()


@pytest.mark.parametrize("k", [0, 1, 2, 5, 32, 57, 63, 64])
@pytest.mark.parametrize("G", [4, 8, 16, 64])
def test_subsampled_silent_rate_against_exact_binomials(k, G):
    exact = Fraction(math.comb(k, G) + math.comb(N - k, G), math.comb(N, G))
    assert float(gsd.silent_rate_subsampled(k, N, G)) == pytest.approx(float(exact), rel=1e-12, abs=1e-300)


def test_silent_rates_by_hand(hist):
    tab = bigmath.silent_rates().set_index("G")
    total = int(hist["count"].sum())
    for G in (4, 8, 16, 32, 64):
        closed = sum(c * (Fraction(k, N) ** G + (1 - Fraction(k, N)) ** G) for k, c in zip(hist.k, hist["count"]))
        sub = sum(
            c * Fraction(math.comb(k, G) + math.comb(N - k, G), math.comb(N, G)) for k, c in zip(hist.k, hist["count"])
        )
        assert tab.loc[G, "closed_form"] == pytest.approx(float(closed / total), rel=1e-12)
        assert tab.loc[G, "subsampled"] == pytest.approx(float(sub / total), rel=1e-12)
    # subsampling a finite pool never exceeds the closed form on p̂ here, and at G = 64 only p̂ ∈ {0, 1} is silent
    assert (tab.subsampled <= tab.closed_form + 1e-12).all()
    ends = (hist["count"].iloc[0] + hist["count"].iloc[-1]) / total
    assert tab.loc[64, "subsampled"] == pytest.approx(ends, rel=1e-12)


def test_population_shares_by_hand(hist, summary):
    total = hist["count"].sum()
    pop = summary["population"]
    assert pop["n_problems"] == total == 215_608
    assert pop["never_solved"] == pytest.approx(hist["count"].iloc[0] / total)
    assert pop["always_solved"] == pytest.approx(hist["count"].iloc[-1] / total)
    assert pop["silent_at_every_G"] == pytest.approx(pop["never_solved"] + pop["always_solved"])
    assert pop["mean_solve_rate"] == pytest.approx((hist.k * hist["count"]).sum() / (N * total))


def test_extreme_and_medium_shares_by_hand(hist, summary):
    p = hist.k.to_numpy() / N
    c = hist["count"].to_numpy(float)
    extreme = ((p > 0) & (p < 0.1)) | ((p > 0.9) & (p < 1))
    medium = (p >= 0.4) & (p <= 0.6)
    for method, w in (("grpo", np.sqrt(p * (1 - p))), ("dr_grpo", p * (1 - p))):
        mass = c * w
        assert summary["headline"][f"extreme_share_{method}"] == pytest.approx(
            mass[extreme].sum() / mass.sum(), rel=1e-12
        )
        assert summary["headline"][f"medium_share_{method}"] == pytest.approx(
            mass[medium].sum() / mass.sum(), rel=1e-12
        )
    # finite G: the exact expected update by a direct binomial sum at G = 8
    G = 8
    kk = np.arange(G + 1)
    sig = np.sqrt(kk * (G - kk)) / G
    pmf = np.array([[math.comb(G, j) * q**j * (1 - q) ** (G - j) for j in kk] for q in p])
    mass = c * (pmf @ sig)
    assert summary["headline"]["extreme_share_grpo_G8"] == pytest.approx(mass[extreme].sum() / mass.sum(), rel=1e-10)


def test_published_numbers_at_printed_precision(summary):
    h = summary["headline"]
    assert round(100 * h["silent_G8_closed_form"], 1) == 44.3
    assert round(100 * h["extreme_share_dr_grpo"], 1) == 13.9
    assert round(100 * h["extreme_share_grpo"], 1) == 24.7


def test_decile_table(hist, summary):
    d = summary["deciles"]
    assert len(d) == 10
    for col in ("prompts", "grpo", "dr_grpo", "grpo_G8", "dr_grpo_G8"):
        assert d[col].sum() == pytest.approx(1.0, abs=1e-12)
        assert (d[col] >= 0).all()
    # prompts per decile straight from the counts: k/64 in [j/10, (j+1)/10), the last decile closed
    p = hist.k / N
    j = np.minimum((p * 10).astype(int), 9)
    expected = hist.groupby(j)["count"].sum() / hist["count"].sum()
    assert np.allclose(d.prompts.to_numpy(), expected.to_numpy())
    # Dr.GRPO's finite-G weights are the large-G ones times (1 − 1/G): identical shares
    assert np.allclose(d.dr_grpo, d.dr_grpo_G8)


def test_budget_table_rows_sum_to_one(summary):
    b = summary["budget_shares"]
    assert set(b.weighting) == {"large_G", "G=8"}
    assert np.allclose(b.extreme + b.medium + b.other, 1.0)


def test_per_problem_file_on_the_grid(tmp_path):
    p, k = gsd.load_bigmath(with_k=True)
    rng = np.random.default_rng(0)
    idx = rng.choice(p.size, 5000, replace=False)
    path = tmp_path / "rates.csv"
    pd.DataFrame({"llama8b_solve_rate": p[idx]}).to_csv(path, index=False)
    d = bigmath.load_difficulty(path)
    assert d.n == 64 and np.array_equal(d.k, k[idx]) and d.n_rounded == 0
    tab = bigmath.silent_rates(d)
    assert tab.subsampled.notna().all()


def test_per_problem_file_off_the_grid(tmp_path):
    rates = np.concatenate([np.arange(65) / 64, [1 / 9]])  # one rate on a /9 grid: rounded and counted
    path = tmp_path / "rates.csv"
    pd.DataFrame({"llama8b_solve_rate": np.repeat(rates, [20] * 65 + [1])}).to_csv(path, index=False)
    d = bigmath.load_difficulty(path)
    assert d.n_rounded == 1 and d.notes
    cont = tmp_path / "continuous.csv"
    pd.DataFrame({"llama8b_solve_rate": np.random.default_rng(1).random(500)}).to_csv(cont, index=False)
    d = bigmath.load_difficulty(cont)
    assert d.k is None
    tab = bigmath.silent_rates(d)
    assert tab.subsampled.isna().all() and tab.closed_form.notna().all()


def test_histogram_file_is_read_as_histogram():
    d = bigmath.load_difficulty(gsd.io.data.data_dir() / "bigmath_solve_rate_histogram.csv")
    assert d.size == 215_608 and d.n == 64


def test_bad_file_names_the_problem(tmp_path):
    with pytest.raises(ValueError, match="path"):
        bigmath.load_difficulty(tmp_path / "missing.csv")
