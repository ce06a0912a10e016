"""notebooks/11_diagnose.ipynb runs top to bottom (fast mode) and shows its three figures.

(Committed without outputs and thin: tests/docs/test_notebooks.py.)
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "11_diagnose.ipynb"


def test_notebook_executes(run_notebook, tmp_path):
    run = run_notebook(NOTEBOOK, timeout=180)
    assert len(run.images) == run.figure_cells == 3
    assert (tmp_path / "runs" / "diagnose_closure" / "rollouts" / "40.jsonl").is_file()
    assert run.elapsed < 120, f"notebook took {run.elapsed:.1f} s"
