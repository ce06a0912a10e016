"""Package data is found through importlib.resources, by name, wherever the package lives."""

import pytest

import gsd
from gsd.data import data_dir
from gsd.resources import config_file, shipped_configs, shipped_file


def test_histogram_is_package_data():
    path = shipped_file("bigmath_solve_rate_histogram.csv")
    assert path.parent.parent == type(path)(gsd.__file__).parent
    assert data_dir() == path.parent
    assert (path.parent / "README.md").is_file()  # the provenance travels with the data
    with pytest.raises(ValueError, match="no_such.csv"):
        shipped_file("no_such.csv")


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
