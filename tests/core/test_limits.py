"""No silent wrong answer at the edges: documented G limits, sentinels instead of overflowed
integers, closed forms instead of loops over G, and the law only where it means something."""

import math

import mpmath as mp
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gsd
from gsd.validation import MAX_EXACT_GROUP_SIZE, MAX_GROUP_SIZE

# (call with G, G limit): every public function that takes a group size.
WITH_G = [
    ("silent_rate", lambda G: gsd.silent_rate(0.3, G), MAX_GROUP_SIZE),
    ("nonsilent_rate", lambda G: gsd.nonsilent_rate(0.3, G), MAX_GROUP_SIZE),
    ("dapo_generation_cost", lambda G: gsd.dapo_generation_cost(0.3, G, max_draws=4), MAX_GROUP_SIZE),
    ("silent_rate_subsampled", lambda n: gsd.silent_rate_subsampled(3, n, 2), 10**6),  # n: logged rollouts
    ("fidelity_law", lambda G: gsd.fidelity_law(0.3, G), MAX_GROUP_SIZE),
    ("expected_update dr_grpo", lambda G: gsd.expected_update(0.3, G, "dr_grpo"), MAX_GROUP_SIZE),
    ("expected_update rloo", lambda G: gsd.expected_update(0.3, G, "rloo"), MAX_GROUP_SIZE),
    ("expected_update grpo", lambda G: gsd.expected_update(0.3, G), MAX_EXACT_GROUP_SIZE),
    ("expected_update dapo", lambda G: gsd.expected_update(0.3, G, "dapo"), MAX_EXACT_GROUP_SIZE),
    ("fidelity", lambda G: gsd.fidelity(0.3, G), MAX_EXACT_GROUP_SIZE),
    ("budget_share", lambda G: gsd.budget_share([0.3, 0.6], np.array([True, False]), G=G), MAX_EXACT_GROUP_SIZE),
    ("required_group_size", lambda G: gsd.required_group_size(0.3, 0.1, max_group_size=G), MAX_EXACT_GROUP_SIZE),
    (
        "required_group_size law",
        lambda G: gsd.required_group_size(0.3, 0.1, rule="law", max_group_size=G),
        MAX_GROUP_SIZE,
    ),
    (
        "group_size_for_silent_rate",
        lambda G: gsd.group_size_for_silent_rate(0.3, 0.1, max_group_size=G),
        MAX_GROUP_SIZE,
    ),
    ("plan_group_sizes", lambda G: gsd.plan_group_sizes([0.3], epsilon=0.1, max_group_size=G), MAX_EXACT_GROUP_SIZE),
    ("convention_gap", lambda G: gsd.convention_gap(G), MAX_GROUP_SIZE),
]


@pytest.mark.parametrize("name,call,limit", WITH_G, ids=[w[0] for w in WITH_G])
def test_each_function_works_at_its_g_limit_and_names_it_beyond(name, call, limit):
    out = call(limit)
    values = out.select_dtypes("number").to_numpy(float) if isinstance(out, pd.DataFrame) else np.asarray(out, float)
    assert np.isfinite(values).all() or name in ("fidelity_law",), values
    for beyond in (limit + 1, 2**62, 2**64, 10**30, 1e300):
        with pytest.raises(gsd.InputError, match=f"must be <= {limit:,}"):
            call(beyond)


def test_silent_target_beyond_int64_is_a_sentinel_not_an_overflow():
    g = gsd.group_size_for_silent_rate([1e-20, 1e-300, 0.0, 0.01], 0.01)
    assert g.tolist() == [gsd.EXCEEDS_MAX, gsd.EXCEEDS_MAX, gsd.UNREACHABLE, 459]
    assert gsd.group_size_for_silent_rate(1e-20, 0.01, max_group_size=10**6) == gsd.EXCEEDS_MAX


@pytest.mark.parametrize("p", [1e-15, 3e-12, 1e-9])
def test_silent_target_near_the_limit_is_exact_against_mpmath(p):
    delta = 0.01
    g = int(gsd.group_size_for_silent_rate(p, delta))
    assert 2 <= g <= MAX_GROUP_SIZE
    mp.mp.dps = 60

    def silent(G):
        return mp.power(1 - mp.mpf(p), G) + mp.power(mp.mpf(p), G)

    assert silent(g) <= delta < silent(g - 1)


@given(st.integers(2, 300), st.sampled_from(sorted(gsd.CONVENTIONS)))
@settings(max_examples=40, deadline=None)
def test_convention_gap_closed_form_equals_the_scan_over_k(G, trainer):
    conv = gsd.CONVENTIONS[trainer]
    k = np.arange(1, G)
    sigma = np.sqrt(k * (G - k)) / G
    ratio = sigma / (sigma * np.sqrt(G / (G - conv.ddof)) + conv.eps)
    row = gsd.convention_gap(G, trainer).iloc[0]
    assert row.ratio_min == pytest.approx(ratio.min(), rel=1e-14)
    assert row.ratio_max == pytest.approx(ratio.max(), rel=1e-14)


def test_convention_gap_at_a_billion_is_immediate_and_right():
    row = gsd.convention_gap(10**9, "trl").iloc[0]
    assert row.G == 10**9 and row.ratio_no_eps == pytest.approx(math.sqrt(1 - 1e-9), rel=1e-15)
    # k = 1: σ = sqrt(G − 1)/G ≈ 3.16e-5, eps = 1e-4 dominates
    sigma = math.sqrt(10**9 - 1) / 10**9
    assert row.ratio_min == pytest.approx(sigma / (sigma / math.sqrt(1 - 1e-9) + 1e-4), rel=1e-12)


def test_fidelity_at_the_exact_limit_matches_the_law_and_beyond_is_refused():
    # at G = 10^9 the law's error O(1/(G p(1−p))²) is far below float resolution
    for p in (0.5, 0.01):
        assert gsd.fidelity(p, MAX_EXACT_GROUP_SIZE) == pytest.approx(
            gsd.fidelity_law(p, MAX_EXACT_GROUP_SIZE), abs=1e-12
        )
    with pytest.raises(gsd.InputError, match="G must be <= 1,000,000,000"):
        gsd.fidelity(0.5, 2**62)


def test_fidelity_law_is_nan_where_it_has_no_meaning():
    assert math.isnan(gsd.fidelity_law(0.5, 1))  # φ(0.5, 1) = 0, the formula gives 0.5
    assert float(gsd.fidelity(0.5, 1)) == 0.0
    assert np.isnan(gsd.fidelity_law([0.0, 1.0], 8)).all()
    p = 0.05  # G·p(1−p) = 0.0475·G crosses 1/8 between G = 2 and 3
    law = gsd.fidelity_law(p, [2, 3])
    assert math.isnan(law[0]) and law[1] == pytest.approx(1 - 1 / (8 * 3 * p * (1 - p)))


@given(st.floats(0, 1), st.integers(1, 10**6))
@settings(max_examples=200, deadline=None)
def test_fidelity_law_is_in_0_1_or_nan_by_its_documented_rule(p, G):
    law = float(gsd.fidelity_law(p, G))
    meaningful = G >= 2 and 8 * G * p * (1 - p) >= 1
    assert (0.0 <= law < 1.0) if meaningful else math.isnan(law)


def test_cli_conventions_at_a_billion(gsd_cli):
    rc, out, _ = gsd_cli("conventions", "--G", "1000000000", "--json")
    rows = __import__("json").loads(out)
    assert rc == 0 and [r["trainer"] for r in rows] == list(gsd.CONVENTIONS)


def test_cli_fidelity_flags_the_law(gsd_cli):
    rc, out, _ = gsd_cli("fidelity", "--p", "0.5", "--G", "1,8")
    assert rc == 0 and "NaN" in out and "no meaning" in out
    rc, _, err = gsd_cli("fidelity", "--p", "0.5", "--G", str(2**62))
    assert rc == 2 and "<= 1,000,000,000" in err and err.count("\n") == 1


def test_cli_plan_for_a_tiny_p_reports_exceeds_max(gsd_cli):
    rc, out, _ = gsd_cli("plan", "--p", "1e-20,0.5", "--delta", "0.01", "--json")
    rows = __import__("json").loads(out)
    assert rc == 0 and rows[0]["status"] == "exceeds_max" and rows[1]["group_size"] == "8"


def test_column_error_lists_the_columns(tmp_path, gsd_cli):
    src = tmp_path / "rates.csv"
    pd.DataFrame({"prompt_id": [1, 2], "rate": [0.1, 0.2]}).to_csv(src, index=False)
    rc, _, err = gsd_cli("plan", "--input", str(src), "--column", "solve", "--epsilon", "0.1")
    assert rc == 2 and "'solve'" in err and "'prompt_id', 'rate'" in err
    pq = tmp_path / "rates.parquet"
    pd.DataFrame({"prompt_id": [1, 2], "rate": [0.1, 0.2]}).to_parquet(pq)
    rc, _, err = gsd_cli("plan", "--input", str(pq), "--column", "solve", "--epsilon", "0.1")
    assert rc == 2 and "'prompt_id', 'rate'" in err


@pytest.mark.parametrize("suffix", [".csv", ".parquet", ".jsonl"])
def test_unreadable_input_file_is_one_line(tmp_path, gsd_cli, suffix):
    bad = tmp_path / f"garbage{suffix}"
    bad.write_bytes(b"\x00\xff\xfe not a table \x00")
    rc, _, err = gsd_cli("plan", "--input", str(bad), "--epsilon", "0.1")
    assert rc == 2 and "cannot read" in err and err.count("\n") == 1
