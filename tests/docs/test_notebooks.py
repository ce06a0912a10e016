"""Every notebook is committed without outputs and stays thin: it calls gsd, it defines nothing.

(Each notebook is executed by the test of the sub-package it shows, through the ``run_notebook``
fixture of the root conftest.)
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

nbformat = pytest.importorskip("nbformat")


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 10


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_without_outputs_and_thin(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert any(re.search(r"^\s*(import|from) gsd\b", c.source, re.M) for c in code), f"{path.name} does not use gsd"
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None
        # thin: no function, class, lambda or loop statement (a comprehension is an expression)
        source = "\n".join(ln for ln in cell.source.splitlines() if not ln.lstrip().startswith(("%", "!")))
        banned = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.For, ast.AsyncFor, ast.While)
        found = [type(n).__name__ for n in ast.walk(ast.parse(source)) if isinstance(n, banned)]
        assert not found, f"{path.name}: {found[0]} in a cell"
