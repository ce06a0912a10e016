"""The Chebyshev tables of the ledger's binomial expectations against mpmath and the exact sum."""

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gsd.core.binomial import _SMALL_G, symmetric_expectation
from gsd.core.chebyshev import MAX_BOUND, chebyshev_expectation, chebyshev_table, monomial_coefficients
from gsd.core.update import _grpo_term

CONVENTIONS = [(0, 0.0), (1, 0.0), (0, 1e-4), (1, 0.1)]


def _mp_expectation(p, G, ddof, eps):
    """Σ_k C(G,k) p^k (1−p)^(G−k) f(k) in 60-digit arithmetic, f = σ²/(σ_c + eps) from σ = sqrt(k(G−k))/G."""
    with mp.workdps(60):
        p = mp.mpf(p)
        q = 1 - p
        total = mp.mpf(0)
        for k in range(1, G):
            s = mp.sqrt(k * (G - k)) / G
            f = s if not ddof and not eps else s * s / (s * mp.sqrt(mp.mpf(G) / (G - ddof)) + eps)
            total += mp.binomial(G, k) * p**k * q ** (G - k) * f
        return total


def _within(got, want, bound):
    """|got − want| ≤ bound·want + 2^-1075: relative, but for the half subnormal ulp of a result
    below the smallest normal float (the last product a·h rounds there in absolute terms)."""
    return abs(mp.mpf(float(got)) - want) <= bound * want + mp.mpf(2) ** -1075


# p spread over many decades, both ends included (1 − p is exact near 1 only from 2^-53 up).
probabilities = st.one_of(
    st.sampled_from([0.0, 1.0, 0.5]), st.floats(1e-300, 1.0), st.floats(1e-300, 2**-20).map(lambda x: 1.0 - x)
)


@settings(max_examples=150, deadline=None)
@given(probabilities, st.integers(2, 130), st.sampled_from(CONVENTIONS))
def test_table_within_its_bound_of_mpmath(p, G, conv):
    table = chebyshev_table(G, _grpo_term(*conv))
    assert table is not None and table.bound <= MAX_BOUND
    got = chebyshev_expectation(np.array([p]), table)[0]
    want = _mp_expectation(p, G, *conv)
    # f's float64 values (≤ 4 roundings each, all terms ≥ 0) sit outside the table's bound.
    assert _within(got, want, table.bound + 4 * 2.0**-53)


@pytest.mark.parametrize("G", [2, 3, 8, 64, 89, 130])
@pytest.mark.parametrize("p", [5e-324, 1e-300, 1e-12, 1e-6, 0.05, 0.3, 0.5, 1 - 1e-12, 1 - 2**-53])
def test_extremes_against_mpmath(p, G):
    table = chebyshev_table(G, _grpo_term(0, 0.0))
    got = chebyshev_expectation(np.array([p]), table)[0]
    assert _within(got, _mp_expectation(p, G, 0, 0.0), table.bound + 4 * 2.0**-53)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 130), st.sampled_from(CONVENTIONS), st.integers(0, 2**32 - 1))
def test_arrays_match_the_exact_sum(G, conv, seed):
    """Many prompts at once (the ledger's use), 2-d too, against the core's exact sum."""
    f = _grpo_term(*conv)
    table = chebyshev_table(G, f)
    rng = np.random.default_rng(seed)
    p = np.concatenate([rng.random(300), 10.0 ** rng.uniform(-300, 0, 200), [0.0, 1.0]]).reshape(2, -1)
    got = chebyshev_expectation(p, table)
    want = symmetric_expectation(p, np.full(p.shape, G), f)
    assert got.shape == p.shape
    assert got[p == 0].tolist() == [0.0] and got[p == 1].tolist() == [0.0]
    if G <= _SMALL_G:
        # the exact sum's dense path (G ≤ 128) errs by ≤ ~2G ulp (gsd.core.binomial), on top of the table's bound
        np.testing.assert_allclose(got, want, rtol=table.bound + 2 * (G + 1) * 2.0**-52, atol=2.0**-1074)
        return
    # Above, the exact sum anchors its blocks on scipy's binom pmf, which has no documented bound
    # (measured 5.4e-13 off at G = 129, p = 0.929, k = 0): a sample of the entries against mpmath,
    # within the table's own bound (plus f's roundings, as in the test above).
    for i in np.linspace(0, p.size - 1, 12).astype(int):
        assert _within(got.flat[i], _mp_expectation(p.flat[i], G, *conv), table.bound + 4 * 2.0**-53)


def test_the_table_and_the_exact_sum_where_scipys_pmf_is_not_right():
    """Found by the explore profile: at G = 129, p = 0.9291…, ddof 1, eps 0.1 the exact sum missed
    mpmath by more than 2G ulp, anchored on scipy's pmf (5.4e-13 off at k = 0); anchored at k = 0 on
    exp(G·log1p(−a)) it is within that, and so is the table."""
    p, G, conv = 0.9291042207970062, 129, (1, 0.1)
    want = _mp_expectation(p, G, *conv)
    table = chebyshev_table(G, _grpo_term(*conv))
    assert _within(chebyshev_expectation(np.array([p]), table)[0], want, table.bound + 4 * 2.0**-53)
    exact = symmetric_expectation(np.array([p]), np.array([G]), _grpo_term(*conv))[0]
    assert _within(exact, want, 2 * (G + 1) * 2.0**-52)


def test_bound_violated_means_no_table():
    """Where the bound would exceed MAX_BOUND (large G) there is no table, and the ledger sums exactly."""
    from gsd.core.update import expected_update
    from gsd.simulator.config import SimConfig
    from gsd.simulator.ledger import predicted_update

    f = _grpo_term(0, 0.0)
    assert chebyshev_table(131, f) is None and chebyshev_table(400, f) is None
    p = np.linspace(0.01, 0.99, 50)
    cfg = SimConfig(group_size=150)
    assert np.array_equal(predicted_update(p, cfg), expected_update(p, 150))


def test_not_a_symmetric_term_gets_no_table():
    assert chebyshev_table(8, lambda k, G: k / G) is None  # f(0) = 0 but not symmetric
    assert chebyshev_table(8, lambda k, G: np.ones(k.shape)) is None  # f(0) ≠ 0


def test_ledger_update_uses_the_table_within_its_bound():
    """predicted_update at G = 64 (a table) against expected_update (the exact sum), every method."""
    from gsd.core.update import expected_update
    from gsd.simulator.config import SimConfig
    from gsd.simulator.ledger import predicted_update

    p = np.random.default_rng(0).random(2000)
    bound = chebyshev_table(64, _grpo_term(0, 0.0)).bound
    for method, kw in (("grpo", {}), ("dapo", {"max_draws": 4}), ("dr_grpo", {})):
        cfg = SimConfig(group_size=64, method=method, max_draws=4)
        np.testing.assert_allclose(
            predicted_update(p, cfg),
            expected_update(p, 64, method, **kw),
            rtol=bound + 2 * 65 * 2.0**-52 + 8 * 2.0**-53,
            atol=0,
        )  # DAPO: a divide, expm1, a product


def test_batches_past_the_kept_rows_give_the_same_bits():
    """Past KEEP_ROW_ENTRIES the work rows are fresh, not kept: each entry's value is the same
    elementwise recurrence, so the same bits as in a small batch."""
    from gsd.core.chebyshev import KEEP_ROW_ENTRIES

    table = chebyshev_table(64, _grpo_term(0, 0.0))
    p = np.random.default_rng(1).random(KEEP_ROW_ENTRIES + 5)
    big = chebyshev_expectation(p, table)
    assert np.array_equal(big[:1000], chebyshev_expectation(p[:1000], table))
    assert np.array_equal(big[-5:], chebyshev_expectation(p[-5:], table))


@pytest.mark.parametrize("G", [2, 8, 64, 130])
def test_monomial_form_is_the_chebyshev_series(G):
    """The exact conversion against mpmath's T_n at 60 digits: Σ c_n T_n(−y) = Σ m_j y^j."""
    table = chebyshev_table(G, _grpo_term(0, 0.0))
    exact = monomial_coefficients(table.coeffs)
    with mp.workdps(60):
        for y in np.random.default_rng(G).uniform(-1, 1, 7).tolist() + [-1.0, 1.0]:
            series = mp.fsum(mp.mpf(float(c)) * mp.chebyt(n, -mp.mpf(y)) for n, c in enumerate(table.coeffs))
            power = mp.fsum(mp.mpf(m.numerator) / m.denominator * mp.mpf(y) ** j for j, m in enumerate(exact))
            assert abs(series - power) <= mp.mpf(10) ** -45 * abs(series)
    # the float64 form is each exact coefficient rounded once
    assert table.monomial.tolist() == [float(m) for m in exact]


def test_horner_bound_below_clenshaw_and_stated():
    """Horner's rule on the monomial form is the evaluated form wherever its bound is the smaller
    (every G with a table in the paper's convention), 7.1e-14 at G = 64 against Clenshaw's 6.4e-13."""
    f = _grpo_term(0, 0.0)
    for G in (2, 8, 64, 89, 130):
        table = chebyshev_table(G, f)
        assert table.monomial is not None and table.bound < table.clenshaw_bound <= 2 * MAX_BOUND
    assert 5e-14 < chebyshev_table(64, f).bound < 1e-13


@pytest.mark.parametrize("G, conv", [(64, (0, 0.0)), (89, (1, 0.1)), (183, (1, 0.1))])
def test_clenshaw_path_within_its_bound(G, conv):
    """Clenshaw on the Chebyshev coefficients, the form a table without a monomial form evaluates
    (ddof 1, eps 0.1 at G = 183), within its own bound of mpmath."""
    import dataclasses

    table = chebyshev_table(G, _grpo_term(*conv))
    if table.monomial is not None:
        table = dataclasses.replace(table, monomial=None, bound=table.clenshaw_bound)
    assert table.bound <= MAX_BOUND
    for p in (1e-300, 1e-9, 0.003, 0.1, 0.37, 0.5, 0.81, 1 - 1e-10):
        got = chebyshev_expectation(np.array([p]), table)[0]
        assert _within(got, _mp_expectation(p, G, *conv), table.bound + 4 * 2.0**-53)


def test_given_minor_same_bits():
    """The ledger hands in min(p, 1 − p) it already has: the same bits as computing it here."""
    from gsd.core.silent import _minor
    from gsd.simulator.config import SimConfig
    from gsd.simulator.ledger import closed_form_columns, predicted_update

    table = chebyshev_table(64, _grpo_term(0, 0.0))
    p = np.random.default_rng(2).random((3, 500))
    assert np.array_equal(chebyshev_expectation(p, table, minor=_minor(p)), chebyshev_expectation(p, table))
    for method in ("grpo", "dapo"):
        cfg = SimConfig(group_size=64, method=method, max_draws=4, verifier_noise=0.1 if method == "dapo" else 0.0)
        cols = closed_form_columns(p, 64, np.zeros(p.shape, dtype=np.int64), cfg)
        assert np.array_equal(cols["grad_pred"], predicted_update(p, cfg).sum(-1))
