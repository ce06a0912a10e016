"""gsd.cli is the roof: it loads the sub-command modules by name and no module of gsd imports it;
the helpers they share live in gsd.cli.support and stay importable from gsd.cli (the same objects)."""

from __future__ import annotations

from test_import_graph import import_graph


def test_no_module_imports_the_dispatcher():
    importers = sorted(m for m, targets in import_graph().items() if "gsd.cli" in targets)
    assert importers == []


def test_the_helpers_keep_their_old_names():
    import gsd.cli
    import gsd.cli.support

    for name in ("CliError", "bounded_int", "bounded_float", "parse_list", "emit", "imports_done"):
        assert getattr(gsd.cli, name) is getattr(gsd.cli.support, name), name
    for module in (
        "gsd.core.cli",
        "gsd.simulator.cli",
        "gsd.reproduce.cli",
        "gsd.sweep.cli",
        "gsd.losses.cli",
        "gsd.diagnose.cli",
    ):
        assert module in gsd.cli.COMMANDS
