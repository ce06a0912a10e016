"""The allocation notebook: committed without outputs, thin, runs top to bottom in fast mode."""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PATH = ROOT / "notebooks" / "10_allocation.ipynb"
nbformat = pytest.importorskip("nbformat")


def test_committed_without_outputs_and_thin():
    nb = nbformat.read(PATH, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert any("import gsd" in c.source for c in code)
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None
        for word in ("def ", "class ", "for ", "while ", "lambda"):
            assert word not in cell.source, f"{word!r} in a cell"


def test_notebook_executes_in_fast_mode(tmp_path, monkeypatch):
    nbclient = pytest.importorskip("nbclient")
    kernelspec = pytest.importorskip("jupyter_client.kernelspec")
    if "python3" not in kernelspec.find_kernel_specs():
        pytest.skip("no python3 Jupyter kernel installed")
    monkeypatch.setenv("GSD_NOTEBOOK_FAST", "1")
    monkeypatch.setenv("GSD_FIGURES_DIR", str(tmp_path / "figures"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(PATH, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert (tmp_path / "figures" / "allocation_campaign.png").is_file()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
                   if o.output_type == "stream")
    assert "Knapsack RL's value raises the effective-gradient ratio" in text
