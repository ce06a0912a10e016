"""No import cycle among gsd's modules, counting every import (in functions too): a cycle is a
boundary in the wrong place (a format module that needs the analysis built on it, say)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """{module: the gsd modules it imports}, read from the source (nothing is imported).

    An import of a package's ``__init__`` is not an edge (it re-exports lazily); ``from . import
    x`` is an edge to the module ``x``; an import of a name inside a module, to that module."""
    mods = {}
    for f in sorted((root / "gsd").rglob("*.py")):
        name = ".".join(f.relative_to(root).with_suffix("").parts)
        mods[name[: -len(".__init__")] if name.endswith(".__init__") else name] = f
    edges = {m: set() for m in mods}
    for m, f in mods.items():
        if f.name == "__init__.py":
            continue
        pkg = m.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = pkg.split(".")
                    parts = parts[: len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([base] if base else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in mods:
                    t = t.rsplit(".", 1)[0] if "." in t else ""
                if t and t != m and mods[t].name != "__init__.py":
                    edges[m].add(t)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_cycles_are_found():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(edges) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_imports_in_functions():
    edges = import_graph()
    assert "gsd.diagnose.tables" in edges["gsd.live.tracker"]  # imported inside a method
    assert "gsd.integrations.tracker_table" in edges["gsd.diagnose.assemble"]  # inside read_rollouts


def test_no_import_cycle_in_gsd():
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_trainer_format_modules_are_leaves():
    """A trainer's format module imports no analysis and no live hook built on it."""
    edges = import_graph()
    from gsd.integrations import TRAINERS

    for m in [f"gsd.integrations.{name}" for name in TRAINERS] + ["gsd.integrations.tracker_table"]:
        bad = sorted(t for t in edges[m] if t.startswith(("gsd.diagnose", "gsd.live")))
        assert not bad, f"{m} imports {bad}"


def _crossing(edges, low: str, high: str) -> list[str]:
    """The arrows from the package ``low`` up into ``high``."""
    return sorted(
        f"{m} -> {t}"
        for m, ts in edges.items()
        if m == low or m.startswith(low + ".")
        for t in ts
        if t == high or t.startswith(high + ".")
    )


def test_layers_formats_then_diagnose_then_live():
    """gsd.integrations (the trainers' formats) < gsd.diagnose (the log reader and its tables) <
    gsd.live (the hooks inside a training run): no arrow points up.  The hooks' deprecated old
    names in gsd.integrations (``trl``, ``trl_live``) look their new place up by name, on use."""
    edges = import_graph()
    assert any(t.startswith("gsd.integrations") for t in edges["gsd.diagnose.discover"])  # the arrows looked for exist
    assert any(t.startswith("gsd.diagnose") for t in edges["gsd.live.tracker"])
    up = (
        _crossing(edges, "gsd.integrations", "gsd.diagnose")
        + _crossing(edges, "gsd.integrations", "gsd.live")
        + _crossing(edges, "gsd.diagnose", "gsd.live")
    )
    assert not up, "upward imports: " + "; ".join(up)


def test_the_layer_check_finds_an_upward_arrow():
    edges = {
        "gsd.integrations.trl": {"gsd.live.tracker"},
        "gsd.live.tracker": {"gsd.diagnose.tables"},
        "gsd.diagnose.tables": set(),
    }
    assert _crossing(edges, "gsd.integrations", "gsd.live") == ["gsd.integrations.trl -> gsd.live.tracker"]
    assert _crossing(edges, "gsd.diagnose", "gsd.live") == []
