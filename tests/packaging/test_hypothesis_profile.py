"""The suite's property tests draw the same examples on every run: the root conftest loads the
"ci" profile (derandomized, no example database, no deadline) unless HYPOTHESIS_PROFILE names
another, so a test passes or fails for a reason, never by the draw."""

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st


@pytest.mark.skipif(os.environ.get("HYPOTHESIS_PROFILE", "ci") != "ci", reason="an explicit exploratory run")
def test_the_ci_profile_is_loaded():
    now = settings()
    assert now.derandomize is True and now.database is None and now.deadline is None and now.print_blob


DRAWN: list = []


@settings(max_examples=15)
@given(st.floats(0, 1), st.integers(0, 10**6))
def _draw(x, n):
    DRAWN.append((x, n))


@pytest.mark.skipif(os.environ.get("HYPOTHESIS_PROFILE", "ci") != "ci", reason="an explicit exploratory run")
def test_two_runs_draw_the_same_examples():
    DRAWN.clear()
    _draw()
    first = list(DRAWN)
    DRAWN.clear()
    _draw()
    assert first == DRAWN and len(first) == 15


def test_the_explore_profile_is_random_and_larger():
    explore = settings.get_profile("explore")
    assert explore.derandomize is False and explore.database is None
