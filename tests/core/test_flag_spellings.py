"""One spelling per idea across the sub-commands (`--prompt-column`, `--reward-column`,
`--step-column`, `--group-column`); the spellings `gsd diagnose` had before stay accepted, hidden
from --help and the docs' command-line reference."""

from __future__ import annotations

import argparse

import pytest

from gsd.cli import build_parser

#: Old spelling → the one shown now, per sub-command.
ALIASES = {
    "diagnose": {
        "--reward": "--reward-column",
        "--prompt-col": "--prompt-column",
        "--step-col": "--step-column",
        "--group-col": "--group-column",
    },
    "plan": {"--reward": "--reward-column", "--prompt-col": "--prompt-column"},
}


def _sub(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]


def _shown(parser) -> set[str]:
    return {s for a in parser._actions if a.help != argparse.SUPPRESS for s in a.option_strings}


@pytest.mark.parametrize("command", list(ALIASES))
def test_old_spellings_parse_as_the_new_ones(command):
    parser = build_parser()
    head = ["diagnose", "log.csv"] if command == "diagnose" else ["plan", "--input", "x.csv"]
    for old, new in ALIASES[command].items():
        a, b = (vars(parser.parse_args([*head, flag, "qid"])) for flag in (old, new))
        assert a == b and "qid" in a.values(), (old, new)
        both = vars(parser.parse_args([*head]))  # neither given: the new option's default, not the alias's
        assert set(both) == set(a)


def test_only_the_new_spellings_are_shown():
    for command, aliases in ALIASES.items():
        sub = _sub(command)
        shown, help_text = _shown(sub), sub.format_help()
        assert set(aliases.values()) <= shown and not set(aliases) & shown
        for old in aliases:
            assert f"{old} " not in help_text and f"{old}]" not in help_text, old
    parser = build_parser()
    every = {
        s
        for name, sub in next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices.items()
        for s in _shown(sub)
    }
    assert not [s for s in every if s.endswith("-col")], "a shown option abbreviates 'column'"


def test_each_alias_names_the_option_it_stands_for():
    for command, aliases in ALIASES.items():
        hidden = {s: a.alias_of for a in _sub(command)._actions if hasattr(a, "alias_of") for s in a.option_strings}
        assert hidden == aliases
