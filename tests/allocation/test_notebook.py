"""The allocation notebook runs top to bottom in fast mode (its thinness: tests/docs/test_notebooks.py)."""

from pathlib import Path

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "10_allocation.ipynb"


def test_notebook_executes_in_fast_mode(run_notebook, tmp_path):
    run = run_notebook(NOTEBOOK, timeout=300, env={"OMP_NUM_THREADS": "1"})
    assert len(run.images) >= run.figure_cells >= 1
    assert (tmp_path / "figures" / "allocation_campaign.png").is_file()
    text = "".join(
        o.get("text", "") for c in run.nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "stream"
    )
    assert "Knapsack RL's value raises the effective-gradient ratio" in text
    assert "fast mode (GSD_NOTEBOOK_FAST=1): seed 0 only (no interval)" in text
    assert "of the 64 sizes lie below some prompt's envelope" in text
    results = [
        o["data"]["text/plain"]
        for c in run.nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "execute_result"
    ]
    assert results and max(r.count("\n") for r in results) < 40  # no list printed one number per line
