"""The allocation campaign's reading of its runs, on a tiny campaign (numbers against the ledgers)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from gsd.reproduce import allocation_campaign as ac
from gsd.reproduce.report_markdown import allocation_markdown, allocation_verdict
from gsd.simulator import read_ledger

TINY = """
[campaign]
seeds = [0, 1]
reference_arm = "fixed_g8"
targets = { mean_p = 0.6, hard_quartile_p = 0.25 }

[base]
steps = 6
n_prompts = 200
rollouts = "counts"
closed_form_every = 0
device = "cpu"
g_max = 32
replan_every = 2
logged_window = 2

[arms.fixed_g8]
allocation = "fixed"

[arms.fixed_g16]
group_size = 16
steps = 3

[arms.knapsack]
allocation = "knapsack"
"""


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    root = tmp_path_factory.mktemp("alloc")
    (root / "tiny.toml").write_text(TINY)
    return root, ac.run_allocation_campaign(root / "out", config=root / "tiny.toml", progress=False)


def test_metrics_read_at_the_reference_generations(campaign):
    root, s = campaign
    for seed in (0, 1):
        ref = read_ledger(root / "out" / "runs" / "fixed_g8" / f"seed{seed}")
        budget = ref.generations.sum()
        assert s["budget_generations"][seed] == budget == 200 * 8 * 6
        led = read_ledger(root / "out" / "runs" / "knapsack" / f"seed{seed}")
        within = led[led.generations_cum <= budget]
        m = s["per_run"]["knapsack"][str(seed)]
        assert m["generations"] == within.generations.sum() <= budget
        kept = (within.n_batch * (1 - within.zero_update_frac)).sum()
        assert m["effective_ratio"] == pytest.approx(kept / within.groups.sum(), rel=1e-12)
        g16 = s["per_run"]["fixed_g16"][str(seed)]
        assert g16["generations"] == budget and g16["steps"] == 3


def _student_t(z):
    """scipy's 95 % Student-t interval of the mean of ``z`` (an independent computation)."""
    return stats.t.interval(0.95, len(z) - 1, loc=np.mean(z), scale=stats.sem(z))


def test_intervals_are_student_t_over_seeds(campaign):
    _, s = campaign
    for key in ("hard_quartile_p", "mean_p", "effective_ratio"):  # probabilities: inside [0, 1]
        vals = np.array([s["per_run"]["knapsack"][str(x)][key] for x in (0, 1)])
        r = s["arms"]["knapsack"][key]
        assert r["mean"] == pytest.approx(np.mean(vals)) and 0 <= r["lo"] <= r["hi"] <= 1
        lo, hi = _student_t(vals)
        if 0 <= lo and hi <= 1:
            assert r["scale"] == "natural" and (r["lo"], r["hi"]) == pytest.approx((lo, hi), rel=1e-12)
        else:  # two seeds: t = 12.7 leaves [0, 1]; the logit's interval, mapped back
            lo, hi = _student_t(np.log(vals / (1 - vals)))
            assert r["scale"] == "logit"
            assert (r["lo"], r["hi"]) == pytest.approx((1 / (1 + np.exp(-lo)), 1 / (1 + np.exp(-hi))), rel=1e-12)
    gains = [
        s["per_run"]["knapsack"][str(x)]["effective_ratio"] / s["per_run"]["fixed_g8"][str(x)]["effective_ratio"] - 1
        for x in (0, 1)
    ]
    assert s["arms"]["knapsack"]["effective_ratio_gain"]["mean"] == pytest.approx(np.mean(gains))
    assert s["arms"]["fixed_g8"]["effective_ratio_gain"]["mean"] == 0


def test_report_section_and_verdict(campaign):
    _, s = campaign
    text = "\n".join(allocation_markdown({"status": "ok", "run_dir": "x", **s, "setup": {}}))
    assert "| Knapsack RL value |" in text and "| fixed G = 16 |" in text
    verdict = allocation_verdict(s)
    assert "Knapsack RL's value raises the effective-gradient ratio" in verdict and "claim: +20–40 %" in verdict
    assert ac.summary_table(s).shape[0] == 3
    assert "nan" not in verdict and "[" in verdict  # two seeds: an interval
    # One seed (the notebook's fast mode) has no interval, and the verdict says so.
    one = {
        **s,
        "arms": {
            n: {k: {**v, "lo": math.nan, "hi": math.nan} if isinstance(v, dict) else v for k, v in r.items()}
            for n, r in s["arms"].items()
        },
    }
    single = allocation_verdict(one)
    assert "nan" not in single and "(one seed: no interval)" in single
    fig = ac.allocation_figure(s, campaign[0] / "out")
    assert len(fig.axes) == 2


def test_resumes_without_rerunning(campaign):
    root, s = campaign
    again = ac.run_allocation_campaign(root / "out", config=root / "tiny.toml", progress=False)
    import pandas as pd

    pd.testing.assert_frame_equal(ac.summary_table(again), ac.summary_table(s))


@pytest.mark.parametrize(
    "values, bounds, scale, expected",
    [
        ([0.50, 0.52], (0, 1), "natural", _student_t([0.50, 0.52])),
        (
            [0.10, 0.99],
            (0, 1),
            "logit",
            tuple(1 / (1 + np.exp(-z)) for z in _student_t(np.log([0.1 / 0.9, 0.99 / 0.01]))),
        ),
        ([1.0e6, 9.0e6], (0, math.inf), "log", tuple(np.exp(_student_t(np.log([1.0e6, 9.0e6]))))),
        (
            [0.3, 3.0],
            (0, math.pi),
            "logit",
            tuple(
                math.pi / (1 + np.exp(-z)) for z in _student_t(np.log([0.3 / (math.pi - 0.3), 3.0 / (math.pi - 3.0)]))
            ),
        ),
        ([0.0, 0.9], (0, 1), "cut", (0.0, _student_t([0.0, 0.9])[1] if _student_t([0.0, 0.9])[1] < 1 else 1.0)),
        ([-5.0, 7.0], (-math.inf, math.inf), "natural", _student_t([-5.0, 7.0])),
    ],
    ids=["inside", "probability", "generations", "objective", "on-the-edge", "unbounded"],
)
def test_interval_stays_in_the_quantity_range(values, bounds, scale, expected):
    r = ac.seed_interval(values, bounds)
    assert r["scale"] == scale and r["mean"] == pytest.approx(np.mean(values))
    assert (r["lo"], r["hi"]) == pytest.approx(expected, rel=1e-12)
    assert bounds[0] <= r["lo"] <= r["mean"] <= r["hi"] <= bounds[1]


def test_interval_of_one_seed_or_none():
    assert math.isnan(ac.seed_interval([0.4], (0, 1))["lo"]) and ac.seed_interval([0.4], (0, 1))["n"] == 1
    assert ac.seed_interval([None, math.nan], (0, 1))["n"] == 0
    assert ac.interval_text(ac.seed_interval([0.10, 0.99], (0, 1))).endswith(ac.TRANSFORMED_MARK)
    assert ac.TRANSFORMED_MARK not in ac.interval_text(ac.seed_interval([0.50, 0.52], (0, 1)))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0, 1), min_size=2, max_size=8),
    st.sampled_from([((0.0, 1.0), 1.0), ((0.0, math.inf), 1e7), ((0.0, math.pi), math.pi)]),
)
def test_every_interval_is_inside_its_range(unit, kind):
    (a, b), scale = kind
    values = [a + scale * u for u in unit]
    r = ac.seed_interval(values, (a, b))
    assert a <= r["lo"] <= r["hi"] <= b
    natural = _student_t(values) if np.std(values) > 0 else (np.mean(values),) * 2
    if a <= natural[0] and natural[1] <= b:  # inside already: the plain Student-t interval, untouched
        assert r["scale"] == "natural"
