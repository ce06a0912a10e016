"""One lazy-export style: a module of gsd that resolves names on first use (PEP 562) gets its
``__getattr__`` from gsd.lazy (lazy_exports, moved_names or built_on_first_use), never a
hand-written one; and importing a subpackage loads no numpy (gsd.simulator aside: its config,
imported eagerly, is numpy's)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

GSD = Path(__file__).resolve().parents[2] / "gsd"
FACTORIES = {"lazy_exports", "moved_names", "built_on_first_use"}


def hand_written_getattr(source: str) -> list[int]:
    """Lines of a module-level ``def __getattr__`` or an ``__getattr__`` not made by gsd.lazy."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            found.append(node.lineno)
        elif isinstance(node, ast.Assign):
            names = [t for t in node.targets if isinstance(t, (ast.Name, ast.Tuple))]
            flat = [
                n.id for t in names for n in ([t] if isinstance(t, ast.Name) else t.elts) if isinstance(n, ast.Name)
            ]
            call = node.value
            made = isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in FACTORIES
            if "__getattr__" in flat and not made:
                found.append(node.lineno)
    return found


def test_every_lazy_name_comes_from_gsd_lazy():
    offenders = [
        f"{path.relative_to(GSD.parent)}:{line}"
        for path in sorted(GSD.rglob("*.py"))
        if path.name != "lazy.py"
        for line in hand_written_getattr(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, "a hand-written __getattr__ (use gsd.lazy):\n" + "\n".join(offenders)


def test_the_check_tells_the_styles_apart():
    assert hand_written_getattr("def __getattr__(name):\n    return 1\n") == [1]
    assert hand_written_getattr("__getattr__ = lambda name: 1\n") == [1]
    assert hand_written_getattr("__getattr__, __dir__, __all__ = lazy_exports(__name__, {})\n") == []
    assert hand_written_getattr("__getattr__ = moved_names(__name__, {})\n") == []
    assert hand_written_getattr("__getattr__ = built_on_first_use(__name__, {})\n") == []
    assert hand_written_getattr("class A:\n    def __getattr__(self, name):\n        return 1\n") == []


@pytest.mark.parametrize("package", ["gsd", "gsd.allocation", "gsd.diagnose", "gsd.reproduce", "gsd.live", "gsd.sweep"])
def test_a_subpackage_import_loads_no_numpy(package):
    probe = (
        f"import sys, {package}; print(sorted(m for m in ('numpy', 'scipy', 'pandas', 'torch') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=GSD.parent, capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
