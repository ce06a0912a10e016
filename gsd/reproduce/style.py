"""One look for every figure of the reproduction: sizes, fonts, colours per method.

Figures are built on :class:`matplotlib.figure.Figure` directly (no pyplot state), so that
library calls never leak open figures and work under any backend.  No LaTeX is needed.
"""

from __future__ import annotations

from matplotlib.figure import Figure

import functools

__all__ = ["COLORS", "RC", "styled", "new_figure", "method_label"]

#: One colour per method / series, used by every figure.
COLORS = {
    "grpo": "#1f77b4",
    "dr_grpo": "#d62728",
    "dapo": "#2ca02c",
    "law": "#7f7f7f",
    "data": "#444444",
    "accent": "#ff7f0e",
    "extra": "#9467bd",
}

_LABELS = {"grpo": "GRPO", "dr_grpo": "Dr.GRPO", "dapo": "DAPO", "rloo": "RLOO"}

#: rcParams applied to every figure.
RC = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "lines.linewidth": 1.6,
    "lines.markersize": 4,
    "legend.frameon": False,
    "text.usetex": False,
}


def method_label(method: str) -> str:
    """Display name of a method key ("dr_grpo" → "Dr.GRPO")."""
    return _LABELS.get(method, method)


def styled(make):
    """Decorator for a figure maker: build the figure under :data:`RC`.

    The style is applied through :func:`matplotlib.rc_context` while the maker runs, so the
    caller's global rcParams are left alone.
    """

    @functools.wraps(make)
    def wrapper(*args, **kwargs):
        import matplotlib

        with matplotlib.rc_context(RC):
            return make(*args, **kwargs)

    return wrapper


def new_figure(ncols: int = 1, nrows: int = 1, *, width: float | None = None, height: float = 3.2, **kw):
    """A figure (no pyplot state) and its axes (a single Axes when ncols = nrows = 1).

    Call it inside a maker decorated with :func:`styled`.
    """
    width = width if width is not None else 4.4 * ncols
    fig = Figure(figsize=(width, height * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=True, **kw)
    return fig, axes
