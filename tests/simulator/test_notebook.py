"""notebooks/06_campaign.ipynb runs top to bottom (fast setting) and shows the figure."""

from __future__ import annotations

from pathlib import Path

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "06_campaign.ipynb"


def test_campaign_notebook_runs(run_notebook, tmp_path):
    run = run_notebook(NOTEBOOK, env={"OMP_NUM_THREADS": "1"})
    assert (tmp_path / "runs" / "06_campaign_fast" / "campaign.png").is_file()
    assert run.images, "the figure is displayed"
