"""No module of gsd reaches into another module's private names (``from .x import _y`` or
``x._y``): what another module uses has a public name; a module's own private names are its own."""

from __future__ import annotations

import ast
from pathlib import Path

GSD = Path(__file__).resolve().parents[2] / "gsd"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(GSD.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _target(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    """Every cross-module private import in ``source`` (the module ``module``), as text."""
    found = []
    imported = {}  # local name -> gsd module it names
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            target = _target(node, module, is_package)
            if not target.startswith("gsd"):
                continue
            if any(_private(p) for p in target.split(".")):
                found.append(f"line {node.lineno}: from {target} import ...")
                continue
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"line {node.lineno}: from {target} import {alias.name}")
                else:
                    imported[alias.asname or alias.name] = f"{target}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("gsd") and not any(_private(p) for p in alias.name.split(".")):
                    imported[alias.asname or alias.name.split(".")[0]] = alias.name
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in imported
            and not any(_private(p) for p in imported[node.value.id].split("."))
        ):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_module_imports_another_modules_private_names():
    offenders = []
    for path in sorted(GSD.rglob("*.py")):
        module = _module_name(path)
        for hit in private_imports(path.read_text(encoding="utf-8"), module, path.name == "__init__.py"):
            offenders.append(f"{path.relative_to(GSD.parent)} {hit}")
    assert not offenders, "private names imported across modules:\n" + "\n".join(offenders)


def test_the_check_catches_each_form():
    m = "gsd.integrations.trl"
    assert private_imports("from ..silent import _minor", m) == ["line 1: from gsd.silent import _minor"]
    assert private_imports("from gsd.core.update import grpo_term, _noisy", m) == [
        "line 1: from gsd.core.update import _noisy"
    ]
    assert private_imports("from . import runfolder\nrunfolder._logit(0.5)", m) == ["line 2: runfolder._logit"]
    assert private_imports("import gsd.core.update as u\nu._grpo_term(0, 0.0)", m) == ["line 2: u._grpo_term"]
    assert private_imports("from .. import silent\nsilent._minor(0.1)", "gsd.diagnose", True) == [
        "line 2: silent._minor"
    ]
    # A private module is a private name too.
    assert private_imports("from . import _columns", m) == ["line 1: from gsd.integrations import _columns"]
    # Allowed: public names (under a private alias too), a module's own private names, dunders.
    assert (
        private_imports(
            "from ..validation import shown\nfrom ..silent import minor_rate as _minor\n"
            "_minor(0.2)\nfrom ..update import __doc__",
            m,
        )
        == []
    )
