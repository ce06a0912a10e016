"""`gsd plan --budget`'s default, uniform G at the budget (gsd.uniform_plan), against a direct count."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

import gsd
from gsd.cli import main


def _direct_sigma(p, G):
    """E[σ̂] = Σ_k Binom(k; G, p)·sqrt(k(G−k))/G, the paper's convention, by scipy's pmf."""
    if G < 2:
        return 0.0
    k = np.arange(G + 1)
    return float(binom.pmf(k, G, p) @ (np.sqrt(k * (G - k)) / G))


rates = st.lists(st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.001, 0.999)), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(p=rates, budget=st.integers(4, 2000), g_min=st.integers(2, 4), step=st.sampled_from([1, 2, 4]))
def test_every_prompt_that_can_learn_gets_the_largest_affordable_grid_size(p, budget, g_min, step):
    p = np.array(p)
    g_max = g_min + 8 * step
    plan = gsd.uniform_plan(p, budget, g_min=g_min, g_max=g_max, step=step)
    live = (p > 0) & (p < 1)
    assert (plan.group_size[~live] == 0).all()  # silent for sure: never worth a rollout
    assert plan.spent == plan.group_size.sum() <= budget
    n = int(live.sum())
    if n and budget // n >= g_min:
        want = [g for g in range(g_min, g_max + 1, step) if g * n <= budget][-1]  # counted, not solved
        assert set(plan.group_size[live].tolist()) == {want}
    elif n:  # too small for all: g_min for the first ones, in input order
        served = plan.group_size[live]
        assert set(served.tolist()) <= {0, g_min} and served.sum() == budget // g_min * g_min
        assert (np.diff((served > 0).astype(int)) <= 0).all()
    direct = [_direct_sigma(x, int(g)) for x, g in zip(p, plan.group_size)]
    np.testing.assert_allclose(plan.value, direct, rtol=1e-10, atol=1e-14)


def test_counts_serve_every_prompt_and_no_skip_serves_known_silent_ones():
    post = gsd.posterior_from_counts([0, 3, 8, 5], [8, 8, 8, 16])
    assert gsd.uniform_plan(post, 40, g_max=32).group_size.tolist() == [10, 10, 10, 10]
    assert gsd.uniform_plan([0.0, 0.5, 1.0], 12, skip=False).group_size.tolist() == [4, 4, 4]
    assert gsd.uniform_plan([0.0, 0.5, 1.0], 12).group_size.tolist() == [0, 12, 0]


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"budget": 1}, "budget must be >= g_min"),
        ({"budget": 0}, "budget"),
        ({"budget": 10, "g_min": 5, "g_max": 4}, "g_min must be <= g_max"),
        ({"budget": 10, "skip": "yes"}, "skip"),
    ],
)
def test_bad_input_names_the_argument(kw, match):
    with pytest.raises(gsd.InputError, match=match):
        gsd.uniform_plan([0.3, 0.6], **kw)


def test_the_cli_default_is_uniform_and_the_values_stay_available(capsys):
    argv = ["plan", "--p", "0.02,0.5,1.0,0.3", "--budget", "32", "--g-max", "16", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["summary"]["value"] == gsd.DEFAULT_PLAN == "uniform"
    assert [r["group_size"] for r in out["rows"]] == [10, 10, 0, 10]
    assert main([*argv, "--value", "update"]) == 0
    old = json.loads(capsys.readouterr().out)
    assert [r["group_size"] for r in old["rows"]] == gsd.allocate_group_sizes(
        [0.02, 0.5, 1.0, 0.3], 32, g_max=16
    ).group_size.tolist()
    assert main(["plan", "--p", "0.5", "--budget", "8", "--value", "bogus"]) == 2
    assert "--value must be one of uniform" in capsys.readouterr().err
