"""The ``gsd`` command line.

Every sub-command prints a readable table by default and JSON with ``--json``.  Bad input
(:class:`gsd.InputError`) is reported as one line on stderr with exit status 2; any other
exception is a bug and keeps its traceback.

Sub-commands live beside the code they drive: each module in ``_COMMANDS`` exposes
``register(subparsers)``, which adds its parser and sets ``func`` to a handler
``handler(args) -> int``.  Those modules import nothing heavy at module level (numpy, scipy,
pandas and torch load inside the handlers), so ``gsd --help`` and the small commands start fast.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys

from ..errors import InputError, MissingExtra

# The helpers the sub-command modules use live in gsd.cli.support (this module, which loads them, is
# imported by none of them); their names stay importable from here.
from .support import (  # noqa: F401
    CliError,
    add_advice_arguments,
    bounded_float,
    bounded_int,
    check_options,
    emit,
    hidden_aliases,
    imports_done,
    json_ready,
    parse_list,
    real_option,
    set_console,
    step_cost,
)

# Modules that add sub-commands; optional ones are skipped if they are not there yet.
_COMMANDS = (
    "gsd.core.cli",
    "gsd.losses.cli",
    "gsd.simulator.cli",
    "gsd.reproduce.cli",
    "gsd.sweep.cli",
    "gsd.diagnose.cli",
    "gsd.diagnose.scalars_cli",
    "gsd.diagnose.counts_cli",
)


def _version() -> str:
    """The package's version and the distribution that installs it (the import name is ``gsd``;
    the registry's ``gsd`` is another project)."""
    from .. import __version__

    return f"{__version__} (distribution grpo-gsd)"


def build_parser() -> argparse.ArgumentParser:
    from .layout import TopParser, lay_out

    parser = TopParser(
        prog="gsd",
        description="gsd reads the logs of a GRPO, Dr.GRPO or DAPO run (TRL, verl, AReaL) and says how much of "
        "its generation was wasted in silent groups (every reward equal, no gradient) and which group size "
        "to train with; it also plans a rollout budget and regenerates the evidence of the paper.",
        epilog="Try: gsd example-logs examples, then gsd diagnose examples/trl\n"
        "gsd COMMAND --help shows a command's options and two examples.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=argparse.ArgumentParser)
    for name in _COMMANDS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name and name.startswith(exc.name):
                continue  # that part of the package is not installed
            raise
        module.register(sub)
    lay_out(sub)
    return parser


def run() -> int:
    """The ``gsd`` console command: :func:`main` with :func:`imports_done` enabled, freed heap
    memory kept for reuse (:func:`gsd.io.heap.keep_freed_memory`: the process is ours), and every
    object frozen before the interpreter's final collections (the process ends here)."""
    set_console(True)
    from ..io.heap import keep_freed_memory

    keep_freed_memory()
    try:
        return main()
    finally:
        set_console(False)
        gc.freeze()


def main(argv=None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:  # argparse's own error, with the nearest option for each one misspelt
        from .layout import suggest_options

        command = getattr(args, "command", None)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        (sub.choices[command] if command in sub.choices else parser).error(
            suggest_options(sub.choices.get(command, parser), extras)
        )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        check_options(args)
        return int(args.func(args) or 0)
    except (InputError, MissingExtra) as exc:  # and CliError; anything else is a bug and keeps its traceback
        print(f"gsd {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # a handler may say where it stopped and how to go on
        print(f"gsd {args.command}: interrupted" + (f": {exc}" if str(exc) else ""), file=sys.stderr)
        return 130
    except BrokenPipeError:  # `gsd ... | head`: the reader left; not an error of ours
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
