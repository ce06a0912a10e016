"""Numbers as the user typed them: a value float64 cannot hold is refused showing the text, never
shown as the inf or 0 it would have become (command line, config files, --set)."""

from __future__ import annotations

import pytest

from gsd import InputError
from gsd.cli import main
from gsd.io.userinput import parse_real


@pytest.mark.parametrize("text", ["1e400", "-1E+400", " 1e309"])
def test_overflow_keeps_the_text(text):
    with pytest.raises(InputError, match=text.strip().replace("+", r"\+") + ": beyond float64's range"):
        parse_real(text, "x")


def test_inf_and_nan_written_as_such_pass_and_small_values_read():
    assert parse_real("inf", "x") == float("inf") and parse_real("-Infinity", "x") == float("-inf")
    assert parse_real("nan", "x") != parse_real("nan", "x")
    assert parse_real("1e-320", "x") == 1e-320 and parse_real("0e5", "x") == 0.0 and parse_real("-0.0", "x") == 0.0
    with pytest.raises(InputError, match="1e-400: below float64's smallest"):
        parse_real("1e-400", "x")
    with pytest.raises(ValueError):
        parse_real("x", "x")


@pytest.mark.parametrize(
    "argv, option",
    [
        (["plan", "--p", "0.3,1e400", "--epsilon", "0.05"], "--p = 1e400"),
        (["plan", "--p", "0.3", "--epsilon", "1e400"], "--epsilon = 1e400"),
        (["silent", "--p", "0.3", "--G", "1e400"], "--G = 1e400"),
        (["identity", "--rewards", "0,1,-1e999"], "--rewards = -1e999"),
    ],
)
def test_cli_names_option_and_text(argv, option, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert option in err and "inf" not in err.replace("float64", "")


@pytest.mark.parametrize("name, text", [("c.toml", "lr = 1e400\n"), ("c.json", '{"lr": 1e400}')])
def test_config_file_number_as_typed(tmp_path, capsys, name, text):
    (tmp_path / name).write_text(text)
    assert main(["simulate", "--config", str(tmp_path / name), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "1e400: beyond float64's range" in err and name in err
    assert not (tmp_path / "r").exists()


def test_set_number_as_typed(tmp_path, capsys):
    assert main(["simulate", "--out", str(tmp_path / "r"), "--set", "lr=1e400"]) == 2
    assert "--set lr" in capsys.readouterr().err


@pytest.mark.parametrize("text, kind", [("[1, 2]", "list"), ('"x"', "string"), ("3", "number")])
def test_config_that_is_not_a_table(tmp_path, capsys, text, kind):
    (tmp_path / "c.json").write_text(text)
    for command in (["simulate", "--config"], ["allocation-comparison", "--config"]):
        assert main([*command, str(tmp_path / "c.json"), "--out", str(tmp_path / "r")]) == 2
        assert f"must hold a table of keys (a JSON object), got a JSON {kind}" in capsys.readouterr().err
