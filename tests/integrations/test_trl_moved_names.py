"""The live TRL hooks moved from gsd.integrations.trl to gsd.integrations.trl_live (and the
tracker's table description to gsd.integrations.tracker_table), then to gsd.live: the old
imports, documented until then, still work for a release, each with a DeprecationWarning naming
the new place (the hooks' new place is gsd.live, not the intermediate trl_live)."""

from __future__ import annotations

import importlib

import pytest

from gsd.integrations import trl as old

#: The names gsd.integrations.trl exported before the move, and where they live now.
BEFORE = {
    "GroupTracker": "gsd.live.GroupTracker",
    "GSDGRPOTrainer": "gsd.live.GSDGRPOTrainer",
    "SkipSampler": "gsd.live.SkipSampler",
    "LIVE_METRICS": "gsd.live.LIVE_METRICS",
    "TRACKER_TABLE": "gsd.integrations.tracker_table.KEY",
    "tracker_table": "gsd.integrations.tracker_table.read_description",
}


@pytest.mark.parametrize("name", list(BEFORE))
def test_old_import_works_with_a_warning_naming_the_new_place(name):
    if name == "GSDGRPOTrainer":
        pytest.importorskip("trl", reason="GSDGRPOTrainer subclasses TRL's GRPOTrainer (make install)")
    module, new = BEFORE[name].rsplit(".", 1)
    scope = {}
    with pytest.warns(DeprecationWarning, match=BEFORE[name].replace(".", r"\.")) as record:
        exec(f"from gsd.integrations.trl import {name}", scope)  # the statement a user's script has
    assert scope[name] is getattr(importlib.import_module(module), new)
    assert record[0].filename == "<string>"  # the warning points at the importing line, not at gsd


def test_the_documented_statement_and_an_unknown_name():
    pytest.importorskip("trl", reason="GSDGRPOTrainer subclasses TRL's GRPOTrainer (make install)")
    import gsd.live

    with pytest.warns(DeprecationWarning) as record:
        from gsd.integrations.trl import GroupTracker, GSDGRPOTrainer
    assert (GroupTracker, GSDGRPOTrainer) == (gsd.live.GroupTracker, gsd.live.GSDGRPOTrainer)
    assert len(record) == 2
    with pytest.raises(ImportError, match="cannot import name 'NoSuchName'"):
        from gsd.integrations.trl import NoSuchName  # noqa: F401
    assert old.DDOF == 1  # its own names are untouched


#: Every public name of gsd.integrations.trl_live before the hooks moved to gsd.live.
TRL_LIVE = ("GroupTracker", "GSDGRPOTrainer", "SkipPolicy", "SkipSampler", "LIVE_METRICS", "trl_total", "trl_zero_std")


@pytest.mark.parametrize("name", TRL_LIVE)
def test_trl_live_names_work_with_a_warning_naming_gsd_live(name):
    if name == "GSDGRPOTrainer":
        pytest.importorskip("trl", reason="GSDGRPOTrainer subclasses TRL's GRPOTrainer (make install)")
    scope = {}
    with pytest.warns(
        DeprecationWarning,
        match=rf"gsd\.integrations\.trl_live\.{name} has moved: import it as "
        rf"gsd\.live\.{name}",
    ) as record:
        exec(f"from gsd.integrations.trl_live import {name}", scope)
    assert scope[name] is getattr(importlib.import_module("gsd.live"), name)
    assert record[0].filename == "<string>"
    assert len(record) == 1


def test_trl_live_lists_every_public_name_it_had_and_nothing_else():
    from gsd.integrations import trl_live

    assert sorted(trl_live.__all__) == sorted(TRL_LIVE)
    with pytest.raises(ImportError, match="cannot import name 'NoSuchName'"):
        from gsd.integrations.trl_live import NoSuchName  # noqa: F401


def test_gsd_live_is_imported_lazily():
    """``import gsd.live`` loads no hook (numpy, pandas, torch, TRL wait for the first name)."""
    import subprocess
    import sys

    code = (
        "import sys, gsd.live; print(sorted(m for m in sys.modules if m.startswith('gsd.live.') "
        "or m in ('torch', 'trl', 'pandas')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
