"""No function or method in gsd/ is longer than 80 lines of code.

A *line of code* is a line that holds a token of code: blank lines, comment lines and the lines of
a docstring (the string that opens a ``def`` or a ``class`` body) do not count; a line holding both
code and a comment counts once; every line of a multi-line string that is not a docstring (an
expression, an argument, an assignment) counts. The ``def`` line and the signature's other lines
count; decorator lines do not (they sit above ``def``).

A nested function counts in its enclosing function, as lines of the enclosing ``def`` (they are
read as part of it), and is measured on its own as well: a 60-line function holding a 30-line
helper is 90 lines long. A long function is split into named steps that read top to bottom, not
into an inner function.
"""

from __future__ import annotations

import ast
import io
import textwrap
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 80

#: Tokens that are not code: layout, comments and the end of the file.
_NOT_CODE = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
}


def _code_lines(source: str) -> set[int]:
    """The numbers of the lines that hold a token of code, a multi-line token on each of its lines."""
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in _NOT_CODE:
            lines.update(range(token.start[0], token.end[0] + 1))
    return lines


def _docstring_lines(tree: ast.AST) -> set[int]:
    """The lines of every docstring: a string constant opening a function's or a class's body."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def function_lengths(source: str) -> list[tuple[int, str, int]]:
    """``[(line of the def, name, lines of code)]`` of every function and method in ``source``, nested ones too."""
    tree = ast.parse(source)
    code = _code_lines(source) - _docstring_lines(tree)
    return [
        (node.lineno, node.name, sum(1 for n in range(node.lineno, node.end_lineno + 1) if n in code))
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def too_long(root: Path, limit: int = LIMIT) -> list[str]:
    """``file:line name count`` of every function under ``root`` with more than ``limit`` lines of code."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for line, name, count in function_lengths(path.read_text(encoding="utf-8")):
            if count > limit:
                found.append((count, f"{path.relative_to(root.parent)}:{line} {name} {count}"))
    return [text for _, text in sorted(found, key=lambda item: (-item[0], item[1]))]


# The measure, on source whose every count is known by reading it.
SAMPLE = textwrap.dedent(
    '''
    import functools


    @functools.cache
    def documented(a,
                   b):
        """A docstring
        of three lines.
        """
        # a comment line

        x = a  # code and a comment: one line
        text = """a string
        that is a value,
        not a docstring"""
        return x, text


    class Holder:
        """The class's docstring."""

        def method(self):
            "One-line docstring."
            return 1

        async def later(self):
            return 2


    def outer():
        """Outer's docstring."""
        y = 1

        def inner():
            """Inner's docstring,
            on two lines."""
            # why, not what
            return y

        return inner
    '''
)


def test_the_measure_counts_code_lines_only():
    lengths = {name: count for _, name, count in function_lengths(SAMPLE)}
    # documented: the def's two lines, x, the 3-line string, return (decorator, docstring, comment, blank: no)
    assert lengths["documented"] == 7
    assert lengths["method"] == 2  # def, return
    assert lengths["later"] == 2
    # inner: def, return; outer: def, y, inner's 2 lines, return inner
    assert lengths["inner"] == 2
    assert lengths["outer"] == 5


def test_the_measure_names_each_def_line():
    where = {name: line for line, name, _ in function_lengths(SAMPLE)}
    lines = SAMPLE.splitlines()
    for name, line in where.items():
        assert lines[line - 1].lstrip().startswith((f"def {name}(", f"async def {name}(")), name


def _function(name: str, statements: int, *, nested: int = 0, noise: int = 0) -> str:
    """A function of ``statements`` assignments (+ def and return), a nested one of ``nested``, and
    ``noise`` lines each of comments, blank lines and docstring."""
    body = ['    """' + "\n    ".join(["docstring"] * max(noise, 1)) + '"""']
    body += ["    # a comment", ""] * noise
    if nested:
        body += ["    def helper():"] + [f"        h{i} = {i}" for i in range(nested)] + ["        return 0"]
    body += [f"    v{i} = {i}" for i in range(statements)]
    return f"def {name}():\n" + "\n".join(body) + "\n    return 0\n"


def test_a_long_function_is_caught_and_a_short_one_passes(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "long.py").write_text(_function("long_one", LIMIT - 1), encoding="utf-8")  # 81 lines of code
    (package / "short.py").write_text(_function("short_one", LIMIT - 2, noise=40), encoding="utf-8")  # 80
    (package / "nested.py").write_text(_function("parent", LIMIT - 10, nested=10), encoding="utf-8")  # 72 + 12
    assert too_long(package) == ["pkg/nested.py:1 parent 84", "pkg/long.py:1 long_one 81"]


def test_the_measure_reads_every_module_of_gsd():
    counted = [name for path in (ROOT / "gsd").rglob("*.py") for _, name, _ in function_lengths(path.read_text())]
    assert len(counted) > 500  # the package's functions were found, not an empty walk


def test_no_function_is_longer_than_80_lines_of_code():
    found = too_long(ROOT / "gsd")
    assert not found, (
        f"{len(found)} function(s) over {LIMIT} lines of code (file:line name count); split each into named "
        "steps that read top to bottom:\n" + "\n".join(found)
    )
