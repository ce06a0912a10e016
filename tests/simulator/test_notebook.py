"""notebooks/06_campaign.ipynb runs top to bottom (fast setting) and shows the figure."""

from __future__ import annotations

from pathlib import Path

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "06_campaign.ipynb"


def test_campaign_notebook_runs(run_notebook, tmp_path):
    run = run_notebook(NOTEBOOK, env={"OMP_NUM_THREADS": "1"})
    assert (tmp_path / "runs" / "06_campaign_fast" / "campaign.png").is_file()
    assert run.images, "the figure is displayed"
    text = "".join(
        o.get("text", "") for c in run.nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "stream"
    )
    # the output says what ran, against the full campaign its text describes
    assert (
        "ran: 1,500 prompts, 30 steps, engine numpy — fast mode (GSD_NOTEBOOK_FAST=1); the full campaign is "
        "6,000 prompts, 150 steps"
    ) in text
