"""An output file option (--figure, --silent-figure, --output) that cannot be written is refused
before any work, naming the option (the suite runs as root, where a mode-555 folder is writable:
the read-only cases are the kernel's own pseudo file systems)."""

from __future__ import annotations

import os

import pytest

from gsd.cli import main


def _cases(tmp_path):
    (tmp_path / "folder.png").mkdir()
    (tmp_path / "file").write_text("x")
    return [
        (str(tmp_path / "folder.png"), "it is a folder"),
        ("/proc/gsd-x.png", "cannot write '/proc/gsd-x.png'"),
        ("/sys/gsd-x.png", "cannot write '/sys/gsd-x.png'"),
        (str(tmp_path / "file" / "x.png"), "a file is in the way"),
    ]


@pytest.mark.parametrize(
    "argv, option",
    [
        (["dapo-fit", "curve.csv", "--figure"], "--figure"),
        (["allocation-comparison", "--out", "OUT", "--figure"], "--figure"),
        (["transformer-update", "--silent-figure"], "--silent-figure"),
        (["simulate", "--campaign", "c.toml", "--out", "OUT", "--figure"], "--figure"),
        (["plan", "--p", "0.3", "--epsilon", "0.05", "--output"], "--output"),
    ],
)
def test_unwritable_output_file_names_the_option(tmp_path, capsys, argv, option):
    argv = [a.replace("OUT", str(tmp_path / "out")) for a in argv]
    for path, why in _cases(tmp_path):
        assert main([*argv, path]) == 2
        err = capsys.readouterr().err
        assert f"error: {option}: " in err and why in err, err
    assert not (tmp_path / "out").exists()  # refused before the command made its folder
    left = [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert left == []  # the probe removed its file


def test_writable_new_folder_is_not_created_by_the_check(tmp_path):
    from gsd.io.atomic import check_writable

    target = tmp_path / "a" / "b" / "fig.png"
    assert check_writable(target, "--figure") == target
    assert os.listdir(tmp_path) == []
