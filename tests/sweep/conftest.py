"""Fixtures of the sweep tests; the stand-in simulator is ``sweep_fakesim`` beside this file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:  # spawned pool workers inherit sys.path; subprocesses get PYTHONPATH
    sys.path.insert(0, _HERE)


@pytest.fixture
def fakesim_log(tmp_path, monkeypatch):
    """A file every stand-in run appends its name to when it completes (across processes)."""
    log = tmp_path / "completions.log"
    monkeypatch.setenv("FAKESIM_LOG", str(log))
    return log
