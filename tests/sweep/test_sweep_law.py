"""The law in training: the measurement from checkpoint pairs, the tables, the figure, the
notebook.  Runs the real simulator on the tiny (fast) grid, once per session."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sweep_helpers import ROOT

from gsd import fidelity
from gsd.sweep import law, load_results

NOTEBOOK = ROOT / "notebooks" / "09_law_in_training.ipynb"


@pytest.fixture(scope="module")
def law_sweep(tmp_path_factory):
    base = tmp_path_factory.mktemp("sweeps")
    grid = law.law_grid(fast=True)
    res = law.run_law_sweep(grid, base / "law_in_training_fast", fast=True, progress=False)
    return res


@pytest.fixture(scope="module")
def result(law_sweep):
    return law.law_in_training(law_sweep.out)


def test_fast_grid_is_the_shipped_grid_made_small():
    full, fast = law.law_grid(fast=False), law.law_grid(fast=True)
    assert dict(full.axes)["group_size"] == (4, 8, 16, 32, 64) and full.size == 150
    assert [m["label"] for m in dict(full.axes)["mix"]] == ["hard", "medium", "easy"]
    assert full.base["method"] == "grpo" and full.base["policy"] == "tabular"
    assert fast.keys == full.keys and fast.size == 27 and fast.base["n_prompts"] == 400


def test_measured_attenuation_follows_exact_phi_not_the_law(law_sweep, result):
    assert law_sweep.ok and len(law_sweep.table) == 27
    assert result.group_keys == ["mix", "step", "group_size"]
    bg = result.by_group.set_index(result.group_keys)
    assert len(bg) == 3 * 2 * 3 and (bg["n"] == 400).all()  # mixes × steps (0, 5) × G; 400 prompts, 1 seed
    assert list(result.by_group["mix"].iloc[[0, 6, 12]]) == ["hard", "medium", "easy"]  # grid order
    # the measurement is unbiased for exact φ: every cell within 4 standard errors
    assert (bg["z"].abs() < 4).all(), bg[["measured", "exact", "z"]]
    # at the first step the law misses hard and easy mixes at G = 4 by far more than the noise
    for mix in ("hard", "easy"):
        row = bg.loc[(mix, 0, 4)]
        assert abs(row["law"] - row["exact"]) > 0.1 > 2 * row["measured_se"]
    # and converges with G
    assert abs(bg.loc[("medium", 0, 64), "law"] - bg.loc[("medium", 0, 64), "exact"]) < 0.005
    assert result.pivot("exact").shape == (6, 3)
    # hard prompts train: the p before step 5 is higher than before step 0
    upd = result.updates
    hard = upd[upd["mix"] == "hard"]
    assert hard.loc[hard["step"] == 5, "p"].mean() > hard.loc[hard["step"] == 0, "p"].mean()


def test_per_prompt_rows_and_bins_are_consistent(result):
    upd = result.updates
    assert set(upd["step"]) == {0, 5}
    assert np.allclose(upd["phi"], fidelity(upd["p"].to_numpy(), upd["group_size"].to_numpy()))
    bb = result.by_bin
    assert (bb["p_lo"] < bb["p_hi"]).all()
    counts = bb.groupby(["mix", "group_size"], sort=False)["n"].sum()
    assert counts.to_dict() == result.by_group.groupby(["mix", "group_size"])["n"].sum().to_dict()
    assert bb["mix"].iloc[0] == "hard"  # grid order, not alphabetical


def test_ledger_fidelity_of_every_step_matches_the_pairs(result):
    """The ledger's mass-weighted fidelity (grad_mass / grad_limit, grad_law / grad_limit) covers
    every step of each family's longest run, and at the steps the checkpoint pairs measure it is
    the pairs' per-prompt ratios weighted by sqrt(p(1−p)), to rounding."""
    bs = result.by_step
    assert list(bs.columns[:3]) == ["mix", "group_size", "step"]
    assert len(bs) == 3 * 3 * 6 and (bs["runs"] == 1).all()  # mixes × G × steps 0…5 of the steps = 6 runs
    assert bs["exact"].isna().all()  # the grid runs without closed forms
    upd = result.updates.assign(w=lambda d: np.sqrt(d["p"] * (1 - d["p"])))
    upd["wr"], upd["wl"] = upd["w"] * upd["ratio"], upd["w"] * upd["law"]
    pairs = upd.groupby(["mix", "group_size", "step"])[["w", "wr", "wl"]].sum()
    ledger = bs.set_index(["mix", "group_size", "step"]).sort_index()
    for key, row in pairs.iterrows():
        assert ledger.loc[key, "measured"] == pytest.approx(row["wr"] / row["w"], rel=1e-10)
        assert ledger.loc[key, "law"] == pytest.approx(row["wl"] / row["w"], rel=1e-10)


def test_figure_is_written(result, tmp_path):
    path = law.save_law_figure(result, tmp_path / "law.png")
    assert path.stat().st_size > 10_000 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_refuses_what_it_cannot_measure(law_sweep, tmp_path):
    with pytest.raises(ValueError, match="not single GRPO steps"):
        law.update_ratios(np.zeros(5), np.full(5, 0.123), 0.5, 8, "x")
    with pytest.raises(ValueError, match="tabular GRPO"):
        law.check_config({**law.REQUIRED_CONFIG, "method": "dr_grpo"}, "run")
    table = load_results(law_sweep.out)
    with pytest.raises(ValueError, match="vary `steps`"):
        law.step_updates(law_sweep.out, table.drop(columns="steps"))
    broken = table.assign(status=np.where(table.index == 0, "failed", table["status"]))
    with pytest.raises(ValueError, match="not complete"):
        law.step_updates(law_sweep.out, broken)
    no_pairs = table[table["steps"] == 5]
    with pytest.raises(ValueError, match="no measurable steps"):
        law.step_updates(law_sweep.out, no_pairs)


# ------------------------------------------------------------------------------ notebook
# (Committed without outputs and thin: tests/docs/test_notebooks.py.)
def test_notebook_executes_in_fast_mode(law_sweep, run_notebook, tmp_path):
    # The sweep is there already: the notebook reruns nothing.
    run = run_notebook(NOTEBOOK, env={"GSD_SWEEPS_DIR": str(law_sweep.out.parent)})
    assert run.images
    assert (tmp_path / "figures" / "law_in_training_fast.png").is_file()
    assert run.elapsed < 60
    text = "".join(
        o.get("text", "") for c in run.nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "stream"
    )
    assert "largest |z|" in text and "fast mode (GSD_NOTEBOOK_FAST=1)" in text
    assert str(law_sweep.out.parent) not in text and str(tmp_path) not in text  # names, not machine paths
    assert isinstance(pd.read_parquet(law_sweep.out / "results.parquet"), pd.DataFrame)
