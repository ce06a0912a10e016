"""Shared by the test suite and by the doctests of the package (``--doctest-modules`` over gsd/).

Nothing is skipped here: a module whose doctests cannot be imported fails the run.
"""

from __future__ import annotations

import numpy as np
import pytest

#: Tests that build the docs run last, so that they can render the notebooks that the notebook
#: tests executed earlier in the same session instead of executing them a second time.
LAST_MARKER = "docs_build"


def pytest_collection_modifyitems(config, items):
    items.sort(key=lambda item: item.get_closest_marker(LAST_MARKER) is not None)


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
