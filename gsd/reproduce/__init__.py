"""Paper reproduction: every number and figure of the paper, regenerated from the package.

Modules, each named for what it computes:

* :mod:`.bigmath` — silent rates and gradient-budget shares on the Big-Math solve rates;
* :mod:`.group_size_table` — the fidelity table (exact smallest G vs the group-size law);
* :mod:`.theory` — the identity, fidelity, silent-rate and objective figures with Monte Carlo;
* :mod:`.dapo_fit` — the DAPO consistency fit of a logged all-correct curve;
* :mod:`.transformer` — TRL's own update and silent groups on a tiny transformer whose solve
  rates are exact, against the closed forms (``gsd transformer-update``), and its trainings:
  ``gsd diagnose``'s calibration, the hardest quarter, the update against σ
  (``gsd transformer-train``);
* :mod:`.figures` — regenerate every figure (``gsd figures``);
* :mod:`.report` — run everything and compare with the published numbers (``gsd reproduce``):
  :mod:`.published` holds the paper's numbers and the comparison, :mod:`.report_markdown` writes
  the report as Markdown.

The figure style and the file writes are the package's own: :mod:`gsd.plotstyle`, :mod:`gsd.io.atomic`.

Submodules are imported on first use, so ``import gsd.reproduce`` stays light.
"""

from __future__ import annotations

from ..lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {"report": ("run_reproduction",), "figures": ("make_all", "fast_mode")},
    submodules=(
        "bigmath",
        "group_size_table",
        "theory",
        "dapo_fit",
        "figures",
        "report",
        "published",
        "report_markdown",
        "transformer",
    ),
)
