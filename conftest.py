"""Shared by the test suite and by the doctests of the package (``--doctest-modules`` over gsd/).

Nothing is skipped here: a module whose doctests cannot be imported fails the run.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent

# Hypothesis: the suite draws the same examples on every run ("ci", the default, and what CI=true
# gets), so that a test passes or fails for a reason and never by the draw; a failure prints the
# blob that replays it. Exploring for new failures is a separate, explicit run:
# HYPOTHESIS_PROFILE=explore (random draws, nothing saved, every test's number of examples times
# $HYPOTHESIS_EXPLORE_FACTOR, default 10).
settings.register_profile("ci", derandomize=True, database=None, deadline=None, print_blob=True)
settings.register_profile(
    "explore",
    derandomize=False,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
EXPLORE_FACTOR = int(os.environ.get("HYPOTHESIS_EXPLORE_FACTOR", "10"))

#: Tests that build the docs run last, so that they can render the notebooks that the notebook
#: tests executed earlier in the same session instead of executing them a second time.
LAST_MARKER = "docs_build"


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: item.get_closest_marker(LAST_MARKER) is not None)
    if settings.default.derandomize is False:
        for item in items:
            _scale_examples(getattr(item, "obj", None), EXPLORE_FACTOR)


def _scale_examples(test, factor):
    """Explore profile: a test's own ``@settings(max_examples=n)`` becomes n·factor (the only way
    to scale it is hypothesis's attribute on the wrapped test; the ci profile never touches it)."""
    own = getattr(test, "_hypothesis_internal_use_settings", None)
    if own is not None and getattr(test, "is_hypothesis_test", False):
        test._hypothesis_internal_use_settings = settings(own, max_examples=own.max_examples * factor)


@pytest.fixture(autouse=True, scope="session")
def _doctest_namespace(doctest_namespace):
    """Doctests see ``np`` and ``gsd`` without importing them."""
    import gsd

    doctest_namespace["np"] = np
    doctest_namespace["gsd"] = gsd


@pytest.fixture(scope="session")
def executed_notebooks(tmp_path_factory):
    """A folder where notebook tests leave the notebooks they executed (for the docs build)."""
    return tmp_path_factory.mktemp("executed_notebooks")


@pytest.fixture
def run_notebook(tmp_path, monkeypatch, executed_notebooks):
    """Execute a notebook top to bottom in ``tmp_path`` and fail on any error output.

    ``run_notebook(path, fast=True, timeout=120, env=None)`` runs it with $GSD_NOTEBOOK_FAST
    set (``fast``), figures written to ``tmp_path/figures``, gsd imported from this checkout and
    ``env`` added to the kernel's environment.  It returns ``nb`` (the executed notebook),
    ``elapsed`` (seconds), ``images`` (the PNG outputs) and ``figure_cells`` (code cells that
    call ``figure(``), and leaves the executed notebook for the docs build.  A notebook that
    raises, or writes anything to stderr, fails.
    """
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    kernelspec = pytest.importorskip("jupyter_client.kernelspec")
    if "python3" not in kernelspec.find_kernel_specs():
        pytest.skip("no python3 Jupyter kernel installed")

    def run(path, *, fast: bool = True, timeout: int = 120, env: dict | None = None):
        path = Path(path)
        if fast:
            monkeypatch.setenv("GSD_NOTEBOOK_FAST", "1")
        monkeypatch.setenv("GSD_FIGURES_DIR", str(tmp_path / "figures"))
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        monkeypatch.setenv("MPLBACKEND", "Agg")
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, str(value))
        nb = nbformat.read(path, as_version=4)
        client = nbclient.NotebookClient(
            nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
        )
        start = time.perf_counter()
        client.execute()
        elapsed = time.perf_counter() - start
        code = [c for c in nb.cells if c.cell_type == "code"]
        errors = [o for c in code for o in c.outputs if o.output_type == "error"]
        assert not errors, f"{path.name}: {errors[0].get('ename')}: {errors[0].get('evalue')}"
        # A warning or a progress bar on stderr would be rendered on the notebook's docs page.
        stderr = [o.text for c in code for o in c.outputs if o.output_type == "stream" and o.name == "stderr"]
        assert not stderr, f"{path.name} wrote to stderr: {stderr[0][:500]}"
        nbformat.write(nb, executed_notebooks / path.name)
        return SimpleNamespace(
            nb=nb,
            elapsed=elapsed,
            images=[o for c in code for o in c.outputs if "image/png" in o.get("data", {})],
            figure_cells=sum("figure(" in c.source for c in code),
        )

    return run


@pytest.fixture
def one_torch_thread():
    """Run a test on one torch CPU thread (restored after): small simulator tensors run fastest,
    and least noisily on a shared machine, on one thread."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
