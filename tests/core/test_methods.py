"""One definition of the methods (gsd.core.methods) and the noisy-verifier expected update."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gsd
from gsd.core.methods import ADVANTAGE_METHODS, METHOD_SPECS, UPDATE_METHODS, method_spec
from gsd.simulator.config import METHODS as SIM_METHODS


def test_every_list_is_derived_from_the_one_definition():
    assert gsd.UPDATE_METHODS == UPDATE_METHODS == tuple(METHOD_SPECS) == SIM_METHODS
    assert gsd.METHODS == ADVANTAGE_METHODS
    for name in UPDATE_METHODS:  # every function that takes a method accepts every method
        assert np.isfinite(gsd.expected_update(0.3, 8, name)).all()
        assert np.isfinite(gsd.large_group_weight(0.3, name)).all()
        gsd.advantages([0, 1, 1, 0], method_spec(name).advantage)
    with pytest.raises(ValueError, match="method must be one of"):
        method_spec("ppo")


@pytest.mark.parametrize("name", UPDATE_METHODS)
def test_large_group_weight_is_the_large_g_limit_of_the_expected_update(name):
    p = np.array([0.05, 0.3, 0.5, 0.9])
    np.testing.assert_allclose(gsd.expected_update(p, 20_000, name), gsd.large_group_weight(p, name), rtol=2e-3)


def _noisy_update_by_enumeration(p, G, nu, method):
    """E[g] by summing over every answer vector and every flip vector (2^G · 2^G outcomes):
    rewards r = y XOR f, g = (1/G) Σ_i A_i(r)·(y_i − p), the logit score of a Bernoulli policy."""
    total = 0.0
    for y in itertools.product((0, 1), repeat=G):
        py = np.prod([p if v else 1 - p for v in y])
        for f in itertools.product((0, 1), repeat=G):
            pf = np.prod([nu if v else 1 - nu for v in f])
            r = np.array(y) ^ np.array(f)
            A = gsd.advantages(r.astype(float), method_spec(method).advantage)
            total += py * pf * float(np.mean(A * (np.array(y) - p)))
    return total


@settings(max_examples=15, deadline=None)
@given(
    p=st.floats(0.01, 0.99),
    nu=st.floats(0.0, 0.45),
    G=st.integers(2, 4),
    method=st.sampled_from(["grpo", "dr_grpo", "rloo"]),
)
def test_verifier_noise_matches_enumeration(p, nu, G, method):
    expected = _noisy_update_by_enumeration(p, G, nu, method)
    got = float(gsd.expected_update(p, G, method, verifier_noise=nu))
    assert got == pytest.approx(expected, rel=1e-10, abs=1e-14)


@pytest.mark.parametrize("bad", [-0.1, 0.5, 0.7, float("nan"), float("inf"), True])
def test_verifier_noise_is_checked(bad):
    with pytest.raises(ValueError, match="verifier_noise"):
        gsd.expected_update(0.3, 8, verifier_noise=bad)
