"""How ``gsd --help`` and each sub-command's help are laid out: the commands in groups (a newcomer's
four first), two examples under every sub-command, help text at most 100 columns, and "did you mean"
for a misspelt command or option (:mod:`difflib`).

Only argparse, difflib and shutil are imported here.
"""

from __future__ import annotations

import argparse
import difflib
import shutil

__all__ = ["GROUPS", "EXAMPLES", "HELP_WIDTH", "TopParser", "lay_out", "suggest_options"]

#: The widest line of any help text (a terminal of 100 columns; narrower terminals get theirs).
HELP_WIDTH = 100

#: ``gsd --help``'s groups of commands, in order; a command in none is listed under "Other".
GROUPS = (
    ("Start here", ("example-logs", "diagnose", "scalars", "plan")),
    ("Long runs", ("count",)),
    (
        "The paper's evidence",
        ("reproduce", "figures", "bigmath", "group-size-table", "dapo-fit", "simulate", "sweep"),
    ),
    ("One group's math", ("identity", "silent", "fidelity", "conventions", "tour", "losses")),
    (
        "Beyond the paper (need the torch or trl extra)",
        ("allocation-comparison", "transformer-update", "transformer-train", "group-size-training"),
    ),
)

#: Two command lines for each sub-command, each runnable as typed (the first two after
#: ``gsd example-logs examples``, from the folder it was typed in).
EXAMPLES = {
    "example-logs": ("gsd example-logs examples", "gsd example-logs /tmp/gsd-logs"),
    "diagnose": (
        "gsd diagnose examples/trl",
        "gsd diagnose examples/rollouts.csv --prompt-column qid --reward-column r --step-column it",
    ),
    "scalars": (
        "gsd scalars examples/trl --group-size 4 --groups 8",
        "gsd scalars examples/trl/trainer_state.json --all-columns",
    ),
    "count": (
        "gsd count examples/verl",
        "gsd count examples/rollouts.csv --prompt-column qid --reward-column r --step-column it --json",
    ),
    "plan": ("gsd plan --p 0.5,0.05 --epsilon 0.05", "gsd plan --p 0.05,0.3,0.5,0.9 --budget 32 --advice"),
    "identity": ("gsd identity --rewards 0,1,1,0", "gsd identity --rewards 0,1,1,0 --ddof 1 --eps 1e-4"),
    "silent": ("gsd silent --p 0.05 --G 8", "gsd silent --p 0.05,0.5 --G 4,16 --json"),
    "fidelity": ("gsd fidelity --p 0.05 --G 64", "gsd fidelity --p 0.05,0.5 --G 8,64"),
    "conventions": ("gsd conventions", "gsd conventions --G 16 --json"),
    "tour": ("gsd tour", "gsd tour | head -20"),
    "losses": ("gsd losses", "gsd losses --figures figures_losses"),
    "simulate": (
        "gsd simulate --campaign paper_campaign --out runs/paper",
        "gsd simulate --campaign paper_campaign --out runs/paper --resume",
    ),
    "reproduce": ("gsd reproduce --out reports/latest", "gsd reproduce --fast --out reports/fast"),
    "transformer-update": ("gsd transformer-update --fast", "gsd transformer-update --G 16 --json"),
    "transformer-train": ("gsd transformer-train --fast", "gsd transformer-train --out runs/transformer"),
    "group-size-training": (
        "gsd group-size-training --fast --out runs/gst",
        "gsd group-size-training --out runs/gst --resume",
    ),
    "figures": ("gsd figures --fast --out figures_fast", "gsd figures --out figures_all"),
    "bigmath": ("gsd bigmath", "gsd bigmath --G 16 --table budget"),
    "group-size-table": ("gsd group-size-table", "gsd group-size-table --fidelity 0.9,0.95 --p 0.05,0.5"),
    "dapo-fit": ("gsd dapo-fit curve.csv", "gsd dapo-fit curve.csv --bootstrap 200 --figure fit.png"),
    "allocation-comparison": (
        "gsd allocation-comparison --out runs/allocation",
        "gsd allocation-comparison --out runs/allocation --jobs 2",
    ),
    "sweep": (
        "gsd sweep --grid law_in_training --out sweeps/law --dry-run",
        "gsd sweep --grid law_in_training --out sweeps/law --backend ray",
    ),
}


def _width() -> int:
    return min(shutil.get_terminal_size().columns, HELP_WIDTH) - 2


class _ExamplesFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions refilled to the width (unless written with their own line breaks), the examples
    epilog kept as written, everything at most :data:`HELP_WIDTH` columns."""

    def __init__(self, prog, **kw):
        kw.setdefault("width", _width())
        super().__init__(prog, **kw)

    def _fill_text(self, text, width, indent):
        if "\n" in text:  # written line by line (the examples, a description that lists)
            return super()._fill_text(text, width, indent)
        return argparse.HelpFormatter._fill_text(self, text, width, indent)


class TopParser(argparse.ArgumentParser):
    """``gsd``'s own parser: its help lists the commands in :data:`GROUPS`; an unknown command gets
    "did you mean" instead of argparse's list of every choice."""

    def format_help(self) -> str:
        sub = next(a for a in self._actions if isinstance(a, argparse._SubParsersAction))
        helps = {a.dest: a.help or "" for a in sub._choices_actions}
        width = _width()
        lines = [self.format_usage().rstrip(), "", *_wrap(self.description or "", width, ""), ""]
        listed = set()
        for title, names in GROUPS + (("Other", tuple(n for n in helps if not any(n in g for _, g in GROUPS))),):
            names = [n for n in names if n in helps]
            if not names:
                continue
            lines.append(f"{title}:")
            for n in names:
                text = _wrap(helps[n], width - 24, "")
                lines.append(f"  {n:<20}  {text[0]}" if len(n) <= 20 else f"  {n}\n{'':24}{text[0]}")
                lines += [f"{'':24}{t}" for t in text[1:]]
                listed.add(n)
            lines.append("")
        lines += ["options:", "  -h, --help            show this help message and exit"]
        lines += ["  --version             show the version and exit", ""]
        lines += _wrap(self.epilog or "", width, "")
        return "\n".join(lines).rstrip() + "\n"

    def error(self, message):
        if "invalid choice:" in message and message.startswith("argument COMMAND"):
            typed = message.split("invalid choice: ", 1)[1].split(" (choose", 1)[0].strip("'")
            sub = next(a for a in self._actions if isinstance(a, argparse._SubParsersAction))
            close = difflib.get_close_matches(typed, list(sub.choices), n=3, cutoff=0.6)
            message = f"unknown command {typed!r}" + (
                f"; did you mean {' or '.join(close)}?" if close else "; gsd --help lists the commands"
            )
        super().error(message)


def _wrap(text: str, width: int, indent: str) -> list[str]:
    import textwrap

    out = []
    for para in text.split("\n"):
        out += textwrap.wrap(para, width, initial_indent=indent, subsequent_indent=indent) or [""]
    return out


def lay_out(sub) -> None:
    """Every sub-command parser of ``sub``: its examples (:data:`EXAMPLES`) as its epilog, and the
    formatter that keeps its help within :data:`HELP_WIDTH` columns."""
    for name, parser in sub.choices.items():
        examples = EXAMPLES.get(name)
        if examples:
            parser.epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)
        parser.formatter_class = _ExamplesFormatter


def suggest_options(parser, extras: list[str]) -> str:
    """``unrecognized arguments: ...``, with the nearest option of ``parser`` for each option typed."""
    known = [s for a in parser._actions for s in a.option_strings if a.help != argparse.SUPPRESS]
    parts = []
    for word in extras:
        flag = word.split("=", 1)[0]
        close = difflib.get_close_matches(flag, known, n=1, cutoff=0.6) if flag.startswith("-") else []
        parts.append(f"{word} (did you mean {close[0]}?)" if close else word)
    return "unrecognized arguments: " + " ".join(parts)
