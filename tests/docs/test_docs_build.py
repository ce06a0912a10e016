"""The documentation builds with warnings as errors, and shows what the package has.

The sources are copied (the build writes generated API pages beside them), notebooks that the
notebook tests executed earlier in this session are rendered with their outputs, and any other
notebook is executed by the build in its fast mode.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import gsd

ROOT = Path(__file__).resolve().parents[2]
#: Every test here runs after the rest of the suite (conftest.py), so the one site build renders the
#: notebooks the notebook tests executed; a test left unmarked built the site a second time, alone.
pytestmark = pytest.mark.docs_build

THEORY_LABELS = (
    "theory-identity",
    "theory-silent",
    "theory-update",
    "theory-law",
    "theory-paper",
    "theory-trainers",
    "theory-losses",
    "theory-conventions",
    "theory-allocation",
    "theory-allocation-run",
    "theory-logs",
)


@pytest.fixture(scope="module")
def site(tmp_path_factory, executed_notebooks):
    import nbformat

    tmp = tmp_path_factory.mktemp("docs")
    src = tmp / "docs"
    shutil.copytree(
        ROOT / "docs",
        src,
        symlinks=False,
        ignore=shutil.ignore_patterns("_build", "generated", "jupyter_execute", ".ipynb_checkpoints"),
    )
    # Pages that include files from the checkout (data/README.md, figures/) keep their relative paths.
    shutil.copytree(ROOT / "data", tmp / "data", ignore=shutil.ignore_patterns("*.py*", "__pycache__"))
    shutil.copytree(ROOT / "figures", tmp / "figures")
    reused = []
    for done in sorted(executed_notebooks.glob("*.ipynb")):
        nb = nbformat.read(done, as_version=4)
        nb.metadata.setdefault("mystnb", {})["execution_mode"] = "off"
        nbformat.write(nb, src / "notebooks" / done.name)
        reused.append(done.name)
    out = tmp / "html"
    env = {**os.environ, "GSD_NOTEBOOK_FAST": "1", "GSD_DOCS_NB_EXECUTION": "force", "MPLBACKEND": "Agg"}
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-b",
            "html",
            "-W",
            "--keep-going",
            "-q",
            "-d",
            str(tmp / "doctrees"),
            str(src),
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    # Nothing is filtered but one race of ipykernel's own shutdown (below): a kernel's notice, a
    # notebook's stderr (nb_output_stderr = "warn"), an unresolved reference, all fail the build.
    warnings = [ln for ln in _without_shutdown_race(res.stderr).splitlines() if "WARNING" in ln or "ERROR" in ln]
    assert res.returncode == 0 and not warnings, res.stderr[-6000:]
    return {"out": out, "reused": reused}


def _without_shutdown_race(stderr: str) -> str:
    """``stderr`` less the one block of ipykernel answering a shutdown request on its control
    channel after its IOPub socket closed (seen once in five builds, after every cell had run):
    tornado's log line, its traceback through ``process_control``, and the ZMQError — only when
    all three are there."""
    lines, out, i = stderr.splitlines(keepends=True), [], 0
    while i < len(lines):
        if lines[i].startswith("ERROR:tornado.general:Uncaught exception in ZMQStream callback"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith(("ERROR:", "WARNING:")) and "ZMQError" not in lines[j]:
                j += 1
            block = lines[i : j + 1]
            if (
                j < len(lines)
                and "zmq.error.ZMQError: Socket operation on non-socket" in lines[j]
                and any("process_control" in line for line in block)
            ):
                i = j + 1
                continue
        out.append(lines[i])
        i += 1
    return "".join(out)


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_theory_page_has_every_section_label_and_numbered_equations(site):
    html = _text(site["out"] / "theory.html")
    for label in THEORY_LABELS:
        assert f'id="{label}"' in html, label
    numbers = [int(n) for n in re.findall(r'<span class="eqno">\((\d+)\)', html)]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 10


def test_equation_links_show_the_number_of_their_equation(site):
    """The equation references are Markdown links (they read on GitHub too) whose text is the number:
    each must be the number Sphinx gives the equation it points at, on every page."""
    numbers = dict(
        re.findall(
            r'id="equation-([\w-]+)"[^>]*>.*?<span class="eqno">\((\d+)\)',
            _text(site["out"] / "theory.html"),
            flags=re.S,
        )
    )
    links = []
    for page in ("theory.html", "conventions.html"):
        links += re.findall(r'href="[^"]*#equation-([\w-]+)"[^>]*>(?:<span[^>]*>)?\((\d+)\)', _text(site["out"] / page))
    assert len(links) >= 20
    assert [(label, n) for label, n in links if numbers.get(label) != n] == []


def test_equations_render_offline(site):
    # The site carries its own MathJax and points at it, so the equations render with no network.
    assert (site["out"] / "_static" / "mathjax" / "tex-chtml.js").is_file()
    assert "_static/mathjax/tex-chtml.js" in _text(site["out"] / "theory.html")


def test_api_reference_documents_every_public_name(site):
    generated = site["out"] / "api" / "generated"
    for name in gsd.__all__:
        assert (generated / f"gsd.{name}.html").is_file(), f"gsd.{name} has no API page"
    # Sub-package pages list exactly their __all__ (autosummary, so they cannot drift).
    from gsd import losses as module

    losses = _text(generated / "gsd.losses.html")
    for name in module.__all__:
        if callable(getattr(module, name)):  # functions and classes (data has no page of its own)
            assert f"gsd.losses.{name}" in losses, name


def test_cli_reference_lists_every_command(site):
    from gsd.cli import build_parser

    text = re.sub(r"<[^>]+>", "", _text(site["out"] / "cli.html"))
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    for command in sub.choices:
        assert f"gsd {command} [-h]" in text, command


def _conf_value(name: str):
    """A literal assigned in docs/conf.py, read without running it (it imports the package, zmq)."""
    import ast

    tree = ast.parse((ROOT / "docs" / "conf.py").read_text())
    return next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets)
    )


def test_cli_reference_options_copy_as_typed(tmp_path):
    """Every option of the command-line reference reads "--name", never "–name" (docutils' smart
    dashes): built with docs/conf.py's smartquotes_action, and without it to show the test can fail."""
    from gsd.cli import build_parser

    options = {
        s
        for p in _subparsers(build_parser()).values()
        for a in p._actions
        for s in a.option_strings
        if s.startswith("--") and s != "--help" and a.help != argparse.SUPPRESS
    }  # listed ones only
    pages = {}
    for name, action in (("conf", _conf_value("smartquotes_action")), ("default", "qDe")):
        src = tmp_path / name / "src"
        src.mkdir(parents=True)
        (src / "conf.py").write_text(
            f"extensions = ['myst_parser', 'sphinxarg.ext']\nsmartquotes_action = {action!r}\n"
        )
        (src / "index.md").write_text(
            "# CLI\n\n```{argparse}\n:module: gsd.cli\n:func: build_parser\n:prog: gsd\n```\n"
        )
        res = subprocess.run(
            [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-E", str(src), str(tmp_path / name / "out")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert res.returncode == 0, res.stderr
        pages[name] = re.sub(r"<[^>]+>", "", _text(tmp_path / name / "out" / "index.html"))
    assert not re.findall(r"[\u2013\u2014]\w", pages["conf"])
    shown = set(re.findall(r"--[A-Za-z][\w-]*", pages["conf"]))
    assert options <= shown, sorted(options - shown)
    assert re.findall(r"\u2013[a-z]", pages["default"])  # docutils' default turns them into en dashes


def _subparsers(parser) -> dict:
    return next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices


def test_conventions_table_and_notebooks(site):
    html = _text(site["out"] / "conventions.html")
    for trainer in gsd.CONVENTIONS:
        assert trainer in html
    assert "0.9354" in html  # TRL's update / paper's at G = 8: sqrt(7/8), from gsd.convention_gap
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        page = _text(site["out"] / "notebooks" / f"{nb.stem}.html")
        assert "<img" in page, f"{nb.name} rendered without a figure"


def test_notebook_pages_show_no_stderr_and_no_local_paths(site):
    for page in sorted((site["out"] / "notebooks").glob("*.html")):
        text = _text(page)
        assert "output stderr" not in text, f"{page.name} shows a stderr output"
        assert str(ROOT) not in text and "site-packages" not in text, f"{page.name} shows a local path"


def test_no_reference_to_files_outside_the_project(site):
    for page in site["out"].rglob("*.html"):
        text = _text(page)
        assert "DESIGN" not in text and "shared/" not in text, page


def test_only_the_kernel_shutdown_race_is_dropped():
    race = (
        "ERROR:tornado.general:Uncaught exception in ZMQStream callback\nTraceback (most recent call last):\n"
        '  File "ipykernel/kernelbase.py", line 409, in process_control\n'
        "zmq.error.ZMQError: Socket operation on non-socket\n"
    )
    assert _without_shutdown_race("WARNING: a\n" + race + "ERROR: b\n") == "WARNING: a\nERROR: b\n"
    other = race.replace("process_control", "dispatch_shell")  # the same error elsewhere: kept
    assert _without_shutdown_race(other) == other
    assert _without_shutdown_race(race.replace("non-socket", "closed")) == race.replace("non-socket", "closed")


def test_allocation_page_shows_its_figure(site):
    html = _text(site["out"] / "allocation_comparison.html")
    img = re.search(r'<img[^>]+src="([^"]*allocation_comparison_paper_scale[^"]*\.png)"', html)
    assert img and (site["out"] / img.group(1)).is_file()


def test_references_in_words_are_links_and_pages_have_no_empty_navigation(site):
    """ "docs/theory.md, section …" written for the terminal (help texts, docstrings, printed
    reports) is a link on every page; a page without sub-pages has no "Section Navigation"."""
    linked = 0
    for page in site["out"].rglob("*.html"):
        text = _text(page)
        bare = re.sub(r"<a\b[^>]*>.*?</a>", "", text, flags=re.S)
        assert "docs/theory.md" not in re.sub(r"<[^>]+>", "", bare), f"{page.name}: a reference in words, not linked"
        linked += len(re.findall(r'<a class="reference internal" href="[./]*theory\.html#[^"]+">docs/theory\.md', text))
    assert linked >= 5
    for name in ("theory", "logs", "trl", "install", "tour"):
        assert "Section Navigation" not in _text(site["out"] / f"{name}.html"), name


def _tiny_site(tmp_path, page_text):
    src = tmp_path / "src"
    src.mkdir(parents=True)
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'docs' / '_ext')!r})\n"
        "extensions = ['myst_parser', 'gsd_docs']\nmyst_heading_anchors = 3\n"
    )
    (src / "index.md").write_text("# Home\n\n```{toctree}\ntheory\npage\n```\n")
    (src / "theory.md").write_text("# Theory\n\n## The group-size law\n\nText.\n")
    (src / "page.md").write_text(page_text)
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "-q", "-E", str(src), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_machine_path_on_a_page_fails_the_build(tmp_path):
    ok = _tiny_site(tmp_path / "a", "# Page\n\nSee docs/theory.md, section The group-size law.\n")
    assert ok.returncode == 0, ok.stderr
    page = _text(tmp_path / "a" / "out" / "page.html")
    assert (
        '<a class="reference internal" href="theory.html#the-group-size-law">docs/theory.md, section The group-size law</a>'
        in page
    )
    # A temp-folder path, a home path, an installed-package path (joined here, not written out).
    for shown in (
        str(Path("/", "tmp", "tmpab12cd", "sweeps", "law_fast")),
        str(Path.home() / "runs" / "x.png"),
        "lib/python3.11/site-packages/gsd",
    ):
        bad = _tiny_site(tmp_path / f"b{len(shown)}", f"# Page\n\n```\nwritten to {shown}\n```\n")
        assert bad.returncode != 0 and "machine path" in bad.stderr, (shown, bad.stderr)
