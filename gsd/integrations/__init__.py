"""One leaf module per outside trainer: what it computes, what it writes, and its quirks.

Each trainer module (``gsd.integrations.<name>``) holds everything the log reader needs to know
about that trainer and imports nothing of gsd beyond the error class and the helpers of this
package, so the reader (:mod:`gsd.diagnose.readers`), the simulator's log writer
(:mod:`gsd.simulator.rollout_log`) and the convention table (:mod:`gsd.trainers`) all sit on top
of it.  Reading a log never needs the trainer installed.  Live hooks that import a trainer
live in their own package above the log reader, :mod:`gsd.live` (a tracker inside TRL's reward
functions, a skipping sampler, a ``GRPOTrainer`` subclass), which saves the self-describing table
of :mod:`gsd.integrations.tracker_table` that the reader reads back.  Nothing here imports
:mod:`gsd.diagnose` or :mod:`gsd.live` (the hooks' deprecated old names, in ``trl`` and
``trl_live``, look up their new place only when used).

**Adding a trainer** is one new module here and its name in :data:`TRAINERS`.

The interface (module-level names; those marked *optional* have the default in brackets):

Identity and convention
    ``NAME`` (the ``--format`` value), ``FILE_DESCRIPTION`` (for messages), ``DDOF``, ``EPS``,
    ``SCALES``, ``SOURCE`` (the advantage convention, with the file and function it was read in).
Files
    ``SUFFIXES`` (the file suffixes the format reads), ``is_log_file(path)`` (a file named as the
    trainer names its dumps, for ``--format auto``), ``step_of(path)`` (the step a file name
    carries, or None when the step is read from the rows), *optional*
    ``is_validation_folder(folder)`` [False], ``dump_folder(path)`` (the folder of one run's dump that
    holds the file: AReaL's ``rollout/`` above its version folders) [its parent], ``RUN_HISTORY``
    (files are one per step, written in step order, so a left-over of an earlier attempt shows in
    their times) [True], ``find_state(roots)`` (a run-state file beside the
    dumps, e.g. TRL's ``trainer_state.json``) [None], ``read_state(path)`` (→ dict).
Rows
    ``PROMPT_COL``, ``STEP_COL`` (None: the file's step), ``NOT_REWARD`` (columns that are never a
    reward), ``default_reward(columns, numeric)`` (→ ``[(coef, column)]``: the reward the
    trainer normalises), *optional* ``READ_ALL_COLUMNS`` [False: only the columns used],
    ``prepare(table, lines)`` (drop rows the trainer did not train on) [identity],
    ``total_reward(parts, coefs)`` (the weighted total in the trainer's arithmetic)
    [float64 sum], ``UNSCORABLE_IN_GROUP`` (a row with no reward stays in its group, as
    TRL's) [False].
Groups
    *optional* ``group_keys(table)`` (→ per-row int64 key of the row's group within its step and
    a mask of rows that have one; None: the prompt text) , ``members(table)`` (→ mask of the rows
    that enter the group's statistics, e.g. verl V1's last output of a session) [all],
    ``GROUP_COL`` (whether ``--group-column`` applies) [True], ``group_column(table, column)`` (a
    ``--group-column`` that names the trainer's own key, read the trainer's way; None: hashed as it
    is), ``GROUP_SIZE`` (whether
    ``--group-size`` applies: groups are blocks of rows) [False], ``arrange(chunks, context)``
    (whole-run rules over the files read: repeated generations, blocks, evaluation steps,
    left-overs of a resumed run; it may set ``short_groups`` / ``short_rollouts`` in the context:
    groups it left out as incomplete) [none], ``zero_std(values, group, n_groups)`` (the trainer's own
    rule for "every reward of the group equal": its dtype, summation and tolerance),
    ``describe_groups(context)`` (→ how groups were formed, in words).
Advantages
    *optional* ``check_advantages(reward, advantage, group, silent)`` (→ the scaling the logged
    advantages show, and warnings) [none].
Writing
    *optional* ``write_step(folder, step, ...)``: write what the trainer writes (the simulator's
    logs).
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
        from .._errors import InputError

        raise InputError(f"trainer must be one of {', '.join(TRAINERS)}, got {name!r}")
    return importlib.import_module(f"{__name__}.{name}")


def trainer_modules() -> dict:
    """{name: module} of every trainer in :data:`TRAINERS`."""
    return {name: trainer_module(name) for name in TRAINERS}
