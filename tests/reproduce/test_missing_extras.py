"""Without torch or the [trl] extra, the commands that run TRL's own code end in one line naming
every missing package and the extras that install them, not in a traceback; ``gsd reproduce``
reports its transformer stage as not available with the same line and runs the rest.

The packages are blocked at interpreter start-up (a finder at the front of ``sys.meta_path``
raising ``ModuleNotFoundError`` as a missing package does), in a subprocess: the environment
of the other tests keeps them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gsd.extras import TRL_EXTRA, TRL_STACK

ROOT = Path(__file__).resolve().parents[2]

#: Run as ``python -c``: block the packages named in argv[1] (comma-separated), then run gsd's CLI.
BLOCKED_RUN = """import sys
blocked = set(sys.argv[1].split(","))
class _Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Missing())
from gsd.cli import main
sys.exit(main(sys.argv[2:]))
"""

#: No torch and no [trl] extra (what `make reproduce` installs); torch alone missing.
CASES = {"no-extras": TRL_STACK, "no-torch": ("torch",)}


def _gsd_without(blocked, *argv, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    return subprocess.run(
        [sys.executable, "-c", BLOCKED_RUN, ",".join(blocked), *map(str, argv)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


@pytest.mark.parametrize("command", ["transformer-train", "transformer-update"])
@pytest.mark.parametrize("case", list(CASES))
def test_trl_commands_name_every_missing_package_in_one_line(tmp_path, command, case):
    res = _gsd_without(CASES[case], command, "--fast", "--quiet", cwd=tmp_path)
    assert res.returncode == 2 and res.stdout == "", res.stderr
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr, res.stderr
    missing = res.stderr.split("not installed here: ", 1)[1].split(":", 1)[0].split(", ")
    assert set(missing) <= set(TRL_STACK) and "torch" in missing
    if case == "no-extras":  # each one named, not only the first an import happened to reach
        assert sorted(missing) == sorted(TRL_STACK), res.stderr
    assert f"pip install '{TRL_EXTRA}'" in res.stderr and "download.pytorch.org/whl/cpu" in res.stderr
    assert res.stderr.startswith(f"gsd {command}: error: ")


def test_reproduce_names_what_its_transformer_stage_needs(tmp_path):
    res = _gsd_without(
        TRL_STACK, "reproduce", "--fast", "--skip-campaign", "--quiet", "--out", tmp_path / "rep", cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert all(row["agrees_at_printed_precision"] for row in report["comparisons"] if row["computed"])
    stage = report["transformer"]
    assert stage["status"] == "not available" and "\n" not in stage["reason"]
    assert all(name in stage["reason"] for name in TRL_STACK) and f"'{TRL_EXTRA}'" in stage["reason"]
    assert f"transformer stage: not available ({stage['reason']})" in (tmp_path / "rep" / "report.md").read_text()


def test_a_broken_package_keeps_its_own_error(monkeypatch):
    """A package of the stack that is there but misses a dependency of its own is not reported as
    the extra missing: its error names what is missing."""
    import importlib

    from gsd import extras as _extras

    real = importlib.import_module

    def broken(name, *args):
        if name == "datasets":
            raise ModuleNotFoundError("No module named 'multiprocess'", name="multiprocess")
        return real(name, *args)

    monkeypatch.setattr(_extras.importlib, "import_module", broken)
    with pytest.raises(ModuleNotFoundError) as info:
        _extras.require_trl("a feature")
    assert info.value.name == "multiprocess" and not isinstance(info.value, _extras.MissingExtra)
