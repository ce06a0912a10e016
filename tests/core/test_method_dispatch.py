"""gsd.core.update dispatches each method's expected update from gsd.core.update.CLOSED_FORMS, keyed by the
methods of gsd.core.methods.METHOD_SPECS: a method without a closed form fails by name, and every
existing method gives the bits the branch-on-name code gave."""

from __future__ import annotations

import numpy as np
import pytest

import gsd
from gsd.core import methods, update
from gsd.core.arrays import namespace
from gsd.core.binomial import symmetric_expectation
from gsd.core.methods import METHOD_SPECS, Method


def _frozen_method_update(p, G, method, ddof, eps, max_draws, expectation):
    """The code before the dispatch table (gsd/core/update.py at 0e5cc36, numpy inputs), kept verbatim
    but for the kernel names: branches on the method's name, DAPO's formula the fall-through."""
    Gf = G
    if method == "dr_grpo":
        return p * (1.0 - p) * (1.0 - 1.0 / Gf)
    if method == "rloo":
        return p * (1.0 - p) + 0.0 * Gf
    f = update.grpo_term(ddof, eps)
    m = expectation(p, G, f)
    if method == "grpo":
        return m
    xp = namespace(m)
    q = -np.expm1(G * np.log1p(-np.minimum(p, 1.0 - p))) - np.minimum(p, 1.0 - p) ** G  # silent.py's kernels
    Gb = G + xp.zeros_like(q, dtype=xp.int64)
    one_odd = f(xp.ones_like(Gb), Gb)
    with np.errstate(invalid="ignore", divide="ignore"):
        cond = xp.where(q > 0, m / xp.where(q > 0, q, 1.0), one_odd)
    if max_draws is None:
        return cond
    with np.errstate(divide="ignore"):
        kept = -xp.expm1(max_draws * xp.log1p(-q))
    return cond * kept


_P = np.array([0.0, 1e-300, 1e-12, 1e-4, 0.01, 0.05, 0.3, 0.5, 0.7, 0.95, 0.999999, 1.0])
_G = np.array([1, 2, 3, 5, 8, 16, 64, 1000])


@pytest.mark.parametrize("method", list(METHOD_SPECS))
@pytest.mark.parametrize("ddof, eps", [(0, 0.0), (1, 1e-4), (1, 1e-6), (0, 1e-8)])
@pytest.mark.parametrize("max_draws", [None, 1, 3])
def test_every_method_gives_the_bits_of_the_code_before(method, ddof, eps, max_draws):
    G = _G[_G >= max(update.closed_form(method).min_group, ddof + 1)]
    p, G = np.broadcast_arrays(_P[:, None], G[None, :])
    p, G = p.ravel().copy(), G.ravel().astype(np.int64)
    D = max_draws if METHOD_SPECS[method].redraws_silent else None
    want = _frozen_method_update(p, G, method, ddof, eps, D, symmetric_expectation)
    got = update.method_update(p, G, method, ddof, eps, D, symmetric_expectation)
    np.testing.assert_array_equal(got, want)  # every bit, NaN where NaN
    public = gsd.expected_update(p, G, method, ddof=ddof, eps=eps, max_draws=max_draws)
    np.testing.assert_array_equal(public, want)


def test_the_closed_forms_against_their_formulas():
    p, G = np.meshgrid(_P, _G[_G >= 2].astype(np.float64))
    np.testing.assert_array_equal(gsd.expected_update(p, G.astype(np.int64), "dr_grpo"), p * (1 - p) * (1 - 1 / G))
    np.testing.assert_array_equal(gsd.expected_update(p, G.astype(np.int64), "rloo"), p * (1 - p))
    # GRPO (ddof 0, eps 0): E[sqrt(k(G−k))/G] summed directly; DAPO: that over P(not silent).
    from scipy.stats import binom

    for g in (2, 5, 16):
        k = np.arange(g + 1)
        direct = (binom.pmf(k[None], g, _P[:, None]) * np.sqrt(k * (g - k)) / g).sum(1)
        np.testing.assert_allclose(gsd.expected_update(_P, g, "grpo"), direct, rtol=1e-13, atol=1e-300)
        live = 1 - _P**g - (1 - _P) ** g
        inner = (_P > 1e-6) & (_P < 1 - 1e-6)
        np.testing.assert_allclose(gsd.expected_update(_P, g, "dapo")[inner], direct[inner] / live[inner], rtol=1e-9)


def test_every_method_has_a_closed_form_and_no_other():
    assert set(update.CLOSED_FORMS) == set(METHOD_SPECS)


@pytest.fixture
def new_row(monkeypatch):
    """A method added to METHOD_SPECS (passes method validation) with no closed form."""
    specs = dict(METHOD_SPECS, gspo=Method("gspo", advantage="grpo", divides_by_std=True, redraws_silent=False))
    monkeypatch.setattr(methods, "METHOD_SPECS", specs)
    monkeypatch.setattr(update, "METHOD_SPECS", specs)
    return "gspo"


def test_a_method_without_a_closed_form_fails_by_name(new_row):
    assert update.METHOD_SPECS[new_row].advantage == "grpo"  # a row DAPO's formula used to answer for
    with pytest.raises(gsd.InputError, match=r"method 'gspo' has no closed form"):
        gsd.expected_update(0.3, 8, new_row)
    with pytest.raises(gsd.InputError, match=r"method 'gspo' has no closed form"):
        update.method_update(np.array([0.3]), np.array([8]), new_row, 0, 0.0, None, symmetric_expectation)


def test_an_unknown_method_fails_by_name():
    with pytest.raises(gsd.InputError, match=r"method must be one of .*got 'ppo'"):
        gsd.expected_update(0.3, 8, "ppo")
    with pytest.raises(gsd.InputError, match=r"got 'ppo'"):
        update.method_update(np.array([0.3]), np.array([8]), "ppo", 0, 0.0, None, symmetric_expectation)
