"""``gsd plan --budget``: the uniform default without a table, strict JSON, and the advice's
allocated column against the allocator and a brute force."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from gsd.allocation import allocate_group_sizes, allocation_value, uniform_group_size_advice
from gsd.cli import main


def _refuse(constant):
    raise ValueError(f"not JSON: {constant}")


def _brute_force(p, budget, g_min, g_max):
    """max Σ V(p_i, G_i) over every G_i in {0, g_min..g_max} with Σ G_i ≤ budget."""
    choices = [0, *range(g_min, g_max + 1)]
    table = {G: allocation_value(np.asarray(p), np.full(len(p), G), "update") for G in choices}
    best = 0.0
    for combo in itertools.product(choices, repeat=len(p)):
        if sum(combo) <= budget:
            best = max(best, sum(table[G][i] for i, G in enumerate(combo)))
    return best


@pytest.mark.parametrize("p", [[0.3, 0.5, 0.1], [0.05, 0.9, 0.5], [0.2, 0.2, 0.7]])
def test_advice_allocated_value_is_the_optimum(p):
    """At every uniform budget the advice's allocated value is the allocator's and the brute
    force's optimum, never below uniform G (a feasible plan).  Before the fix the column was the
    greedy's, uncertified at unequal segment costs: 0.775 < uniform 0.778 at G = 3 for the first p."""
    g_max = 6
    adv = uniform_group_size_advice(p, budget=9, g_max=g_max)
    for row in adv.curve.itertuples():
        brute = _brute_force(p, row.rollouts, 2, g_max)
        assert row.allocated_value == pytest.approx(brute, rel=1e-12, abs=1e-15)
        assert row.allocated_value >= row.uniform_value * (1 - 1e-12)
        assert row.allocated_value == pytest.approx(allocate_group_sizes(p, row.rollouts, g_max=g_max).total, rel=1e-12)
    assert adv.at_budget["allocated_value"] == pytest.approx(_brute_force(p, 9, 2, g_max), rel=1e-12)


def test_uniform_default_plans_many_distinct_rates_without_a_table(tmp_path, capsys):
    rates = np.random.default_rng(0).random(100_000)
    path = tmp_path / "rates.csv"
    np.savetxt(path, rates, header="p", comments="", fmt="%.17g")
    assert main(["plan", "--input", str(path), "--column", "p", "--budget", "1000000", "--json"]) == 0
    out = json.loads(capsys.readouterr().out, parse_constant=_refuse)
    assert out["summary"]["spent"] == 1_000_000 and {r["group_size"] for r in out["rows"]} == {10}
    assert out["summary"]["uniform_at_budget"] is None
    # asked for, the table is still refused with the reason
    assert main(["plan", "--input", str(path), "--column", "p", "--budget", "1000000", "--advice"]) == 2
    assert "table limit" in capsys.readouterr().err
    # and a planned value needs it
    assert main(["plan", "--input", str(path), "--column", "p", "--budget", "1000000", "--value", "update"]) == 2


@pytest.mark.parametrize("extra", [[], ["--advice"], ["--value", "update"], ["--value", "update", "--advice"]])
def test_plan_json_is_strict_json(capsys, extra):
    # a surely silent prompt (p = 0) and a uniform plan: NaN multiplier, NaN gains in the advice
    assert main(["plan", "--p", "0,0.3,1,0.5", "--budget", "4", "--g-max", "8", "--json", *extra]) == 0
    out = json.loads(capsys.readouterr().out, parse_constant=_refuse)
    if extra[:2] != ["--value", "update"]:
        assert out["summary"]["multiplier"] is None
