"""Catalogue of bad inputs: each raises ValueError naming the argument and the value."""

import numpy as np
import pytest

import gsd

CASES = [
    (lambda: gsd.silent_rate(1.5, 8), "p", "1.5"),
    (lambda: gsd.silent_rate(-0.1, 8), "p", "-0.1"),
    (lambda: gsd.silent_rate(float("nan"), 8), "p", "nan"),
    (lambda: gsd.silent_rate(0.5, 0), "G", "0"),
    (lambda: gsd.silent_rate(0.5, 2.5), "G", "2.5"),
    (lambda: gsd.silent_rate(0.5, "eight"), "G", "eight"),
    (lambda: gsd.fidelity([0.2, 7.0], 8), "p", "7.0"),
    (lambda: gsd.expected_update(0.5, 8, "ppo"), "method", "ppo"),
    (lambda: gsd.expected_update(0.5, 1, "dapo"), "G", "1"),
    (lambda: gsd.expected_update(0.5, 8, ddof=2), "ddof", "2"),
    (lambda: gsd.expected_update(0.5, 8, eps=-1.0), "eps", "-1.0"),
    (lambda: gsd.required_group_size(0.5, 0.0), "epsilon", "0.0"),
    (lambda: gsd.required_group_size(0.5, 1.2), "epsilon", "1.2"),
    (lambda: gsd.required_group_size(0.5, 0.1, rule="guess"), "rule", "guess"),
    (lambda: gsd.group_size_for_silent_rate(0.5, 1.0), "delta", "1.0"),
    (lambda: gsd.group_size_for_silent_rate(0.5, float("nan")), "delta", "nan"),
    (lambda: gsd.advantages([0, 1, float("nan")]), "rewards", "NaN"),
    (lambda: gsd.advantages([]), "rewards", "empty"),
    (lambda: gsd.advantages(1.0), "rewards", "1.0"),
    (lambda: gsd.advantages([0, 1], "ppo"), "method", "ppo"),
    (lambda: gsd.advantages([1.0], ddof=1), "ddof", "G=1"),
    (lambda: gsd.identity_terms([0, 0.5], np.zeros((2, 1))), "rewards", "0.5"),
    (lambda: gsd.group_update([0, 1, 1], np.zeros((2, 3))), "scores", "(2, 3)"),
    (lambda: gsd.group_update([0, 1], np.zeros((2, 0))), "scores", "D = 0"),
    (lambda: gsd.silent_rate_subsampled(70, 64, 8), "k", "70"),
    (lambda: gsd.silent_rate_subsampled(3, 64, 65), "G", "65"),
    (lambda: gsd.budget_share([0.5, 0.2], [1, 0]), "selected", "dtype"),
    (lambda: gsd.budget_share([0.5, 0.2], np.array([True])), "selected", "(1,)"),
    (lambda: gsd.budget_share([0.0, 1.0], np.array([True, False])), "p", "0.0"),
    (lambda: gsd.plan_group_sizes([0.5]), "epsilon", "delta"),
    (lambda: gsd.dapo_generation_cost(0.5, 8, max_draws=0), "max_draws", "0"),
]


@pytest.mark.parametrize("call,arg,value", CASES, ids=[f"{a}-{v}" for _, a, v in CASES])
def test_bad_input_names_argument_and_value(call, arg, value):
    with pytest.raises(ValueError) as info:
        call()
    msg = str(info.value)
    assert arg in msg and value in msg, msg
