"""notebooks/08_loss_geometry.ipynb runs top to bottom and writes its ten figures.

(Committed without outputs and thin: tests/docs/test_notebooks.py.)
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "08_loss_geometry.ipynb"


def test_notebook_executes(run_notebook, tmp_path):
    run = run_notebook(NOTEBOOK, fast=False)
    written = sorted(p.name for p in (tmp_path / "figures").glob("loss_*.png"))
    assert len(written) == 10
    assert run.elapsed < 60, f"notebook took {run.elapsed:.1f} s"
