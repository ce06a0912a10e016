"""A short version of the paper's campaign (docs/theory.md, section The paper's definitions and
reproduction targets): the closed forms track training."""

from __future__ import annotations

import numpy as np
import pytest

from gsd.core.silent import dapo_generation_cost
from gsd.simulator import SimConfig, make_campaign_figure, read_ledger, run_paper_campaign
from gsd.simulator.campaign import load_campaign
from gsd.simulator.population import initial_solve_rates


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # (module-scoped: set up before the autouse one-thread fixture)
    out = tmp_path_factory.mktemp("campaign")
    # 4,000 prompts: the observed silent fraction has binomial noise of variance ≈ P(1−P)/N per
    # step, so at N = 1,000 and 40 steps R² already sits near 0.99 from noise alone.
    try:
        summary = run_paper_campaign(
            out, overrides={"n_prompts": 4000, "steps": 40, "decile_draws": 60}, progress=False
        )
    finally:
        torch.set_num_threads(threads)
    return out, summary


def test_silent_fraction_tracks_the_closed_form(campaign):
    _, s = campaign
    assert s["silent_r2"]["grpo"] >= 0.99
    assert s["silent_r2"]["dapo"] >= 0.99
    assert s["silent_r2"]["dr_grpo"] >= 0.95  # slower drift, so a smaller signal against the same noise


def test_decile_measurement_matches_closed_forms(campaign):
    _, s = campaign
    dec = s["decile_measurement"]
    for m in ("grpo", "dr_grpo"):
        assert dec[m]["share_max_abs_diff"] < 0.005
        assert dec[m]["mass_ratio"] == pytest.approx(1.0, abs=0.01)
        assert np.nanmax(np.abs(np.array(dec[m]["mass_ratio_per_decile"]) - 1)) < 0.05
    # GRPO puts more of the budget on the hardest decile than Dr.GRPO (weight 1/sqrt(p(1−p))).
    assert dec["grpo"]["share_closed_form"][0] > dec["dr_grpo"]["share_closed_form"][0]
    assert dec["grpo"]["share_measured"][0] > dec["dr_grpo"]["share_measured"][0]
    # Over training too, per arm.
    for arm in s["arms"].values():
        assert arm["grad_mass_over_closed_form"] == pytest.approx(1.0, abs=0.01)
        assert arm["decile_share_max_abs_diff"] < 0.01


def test_dapo_cost_and_quartiles(campaign):
    out, s = campaign
    # DAPO's groups drawn against the closed form Σ (1 − P_silent^D)/(1 − P_silent): at the
    # first step the p are the initial population's, which this test can rebuild.
    cfg = load_campaign(None, {"n_prompts": 4000, "steps": 40, "decile_draws": 60})["arms"]["dapo"]
    p0 = initial_solve_rates(SimConfig.from_dict(cfg))
    ledger = read_ledger(out / "arms" / "dapo")
    pred0 = dapo_generation_cost(p0, 8, max_draws=4).sum()
    assert ledger["groups_pred"].iloc[0] == pytest.approx(pred0, rel=1e-12)
    assert ledger["groups"].iloc[0] == pytest.approx(pred0, rel=0.02)
    assert s["dapo_generation_cost_ratio"] == pytest.approx(s["dapo_generation_cost_ratio_pred"], rel=0.01)
    assert s["dapo_generation_cost_ratio"] > 1
    hq = s["hard_quartile_final"]
    assert hq["dapo"] > hq["grpo"] > hq["dr_grpo"] > s["hard_quartile_initial"]


def test_campaign_folder_and_figure(campaign, tmp_path):
    out, s = campaign
    assert (out / "campaign.png").stat().st_size > 10_000
    for arm in ("grpo", "dr_grpo", "dapo"):
        assert (out / "arms" / arm / "summary.json").is_file()
    again = run_paper_campaign(out, overrides={"n_prompts": 4000, "steps": 40, "decile_draws": 60}, progress=False)
    assert again["silent_r2"] == s["silent_r2"]  # finished: read back, not rerun
    with pytest.raises(ValueError, match="different campaign"):
        run_paper_campaign(out, overrides={"n_prompts": 3000, "steps": 40, "decile_draws": 60}, progress=False)
    path = make_campaign_figure(out, tmp_path / "fig.png")  # from the folder alone
    assert path.stat().st_size > 10_000


def test_campaign_figure_fits_its_fixed_margins(campaign):
    """The figure is drawn with fixed margins (no layout engine): every panel with its labels,
    title and legend lies inside the figure, left of the next panel and below the suptitle."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from gsd.simulator.campaign import campaign_figure

    _, s = campaign
    fig = campaign_figure(s)
    assert fig.get_layout_engine() is None
    FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    boxes = [ax.get_tightbbox(renderer) for ax in fig.axes]
    assert len(boxes) == 3
    top = fig._suptitle.get_window_extent(renderer)
    for box in boxes:
        assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= fig.bbox.width and box.y1 <= top.y0
    for left, right in zip(boxes, boxes[1:]):
        assert left.x1 < right.x0
    assert top.x0 >= 0 and top.x1 <= fig.bbox.width and top.y1 <= fig.bbox.height


@pytest.mark.parametrize("engine", ["numpy", "torch"])
def test_decile_methods_are_paired(monkeypatch, engine):
    """Every method scores the same drawn groups: Dr.GRPO measured beside GRPO is Dr.GRPO
    measured alone, and the split of the draws into chunks changes nothing but rounding."""
    import gsd.simulator.engine as engine_module
    import gsd.simulator.tabular as tabular_module
    from gsd.simulator.campaign import measure_initial_deciles

    cfg = SimConfig.from_dict({**load_campaign(None, {"n_prompts": 500})["base"], "engine": engine})
    both = measure_initial_deciles(cfg, draws=12, methods=["grpo", "dr_grpo"])
    assert measure_initial_deciles(cfg, draws=12, methods=["dr_grpo"])["dr_grpo"] == both["dr_grpo"]
    monkeypatch.setattr(engine_module, "SMALL_STEP", 500 * 8 * 5)  # chunks of 5, 5, 2 draws
    monkeypatch.setattr(tabular_module, "CHUNK_ANSWERS", 500 * 8 * 5)
    split = measure_initial_deciles(cfg, draws=12, methods=["grpo", "dr_grpo"])
    for m in ("grpo", "dr_grpo"):
        np.testing.assert_allclose(split[m]["share_measured"], both[m]["share_measured"], rtol=1e-12)


def test_decile_draws_beyond_the_answer_limit_is_refused_before_any_work(tmp_path):
    import time

    import gsd
    from gsd.simulator.campaign import load_campaign, measure_initial_deciles

    start = time.perf_counter()
    with pytest.raises(gsd.InputError, match=r"'decile_draws' = 1000000000000000: .* above the limit"):
        load_campaign(None, {"decile_draws": 10**15})
    with pytest.raises(gsd.InputError, match="decile_draws"):
        measure_initial_deciles(SimConfig(n_prompts=100, device="cpu"), draws=10**15)
    assert time.perf_counter() - start < 5
