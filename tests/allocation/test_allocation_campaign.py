"""The allocation campaign's reading of its runs, on a tiny campaign (numbers against the ledgers)."""

import math

import numpy as np
import pytest
from scipy import stats

from gsd.reproduce import allocation_campaign as ac
from gsd.reproduce.report import _allocation_markdown, allocation_verdict
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


def test_intervals_are_student_t_over_seeds(campaign):
    _, s = campaign
    vals = [s["per_run"]["knapsack"][str(x)]["hard_quartile_p"] for x in (0, 1)]
    r = s["arms"]["knapsack"]["hard_quartile_p"]
    half = stats.t.ppf(0.975, 1) * np.std(vals, ddof=1) / math.sqrt(2)
    assert r["mean"] == pytest.approx(np.mean(vals)) and r["hi"] - r["mean"] == pytest.approx(half)
    gains = [s["per_run"]["knapsack"][str(x)]["effective_ratio"] / s["per_run"]["fixed_g8"][str(x)]["effective_ratio"] - 1
             for x in (0, 1)]
    assert s["arms"]["knapsack"]["effective_ratio_gain"]["mean"] == pytest.approx(np.mean(gains))
    assert s["arms"]["fixed_g8"]["effective_ratio_gain"]["mean"] == 0


def test_report_section_and_verdict(campaign):
    _, s = campaign
    text = "\n".join(_allocation_markdown({"status": "ok", "run_dir": "x", **s, "setup": {}}))
    assert "| Knapsack RL value |" in text and "| fixed G = 16 |" in text
    verdict = allocation_verdict(s)
    assert "Knapsack RL's value raises the effective-gradient ratio" in verdict and "claim: +20–40 %" in verdict
    assert ac.summary_table(s).shape[0] == 3
    assert "nan" not in verdict and "[" in verdict  # two seeds: an interval
    # One seed (the notebook's fast mode) has no interval, and the verdict says so.
    one = {**s, "arms": {n: {k: {**v, "lo": math.nan, "hi": math.nan} if isinstance(v, dict) else v
                             for k, v in r.items()} for n, r in s["arms"].items()}}
    single = allocation_verdict(one)
    assert "nan" not in single and "(one seed: no interval)" in single
    fig = ac.allocation_figure(s, campaign[0] / "out")
    assert len(fig.axes) == 2


def test_resumes_without_rerunning(campaign):
    root, s = campaign
    again = ac.run_allocation_campaign(root / "out", config=root / "tiny.toml", progress=False)
    import pandas as pd

    pd.testing.assert_frame_equal(ac.summary_table(again), ac.summary_table(s))
