"""The reproduction notebooks run top to bottom in their fast mode and show every figure.

(Committed without outputs and thin: tests/docs/test_notebooks.py, for every notebook.)
"""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NAMES = ["01_identity", "02_silent_groups", "03_group_size_law", "04_difficulty_weighting", "05_bigmath", "07_dapo"]
NOTEBOOKS = [ROOT / "notebooks" / f"{n}.ipynb" for n in NAMES]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=NAMES)
def test_notebook_executes(path, run_notebook):
    run = run_notebook(path)
    assert len(run.images) >= run.figure_cells  # every figure cell produced an image
    assert run.elapsed < 60, f"{path.name} took {run.elapsed:.1f} s"
    if path.stem == "01_identity":  # its first table: the groups that have a contrast, no NaN
        first = next(
            o
            for c in run.nb.cells
            if c.cell_type == "code"
            for o in c.outputs
            if o.output_type == "execute_result" and "text/html" in o["data"] and "coef_grpo" in o["data"]["text/html"]
        )
        assert "NaN" not in first["data"]["text/html"]
