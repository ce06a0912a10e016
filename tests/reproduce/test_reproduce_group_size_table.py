"""The group-size table against a brute-force scan and a direct binomial sum."""

import math

import numpy as np
import pytest

from gsd.reproduce import group_size_table as gst


def phi_direct(p, G):
    """φ(p, G) = Σ_k C(G,k) p^k (1−p)^(G−k) · sqrt(k(G−k))/G / sqrt(p(1−p)), term by term."""
    m = sum(math.comb(G, k) * p**k * (1 - p) ** (G - k) * math.sqrt(k * (G - k)) / G for k in range(G + 1))
    return m / math.sqrt(p * (1 - p))


@pytest.fixture(scope="module")
def table():
    return gst.group_size_table()


def test_shape_and_symmetry(table):
    assert len(table) == 12
    assert set(table.fidelity) == {0.90, 0.95, 0.99}
    assert set(table.p) == {0.5, 0.3, 0.1, 0.05}
    assert table.symmetric.all()
    assert (table.G_exact == table.G_exact_complement).all()


def test_exact_column_is_the_first_G_of_a_brute_force_scan(table):
    for row in table.itertuples():
        target = row.fidelity
        first = next(G for G in range(2, 2000) if phi_direct(row.p, G) >= target)
        assert row.G_exact == first, (row.p, row.fidelity)
        assert row.phi_at_G_exact >= target
        if row.G_exact > 2:
            assert row.phi_below < target


def test_law_column(table):
    for row in table.itertuples():
        value = 1.0 / (8 * row.epsilon * row.p * (1 - row.p))
        assert row.law_value == pytest.approx(value)
        assert row.G_law == max(2, math.floor(value + 0.5))
    # the law never asks for more than the exact answer on these rows (it is optimistic for hard prompts)
    assert (table.G_law <= table.G_exact).all()


def test_wide_layout(table):
    wide = gst.group_size_table_wide(table)
    assert list(wide.p) == [0.5, 0.3, 0.1, 0.05]
    assert np.allclose(wide["1 - p"], [0.5, 0.7, 0.9, 0.95])
    assert [c for c in wide.columns if c.endswith("exact")] == ["90% exact", "95% exact", "99% exact"]
    assert (
        wide.loc[wide.p == 0.05, "95% exact"].item()
        == table[(table.p == 0.05) & (table.fidelity == 0.95)].G_exact.item()
    )


def test_hard_prompt_check_matches_design():
    c = gst.hard_prompt_check()
    assert round(c["law"], 3) == 0.959
    assert round(c["exact"], 3) == 0.945
    assert c["exact"] == pytest.approx(phi_direct(0.05, 64), rel=1e-12)


def test_law_group_size_rounds_half_up():
    # ε = 0.1, p = 0.5: 1/(8·0.1·0.25) = 5 exactly
    assert int(gst.law_group_size(0.5, 0.1)) == 5
    assert int(gst.law_group_size(0.5, 0.9)) == 2  # never below 2


def test_bad_probability_is_refused():
    with pytest.raises(ValueError):
        gst.group_size_table(probabilities=(0.0, 0.5))
