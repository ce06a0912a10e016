"""verl's GRPO (checked against ``verl`` 0.9.1): its convention, its rollout dumps, their quirks.

verl 0.9.1 has two trainers.  The **V1 trainer is the default** (``trainer.use_v1: true`` in
``verl/trainer/config/ppo_trainer.yaml``); the legacy ``RayPPOTrainer`` (``main_ppo_v0``) is
deprecated.  Both dump through ``_write_generations`` into ``trainer.rollout_data_dir``; what the
rows hold differs, and the reader tells them apart by the rows themselves (no flag).

What it computes
    ``compute_grpo_outcome_advantage``: A_i = (r_i − mean_group) / (std_group + 1e-6), sample
    std (ddof 1), the group being the responses sharing a ``uid`` (one per dataset row drawn);
    ``norm_adv_by_std_in_grpo=False`` only centres.  A group whose scores have zero std is
    silent (advantage 0); DAPO's recipe (``algorithm.filter_groups``) drops and refills them.

What the V1 trainer writes (``v1/trainer_base.py::_log_rollout_data``)
    The rows of the trained batch, fetched from TransferQueue, ``score`` the sum of ``rm_scores``,
    sorted by their key ``{uid}_{session_id}_{index}`` and written with **one extra key, ``uid``,
    holding that whole key** (no reward extras: ``acc`` and the like are not in a V1 dump).
    A GRPO group is the rows whose key shares the ``uid`` part; a session is one member of the
    group; a multi-turn session can write several outputs (index 0, 1, ...), all with the
    session's final score, and only its output with the largest index enters the group's mean
    and std (``v1/utils.py::compute_advantage_for_multi_trajectories``), its advantage copied to
    the session's other outputs.  So the reader counts a session once, at its final output.
    DAPO's group filter lives in the V1 replay buffer (``algorithm.filter_groups``,
    ``v1/replay_buffer.py::_dapo_filtered_keys``: a group of two or more trajectories whose
    metric has ``np.std(values) == 0`` is evicted and refilled, counted in
    ``training/filter_groups/evicted_samples``) *before* the batch is trained and dumped: such a
    dump holds only live groups and cannot show the generation's silent share.

What the legacy trainer writes (``ray_trainer.py``)
    One ``{global_step}.jsonl`` per training step, one JSON object per response: ``input`` (the
    decoded prompt), ``output``, ``gts``, ``score`` (the summed token-level score), ``step``,
    and every reward extra-info key with one value per response (e.g. ``acc``, ``pred``).
    Quirks:

    * no ``uid`` or dataset index is written, and with ``trainer.balance_batch=True`` (the
      default) the batch is reordered by sequence length before the dump: a group can only be
      found as the rows of one step with the same ``input`` text, so two dataset rows with the
      same text in one batch read as one group of 2n — unless the reward function returns a
      group id (e.g. the dataset index) as an extra key, named with ``--group-column``;
    * numpy booleans in the extra info are dumped as the strings ``"True"`` / ``"False"``;
    * validation dumps (``trainer.validation_data_dir``) use the same file names in another
      folder (``validation_data/`` beside ``rollout_data/`` in the usual layout).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import TRUTH_COLUMN

__all__ = [
    "NAME",
    "DDOF",
    "EPS",
    "SCALES",
    "SOURCE",
    "NOT_REWARD",
    "DEFAULT_REWARD",
    "BOOL_STRINGS",
    "is_log_file",
    "step_of",
    "is_validation_folder",
    "write_step",
    "FILE_DESCRIPTION",
    "split_keys",
    "group_keys",
    "members",
    "row_keys",
    "zero_std",
    "is_v1",
]

NAME = "verl"

DDOF = 1
EPS = 1e-6
SCALES = ("group", "none", "rloo", "rloo_vectorized")
SOURCE = (
    "verl 0.9.1 compute_grpo_outcome_advantage (norm_adv_by_std_in_grpo), compute_rloo_outcome_advantage, "
    "compute_rloo_vectorized_outcome_advantage"
)

# The docs' table of trainers (python -m gsd.integrations.docs_table --write docs/logs.md).
TITLE = "verl (its V1 and legacy trainers)"
PACKAGE = "verl"
VERSION = "0.9.1"
FILES = "`{trainer.rollout_data_dir}/{step}.jsonl`"
GROUP_RULE = (
    "V1: the rows whose key `{uid}_{session_id}_{index}` shares its uid, a session counted once; "
    "legacy: one step's rows with one `input` text (or `--group-column`)"
)
SILENCE = "its float32 scores all equal (the DAPO filter's `np.std(values) == 0`)"

FILE_DESCRIPTION = "verl's {step}.jsonl"
SUFFIXES = (".jsonl", ".json")
PROMPT_COL = "input"
STEP_COL = "step"
#: What removes silent groups before the dump, when a dump shows none.
FILTER = (
    "verl's algorithm.filter_groups (DAPO) evicts the groups whose scores are all equal before the batch is "
    "trained and dumped; their number is the trainer's training/filter_groups/evicted_samples metric"
)
#: The rows' V1 key, ``{uid}_{session_id}_{index}``.
KEY_PATTERN = r"^(.*)_(\d+)_(\d+)$"

#: Keys of a dumped row that are not rewards.
NOT_REWARD = ("input", "output", "gts", "step", "data_source", "request_id", "uid", TRUTH_COLUMN)
#: The reward verl normalises.
DEFAULT_REWARD = "score"
#: How verl's dump (``json.dumps(default=str)``) writes numpy booleans.
BOOL_STRINGS = {"True": 1.0, "False": 0.0}


def is_log_file(path: Path) -> bool:
    return path.suffix == ".jsonl" and path.stem.isdigit()


def step_of(path: Path):
    """The step a ``{step}.jsonl`` name carries (None for any other name: the rows' ``step`` says)."""
    stem = Path(path).stem
    return int(stem) if stem.isdigit() and len(stem) < 19 else None


def default_reward(columns, numeric) -> list:
    from ..errors import InputError

    if DEFAULT_REWARD in columns:
        return [(1.0, DEFAULT_REWARD)]
    raise InputError(f"no 'score' key; choose the reward with --reward-column KEY (keys: {', '.join(columns)})")


def split_keys(keys):
    r"""V1 keys ``{uid}_{session_id}_{index}`` → (uid, session, index, ok) arrays; ``ok`` False
    where a key is missing or not of that form.

    The key is read as Python's ``re`` reads ``^(.*)_(\d+)_(\d+)$`` (``.`` no newline, ``\d`` any
    Unicode decimal digit, ``$`` also before a final newline); a number is its ASCII digits (one in
    other digits reads as 0).

    >>> uid, session, index, ok = split_keys(np.array(["a-1_0_0", "a-1_0_1", "b_1_0", "plain"], dtype=object))
    >>> uid.tolist(), session.tolist(), index.tolist(), ok.tolist()
    (['a-1', 'a-1', 'b', ''], [0, 0, 1, 0], [0, 1, 0, 0], [True, True, True, False])
    """
    import pyarrow.compute as pc

    from ..io.arrow_arrays import to_numpy, valid

    parts = pc.extract_regex(_key_text(keys), _KEY_RE2)
    ok = valid(parts)
    uid = to_numpy(pc.struct_field(parts, "uid"))
    uid[~ok] = ""
    session, index = (_key_number(pc.struct_field(parts, name)) for name in ("session", "index"))
    return uid, session, index, ok


#: :data:`KEY_PATTERN` in RE2's words (pyarrow's regex engine), with Python's meaning of ``\d`` and ``$``.
_KEY_RE2 = r"^(?P<uid>.*)_(?P<session>\p{Nd}+)_(?P<index>\p{Nd}+)\n?$"


def _key_text(keys):
    """The keys as a pyarrow string array (a non-text key as Python writes it, ``str(value)``)."""
    import pyarrow as pa

    from ..io.arrow_arrays import text_array

    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if isinstance(keys, pa.Array) and (pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type)):
        return keys
    values = keys.to_pylist() if isinstance(keys, pa.Array) else np.asarray(keys, dtype=object).tolist()
    return text_array([None if v is None else str(v) for v in values])


def _key_number(digits) -> np.ndarray:
    """A key's session or index as int64: 0 where missing or not ASCII digits; beyond 18 digits,
    through float64 as pandas's ``to_numeric(...).fillna(0).to_numpy(np.int64)`` goes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..io.arrow_arrays import from_numpy, to_numpy
    from .columns import text_to_numbers

    short = to_numpy(pc.match_substring_regex(digits, r"^[0-9]{1,18}$"), fill=False)
    out = np.zeros(len(digits), np.int64)
    if short.any():
        out[short] = to_numpy(pc.cast(digits.filter(from_numpy(short)), pa.int64()))
    long = ~short & (to_numpy(pc.utf8_length(digits), fill=0) > 18)
    if long.any():
        with np.errstate(invalid="ignore"):
            out[long] = np.nan_to_num(text_to_numbers(digits.filter(from_numpy(long))), nan=0.0).astype(np.int64)
    return out


_PARSED: dict = {}  # the last table's parsed keys (group_keys and members read the same table)


def _parsed(table):
    """(uid, session, index, ok) of a table's ``uid`` column, or None when it has none."""
    if "uid" not in table.column_names:
        return None
    if _PARSED.get("table") is not table:
        _PARSED.clear()
        _PARSED.update(table=table, keys=split_keys(table.column("uid")))
    return _PARSED["keys"]


#: Why a row of a V1 dump is unusable when its key is malformed, and when it contradicts another.
BAD_KEY = "its V1 key is not {uid}_{session_id}_{index} (its group is unknown)"
CONFLICT = "its V1 key {uid}_{session_id}_{index} is written twice with different scores (a contradiction)"


def is_v1(table) -> bool:
    """A V1 dump: a ``uid`` key on the rows, most of them of the form ``{uid}_{session_id}_{index}``
    (the legacy trainer writes no ``uid``).  A V1 row whose key is malformed (text without the
    two numbers, a JSON null) does not make the file a legacy dump: it is a bad row, and the
    groups of its prompt text at its step, one of which it belonged to, are left out."""
    parsed = _parsed(table)
    return parsed is not None and parsed[3].size > 0 and 2 * int(parsed[3].sum()) > parsed[3].size


def group_keys(table):
    """V1: the group of a row is its key's ``uid`` part (hashed); legacy: None (the prompt text)."""
    if not is_v1(table):
        return None
    from ..io.hashing import hash_text

    uid, _, _, ok = _parsed(table)
    names, codes = np.unique(uid.astype(str), return_inverse=True)  # each uid hashed once
    return hash_text(names.tolist())[codes.ravel()], ok


def group_column(table, column):
    """``--group-column uid`` on a V1 dump names the trainer's own key: its uid part, as by default."""
    return group_keys(table) if column == "uid" else None


def members(table):
    """V1: the rows that enter GRPO's statistics, each session's output with the largest index;
    None for a legacy dump (every row)."""
    if not is_v1(table):
        return None
    from .columns import pair_codes

    uid, session, index, ok = _parsed(table)
    sessions, n = pair_codes(_text_codes(uid), session)
    last = np.full(n, np.iinfo(np.int64).min)
    np.maximum.at(last, sessions, index)
    last = last[sessions]  # per row, the largest index of its (uid, session)
    # A malformed key stays (reported as a bad row); a key written twice is judged by row_keys.
    return (index == last) | ~ok


def row_keys(table):
    """V1: per row an int64 code of its whole key (-1 where malformed), so that a key written twice
    is counted once when its scores agree and named a contradiction when they do not."""
    if not is_v1(table):
        return None
    from .columns import pair_codes

    uid, session, index, ok = _parsed(table)
    sessions, _ = pair_codes(_text_codes(uid), session)
    codes, _ = pair_codes(sessions, index)
    return np.where(ok, _first_seen(codes), -1)


def _text_codes(values) -> np.ndarray:
    """Dense int64 codes of equal texts."""
    return np.unique(np.asarray(values).astype(str), return_inverse=True)[1].ravel().astype(np.int64)


def _first_seen(codes) -> np.ndarray:
    """Codes renumbered in the order of first appearance (as ``factorize`` numbers them)."""
    if not codes.size:
        return codes
    _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    rank = np.empty(first.size, np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse.ravel()]


def describe_groups(context) -> str | None:
    if context.keyed:
        return "rows whose V1 key {uid}_{session_id}_{index} shares the uid, one per session (its final output)"
    return None


def zero_std(values, group, n_groups: int) -> np.ndarray:
    """verl's rule for a group with nothing to learn, per group: two or more scores, all equal in
    float32, the dtype verl holds them in (``rm_scores`` / ``token_level_scores`` and their sums).

    Equality in float32 is what both of verl's tests see: DAPO's filter
    (``v1/replay_buffer.py::_dapo_filtered_keys``, ``np.std`` of the float32 sums == 0) and
    ``compute_grpo_outcome_advantage``, which gives every member of such a group one and the same
    advantage, so no member is pushed against another.  That advantage is 0 when the float32 mean
    of the equal scores is exact (0, 1, 0.25, ...) and otherwise a small constant: (x − mean)/(std
    + 1e-6) with mean and std off by one float32 rounding (0.7 at G = 8: 0.056 for each member).
    A score read as 0.99999999 beside 1.0 is 1.0 to verl: the group is silent.

    >>> zero_std(np.array([1.0, 1.0, 0.0, 1.0, 1.0, 0.99999999]), np.array([0, 0, 1, 1, 2, 2]), 3).tolist()
    [True, False, True]
    """
    from .columns import group_range

    with np.errstate(over="ignore"):  # beyond float32 is inf to verl too
        v32 = np.asarray(values, np.float64).astype(np.float32).astype(np.float64)
    lo, hi = group_range(v32, group, n_groups)
    count = np.bincount(np.asarray(group, np.int64), minlength=n_groups)
    return (count >= 2) & (lo == hi)


def is_validation_folder(folder: Path) -> bool:
    """A dump folder whose name says validation (``validation_data``, ``val_generations``, ...)."""
    name = Path(folder).name.lower()
    return name.startswith("val") or "validation" in name or name.endswith("_val") or name == "eval"


def write_step(folder, step: int, prompts, scores, *, outputs="", extra: dict | None = None) -> Path:
    """Write one step of rollouts as verl's ``{folder}/{step}.jsonl``; returns the path.

    Parameters
    ----------
    folder : path
        The ``rollout_data_dir``.
    step : int
        Training step (verl's ``global_steps``, from 1).
    prompts, scores : array_like, one entry per rollout
        The prompt text and the sequence score.
    outputs : str or array_like
        The answers' text.
    extra : dict of array_like, optional
        Extra reward keys (e.g. ``{"acc": ...}``).
    """
    import pandas as pd

    from ..io.atomic import atomic_path
    from .columns import column

    n = len(prompts)
    data = {
        "input": column(prompts, n, "prompts").astype(str),
        "output": column(outputs, n, "outputs").astype(str),
        "gts": np.full(n, ""),
        "score": column(scores, n, "scores").astype(np.float64),
        "step": np.full(n, int(step), dtype=np.int64),
    }
    for key, values in (extra or {}).items():
        data[key] = column(values, n, key)
    path = Path(folder) / f"{int(step)}.jsonl"
    with atomic_path(path) as tmp:
        pd.DataFrame(data).to_json(tmp, orient="records", lines=True, force_ascii=False, double_precision=15)
    return path
