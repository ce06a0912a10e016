"""References written as words resolve: every "section X" of the theory page that the notebooks,
README, docs, docstrings, help texts and shipped files point to is a section of docs/theory.md,
and the notebooks are numbered and titled once each.

Sphinx resolves the marked-up references ({ref}, {eq}, {doc}) and fails the docs build on a
broken one; these are the plain-text ones it cannot see (a notebook opened in Jupyter shows them
as text), checked without building anything.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
THEORY = ROOT / "docs" / "theory.md"


def _sections() -> list[str]:
    return [m.group(1).strip() for m in re.finditer(r"^##+ (.+)$", THEORY.read_text(), flags=re.M)]


def _notebook_text(path: Path) -> str:
    return "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])


def _sources() -> dict[str, str]:
    files = {
        p: p.read_text()
        for p in [
            ROOT / "README.md",
            *(ROOT / "docs").glob("*.md"),
            *(ROOT / "data").glob("*.md"),
            *(ROOT / "simulations").glob("*.toml"),
            *(ROOT / "gsd").rglob("*.py"),
        ]
    }
    files.update({p: _notebook_text(p) for p in (ROOT / "notebooks").glob("*.ipynb")})
    # Words wrap across lines, behind comment marks and indentation: one space between words.
    return {str(p.relative_to(ROOT)): re.sub(r"\s*\n\s*(?:#+ )?", " ", text) for p, text in files.items()}


def theory_references(text: str) -> list[str]:
    """The section names that follow "section(s)" in a sentence that names the theory page."""
    names = []
    for m in re.finditer(r"\bsections? ((?:[A-Z]|[a-z]+ [A-Z])[^.;:)\"`]*)", text):
        if "theory" not in text[max(0, m.start() - 60) : m.start()]:
            continue  # a section of something else (a paper, a report)
        names += [part.strip() for part in re.split(r",? and (?=[A-Z])", m.group(1))]
    return names


def test_the_check_finds_what_it_should():
    text = (
        "see docs/theory.md, section The group-size law). Also (docs: theory page, section\n"
        "Budget allocation) and docs/theory.md, sections Expected update and The group-size law."
    )
    assert theory_references(re.sub(r"\s*\n\s*", " ", text)) == [
        "The group-size law",
        "Budget allocation",
        "Expected update",
        "The group-size law",
    ]


def test_every_theory_section_named_in_words_exists():
    sections = _sections()
    found, broken = 0, []
    for name, text in _sources().items():
        for ref in theory_references(text):
            found += 1
            if not any(ref.startswith(s) or s.startswith(ref) for s in sections):
                broken.append(f"{name}: section {ref!r}")
    assert found >= 10  # the check sees the references it is meant to check
    assert not broken, f"no such section in docs/theory.md ({'; '.join(sections)}):\n" + "\n".join(broken)


def test_notebooks_are_numbered_and_titled_once_each():
    titles = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        first = _notebook_text(path).splitlines()[0]
        number = path.name.split("_")[0]
        assert first.startswith(f"# {number} — "), f"{path.name} is titled {first!r}"
        titles[path.name] = first
    assert len(set(titles.values())) == len(titles) >= 11
