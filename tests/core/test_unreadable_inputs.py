"""A user's input file that cannot be read (permission denied) is refused in one line naming the
option and the path, never a PermissionError traceback.  The suite runs as root, where mode 000
still reads: the denial is raised by ``open`` itself, as the kernel raises it for another user."""

from __future__ import annotations

import builtins
import errno
import io
import os

import pytest

from gsd.cli import main


@pytest.fixture
def deny(monkeypatch):
    denied = set()
    real_open = builtins.open

    def fake_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and os.path.abspath(os.fspath(file)) in denied:
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(io, "open", fake_open)
    return lambda path: denied.add(os.path.abspath(path))


@pytest.mark.parametrize(
    "name, text, argv",
    [
        ("c.toml", "steps = 1\n", ["simulate", "--config", "{}", "--out", "{out}"]),
        ("c.json", '{"steps": 1}', ["simulate", "--config", "{}", "--out", "{out}"]),
        ("g.toml", "[grid]\nseed = [0]\n", ["sweep", "--grid", "{}", "--out", "{out}"]),
        ("h.csv", "k,count\n0,1\n", ["bigmath", "--input", "{}"]),
        ("log.csv", "prompt,step,reward\na,0,1\na,0,0\n", ["diagnose", "{}", "--reward", "reward", "--no-progress"]),
    ],
)
def test_permission_denied_is_one_line_naming_the_file(tmp_path, capsys, deny, name, text, argv):
    path = tmp_path / name
    path.write_text(text)
    deny(path)
    rc = main([a.format(str(path), out=str(tmp_path / "out")) for a in argv])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and name in err and "Permission denied" in err, err
