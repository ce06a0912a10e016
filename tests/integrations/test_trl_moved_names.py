"""The live TRL hooks moved from gsd.integrations.trl to gsd.integrations.trl_live (and the
tracker's table description to gsd.integrations.tracker_table): the old imports, documented
until then, still work for a release, each with a DeprecationWarning naming the new place."""

from __future__ import annotations

import importlib

import pytest

from gsd.integrations import trl as old

#: The names gsd.integrations.trl exported before the move, and where they live now.
BEFORE = {"GroupTracker": "gsd.integrations.trl_live.GroupTracker",
          "GSDGRPOTrainer": "gsd.integrations.trl_live.GSDGRPOTrainer",
          "SkipSampler": "gsd.integrations.trl_live.SkipSampler",
          "LIVE_METRICS": "gsd.integrations.trl_live.LIVE_METRICS",
          "TRACKER_TABLE": "gsd.integrations.tracker_table.KEY",
          "tracker_table": "gsd.integrations.tracker_table.read_description"}


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
    from gsd.integrations import trl_live

    with pytest.warns(DeprecationWarning) as record:
        from gsd.integrations.trl import GroupTracker, GSDGRPOTrainer
    assert (GroupTracker, GSDGRPOTrainer) == (trl_live.GroupTracker, trl_live.GSDGRPOTrainer)
    assert len(record) == 2
    with pytest.raises(ImportError, match="cannot import name 'NoSuchName'"):
        from gsd.integrations.trl import NoSuchName  # noqa: F401
    assert old.DDOF == 1  # its own names are untouched
