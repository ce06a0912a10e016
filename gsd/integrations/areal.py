"""AReaL (checked against ``areal`` 1.0.4): its convention, its rollout dumps, their quirks.

What it computes
    ``PPOActor._compute_advantages`` (``areal/trainer/ppo/actor.py``) shifts and scales the
    reward ((r + reward_bias)·reward_scaling, clipped to ±reward_clip), then normalises it with
    ``Normalization`` (``areal/utils/data.py``) when ``actor.reward_norm`` is set.  A GRPO run
    sets ``mean_level: group``, ``std_level: group``, ``group_size: n_samples``; then
    A_i = (r_i − mean_group) / (std_group + eps), computed in float64 (``high_precision``), the
    std with ddof 1 (``std_unbiased=True``, the default since AReaL 0.3.4) and eps = 1e-5
    (``NormConfig.eps``); ``std_level: null`` only centres (Dr.GRPO).  ``NormConfig``'s own
    defaults are ``batch`` levels (one mean and std over the batch) and ``reward_norm`` itself
    defaults to None (no normalisation).  The groups of ``Normalization`` are consecutive blocks
    of ``group_size`` rows of the training batch, which are one task's rows.  AReaL has no
    built-in filter of zero-std groups: DAPO's dynamic sampling is the ``dynamic_filter_fn`` a
    recipe hands to ``prepare_batch`` (``should_accept_fn``), which runs *after* the dump.

What it writes (``rollout.dump_to_file=True``)
    ``WorkflowExecutor._dump_trajectory`` (``areal/infra/workflow_executor.py``) writes every
    finished task to ``{fileroot}/logs/{user}/{experiment_name}/{trial_name}/rollout/{version}/
    {task_id}.jsonl`` (evaluation tasks under ``eval-rollout/``), one JSON object per answer:
    ``task_id``, ``sample_idx`` (the answer's row in the task), ``seqlen``, ``prompt_len``,
    ``head_version``, ``tail_version``, ``reward``, ``prompt`` and ``completion`` (decoded).
    A task is one dataset row run ``n_samples`` times (``GroupedRolloutWorkflow``): one group.
    Quirks:

    * the folder is the task's ``tail_version``, the newest policy version among its tokens:
      the number of weight updates before its last token was generated, so version 0 is the
      first step's rollouts; an asynchronous run (``max_head_offpolicyness`` > 0) trains a step
      on several versions, and a step's own version is not written;
    * ``head_version`` is the oldest version among *all* tokens, prompt tokens included, which
      the single-turn workflow stamps -1: it is -1 in every row it writes;
    * an answer with no completion token is left out of the dump but trained on, and
      ``GroupedRolloutWorkflow`` drops an episode that returned None: either leaves a task with
      fewer rows than ``n_samples`` (the trained batch then no longer splits into one task per
      ``group_size`` block); the reader takes ``n_samples`` as the run's usual group size and
      leaves shorter groups out;
    * a task rejected by ``should_accept_fn`` (e.g. DAPO's filter) is dumped all the same;
    * each ``WorkflowExecutor`` numbers its tasks from 0 and appends to ``{task_id}.jsonl``:
      with ``AREAL_SPMD_MODE`` (one rollout engine per data-parallel rank; the default single
      controller numbers tasks once for all) several ranks write their task of one id into one
      file, each in ``sample_idx`` order, told apart here where ``sample_idx`` starts again
      (rows of two ranks interleaved line by line would not be);
    * the reward is a float32 (``torch.tensor(reward, dtype=torch.float32).item()``), before
      bias, scaling, clipping and the overlong penalty, none of which changes which rewards of a
      group are equal (clipping aside: two rewards beyond ``reward_clip`` become equal).

Read piece by piece (:mod:`gsd.diagnose.counts`)
    The one whole-run rule, :func:`arrange`'s usual task size (the most common over the run; a
    shorter task lost answers and is left out), needs every task's size before any row is
    counted: a first pass parses the files and keeps one count per task (step, task key), not
    the rows; the counting pass then cuts each piece's rows of a short task before counting it
    (:class:`Arrangement`).  The other rules are a row's or a task's: a task's rows are one file's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import InputError
from .columns import pair_codes

__all__ = [
    "NAME",
    "DDOF",
    "EPS",
    "SCALES",
    "SOURCE",
    "FILE_DESCRIPTION",
    "SUFFIXES",
    "PROMPT_COL",
    "STEP_COL",
    "DEFAULT_REWARD",
    "NOT_REWARD",
    "is_log_file",
    "step_of",
    "dump_folder",
    "is_validation_folder",
    "default_reward",
    "group_keys",
    "arrange",
    "describe_groups",
    "zero_std",
]

NAME = "areal"
DDOF = 1
EPS = 1e-5
#: ``reward_norm`` with ``mean_level: group`` and ``std_level: group`` / ``null``.
SCALES = ("group", "none")
SOURCE = (
    "AReaL 1.0.4 areal/utils/data.py Normalization (std_unbiased=True, eps=1e-5, high_precision float64) "
    "with reward_norm mean_level/std_level 'group', applied in areal/trainer/ppo/actor.py "
    "PPOActor._compute_advantages"
)

# The docs' table of trainers (python -m gsd.integrations.docs_table --write docs/logs.md).
TITLE = "AReaL"
PACKAGE = "areal"
VERSION = "1.0.4"
FILES = "`…/rollout/{version}/{task_id}.jsonl` (`rollout.dump_to_file=True`)"
GROUP_RULE = "one task: the rows of a `{task_id}.jsonl`, a rank's next task where `sample_idx` does not increase"
SILENCE = "its float32 rewards all equal (its float64 std is then exactly 0)"

FILE_DESCRIPTION = "AReaL's rollout/{version}/{task_id}.jsonl"
SUFFIXES = (".jsonl",)
PROMPT_COL = "prompt"
#: The row's copy of its version folder: the step is read from the rows (many files per step).
STEP_COL = "tail_version"
DEFAULT_REWARD = "reward"
NOT_REWARD = ("task_id", "sample_idx", "seqlen", "prompt_len", "head_version", "tail_version", "prompt", "completion")
#: The reader's rule that a later step's older file is a left-over assumes one file per step,
#: written in step order; AReaL writes a file per task, finished in any order.
RUN_HISTORY = False

_TRAIN_FOLDER = "rollout"
_EVAL_FOLDER = "eval-rollout"
_TASK_COL = "task_id"
#: The answer's row in its task, 0 … n_samples − 1, written in that order.
INDEX_COL = "sample_idx"


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit() and text.count("-") <= 1 and len(text) < 19


def is_log_file(path: Path) -> bool:
    """``{version}/{task_id}.jsonl`` under ``rollout/`` or ``eval-rollout/``."""
    path = Path(path)
    return (
        path.suffix == ".jsonl"
        and path.stem.isdigit()
        and _is_int(path.parent.name)
        and path.parent.parent.name in (_TRAIN_FOLDER, _EVAL_FOLDER)
    )


def step_of(path: Path):
    """None: a file's name is its task id, and a step holds many files; the rows' ``tail_version``
    (their version folder) is the step."""
    return None


def dump_folder(path: Path) -> Path:
    """The folder of one dump, above the version folders (``rollout/`` or ``eval-rollout/``)."""
    return Path(path).parent.parent


def is_validation_folder(folder: Path) -> bool:
    """The evaluation dump (``eval-rollout/``, or one of its version folders)."""
    folder = Path(folder)
    return folder.name == _EVAL_FOLDER or folder.parent.name == _EVAL_FOLDER


def default_reward(columns, numeric) -> list:
    if DEFAULT_REWARD in columns:
        return [(1.0, DEFAULT_REWARD)]

    raise InputError(f"no 'reward' key; choose the reward with --reward-column KEY (keys: {', '.join(columns)})")


def group_keys(table):
    """Per row, the key of its group within its version, and which rows have one.

    A group is a task: the rows of one ``{task_id}.jsonl``.  Executors that share the trial
    folder append their own task of the same id to the same file, each in ``sample_idx`` order,
    so a ``sample_idx`` that does not exceed the previous row's starts another executor's task.
    (The prompt text cannot tell tasks apart: for a multi-turn task the dump's ``prompt`` is the
    sequence less its generated tokens, which differs from answer to answer.)
    """
    from ..io.hashing import combine_hashes, hash_numbers

    if _TASK_COL not in table.column_names:
        return None
    n = table.num_rows
    task = _as_numbers(table.column(_TASK_COL))
    index = _as_numbers(table.column(INDEX_COL)) if INDEX_COL in table.column_names else np.full(n, np.nan)
    ok = ~np.isnan(task) & ~np.isnan(index)
    t = np.where(np.isnan(task), -1.0, task)
    i = np.where(np.isnan(index), -1.0, index)
    # An executor's task starts again where sample_idx does not rise; a row without one (a bad
    # row) neither starts nor ends a run: the comparison skips it.
    pos = np.flatnonzero(ok)
    start = np.zeros(n, bool)
    start[pos] = np.r_[True, (t[pos][1:] != t[pos][:-1]) | (i[pos][1:] <= i[pos][:-1])]
    start[0] = True
    run = np.cumsum(start)
    key = combine_hashes(hash_numbers(t), hash_numbers(run))  # the (task, run) pair's hash
    return key, ok


def _as_numbers(column) -> np.ndarray:
    """A column as float64, NaN where missing or not a number (text read as numbers are)."""
    import pyarrow as pa

    from ..io.arrow_arrays import to_numpy
    from .columns import text_to_numbers

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    t = column.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return text_to_numbers(column)
    if pa.types.is_null(t):
        return np.full(len(column), np.nan)
    return to_numpy(column.cast(pa.float64(), safe=False), fill=np.nan).astype(np.float64)


#: Why a row of an AReaL dump is unusable when it lacks its task key.
BAD_KEY = f"no {_TASK_COL} or {INDEX_COL} (AReaL writes both on every answer; its task is unknown)"


def arrange(chunks, context) -> list:
    """AReaL's whole-run rule: a task holds ``n_samples`` answers, the run's usual group size; a
    shorter group lost answers the trainer normalised with the rest (an empty answer is not
    dumped, an episode that returned None is dropped from its task), so its rows are left out of
    the diagnosis, with a warning that counts them.

    ``context``: the reader's :class:`~gsd.integrations.contract.RunContext`; this sets
    ``group_size`` (the usual size) and ``short_groups`` / ``short_rollouts``
    (:class:`Arrangement` over the whole run).
    """
    arrangement = Arrangement(context)
    for ch in chunks:
        arrangement.survey_rows(ch)
    for ch in chunks:
        arrangement.take(ch)
    arrangement.close()
    return chunks


class Arrangement:
    """:func:`arrange`'s rule one chunk at a time, for a reader that never holds the whole run
    (:mod:`gsd.diagnose.counts`): the usual group size is the most common size over the whole
    run, so a first pass over the parsed rows (:meth:`survey_rows`) counts each group's keyed
    rows — one count per group (step, task key), never the rows — and fixes the usual size and
    the short groups; the counting pass then drops each chunk's rows of a short group
    (:meth:`take`), before its unusable rows are counted, as :func:`arrange` does."""

    def __init__(self, context):
        self.context = context
        self.found: list = []  # per chunk surveyed: (its groups' steps, keys, keyed rows)
        self.usual = None
        self.short = np.zeros((2, 0), np.int64)  # the short groups' (step, key), decided once
        self.n_short = self.short_rows = 0

    def fate(self, step) -> None:
        """No file is left out by its step alone."""
        return None

    def survey_rows(self, ch) -> None:
        """The first pass: one parsed chunk's groups and their keyed rows (rows with a step and a key)."""
        if ch.gkey is None or not ch.hashes.size:
            return
        ok = ch.gkey_ok & ch.step_ok
        code, n = pair_codes(ch.steps[ok], ch.gkey[ok])
        first = np.zeros(n, np.int64)
        first[code] = np.flatnonzero(ok)
        self.found.append((ch.steps[first], ch.gkey[first], np.bincount(code, minlength=n)))

    def _decide(self) -> None:
        """The usual size (the most common; ties: the smaller) and the short groups, from the survey."""
        if self.usual is not None or not self.found:
            return
        steps, keys, rows = (np.concatenate(x) for x in zip(*self.found))
        self.found = []
        code, n = pair_codes(steps, keys)
        sizes = np.bincount(code, weights=rows, minlength=n).round().astype(np.int64)
        first = np.zeros(n, np.int64)
        first[code] = np.arange(code.size)
        if not sizes.size:
            return
        values, counts = np.unique(sizes, return_counts=True)
        self.usual = int(values[np.argmax(counts)])
        short = sizes < self.usual
        self.short = np.stack([steps[first][short], keys[first][short]])
        self.n_short, self.short_rows = int(short.sum()), int(sizes[short].sum())

    def take(self, ch) -> bool:
        """A chunk's rows of a short group dropped in place; every chunk is kept."""
        self._decide()
        if ch.gkey is None or not self.short.shape[1] or not ch.hashes.size:
            return True
        ok = ch.gkey_ok & ch.step_ok
        k = self.short.shape[1]
        codes, n = pair_codes(np.r_[self.short[0], ch.steps], np.r_[self.short[1], ch.gkey])
        bad = np.zeros(n, bool)
        bad[codes[:k]] = True
        cut = ok & bad[codes[k:]]
        if cut.any():
            _drop_rows(ch, ~cut)
        return True

    def close(self) -> None:
        """The warning that counts the short groups, and the context's fields."""
        self._decide()
        if self.usual is None:
            return
        if self.n_short:
            self.context.warnings.append(
                f"{self.n_short} AReaL task(s) hold fewer than the run's {self.usual} answers ({self.short_rows} "
                "rollouts): AReaL does not dump an answer with no completion token (it trains on it) and drops an "
                "episode that returned None from its task; those groups are left out"
            )
        context = self.context
        context.group_size, context.short_groups, context.short_rollouts = self.usual, self.n_short, self.short_rows


stream_arrange = Arrangement


def _drop_rows(chunk, keep) -> None:
    """Keep only the ``keep`` rows of a reader's chunk: every per-row array it holds (its line
    numbers read first, so that the rows kept keep theirs)."""
    n = keep.size
    if getattr(chunk, "lines", None) is None and hasattr(chunk, "line_numbers"):
        chunk.line_numbers()
    for name, value in list(vars(chunk).items()):
        if isinstance(value, np.ndarray) and value.shape[:1] == (n,):
            setattr(chunk, name, value[keep])


def describe_groups(context) -> str:
    return (
        f"the rows of one AReaL task ({{version}}/{{{_TASK_COL}}}.jsonl, one run of {INDEX_COL} per executor); "
        f"n_samples = {context.group_size}, the run's usual group size"
    )


def zero_std(values, group, n_groups: int) -> np.ndarray:
    """Per group, whether AReaL's group std is zero: every reward of the group equal.

    The dump holds float32 rewards, which ``Normalization`` widens to float64 before taking the
    std: n equal float32 values sum exactly in float64 (24 + log2 n bits, n < 2^29), so their
    mean is the value itself and the std exactly 0; distinct values give a std far above 0.

    >>> zero_std(np.array([1.0, 1.0, 0.0, 1.0]), np.array([0, 0, 1, 1]), 2).tolist()
    [True, False]
    """
    from .columns import group_range

    lo, hi = group_range(values, group, n_groups)
    return lo == hi
