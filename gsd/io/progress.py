"""Progress bars: tqdm's notebook widget where it can be drawn, its text bar everywhere else.

``tqdm.auto`` picks the widget inside Jupyter, but where ipywidgets is not installed it warns
(a ``TqdmWarning`` quoting the path of the tqdm install) the first time it is imported in a
kernel, even for a bar that is never shown: that warning landed in every notebook that ran a
simulation.  The text bar needs no widget, so it is used instead whenever ipywidgets is absent.
"""

from __future__ import annotations

import importlib.util

__all__ = ["progress_bar"]


def progress_bar(iterable=None, **kwargs):
    """A tqdm bar (same arguments as ``tqdm.tqdm``)."""
    if kwargs.get("disable") is True or importlib.util.find_spec("ipywidgets") is None:
        from tqdm.std import tqdm
    else:
        from tqdm.auto import tqdm
    return tqdm(iterable, **kwargs)
