"""Pages generated from the package itself, so that the docs cannot drift from the code.

``.. gsd-conventions::`` renders :data:`gsd.trainers.CONVENTIONS` (std, eps and scaling of each
trainer) with the update each gives relative to the paper's at a few group sizes
(:func:`gsd.convention_gap`).
"""

from __future__ import annotations

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
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
        from gsd.trainers import CONVENTIONS

        sizes = [int(g) for g in self.options.get("group-sizes", "4,8,16").split(",")]
        header = ["trainer", "std (ddof)", "eps", "``scale`` values (default first)", "source"]
        header += [f"update / paper's at eps = 0, G = {G}" for G in sizes]  # gsd conventions: ratio(eps=0)
        rows = []
        for name, c in CONVENTIONS.items():
            gap = gsd.convention_gap(sizes, name)
            ratio = gap["ratio_no_eps"].to_numpy()
            rows.append([f"``{name}``", str(c.ddof), f"{c.eps:g}", ", ".join(f"``{s}``" for s in c.scales),
                         c.source.replace("*", r"\*")] + [f"{r:.4f}" for r in ratio])
        container = nodes.container()
        self.state.nested_parse(StringList(_list_table(header, rows)), self.content_offset, container)
        return container.children


def setup(app):
    app.add_directive("gsd-conventions", ConventionsTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True, "version": "1"}
