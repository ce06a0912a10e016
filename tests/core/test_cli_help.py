"""Every option and argument of every `gsd` command says what it does in --help."""

import argparse

from gsd.cli import build_parser


def _walk(parser, path=("gsd",)):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, (*path, name))
        elif not isinstance(action, argparse._HelpAction):
            yield " ".join(path), action


def test_every_option_has_help():
    # An old spelling kept as a hidden alias (gsd.cli.hidden_aliases) has the help of the option it stands for.
    missing = [
        f"{cmd} {'/'.join(a.option_strings) or a.dest}"
        for cmd, a in _walk(build_parser())
        if (not (a.help and a.help.strip()) or a.help == argparse.SUPPRESS) and not hasattr(a, "alias_of")
    ]
    assert not missing, "options without help text:\n" + "\n".join(missing)


def test_every_command_has_help():
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    helps = {c.dest: c.help for c in sub._choices_actions}
    assert set(helps) == set(sub.choices) and all(h and h.strip() for h in helps.values()), helps
