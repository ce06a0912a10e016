"""Pages generated from the package itself, so that the docs cannot drift from the code, and two
checks of every rendered page.

``.. gsd-conventions::`` renders :data:`gsd.core.trainers.CONVENTIONS` (std, eps and scaling of each
trainer) with the update each gives relative to the paper's at a few group sizes
(:func:`gsd.convention_gap`).

Every HTML page, as it is written:

* a reference written as words for the terminal — ``docs/theory.md, section The group-size law``
  in a help text, a docstring or a notebook's printed report — becomes a link to that page and
  section (the words stay as they are);
* a machine path (the build's own folders, the temporary folder, a home folder, ``site-packages``)
  is a build warning, hence an error under ``-W``: a page never shows where it was built.

A class re-exported twice (``gsd.Allocation`` and ``gsd.allocation.Allocation``, defined in
``gsd.allocation.solver``) has a page at each public path, and each page registers the class's
canonical name as an alias of itself: :class:`_PythonDomain` takes the first alias rather than
warning of a duplicate (the page of the defining module, when there is one, still takes the name).
"""

from __future__ import annotations

import html
import re
import tempfile
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.domains.python import PythonDomain
from sphinx.util.docutils import SphinxDirective


def _list_table(header, rows, widths=None) -> list[str]:
    lines = [".. list-table::", "   :header-rows: 1", ""]
    if widths:
        lines.insert(2, f"   :widths: {' '.join(map(str, widths))}")
    for row in [header, *rows]:
        lines.append(f"   * - {row[0]}")
        lines.extend(f"     - {cell}" for cell in row[1:])
    return lines


class ConventionsTable(SphinxDirective):
    """The trainer conventions as the package knows them, and the gap each one gives."""

    option_spec = {"group-sizes": directives.unchanged}

    def run(self):
        import gsd
        from gsd.core.trainers import CONVENTIONS

        sizes = [int(g) for g in self.options.get("group-sizes", "4,8,16").split(",")]
        header = ["trainer", "std (ddof)", "eps", "``scale`` values (default first)", "source"]
        header += [f"update / paper's at eps = 0, G = {G}" for G in sizes]  # gsd conventions: ratio(eps=0)
        rows = []
        for name, c in CONVENTIONS.items():
            gap = gsd.convention_gap(sizes, name)
            ratio = gap["ratio_no_eps"].to_numpy()
            rows.append(
                [
                    f"``{name}``",
                    str(c.ddof),
                    f"{c.eps:g}",
                    ", ".join(f"``{s}``" for s in c.scales),
                    c.source.replace("*", r"\*"),
                ]
                + [f"{r:.4f}" for r in ratio]
            )
        container = nodes.container()
        self.state.nested_parse(StringList(_list_table(header, rows)), self.content_offset, container)
        return container.children


#: ``docs/NAME.md`` and an optional ``, section Title`` (or ``, sections A and B``: the first), as
#: help texts, docstrings and printed reports write them; not inside an HTML tag or attribute.
_WORDS_REF = re.compile(
    r"(?<![\w/.-])docs/(?P<page>[a-z_]+)\.md(?P<section>,? sections? (?P<title>[A-Z][^.;:)(<>&\"'`,]*?"
    r"(?=(?:,? and [A-Z]|[.;:)(<>&\"'`,]|$))))?"
)


def _section_ids(app) -> dict[str, dict[str, str]]:
    """{page: {section title: its HTML id}} of every documentation page, from the doctrees."""
    out: dict[str, dict[str, str]] = {}
    env = app.env
    for doc in env.found_docs:
        if "/" in doc:
            continue
        try:
            tree = env.get_doctree(doc)
        except Exception:  # a page not read in this build (cannot happen in a full build)
            continue
        ids = {}
        for sec in tree.findall(nodes.section):
            title = sec.next_node(nodes.title)
            if title is not None and sec["ids"]:
                ids[title.astext().strip()] = sec["ids"][-1]
        out[doc] = ids
    return out


def _link_words(app, pagename: str, body: str) -> str:
    """``docs/X.md, section Y`` in the page's text → a link to X.html#y (text outside tags only)."""
    if not hasattr(app, "_gsd_section_ids"):
        app._gsd_section_ids = _section_ids(app)
    sections = app._gsd_section_ids
    depth = pagename.count("/")
    prefix = "../" * depth

    def link(m):
        page = m.group("page")
        if page not in sections:
            return m.group(0)
        anchor = ""
        title = (m.group("title") or "").strip()
        if title:
            anchor = next(
                (f"#{i}" for t, i in sections[page].items() if title.startswith(t) or t.startswith(title)), ""
            )
        return f'<a class="reference internal" href="{prefix}{page}.html{anchor}">{m.group(0)}</a>'

    parts = re.split(r"(<[^>]*>)", body)
    inside_link = 0
    for i, part in enumerate(parts):
        if part.startswith("<"):
            if re.match(r"<a[\s>]", part):
                inside_link += 1
            elif part.startswith("</a"):
                inside_link = max(0, inside_link - 1)
            continue
        if not inside_link and "docs/" in part:
            parts[i] = _WORDS_REF.sub(link, part)
    return "".join(parts)


def _machine_paths(app) -> re.Pattern:
    """The paths no page may show: this build's folders, the temporary folder, home folders."""
    roots = {
        str(Path(p).resolve())
        for p in (app.srcdir, app.outdir, app.doctreedir, Path(app.srcdir).parent, tempfile.gettempdir(), Path.home())
    }
    roots |= {str(p) for p in (app.srcdir, app.outdir, app.doctreedir, tempfile.gettempdir(), Path.home())}
    roots = {r for r in roots if len(r) > 1}
    generic = (
        r"(?<![\w.~-])/(?:tmp|var/folders|private/var|home|root|Users|work)/[^\s<>\"']*|site-packages|[A-Z]:\\Users\\"
    )
    own = "|".join(re.escape(r) for r in sorted(roots, key=len, reverse=True))
    return re.compile(rf"(?<![\w.~-])(?:{own})(?![\w.-])|{generic}")


def _check_page(app, pagename, templatename, context, doctree):
    body = context.get("body")
    if not body:
        return
    body = context["body"] = _link_words(app, pagename, body)
    if not hasattr(app, "_gsd_machine_paths"):
        app._gsd_machine_paths = _machine_paths(app)
    text = html.unescape(re.sub(r"<[^>]*>", "", body))
    hits = sorted({m.group(0) for m in app._gsd_machine_paths.finditer(text)})
    if hits:
        from sphinx.util import logging

        logging.getLogger(__name__).warning(
            "the page shows a machine path (a temporary or build folder, a home folder, site-packages): %s",
            ", ".join(hits[:5]),
            location=pagename,
            type="gsd",
            subtype="machine-path",
        )


class _PythonDomain(PythonDomain):
    """The Python domain, where two aliases of one canonical name are the same object, not a duplicate."""

    def note_object(self, name, objtype, node_id, aliased=False, location=None):
        other = self.objects.get(name)
        if aliased and other is not None and other.aliased:
            return  # the same class under a second public path: the first alias keeps the name
        super().note_object(name, objtype, node_id, aliased=aliased, location=location)


def setup(app):
    app.add_domain(_PythonDomain, override=True)
    app.add_directive("gsd-conventions", ConventionsTable)
    app.connect("html-page-context", _check_page)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
