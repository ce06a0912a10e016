"""What the ``gsd`` sub-command modules share: option types with their bounds, table output, the
usage error, and the console process's flag.

The sub-command modules (:mod:`gsd.core.cli`, :mod:`gsd.simulator.cli`, ...) import these from
here; :mod:`gsd.cli`, the dispatcher that loads them by name, sits on top and is imported by
none of them.
"""

from __future__ import annotations

import argparse
import gc
import math

from ..errors import InputError
from ..io.userinput import parse_real

__all__ = [
    "CliError",
    "bounded_int",
    "bounded_float",
    "real_option",
    "check_options",
    "parse_list",
    "emit",
    "json_ready",
    "imports_done",
    "set_console",
    "REPORT_WIDTH",
    "wrap_lines",
    "fit_columns",
]

#: The widest line a report prints by default: a terminal of 100 columns (``--all-columns``: wider tables).
REPORT_WIDTH = 100


class CliError(InputError):
    """A usage error found by a handler (reported like any InputError)."""


class _OutOfBounds:
    """An option value outside its schema, kept by the parser until :func:`gsd.cli.main` reports it."""

    def __init__(self, text: str, message: str):
        self.text, self.message = text, message


def bounded_int(lo: int, hi: int, why: str):
    """An argparse ``type`` for an integer option in [lo, hi]: the option's schema.

    A value that is not an integer is argparse's usage error; one out of range is reported by
    :func:`gsd.cli.main` as one line naming the option, the value as typed and the bound, before the
    handler runs (so before any folder or memory is touched).
    """

    def integer(text: str):
        try:
            value = int(text, 10)
        except ValueError:  # 1e10 is an integer too; 1.5, nan and words are argparse's usage error
            number = float(text)
            if not (number.is_integer() and abs(number) <= 2**53):
                raise
            value = int(number)
        if not lo <= value <= hi:
            return _OutOfBounds(text, f"must be an integer in [{lo:,}, {hi:,}] ({why})")
        return value

    return integer


def bounded_float(lo: float, hi: float, why: str, *, open_lo: bool = False, open_hi: bool = False):
    """An argparse ``type`` for a real option in [lo, hi] (``open_lo`` / ``open_hi``: that end
    excluded), as :func:`bounded_int`: NaN and ±inf are out of range, named as typed."""

    def real(text: str):
        try:
            value = parse_real(text, "value")  # not a number: argparse's usage error
        except InputError as exc:  # 1e400: named as typed, not as the inf float64 makes of it
            return _OutOfBounds(text, str(exc).split(": ", 1)[1])
        inside = (lo < value if open_lo else lo <= value) and (value < hi if open_hi else value <= hi)
        if not (math.isfinite(value) and inside):
            span = f"{'(' if open_lo else '['}{lo:g}, {hi:g}{')' if open_hi else ']'}"
            return _OutOfBounds(text, f"must be a finite number in {span} ({why})")
        return value

    return real


def real_option(text: str):
    """An argparse ``type`` for a real option without a schema of its own: ``float``, except that
    a number float64 cannot hold (``1e400``, ``1e-400``) is reported naming the option and the
    text as typed (the handler's own checks judge NaN and inf, which the user wrote as such)."""
    try:
        return parse_real(text, "value")
    except InputError as exc:
        return _OutOfBounds(text, str(exc).split(": ", 1)[1])


real_option.__name__ = "number"  # argparse names the type in its usage error

#: Options that name one file a command writes: checked writable before the command's work.
_OUTPUT_FILES = ("figure", "silent_figure", "output")


def check_options(args) -> None:
    """A usage error naming the first option whose value is outside its schema; an output file
    option (:data:`_OUTPUT_FILES`) that could not be written, named before any work."""
    for dest, value in vars(args).items():
        if isinstance(value, _OutOfBounds):
            raise CliError(f"--{dest.replace('_', '-')} = {value.text}: {value.message}")
    for dest in _OUTPUT_FILES:
        value = getattr(args, dest, None)
        if isinstance(value, str) and value:
            from ..io.atomic import check_writable

            check_writable(value, f"--{dest.replace('_', '-')}")


def parse_list(text: str, kind=float, name: str = "value"):
    """'0.1,0.5' → np.array([0.1, 0.5]); a clear error naming the option otherwise."""
    import numpy as np

    try:
        values = [
            kind(parse_real(x, f"--{name}")) if kind is float else kind(x)
            for x in str(text).split(",")
            if x.strip() != ""
        ]
    except InputError:
        raise
    except ValueError:
        raise CliError(f"--{name} must be a comma-separated list of numbers, got {text!r}") from None
    if not values:
        raise CliError(f"--{name} is empty")
    return np.array(values)


def emit(df, as_json: bool, *, title: str | None = None, floatfmt: str = "{:.6g}", width: int | None = None) -> None:
    """Print a table (or JSON records) to stdout.

    ``df`` is a DataFrame, or a mapping of column name to 1-d array: the small commands pass
    the mapping, which is printed without importing pandas (it costs more start-up time than
    their whole computation). ``width``: a DataFrame's columns, from the first, that fit this many
    characters, and a line naming how many more there are (:func:`fit_columns`).
    """
    import json

    if not hasattr(df, "to_json"):
        columns = {name: values.tolist() if hasattr(values, "tolist") else list(values) for name, values in df.items()}
        if as_json:
            rows = [dict(zip(columns, map(_json_number, row))) for row in zip(*columns.values())]
            print(json.dumps(rows, indent=2))
            return
        if title:
            print(title)
        print(_text_table(columns, floatfmt))
        return

    import pandas as pd

    if as_json:
        print(json.dumps(json.loads(df.to_json(orient="records", double_precision=15)), indent=2))
        return
    if title:
        print(title)

    def render(names):
        return df[names].to_string(index=False, float_format=lambda x: floatfmt.format(x))

    with pd.option_context("display.max_rows", 200, "display.width", 160):
        if width is None:
            print(render(list(df.columns)))
        else:
            print("\n".join(fit_columns(render, list(df.columns), width)))


def fit_columns(
    render, names: list, width: int, more: str = "--all-columns, --output or --json", left_out: int = 0
) -> list[str]:
    """The lines of ``render(names[:j])`` for the largest ``j`` whose lines fit ``width`` characters (at
    least one column), and a line saying how many columns were left out (those of ``names`` and
    ``left_out`` more) and where they are (``more``)."""
    shown = list(names)
    lines = render(shown).split("\n")
    while len(shown) > 1 and max(map(len, lines)) > width:
        shown.pop()
        lines = render(shown).split("\n")
    rest = len(names) - len(shown) + left_out
    return lines + ([f"({rest} more column{'s' if rest > 1 else ''}: {more})"] if rest else [])


def wrap_lines(lines: list[str], width: int = REPORT_WIDTH) -> list[str]:
    """Each line longer than ``width`` wrapped at spaces, its continuation indented two more than it."""
    import textwrap

    out = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()))
        out += textwrap.wrap(line, width, subsequent_indent=indent + "  ", break_on_hyphens=False) or [line]
    return out


def json_ready(obj):
    """``obj`` with every NaN and ±inf float (numpy's too) replaced by None, in nested dicts and
    lists: what ``json.dumps(..., allow_nan=False)`` takes (NaN is not JSON)."""
    if isinstance(obj, dict):
        return {k: json_ready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_ready(v) for v in obj]
    if isinstance(obj, float) or type(obj).__name__ in ("float64", "float32"):
        return float(obj) if math.isfinite(obj) else None
    return obj


def _json_number(v):
    """NaN and ±inf as None (JSON null, as pandas writes them)."""
    import math

    return None if isinstance(v, float) and not math.isfinite(v) else v


def _text_table(columns: dict, floatfmt: str) -> str:
    """Right-aligned columns under their names, like ``DataFrame.to_string(index=False)``."""

    def cell(v):
        if isinstance(v, float):
            return "NaN" if v != v else floatfmt.format(v)  # inf prints as inf
        return str(v)

    cells = {name: [cell(v) for v in values] for name, values in columns.items()}
    widths = {name: max([len(name), *map(len, col)]) for name, col in cells.items()}
    lines = [" ".join(name.rjust(widths[name]) for name in cells)]
    lines += [" ".join(row) for row in zip(*([c.rjust(widths[n]) for c in col] for n, col in cells.items()))]
    return "\n".join(lines)


#: True in the ``gsd`` process itself (set by :func:`gsd.cli.run` through :func:`set_console`);
#: False when :func:`gsd.cli.main` is called from Python, whose garbage collector is left alone.
_CONSOLE = False


def set_console(on: bool) -> None:
    """Mark this process as the ``gsd`` console command (``on``) or not."""
    global _CONSOLE
    _CONSOLE = bool(on)


def imports_done() -> None:
    """In the ``gsd`` process: freeze what exists now (gc.freeze), once a handler has imported
    its heavy modules.

    torch alone brings ~2·10^5 objects that live as long as the process; frozen, the cyclic
    garbage collector stops walking them in every full collection it makes later, during the
    work and at interpreter exit (0.2–0.4 s of a campaign's wall time).  Objects made afterwards
    are collected as usual.  A no-op when :func:`gsd.cli.main` is called from Python (tests, notebooks).
    """
    if _CONSOLE:
        gc.freeze()


def hidden_aliases(parser, aliases: dict) -> None:
    """Accept each old option spelling in ``aliases`` (``{"--prompt-col": "prompt_col"}``: the
    spelling and the ``dest`` of the option it stands for) without listing it in ``--help`` or the
    docs: one spelling shown per idea, commands typed with the old one still run."""
    shown = {a.dest: a.option_strings[-1] for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS}
    for alias, dest in aliases.items():
        action = parser.add_argument(alias, dest=dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        action.alias_of = shown[dest]  # the option --help shows for it (its help text is that one's)


#: --noise-scale's largest B_NOISE and --run-lr's largest LR: :data:`gsd.core.advice.MAX_BATCH` and
#: :data:`gsd.core.advice.MAX_LR` (the CLI starts without importing the advice; a test holds them equal).
MAX_NOISE_SCALE = 2**53
MAX_RUN_LR = 1e300


def add_advice_arguments(p) -> None:
    """``--optimizer`` and ``--cost``: the conventions of the group-size advice (:func:`gsd.group_size_advice`)."""
    p.add_argument(
        "--optimizer",
        choices=("adam", "sgd"),
        default=None,
        help="the optimiser the advice models: adam (default; TRL's and verl's AdamW) or sgd",
    )
    p.add_argument(
        "--cost",
        metavar="T_STEP,T_PROMPT,T_ROLLOUT",
        help="seconds per training step = T_STEP + T_PROMPT x prompts + T_ROLLOUT x generations per step "
        "(fit them from runs at several G with gsd.fit_step_cost); with it the advice also gives the "
        "best G per second",
    )
    add_noise_scale_arguments(p)


def add_noise_scale_arguments(p) -> None:
    """``--noise-scale`` and ``--run-lr``: the batch advice (:func:`gsd.core.advice.batch_advice`)."""
    p.add_argument(
        "--noise-scale",
        metavar="B_NOISE[,LO,HI]",
        help="the run's measured gradient noise scale in generations (gsd.live.noise_scale's callback, or "
        "gsd.core.noise_scale from gradient norms at two batch sizes) with its interval: with it the advice "
        "also names generations per step B and the learning rate",
    )
    p.add_argument(
        "--run-lr",
        type=bounded_float(0, MAX_RUN_LR, "a learning rate", open_lo=True),
        default=None,
        metavar="LR",
        help="the run's learning rate: the advised lr is the run's at every B (measured in TRL: the lr acted "
        "alike at every B)",
    )


def noise_scale_arg(text):
    """``--noise-scale B_NOISE[,LO,HI]`` → (b_noise, lo, hi) (None when not given; no interval: lo = hi = B_NOISE)."""

    if text is None:
        return None
    vals = parse_list(text, float, "noise-scale")
    if vals.size not in (1, 3) or not (0 < vals[0] <= MAX_NOISE_SCALE):
        raise CliError(
            f"--noise-scale takes B_NOISE or B_NOISE,LO,HI with 0 < B_NOISE <= 2^53 generations, got {text!r}"
        )
    if vals.size == 1:
        return (float(vals[0]),) * 3
    # HI = inf is what gsd.core.noise_scale gives where the gradient is not resolved from 0: no upper end
    if not (0 <= vals[1] <= vals[0] <= vals[2]):
        raise CliError(f"--noise-scale: need 0 <= LO <= B_NOISE <= HI (HI may be inf), got {text!r}")
    return tuple(float(v) for v in vals)


def step_cost(text):
    """``--cost T_STEP,T_PROMPT,T_ROLLOUT`` → :class:`gsd.core.advice.StepCost` (None when not given)."""
    if text is None:
        return None
    from ..core.advice import StepCost
    from ..errors import InputError

    vals = parse_list(text, float, "cost")
    if vals.size != 3:
        raise CliError(f"--cost takes three seconds T_STEP,T_PROMPT,T_ROLLOUT, got {text!r}")
    try:
        return StepCost(*vals.tolist(), source="--cost")
    except InputError as e:
        raise CliError(f"--cost: {e}") from None
