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


def mypy_checked_files() -> list[Path]:
    """The files ``mypy`` checks: those under [tool.mypy] ``files`` that no ``exclude`` pattern
    matches (mypy's own rule: a regular expression searched in the path relative to the root)."""
    import re
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    excluded = [re.compile(p) for p in config.get("exclude", [])]
    found = []
    for entry in config["files"]:
        path = ROOT / entry
        for f in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            rel = f.relative_to(ROOT).as_posix()
            if not any(p.search(rel) for p in excluded):
                found.append(f)
    return found


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_mypy_covers_most_of_the_package():
    """At least 60 % of gsd/'s lines are in files mypy checks, every public module of the core and
    of gsd.io among them."""
    checked = set(mypy_checked_files())
    every = sorted((ROOT / "gsd").rglob("*.py"))
    share = sum(_lines(f) for f in checked) / sum(_lines(f) for f in every)
    assert share >= 0.60, f"mypy checks {share:.1%} of gsd/'s lines"
    for package in ("core", "io"):
        missing = [f.name for f in sorted((ROOT / "gsd" / package).glob("*.py")) if f not in checked]
        assert not missing, f"gsd.{package} modules mypy does not check: {missing}"
    assert ROOT / "gsd" / "cli" / "support.py" in checked


def test_mypy_checked_files_reads_the_config():
    files = mypy_checked_files()
    assert ROOT / "gsd" / "core" / "advice.py" in files
    assert ROOT / "gsd" / "simulator" / "engine.py" not in files  # listed in exclude
    assert all(f.suffix == ".py" and f.is_file() for f in files)
