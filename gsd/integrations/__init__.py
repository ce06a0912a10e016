"""One leaf module per outside trainer: what it computes, what it writes, and its quirks.

Each trainer module (``gsd.integrations.<name>``) holds everything the log reader needs to know
about that trainer and imports nothing of gsd beyond the error class and the helpers of this
package, so the reader (:mod:`gsd.diagnose.readers`), the simulator's log writer
(:mod:`gsd.simulator.rollout_log`) and the convention table (:mod:`gsd.core.trainers`) all sit on top
of it.  Reading a log never needs the trainer installed.  Live hooks that import a trainer
live in their own package above the log reader, :mod:`gsd.live` (a tracker inside TRL's reward
functions, a skipping sampler, a ``GRPOTrainer`` subclass), which saves the self-describing table
of :mod:`gsd.integrations.tracker_table` that the reader reads back.  Nothing here imports
:mod:`gsd.diagnose` or :mod:`gsd.live` (the hooks' deprecated old names, in ``trl`` and
``trl_live``, look up their new place only when used).

**Adding a trainer**: write its module here (every hook of the contract, the docs' table's
facts among them: ``TITLE``, ``PACKAGE``, ``VERSION``, ``FILES``, ``GROUP_RULE``, ``SILENCE``),
add its name to :data:`TRAINERS`, pin the release its rules were read in (``VERSION``, and the
same ``PACKAGE==VERSION`` in the Makefile or ``pyproject.toml``), test the reader against the
trainer's own writer, and refresh the table of trainers in the docs,
``python -m gsd.integrations.docs_table --write docs/logs.md`` (:func:`trainers_table`; the
suite fails while the docs' table differs from the modules).

The interface is :mod:`gsd.integrations.contract`: every hook (module-level name) with its type
and its default (``TrainerHooks``), and ``resolve``, which checks a module against it when the
reader loads (a missing, mistyped or misspelt hook is an error, never a silent default).
"""

from __future__ import annotations

import importlib

#: The trainers with an integration module, in the order ``--format auto`` tries them (AReaL's
#: ``rollout/{version}/{task_id}.jsonl`` are verl names too: the more specific first).
TRAINERS = ("trl", "areal", "verl")

#: Column (TRL) or extra key (verl) in which gsd's own simulator logs a prompt's true solve rate;
#: never a reward.
TRUTH_COLUMN = "true_p"


def trainer_module(name: str):
    """The integration module of the trainer ``name`` (one of :data:`TRAINERS`)."""
    if name not in TRAINERS:
        from ..errors import InputError

        raise InputError(f"trainer must be one of {', '.join(TRAINERS)}, got {name!r}")
    return importlib.import_module(f"{__name__}.{name}")


def trainer_modules() -> dict:
    """{name: module} of every trainer in :data:`TRAINERS`."""
    return {name: trainer_module(name) for name in TRAINERS}


def trainers_table() -> str:
    """The docs' Markdown table of every trainer in :data:`TRAINERS` (see :mod:`gsd.integrations.docs_table`)."""
    from .docs_table import trainers_table as table

    return table()
