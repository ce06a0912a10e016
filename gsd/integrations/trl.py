"""TRL's ``GRPOTrainer`` (checked against ``trl`` 1.16.0): its convention, its logs, its quirks.

What it computes
    A_i = (r_i − mean_group) / (std_group + 1e-4) with the sample std (ddof 1) of the group's
    *weighted total* reward r = Σ_f w_f·r_f (``reward_weights``; a function that returned None
    counts as 0).  ``scale_rewards`` = ``"group"`` (default), ``"batch"`` (one std over the
    generation batch) or ``"none"``.  A group whose total has zero std is *silent*: TRL counts it
    in ``frac_reward_zero_std`` (logged in ``trainer_state.json``'s ``log_history``) and trains on
    it with advantage 0.

What it writes (``log_completions=True``)
    At every *logging* step, ``{output_dir}/completions/completions_{global_step:05d}.parquet``
    with columns ``step``, ``prompt`` (text, or a list of ``{role, content}`` messages),
    ``completion``, one column per reward function (unweighted, NaN where it returned None),
    extra columns logged by the reward functions, and ``advantage``.  The rows come from buffers
    that hold the last ``generation_batch_size`` rows and are never cleared, so:

    * rows are in generation order: a group is a block of ``num_generations`` consecutive rows
      (TRL normalises over exactly those rows), even when two blocks hold the same prompt text;
    * with ``num_iterations > 1`` or ``steps_per_generation > 1`` several optimizer steps use one
      generation, and each logging step writes it again under its own step number;
    * with ``logging_steps = L`` only every L-th step is written (the generations in between are
      lost);
    * evaluation completions go into the same buffers and the same file name, without a ``mode``
      column: the file of a step that evaluated holds evaluation rows;
    * the reward weights are not written anywhere in the file.

The reader (:mod:`gsd.diagnose.readers`) undoes what can be undone and says what cannot (see the
docs page "Reading real logs").

Read piece by piece (:mod:`gsd.diagnose.counts`), the whole-run rules of :func:`arrange` become
rules on one file and the file before it (:class:`Arrangement`): a file beyond the final
``global_step`` or of an evaluation step is known by its step before it is read; a repeated
generation by the digest of the previous file kept; ``num_generations`` (when not given) is the
gcd of the files' own gcds, found by a first pass over the prompt column alone.  Rows of one
group are contiguous and in one file (a block), so every per-group rule — incomplete block, rows
kept without a reward, padding, :func:`zero_std`, :func:`check_advantages` (its errors combine by
their max: :func:`advantage_errors`), the step's reward std of ``scale_rewards="batch"`` — is
applied to the file's blocks as the file is read, and the file dropped.

The live hooks (:mod:`gsd.live`: a tracker inside the reward functions, a ``GRPOTrainer``
subclass) build on this module; this module imports neither them nor gsd.diagnose.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import numpy as np

from ..lazy import moved_names
from . import TRUTH_COLUMN
from .columns import chat_label

__all__ = [
    "NAME",
    "DDOF",
    "EPS",
    "SCALES",
    "SOURCE",
    "NOT_REWARD",
    "is_log_file",
    "step_of",
    "infer_group_size",
    "generation_fingerprint",
    "find_trainer_state",
    "read_trainer_state",
    "chat_label",
    "write_step",
    "FILE_DESCRIPTION",
    "total_reward",
    "group_std",
    "zero_std",
    "settled_zero_std",
    "ZERO_STD_ATOL",
    "NUMPY_FUNCTIONS",
    "check_advantages",
    "padding_rows",
    "PADDING_METRIC",
]

NAME = "trl"
DDOF = 1
EPS = 1e-4
SCALES = ("group", "batch", "none")
SOURCE = "TRL 1.16 GRPOTrainer, scale_rewards"

# The docs' table of trainers (python -m gsd.integrations.docs_table --write docs/logs.md).
TITLE = "TRL `GRPOTrainer`"
PACKAGE = "trl"
VERSION = "1.16.0"
FILES = "`{output_dir}/completions/completions_{step:05d}.parquet` (`log_completions=True`), `trainer_state.json`"
GROUP_RULE = "a block of `num_generations` consecutive rows (inferred, or `--group-size`)"
SILENCE = "`torch.isclose(std, 0)` (std ≤ 1e-8) on the float32 weighted sum of the rewards"

#: How the file is named, for messages.
FILE_DESCRIPTION = "TRL's completions_{step:05d}.parquet"

#: Columns of the completions table that are not rewards.
NOT_REWARD = ("step", "prompt", "completion", "advantage", "mode", "image", "images", TRUTH_COLUMN)

_FILE = re.compile(r"completions_(\d+)")

SUFFIXES = (".parquet",)
PROMPT_COL = "prompt"
STEP_COL = "step"
#: Every column is read: a repeated generation is recognised by the digest of the whole table.
READ_ALL_COLUMNS = True
#: A row every reward function returned None for stays in its block (TRL leaves it out of the
#: group's mean and std, and trains it with advantage 0).
UNSCORABLE_IN_GROUP = True
GROUP_COL = False
GROUP_SIZE = True
#: ``reward_weights`` are not in the file: the default reward weighs each column 1.
REWARD_WEIGHTS_UNLOGGED = True
#: ``torch.isclose(std, 0)``'s default tolerance, TRL's test for a zero-std group.
ZERO_STD_ATOL = 1e-8
#: Up to this many reward functions, TRL's float32 ``nansum`` is computed in numpy (torch's CPU
#: kernel adds so few terms in order: the same bits, without importing torch).
NUMPY_FUNCTIONS = 4


def is_log_file(path: Path) -> bool:
    return path.suffix == ".parquet" and _FILE.fullmatch(path.stem) is not None


def step_of(path: Path):
    """The step a ``completions_{step:05d}.parquet`` name carries (None beyond int64: the rows' step)."""
    match = _FILE.fullmatch(path.stem)
    assert match is not None, path  # called on the names is_log_file takes
    digits = match.group(1)
    return int(digits) if len(digits) < 19 else None


def infer_group_size(prompt_runs) -> int:
    """``num_generations`` from the prompt sequences of the files.

    ``prompt_runs``: for each file, its per-row prompt codes in file order.  Each prompt's
    ``num_generations`` rows are consecutive, so every run of equal consecutive prompts is a
    multiple of G (two blocks of one text side by side make a run of 2G); G is the greatest
    common divisor of the run lengths and of the file lengths.

    >>> infer_group_size([np.array([3, 3, 3, 3, 5, 5, 5, 5, 5, 5, 5, 5])])
    4
    """
    g = 0
    for codes in prompt_runs:
        codes = np.asarray(codes)
        if codes.size == 0:
            continue
        starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
        lengths = np.diff(np.r_[starts, codes.size])
        g = math.gcd(g, int(np.gcd.reduce(lengths)), int(codes.size))
    return g


def generation_fingerprint(table) -> str:
    """A digest of every column but ``step`` (pyarrow table): equal for two files that hold the
    same generation written at two steps."""
    import pyarrow as pa

    rest = table.drop_columns([c for c in ("step",) if c in table.column_names])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, rest.schema) as writer:
        writer.write_table(rest)
    return hashlib.sha1(sink.getvalue().to_pybytes()).hexdigest()


def find_trainer_state(folder: Path):
    """``trainer_state.json`` of the run whose ``completions/`` folder (or ``output_dir``) is
    ``folder``: in the output_dir itself, else in its latest ``checkpoint-N/``; None if absent."""
    folder = Path(folder)
    roots = [folder] + ([folder.parent] if folder.name == "completions" else [])
    for root in roots:
        direct = root / "trainer_state.json"
        if direct.is_file():
            return direct
        checkpoints = sorted(
            (p for p in root.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
            key=lambda p: int(p.name.split("-")[-1]),
        )
        for cp in reversed(checkpoints):
            if (cp / "trainer_state.json").is_file():
                return cp / "trainer_state.json"
    return None


def read_trainer_state(path: Path) -> dict:
    """From ``trainer_state.json``: ``eval_steps`` (steps whose log holds evaluation metrics),
    ``zero_std`` ({step: TRL's training ``frac_reward_zero_std``}), ``global_step`` and
    ``skipped`` (entries whose step is not a whole number: a string, null, NaN, 1e400, ...)."""
    from ..errors import InputError

    try:
        state = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a readable TRL trainer_state.json ({type(exc).__name__}: {exc})") from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise InputError(
            f"{path}: not a TRL trainer_state.json (its log_history is "
            f"{type(history).__name__ if history is not None else 'missing'}, not a list)"
        )
    eval_steps, zero_std, skipped, unreadable = set(), {}, 0, 0
    pads = any(isinstance(e, dict) and any(str(k).startswith(PADDING_METRIC) for k in e) for e in history)
    for entry in history:
        if not isinstance(entry, dict) or "step" not in entry:
            continue
        step = _whole(entry["step"])
        if step is None:
            skipped += 1
            continue
        if any(str(k).startswith("eval_") for k in entry):
            eval_steps.add(step)
        value = entry.get("frac_reward_zero_std")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            zero_std[step] = float(value)
        elif value is not None:
            unreadable += 1
    notes = []
    raw = state.get("global_step", 0)
    global_step = _whole(raw)
    if global_step is None or isinstance(raw, str):  # TRL writes an int: a string "2" is not its file
        global_step = None
        notes.append(
            f"{Path(path).name}: global_step is {raw!r} ({type(raw).__name__}), not a whole number: the check "
            "for log files beyond the run's last step is off"
        )
    if unreadable:
        notes.append(
            f"{Path(path).name}: {unreadable} log_history entr(ies) hold a frac_reward_zero_std that is not a "
            "finite number: TRL's own silent share is not compared at those steps"
        )
    return {
        "eval_steps": sorted(eval_steps),
        "zero_std": zero_std,
        "global_step": global_step,
        "skipped": skipped,
        "notes": notes,
        "pads": pads,
    }


#: The metrics of a ``GRPOTrainer`` subclass that pads its groups with rows it did not generate:
#: ``trl-cgrpo`` (0.2.0) draws each prompt's answers in increments, stops early and pads the
#: block to ``num_generations`` with single-EOS completions whose every reward is NaN (so TRL
#: leaves them out of the group's mean and std); it logs ``cgrpo/mean_k`` and
#: ``cgrpo/rollout_savings``.
PADDING_METRIC = "cgrpo/"


def padding_rows(table, parts) -> np.ndarray | None:
    """Rows of a completions table that a padding trainer would have padded in: no reward at all
    (every reward column NaN) and an empty completion (the single EOS token, decoded without
    special tokens).  The reader counts them as padding, not generation, only in a run whose
    ``trainer_state.json`` shows a padding trainer (``pads``: a :data:`PADDING_METRIC` metric);
    elsewhere such a row is an unscorable answer the policy generated.  None without a
    completion column."""
    if "completion" not in table.column_names:
        return None
    import pyarrow.compute as pc

    from ..io.arrow_arrays import to_numpy

    text = table.column("completion")
    try:
        empty = to_numpy(pc.utf8_length(pc.utf8_trim_whitespace(text)), fill=-1) == 0
    except Exception:  # not text (a conversation's list of messages): a padded row has one empty message
        empty = np.array([_empty_completion(v) for v in text.to_pylist()], dtype=bool)
    return empty & np.isnan(np.asarray(parts, np.float64)).all(axis=0)


def _empty_completion(value) -> bool:
    if value is None:
        return False
    if isinstance(value, str):
        return value.strip() == ""
    if isinstance(value, list):
        return all(_empty_completion(m.get("content") if isinstance(m, dict) else m) for m in value)
    return False


def _whole(value):
    """A JSON step as an int, or None when it is not a whole number within int64."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value == int(value)):
        return None
    value = int(value)
    return value if 0 <= value < 2**63 else None


fingerprint = generation_fingerprint


def arrange(chunks, context) -> list:
    """TRL's whole-run rules over the files read, in step order; returns the chunks kept.

    * a file at a step beyond the run's own ``trainer_state.json`` (``global_step``) is a
      left-over of an earlier attempt (a run resumed from an earlier checkpoint, or a shorter
      run written into the same folder): left out;
    * a step that evaluated (``eval_*`` keys in ``log_history``) holds evaluation completions:
      left out;
    * a file that repeats the previous file's generation (``num_iterations`` or
      ``steps_per_generation`` > 1) is counted once, at its first step;
    * a group is a block of ``num_generations`` consecutive rows (given, or inferred from the
      files); files whose own blocks disagree (two runs with different group sizes) are refused.

    ``context``: the reader's :class:`~gsd.integrations.contract.RunContext` (``group_size``,
    ``state`` from :func:`read_trainer_state` or None, ``state_path``, ``state_is_final``: the
    state is the output_dir's own, written at the end, not a checkpoint's, and ``warnings``);
    this function sets ``group_size``, ``repeated_steps``, ``eval_steps``, ``trainer_silent``
    and ``excluded_steps``.
    """
    arrangement = Arrangement(context)
    if context.group_size is None:
        for ch in chunks:
            if arrangement.fate(ch.file_step) is None:
                arrangement.survey_prompts(ch.hashes[ch.prompt_ok])
    kept = [ch for ch in chunks if arrangement.take(ch)]
    arrangement.close()
    return kept


class Arrangement:
    """:func:`arrange`'s rules one chunk at a time, in file order: what a reader that never holds
    the whole run needs (:mod:`gsd.diagnose.counts`), and what :func:`arrange` itself runs.

    Each rule is a function of the file alone or of the file before it, except the group size:

    * beyond the final ``global_step`` and evaluation steps: the file's step and the state
      (:meth:`fate`, known before the file is read);
    * a repeated generation: the previous kept file's fingerprint (one digest held);
    * ``num_generations`` when not given: the greatest common divisor of the runs of one prompt,
      which is the gcd of each file's own gcd, so a first pass over the prompt column only
      (:meth:`survey_prompts`, one file's prompts at a time) leaves one integer per file;
    * the blocks: a file's rows keyed by their block of G, numbered by the file's place among the
      files kept (:meth:`take`).  A block never spans two files (TRL writes one generation per
      file), so every rule on a group — incomplete, silent, its advantages — is one file's.

    :meth:`close` adds the warnings in :func:`arrange`'s order and fills the context.
    """

    #: Columns the first pass reads beside the prompt: ``mode`` marks evaluation rows (:func:`prepare`).
    SURVEY_COLUMNS = ("mode",)

    def __init__(self, context):
        self.context = context
        state = context.state
        self.last = state["global_step"] if state is not None and context.state_is_final else None
        self.beyond: list = []
        self.repeated: list = []
        self.eval_steps: list = []
        self.previous = None  # the fingerprint of the last file kept
        self.sizes: set = set()
        self.per_file: list = []  # survey: each file's own num_generations (0: no prompt)
        self.notes: list = []  # the blocks' warnings, said after the run's
        self.kept = 0
        self.G = context.group_size
        self.errors: dict | None = None  # the advantages' errors so far (check), None: none checked
        self.checked = 0  # groups checked
        self.logged = False  # an advantage that is not 0
        self.unlogged = False  # a file without advantages: no check (as the whole-log reader)
        self.disagree = 0  # groups silent by the rewards and not by the advantages, or the reverse

    def fate(self, step) -> str | None:
        """``"beyond"`` (a left-over beyond the final state), ``"eval"`` (an evaluation step) or
        None (read) for a file of ``step``."""
        if self.last is not None and step > self.last:
            return "beyond"
        state = self.context.state
        if state is not None and step in state["eval_steps"]:
            return "eval"
        return None

    def survey_prompts(self, hashes) -> None:
        """The first pass: one file's prompt hashes (rows with a prompt), in file order."""
        self.per_file.append(infer_group_size([hashes]))

    def take(self, ch) -> bool:
        """Whether a chunk (one file's rows) is kept; a kept one is keyed by its blocks in place."""
        fate = self.fate(ch.file_step)
        if fate is not None:
            (self.beyond if fate == "beyond" else self.eval_steps).append(ch.file_step)
            return False
        if ch.fingerprint is not None and ch.fingerprint == self.previous:
            self.repeated.append(ch.file_step)
            return False
        self.previous = ch.fingerprint
        self.sizes.add(ch.hashes.size)
        if self.G is None:
            self.G = group_size_of(self.per_file)
        key_blocks(ch, self.kept, self.G, self.notes)
        self.kept += 1
        return True

    def check(self, reward, advantage, group, n_groups: int, silent) -> None:
        """The advantages of one kept file's kept groups (``group``: dense codes; ``silent``: TRL's
        verdict per group), checked as :func:`check_advantages` checks a whole run; None: the file
        has none, and the run is not checked."""
        if advantage is None:
            self.unlogged = True
            return
        errors = advantage_errors(reward, advantage, group, n_groups, np.zeros(group.size, np.int64))
        self.errors = errors if self.errors is None else {k: max(v, errors[k]) for k, v in self.errors.items()}
        self.checked += n_groups
        amax = np.zeros(n_groups)
        np.maximum.at(amax, group, np.abs(np.nan_to_num(advantage, nan=0.0)))
        self.logged |= bool(np.any(amax > 0))
        self.disagree += int((silent != (amax <= 1e-3)).sum())

    def advantage_check(self) -> tuple[dict | None, int]:
        """(the run's :func:`check_advantages` from the files checked, None when not checked or no
        advantage is logged; the groups whose verdicts disagree)."""
        if self.unlogged or self.errors is None or not self.logged:
            return None, 0
        return scale_of(self.errors, self.checked), self.disagree

    def close(self) -> None:
        """The run's warnings, in :func:`arrange`'s order, and the context's fields."""
        context, warnings = self.context, self.context.warnings
        if self.G is None:  # no file kept: the refusal arrange gives
            self.G = group_size_of(self.per_file)
        if self.beyond:
            warnings.append(
                f"steps {_span(self.beyond)} are beyond the run's trainer_state.json (global_step {self.last}): "
                "left-overs of an earlier attempt (resumed from an earlier checkpoint, or another run "
                "in the same folder), left out"
            )
        if self.eval_steps:
            warnings.append(
                f"steps {_span(self.eval_steps)} evaluated ({Path(context.state_path).name}): their files hold "
                "evaluation completions (TRL writes them under the training file name) and are left out"
            )
        if self.repeated:
            warnings.append(
                f"{len(self.repeated)} file(s) repeat the previous step's generation (num_iterations or "
                f"steps_per_generation > 1): counted once, at their first step; repeated steps {_span(self.repeated)}"
            )
        if context.state is None and len(self.sizes) > 1:
            warnings.append(
                f"the files hold different numbers of rows ({', '.join(map(str, sorted(self.sizes)))}): TRL writes "
                "evaluation completions under the training file name; give the run's output_dir with its "
                "trainer_state.json to leave the evaluation steps out"
            )
        warnings.extend(self.notes)
        context.group_size, context.repeated_steps, context.eval_steps = self.G, self.repeated, self.eval_steps
        context.excluded_steps = self.beyond
        context.trainer_silent = context.state["zero_std"] if context.state is not None else {}


stream_arrange = Arrangement


def group_size_of(per_file) -> int:
    """``num_generations`` from each file's own (:func:`infer_group_size` of one file; 0 for a
    file without prompts): their gcd; refused below 2 or when the files' own blocks disagree."""
    from ..errors import InputError

    G = 0
    for g in per_file:
        G = math.gcd(G, int(g))
    if G < 2:
        raise InputError(
            "TRL log: cannot infer num_generations from the files (consecutive rows of one prompt "
            f"come in runs whose greatest common divisor is {G}); pass --group-size G"
        )
    distinct = sorted({g for g in per_file if g})
    if len(distinct) > 1:  # a file of one run with every block doubled is the only other cause
        raise InputError(
            f"TRL log: the files' blocks disagree (groups of {', '.join(map(str, distinct))} rows): "
            "files of two runs with different num_generations in one folder? Name the files of "
            "one run, or pass --group-size G"
        )
    return G


def key_blocks(ch, index: int, G: int, warnings: list) -> None:
    """Key a file's rows by their block of ``G`` (``gkey`` = index << 32 + block, ``index`` the
    file's place among those kept; ``gkey_ok`` false in a block cut short, with a warning);
    refused where a block does not hold one prompt."""
    from ..errors import InputError

    n = ch.hashes.size
    block = np.arange(n) // G
    if n % G:
        warnings.append(
            f"{ch.file.name}: {n} rows is not a multiple of the group size {G}; its last "
            f"{n % G} row(s) form an incomplete group"
        )
    first = ch.hashes[block * G]
    wrong = ch.prompt_ok & (ch.hashes != first)
    if wrong.any():
        at = int(np.flatnonzero(wrong)[0])
        raise InputError(
            f"{ch.file}: rows {at // G * G + 1}-{at // G * G + G} do not hold one prompt, so groups "
            f"are not blocks of {G} rows; pass the run's num_generations with --group-size"
        )
    ch.gkey = (np.int64(index) << 32) + block
    ch.gkey_ok = np.ones(n, bool)
    if n % G:
        ch.gkey_ok[n - n % G :] = False  # a block cut short: its group is incomplete


def describe_groups(context) -> str:
    return (
        f"blocks of {context.group_size} consecutive rows of one generation (num_generations, "
        f"{'given' if context.group_size_given else 'inferred from the files'})"
    )


def _span(steps) -> str:
    steps = list(steps)
    return ", ".join(map(str, steps[:10])) + (f" ... ({len(steps)} in all)" if len(steps) > 10 else "")


def find_state(roots):
    """The run's ``trainer_state.json`` beside its ``completions/`` folders (see :func:`find_trainer_state`)."""
    for root in roots:
        state = find_trainer_state(root) or find_trainer_state(Path(root).parent)
        if state is not None:
            return state
    return None


read_state = read_trainer_state


def default_reward(columns, numeric) -> list:
    """TRL normalises the sum of its reward columns (weights are not logged: 1 each)."""
    from ..errors import InputError

    cands = [c for c in columns if c not in NOT_REWARD and c in numeric]
    if not cands:
        raise InputError(
            f"no reward column (numeric columns other than step and advantage); columns: {', '.join(columns)}"
        )
    return [(1.0, c) for c in cands]


def prepare(table, lines):
    """Keep the training rows of a table from a TRL version that marks evaluation rows (``mode``)."""
    if "mode" not in table.column_names:
        return table, lines
    import pyarrow.compute as pc

    from ..io.arrow_arrays import from_numpy, text_array, to_numpy

    train = to_numpy(pc.equal(table.column("mode"), text_array(["train"])[0]), fill=False)
    lines = (np.arange(1, table.num_rows + 1) if lines is None else lines)[train]
    return table.filter(from_numpy(train)).drop_columns(["mode"]), lines


def total_reward(parts, coefs, device=None) -> np.ndarray:
    """The reward TRL normalises, in TRL's arithmetic (``GRPOTrainer``, ``trl`` 1.16.0): each
    function's reward cast to float32 (None → NaN, beyond float32 → inf), multiplied by its float32
    weight and summed over the functions with ``nansum`` in float32 (a NaN product adds nothing);
    NaN where every function returned None (unscorable).

    In numpy, the functions summed in order, for up to :data:`NUMPY_FUNCTIONS` reward functions
    with no ``device`` given: bit for bit torch's CPU kernel (a reduction over so few terms adds
    them in order; tested against TRL's own expression).  With more functions, or a ``device``
    (reductions round differently on other devices), torch's own operations when torch is
    installed, else numpy.  Returned as float64 holding float32 values.

    >>> total_reward(np.array([[0.1], [0.2]]), np.array([1.0, 1.0])) == np.float32(0.3)
    array([ True])
    """
    from ..errors import InputError

    p = np.asarray(parts, dtype=np.float64)
    w64 = np.asarray(coefs, dtype=np.float64)
    if p.ndim != 2 or w64.ndim != 1 or w64.size != p.shape[0]:
        raise InputError(
            f"weights: {w64.size} weight(s) for {p.shape[0] if p.ndim == 2 else '?'} reward function(s) "
            f"(parts of shape {p.shape}: one row per reward function, one weight each)"
        )
    with np.errstate(over="ignore", invalid="ignore"):
        p32 = p.astype(np.float32)
        w = w64.astype(np.float32)
    torch = _torch() if device is not None or p.shape[0] > NUMPY_FUNCTIONS else None
    if torch is not None:
        per_func = torch.as_tensor(p32.T.copy(), device=device)
        total = (per_func * torch.as_tensor(w, device=device).unsqueeze(0)).nansum(dim=1)
        total[torch.isnan(per_func).all(dim=1)] = torch.nan
        return total.cpu().numpy().astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        total = np.zeros(p.shape[1], np.float32)
        for term in p32 * w.reshape(-1, 1):
            total = (total + np.where(np.isnan(term), np.float32(0), term)).astype(np.float32)
    total = total.astype(np.float64)
    total[np.isnan(p32).all(axis=0)] = np.nan
    return total


def group_std(total, group_size: int, device=None):
    """TRL's per-group std of the total and its zero-std test, groups as consecutive blocks of
    ``group_size`` rows: (std, zero), one per group.

    std is TRL's ``nanstd`` (``trl.trainer.utils``): in float32, the mean of the scorable rewards,
    the mean squared deviation times n/(n − 1), its square root; NaN with fewer than two scorable
    rewards or an infinite one.  zero is ``torch.isclose(std, 0)`` with torch's default tolerances
    (``|std| <= 1e-8``; NaN is not close), what TRL counts in ``frac_reward_zero_std``.

    With torch installed, torch's own operations on ``device`` (exact where the run computed on
    that kind of device); without it, numpy summing each group in row order, which agrees with
    torch's CPU kernel for groups of 2 to 12 rows (for larger groups torch sums in vector lanes, and
    a group of identical graded rewards whose float32 mean is inexact can then differ).

    >>> group_std(np.array([0.0, 1e-8, 1.0, 1.0, np.nan, 0.5]), 2)[1].tolist()
    [True, True, False]
    """
    G = int(group_size)
    x32 = np.asarray(total, np.float64).astype(np.float32).reshape(-1, G)
    torch = _torch()
    if torch is not None:
        x = torch.as_tensor(x32, device=device)
        mean = torch.nanmean(x, dim=1, keepdim=True)
        variance = torch.nanmean((x - mean) ** 2, dim=1, keepdim=True)
        count = torch.sum(~torch.isnan(x), dim=1, keepdim=True)
        correction = count / (count - 1)
        correction = torch.where(count > 1, correction, torch.full_like(correction, float("nan")))
        std = torch.sqrt(variance * correction).squeeze(1)
        zero = torch.isclose(std, torch.zeros_like(std))
        return std.cpu().numpy().astype(np.float64), zero.cpu().numpy()
    ok = ~np.isnan(x32)
    count = ok.sum(axis=1).astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        mean = _row_sums(np.where(ok, x32, np.float32(0))) / count
        dev = (x32 - mean[:, None]) ** 2
        var = _row_sums(np.where(ok, dev, np.float32(0))) / count
        corr = np.where(count > 1, count / (count - 1), np.float32(np.nan)).astype(np.float32)
        std = np.sqrt((var * corr).astype(np.float32))
    return std.astype(np.float64), np.abs(std) <= ZERO_STD_ATOL


def zero_std(values, group, n_groups: int) -> np.ndarray:
    """TRL's zero-std verdict per group (:func:`group_std`), for the log reader: ``group`` the
    dense group code of each row, the rows of a group in generation order; every group a block of
    one size (TRL's ``num_generations``).

    Decided in numpy where no order of float32 additions can change it (:func:`settled_zero_std`:
    every right/wrong group is); the other groups go through :func:`group_std` (torch's own
    operations when installed).

    >>> zero_std(np.array([0.0, 1e-8, 1.0, 1.0, np.nan, 0.5]), np.array([0, 0, 1, 1, 2, 2]), 3).tolist()
    [True, True, False]
    """
    group = np.asarray(group, dtype=np.int64)
    sizes = np.bincount(group, minlength=n_groups)
    if n_groups == 0:
        return np.zeros(0, bool)
    if sizes.min() != sizes.max():
        from ..errors import InputError

        raise InputError(f"TRL groups are blocks of one size; got groups of {sizes.min()} to {sizes.max()} rows")
    order = np.argsort(group, kind="stable")
    G = int(sizes[0])
    x = np.asarray(values, np.float64)[order].reshape(-1, G)
    verdict, settled = settled_zero_std(x)
    if not settled.all():
        verdict[~settled] = group_std(x[~settled].ravel(), G)[1]
    return verdict


#: Sum of significand bits and group size below which c·x is exact in float32 (24-bit significand).
_FLOAT32_SIGNIFICAND = 2**24


def settled_zero_std(groups):
    """TRL's zero-std verdict, ``torch.isclose(nanstd(group), 0)`` in float32, for the groups
    (rows of ``groups``) where it does not depend on the order in which float32 additions are
    made; returns (verdict, settled).  Each group's values are cast to float32, as TRL casts them:

    * fewer than two values that are not NaN, or an infinite one: nanstd is NaN or inf, not
      close to 0 — settled False;
    * c ≥ 2 equal values x whose multiples j·x (j ≤ c) are all exact in float32 (|m|·c ≤ 2^24
      for x = m·2^e, m odd; 0 and 1 always): every partial sum is exact in any order, the mean is
      x, every deviation 0 — settled True;
    * values spread by d = max − min: Σ(x − t)² ≥ d²/2 about any t (the rounded mean included),
      and the float32 subtraction, squares, sum, n/(n − 1) and square root each err by a relative
      c·2^-24 at most, so nanstd ≥ d/sqrt(2(c − 1))·(1 − (c + 6)·2^-24); above twice torch's
      ``atol`` 1e-8 — settled False (sums beyond float32's range only raise it to inf);
    * anything else (equal values whose sum rounds, as 0.7 does; spreads near 1e-8) is not settled.

    >>> settled_zero_std(np.array([[1.0, 1.0], [0.0, 1.0], [0.7, 0.7], [np.nan, 1.0]]))
    (array([ True, False, False, False]), array([ True,  True, False,  True]))
    """
    with np.errstate(over="ignore", invalid="ignore"):
        x = np.asarray(groups, np.float64).astype(np.float32).astype(np.float64)
    ok = ~np.isnan(x)
    c = ok.sum(axis=1)
    inf = np.isinf(x).any(axis=1)
    with np.errstate(invalid="ignore"):
        hi = np.where(ok, x, -np.inf).max(axis=1)
        lo = np.where(ok, x, np.inf).min(axis=1)
    few = (c < 2) | inf
    equal = ~few & (hi == lo)
    # Odd significand of each group's value: |x| = m·2^e with m odd (frexp gives a 24-bit integer).
    mant, _ = np.frexp(np.where(equal, hi, 0.0))
    m = np.abs(mant) * _FLOAT32_SIGNIFICAND
    m = np.where(m == 0, 0, m.astype(np.int64) >> np.minimum(_trailing_zeros(m.astype(np.int64)), 62))
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        exact = equal & (m * c <= _FLOAT32_SIGNIFICAND) & (np.abs(hi) * c < 1e38)
        bound = (hi - lo) / np.sqrt(2.0 * np.maximum(c - 1, 1)) * (1.0 - (c + 6) / _FLOAT32_SIGNIFICAND)
    spread = ~few & ~equal & (bound > 2 * ZERO_STD_ATOL)
    return exact.copy(), few | exact | spread


def _trailing_zeros(m):
    """Number of trailing zero bits of each positive int64 (0 for 0)."""
    low = m & -m  # the lowest set bit
    return np.where(m > 0, np.log2(np.maximum(low, 1)).round().astype(np.int64), 0)


def _row_sums(x):
    """Row sums in float32, each row summed left to right."""
    out = np.zeros(x.shape[0], np.float32)
    for j in range(x.shape[1]):  # G passes over the groups: one add per group per pass, in order
        out = (out + x[:, j]).astype(np.float32)
    return out


def _torch():
    """torch when it can be imported (TRL's own arithmetic), else None: a log is read without it."""
    if not _TORCH:
        try:
            import torch
        except ImportError:
            torch = None
        _TORCH.append(torch)
    return _TORCH[0]


_TORCH: list = []


def check_advantages(reward, advantage, group, n_groups: int, batch) -> dict:
    """The scaling the logged advantages show: ``"group"`` (A = (r − mean)/(std_group + 1e-4)),
    ``"batch"`` (one std over the generation: ``batch`` is each row's generation code) or
    ``"none"`` (A = r − mean), each evaluated in float32 from the rewards; ``None`` when none fits
    (other reward weights, another ``multi_objective_aggregation``).

    Returns ``{"scale": ..., "groups_checked": n, "max_error": e}`` (:func:`scale_of` of
    :func:`advantage_errors`).
    """
    return scale_of(advantage_errors(reward, advantage, group, n_groups, batch), n_groups)


def advantage_errors(reward, advantage, group, n_groups: int, batch) -> dict:
    """Per scaling (``"group"``, ``"batch"``, ``"none"``), the largest relative error of the logged
    advantages against it, max |A_pred − A| / (1e-3 + |A|) over the rows (0 without rows): a max,
    so the errors of disjoint generations combine by their max."""
    r = np.asarray(reward, np.float64).astype(np.float32)
    a = np.nan_to_num(np.asarray(advantage, np.float64), nan=0.0)
    group = np.asarray(group, np.int64)
    ok = ~np.isnan(r)
    count = np.bincount(group, weights=ok, minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        mean = (np.bincount(group, weights=np.where(ok, r, 0.0), minlength=n_groups) / count).astype(np.float32)
        centred = np.where(ok, r - mean[group], 0.0).astype(np.float64)
        gstd = _nanstd64(r, group, n_groups)
        b = np.asarray(batch, np.int64)
        bstd = _nanstd64(r, b, int(b.max()) + 1 if b.size else 0)
        fits = {"group": centred / (gstd[group] + EPS), "batch": centred / (bstd[b] + EPS), "none": centred}
    # TRL computes in float32: its advantages carry relative errors of ~1e-6 and, on a silent
    # group of graded rewards, rounding up to ~1e-3 (divided by std + 1e-4).
    errors = {}
    for name, pred in fits.items():
        err = np.abs(np.nan_to_num(pred, nan=0.0) - a)
        errors[name] = float(np.max(err / (1e-3 + np.abs(a)))) if err.size else 0.0
    return errors


def scale_of(errors: dict, groups_checked: int) -> dict:
    """The scaling whose error (:func:`advantage_errors`) is least, if it is within 1e-2."""
    best = min(errors, key=errors.__getitem__)
    return {
        "scale": best if errors[best] <= 1e-2 else None,
        "groups_checked": int(groups_checked),
        "max_error": errors[best],
    }


def trainer_silent_note(check) -> str | None:
    """What TRL's logged ``frac_reward_zero_std`` means under the scaling the advantages show."""
    if check and check.get("scale") == "batch":
        return (
            "scale_rewards='batch': TRL's frac_reward_zero_std then tests the std of the whole generation, "
            "not each group's, so it is not the silent fraction of the groups (a silent group still has "
            "advantage 0)"
        )
    return None


def _nanstd64(r, group, n):
    ok = ~np.isnan(r)
    x = np.where(ok, r, 0.0).astype(np.float64)
    c = np.bincount(group, weights=ok, minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.bincount(group, weights=x, minlength=n) / c
        ss = np.bincount(group, weights=np.where(ok, (x - m[group]) ** 2, 0.0), minlength=n)
        return np.sqrt(ss / (c - 1))


def write_step(folder, step: int, prompts, rewards: dict, *, completions="", advantages=None, extra=None) -> Path:
    """Write one generation as TRL's ``{folder}/completions/completions_{step:05d}.parquet``.

    Parameters
    ----------
    folder : path
        TRL's ``output_dir``.
    step : int
        ``state.global_step`` of the logging step.
    prompts : array_like of str, one per rollout, in generation order (groups as consecutive blocks)
    rewards : dict
        One column per reward function, named after it (unweighted, as TRL logs them).
    completions : str or array_like
    advantages : array_like, optional
        The advantages the trainer used (zeros if omitted).
    extra : dict of array_like, optional
        Extra logged columns (placed between the rewards and ``advantage``, as TRL does).
    """
    import pandas as pd

    from ..io.atomic import atomic_path
    from .columns import column

    n = len(prompts)
    data = {
        "step": np.full(n, int(step), dtype=np.int64),
        "prompt": column(prompts, n, "prompts").astype(str),
        "completion": column(completions, n, "completions").astype(str),
    }
    for name, values in rewards.items():
        data[name] = column(values, n, name).astype(np.float64)
    for name, values in (extra or {}).items():
        data[name] = column(values, n, name)
    data["advantage"] = np.zeros(n) if advantages is None else column(advantages, n, "advantages").astype(np.float64)
    path = Path(folder) / "completions" / f"completions_{int(step):05d}.parquet"
    with atomic_path(path) as tmp:
        pd.DataFrame(data).to_parquet(tmp, index=False)
    return path


#: Names this module held until the live hooks moved out (gsd 0.1.0): each still imports from
#: here, with a DeprecationWarning naming where it lives now (old name → module, name there).
_MOVED = {
    "GroupTracker": ("gsd.live", "GroupTracker"),
    "GSDGRPOTrainer": ("gsd.live", "GSDGRPOTrainer"),
    "SkipSampler": ("gsd.live", "SkipSampler"),
    "LIVE_METRICS": ("gsd.live", "LIVE_METRICS"),
    "TRACKER_TABLE": ("gsd.integrations.tracker_table", "KEY"),
    "tracker_table": ("gsd.integrations.tracker_table", "read_description"),
}

__getattr__ = moved_names(__name__, _MOVED)
