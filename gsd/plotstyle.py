"""One look for every figure the package draws, and one way to write figures to disk.

* :data:`RC`, :data:`COLORS`, :func:`styled`, :func:`new_figure`, :func:`method_label` — sizes,
  fonts and one colour per method, shared by the reproduction, the loss-geometry figures, the
  campaign figure and the law-in-training figure;
* :data:`FIGURE_DPI` and :func:`save_figure` — every figure is written at one resolution,
  atomically, with no version or timestamp in its metadata (regenerating a figure with the same
  libraries gives the same bytes: a clean diff when nothing changed);
* :func:`figures_dir` — where figures go by default.

Figures are built on :class:`matplotlib.figure.Figure` directly (no pyplot state), so that
library calls never leak open figures and work under any backend.  No LaTeX is needed.
matplotlib is imported on first use, so :func:`figures_dir` stays cheap.
"""

from __future__ import annotations

import functools
import io
import os
from pathlib import Path

from .io.atomic import write_atomic

__all__ = [
    "COLORS",
    "RC",
    "FIGURE_DPI",
    "FIGURES_ENV",
    "styled",
    "new_figure",
    "method_label",
    "save_figure",
    "figures_dir",
    "checkout_root",
]

#: Resolution of every figure the package writes (small files, readable on screen).
FIGURE_DPI = 110

#: Environment variable that overrides the default figures folder.
FIGURES_ENV = "GSD_FIGURES_DIR"

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

#: Metadata that would differ between two renderings of the same figure, per format.
_NO_STAMP = {
    "png": {"Software": None},
    "pdf": {"Creator": None, "Producer": None, "CreationDate": None},
    "svg": {"Creator": None, "Date": None},
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


def new_figure(
    ncols: int = 1,
    nrows: int = 1,
    *,
    width: float | None = None,
    height: float = 3.2,
    margins: dict | None = None,
    **kw,
):
    """A figure (no pyplot state) and its axes (a single Axes when ncols = nrows = 1).

    ``height`` is per row.  Call it inside a maker decorated with :func:`styled`.
    ``margins``: fixed subplot margins (the keywords of
    :meth:`matplotlib.figure.Figure.subplots_adjust`: left, right, bottom, top, wspace, hspace)
    instead of constrained layout.  Constrained layout measures every label before the figure
    is drawn, so a saved figure is drawn twice; fixed margins draw it once, for a large figure
    about half the cost of writing it.
    """
    from matplotlib.figure import Figure

    width = width if width is not None else 4.4 * ncols
    fig = Figure(figsize=(width, height * nrows), layout=None if margins else "constrained")
    if margins:
        fig.subplots_adjust(**margins)
    axes = fig.subplots(nrows, ncols, squeeze=True, **kw)
    return fig, axes


def save_figure(fig, path, *, dpi: int = FIGURE_DPI) -> Path:
    """Render ``fig`` in memory and write it atomically to ``path``; returns the path.

    The format follows the suffix (PNG unless ``.pdf`` or ``.svg``); no software version or
    date goes into the file.
    """
    import matplotlib

    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    fmt = fmt if fmt in _NO_STAMP else "png"
    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": "gsd"}):  # SVG element ids: fixed, not random
        fig.savefig(buf, format=fmt, dpi=dpi, metadata=_NO_STAMP[fmt])
    return write_atomic(path, buf.getvalue())


def checkout_root() -> Path | None:
    """The source checkout this package runs from (editable install), or None."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() and (root / "gsd").is_dir() else None


def figures_dir() -> Path:
    """Default figures folder: $GSD_FIGURES_DIR, else the checkout's ``figures/`` (editable
    install), else ./figures."""
    env = os.environ.get(FIGURES_ENV)
    if env:
        return Path(env)
    root = checkout_root()
    return root / "figures" if root else Path("figures")


#: Environment variable that asks notebooks and figure makers for their small, fast version.
FAST_ENV = "GSD_NOTEBOOK_FAST"


def fast_mode(fast: bool | None = None) -> bool:
    """``fast`` if given, else whether $GSD_NOTEBOOK_FAST is set (to anything but '', 0, false, no)."""
    import os

    if fast is not None:
        return bool(fast)
    return os.environ.get(FAST_ENV, "").strip().lower() not in ("", "0", "false", "no")


def group_size_axis(ax, ticks) -> None:
    """A log2 x axis labelled with the group sizes themselves (2, 4, 8, …)."""
    ticks = [int(t) for t in ticks]
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    ax.set_xlabel("group size G")
