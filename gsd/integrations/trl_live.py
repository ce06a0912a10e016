"""The old home of the live TRL hooks, now :mod:`gsd.live`: every name imports from here, with a warning.

``from gsd.integrations.trl_live import GroupTracker`` (the documented statement until the hooks
moved above :mod:`gsd.diagnose`, so that the trainers' format modules import no analysis) gives
:class:`gsd.live.GroupTracker` and warns at the importing line; write
``from gsd.live import GroupTracker``.  The old path will be removed in a later release.
"""

from __future__ import annotations

from ..lazy import moved_names

#: Each public name the module held, and where it lives now (old name → module, name there).
_MOVED = {
    name: ("gsd.live", name)
    for name in (
        "GroupTracker",
        "GSDGRPOTrainer",
        "SkipPolicy",
        "SkipSampler",
        "LIVE_METRICS",
        "trl_total",
        "trl_zero_std",
    )
}

__all__ = list(_MOVED)  # each resolved, with its warning, by __getattr__
__getattr__ = moved_names(__name__, _MOVED)
