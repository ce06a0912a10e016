"""The tree is clean under ruff (lint and format, rules and line length in pyproject.toml) and the
public API under mypy ([tool.mypy] in pyproject.toml).  The tools are pinned in the ``test`` extra,
which ``make test`` installs; a test is skipped, saying why, only where the tool is missing."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool(name: str) -> list[str]:
    """The command that runs ``name`` from this interpreter's environment."""
    exe = Path(sys.executable).parent / name
    if exe.exists():
        return [str(exe)]
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]' installs the pinned version)")
    return [found]


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_check():
    res = _run(_tool("ruff") + ["check", "--no-cache", "--output-format", "concise", "."])
    assert res.returncode == 0, res.stdout + res.stderr


def test_ruff_format():
    res = _run(_tool("ruff") + ["format", "--no-cache", "--check", "."])
    assert res.returncode == 0, "run `ruff format .`:\n" + res.stdout + res.stderr


def test_mypy_on_the_public_api(tmp_path):
    res = _run(_tool("mypy") + ["--cache-dir", str(tmp_path / "mypy_cache"), "--no-error-summary"])
    assert res.returncode == 0, res.stdout + res.stderr
