"""No module of gsd, and no test, reaches into another module's private names (``from .x import
_y``, ``x._y``, ``gsd.x._y``, or ``monkeypatch.setattr(x, "_y", ...)``): what another module or a
test uses has a public name; a module's own private names are its own."""

from __future__ import annotations

import ast
from pathlib import Path

GSD = Path(__file__).resolve().parents[2] / "gsd"
TESTS = GSD.parent / "tests"


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


def _dotted(node: ast.expr, imported: dict[str, str]) -> str | None:
    """The gsd path an expression ``a.b.c`` names when ``a`` is an imported gsd name and no part
    is private, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in imported:
        return None
    path = ".".join([imported[node.id], *reversed(parts)])
    return None if any(_private(p) for p in path.split(".")) else path


def _named(func: ast.expr) -> str | None:
    """``setattr`` for ``setattr(...)`` and ``monkeypatch.setattr(...)``."""
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def _private_by_name(call: ast.Call, imported: dict[str, str]) -> str | None:
    """``(mod, "_x")`` or ``("gsd.mod._x", ...)`` given to setattr/getattr/monkeypatch.setattr."""
    args = call.args
    if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
        parts = args[0].value.split(".")
        if parts[0] == "gsd" and any(_private(p) for p in parts):
            return f"{_named(call.func)}({args[0].value!r})"
    if len(args) >= 2 and isinstance(args[1], ast.Constant) and isinstance(args[1].value, str):
        if _private(args[1].value) and _dotted(args[0], imported) is not None:
            return f"{_named(call.func)}({ast.unparse(args[0])}, {args[1].value!r})"
    return None


def private_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    """Every cross-module private import in ``source`` (the module ``module``), as text."""
    found = []
    imported = {}  # local name -> gsd module it names
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            target = _target(node, module, is_package)
            if not target.startswith("gsd"):
                continue
            if any(_private(p) for p in target.split(".")):  # a private module is a private name too
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
                    if alias.asname:  # import gsd.a.b as m: m is gsd.a.b
                        imported[alias.asname] = alias.name
                    else:  # import gsd.a.b: the name bound is gsd
                        imported[alias.name.split(".")[0]] = alias.name.split(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            path = _dotted(node.value, imported)
            if path is not None:
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and _named(node.func) in ("setattr", "getattr", "delattr", "hasattr"):
            hit = _private_by_name(node, imported)
            if hit:
                found.append(f"line {node.lineno}: {hit}")
    return found


def _offenders(root: Path) -> list[str]:
    return [
        f"{path.relative_to(GSD.parent)} {hit}"
        for path in sorted(root.rglob("*.py"))
        for hit in private_imports(path.read_text(encoding="utf-8"), _module_name(path), path.name == "__init__.py")
    ]


def test_no_module_imports_another_modules_private_names():
    offenders = _offenders(GSD)
    assert not offenders, "private names imported across modules:\n" + "\n".join(offenders)


def test_no_test_imports_a_private_name_of_gsd():
    offenders = _offenders(TESTS)
    assert not offenders, "private names of gsd reached from tests:\n" + "\n".join(offenders)


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
    # Through the package's dotted path, and by name through setattr/getattr (monkeypatch too).
    t = "tests.core.test_x"
    assert private_imports("import gsd.core.update\ngsd.core.update._grpo_term", t) == [
        "line 2: gsd.core.update._grpo_term"
    ]
    assert private_imports("import gsd\ngsd.core.silent._minor(0.1)", t) == ["line 2: gsd.core.silent._minor"]
    assert private_imports("from gsd.simulator import tabular\nmonkeypatch.setattr(tabular, '_CHUNK', 5)", t) == [
        "line 2: setattr(tabular, '_CHUNK')"
    ]
    assert private_imports("monkeypatch.setattr('gsd.io.lock._pid', f)", t) == ["line 1: setattr('gsd.io.lock._pid')"]
    assert private_imports("from gsd.live.tracker import GroupTracker\nGroupTracker._prior_now", t) == [
        "line 2: GroupTracker._prior_now"
    ]
    # A private module is a private name too.
    assert private_imports("from . import _columns", m) == ["line 1: from gsd.integrations import _columns"]
    assert private_imports("from .._validate import shown", m) == ["line 1: from gsd._validate import ..."]
    # Allowed: public names (under a private alias too), a module's own private names, dunders,
    # and private attributes of what is not a gsd name (an instance, another library).
    assert (
        private_imports(
            "from ..silent import minor_rate as _minor\n_minor(0.2)\nfrom ..update import __doc__\n"
            "tracker = GroupTracker(8)\ntracker._n\nimport numpy as np\nnp._x\nsetattr(obj, '_y', 1)",
            m,
        )
        == []
    )
