"""Package data is found through importlib.resources, by name, wherever the package lives.

In the source tree the data live in ``data/`` and the configs in ``simulations/`` (one copy of each
file in git); the build maps them into the package as ``gsd._data`` and ``gsd._simulations``.
"""

import tomllib
from pathlib import Path

import pytest

from gsd.io.data import data_dir
from gsd.resources import config_file, shipped_configs, shipped_file

ROOT = Path(__file__).resolve().parents[2]


def test_histogram_is_package_data():
    path = shipped_file("bigmath_solve_rate_histogram.csv")
    assert path.read_bytes() == (ROOT / "data" / "bigmath_solve_rate_histogram.csv").read_bytes()
    assert data_dir() == path.parent
    assert (path.parent / "README.md").is_file()  # the provenance travels with the data
    with pytest.raises(ValueError, match="no_such.csv"):
        shipped_file("no_such.csv")
    with pytest.raises(ValueError, match="__init__.py"):
        shipped_file("__init__.py")  # the marker that makes the folder a package is not data


def test_one_copy_of_each_shipped_file():
    """The top-level folders are the only home of the shipped files: nothing left under gsd/."""
    shipped = {p.name for p in (ROOT / "data").iterdir()} | {p.name for p in (ROOT / "simulations").iterdir()}
    copies = [p for p in (ROOT / "gsd").rglob("*") if p.suffix in (".csv", ".toml", ".md") and p.name in shipped]
    assert copies == []
    assert set(shipped_configs()) == {p.stem for p in (ROOT / "simulations").glob("*.toml")}


def test_every_shipped_config_is_commented_for_a_copy():
    for name, path in shipped_configs().items():
        text = path.read_text()
        assert text.startswith("#"), name  # a header that says what the file is
        assert "copy" in text.lower(), f"{name}: no word on how to copy and edit it"


def test_pyproject_lists_every_package():
    """Packages are listed (two of them map folders outside gsd/), so a new sub-package must be too."""
    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "gsd").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert on_disk <= set(setup["packages"]), (
        f"add to [tool.setuptools] packages: {sorted(on_disk - set(setup['packages']))}"
    )
    assert setup["package-dir"] == {"gsd._data": "data", "gsd._simulations": "simulations"}


def test_configs_by_name_or_path(tmp_path, monkeypatch):
    shipped = shipped_configs()
    assert shipped and all(p.suffix == ".toml" and p.is_file() for p in shipped.values())
    name = next(iter(shipped))
    assert config_file(name) == shipped[name] == config_file(f"{name}.toml")
    # A file of one's own wins, by path or by a name that exists in the working folder.
    own = tmp_path / f"{name}.toml"
    own.write_text("[grid]\nseed = [0]\n")
    assert config_file(own) == own
    monkeypatch.chdir(tmp_path)
    assert config_file(f"{name}.toml").resolve() == own.resolve()
    # Unknown: the error names the argument and lists what is shipped.
    with pytest.raises(ValueError, match=rf"grid file 'nope' not found.*{name}"):
        config_file("nope", what="grid file")
    with pytest.raises(ValueError, match="not found"):
        config_file(tmp_path / "sub" / name)  # a path in another folder is never a shipped name
