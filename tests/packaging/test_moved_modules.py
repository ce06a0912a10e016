"""The modules moved into gsd.core, gsd.io and gsd.cli keep their old import paths for one release:
the old path gives the very module at the new one, with a DeprecationWarning naming the new path."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import gsd

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("old", sorted(gsd.MOVED_MODULES))
def test_old_path_is_the_new_module_with_a_warning(old):
    new = gsd.MOVED_MODULES[old]
    # A fresh interpreter: in this one the old name may be in sys.modules already (no warning twice).
    code = (
        "import importlib, warnings\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module({old!r})\n"
        f"new = importlib.import_module({new!r})\n"
        "assert old is new, (old, new)\n"
        "msgs = [str(x.message) for x in w if issubclass(x.category, DeprecationWarning)]\n"
        f"assert len(msgs) == 1 and {new!r} in msgs[0], msgs\n"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


def test_from_import_of_a_moved_name_warns_at_the_users_line(tmp_path):
    user = tmp_path / "user_code.py"
    user.write_text("from gsd.speed import group_size_advice\n")
    code = (
        "import sys, warnings\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    import user_code\n"
        "import gsd\n"
        "assert user_code.group_size_advice is gsd.group_size_advice\n"
        "dep = [x for x in w if issubclass(x.category, DeprecationWarning)]\n"
        "assert dep and dep[0].filename.endswith('user_code.py'), [(x.filename, x.lineno) for x in dep]\n"
    )
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr


def test_every_new_path_exists_and_no_old_file_is_left():
    for old, new in gsd.MOVED_MODULES.items():
        assert importlib.util.find_spec(new) is not None, new
        assert not (ROOT / (old.replace(".", "/") + ".py")).exists(), old


def test_the_root_holds_at_most_ten_modules():
    modules = sorted(p.name for p in (ROOT / "gsd").glob("*.py"))
    assert len(modules) <= 10, modules


def test_unknown_names_are_not_claimed():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("gsd.no_such_module")
