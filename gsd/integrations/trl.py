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

Inside a live run (the docs page "gsd in a TRL run")
    TRL calls each reward function once per generation with the rows in group order (each
    prompt's ``num_generations`` completions consecutive) and every dataset column as a keyword
    argument, so :class:`GroupTracker` wraps the reward functions and sees every group exactly
    once, whatever ``num_iterations``, ``steps_per_generation`` or ``logging_steps``.
    :class:`GSDGRPOTrainer` (a ``GRPOTrainer`` subclass, built when first used so that this
    module never imports TRL by itself) puts gsd's figures into TRL's own metrics and can skip,
    before generation, prompts whose next group is almost surely silent.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import numpy as np

from . import TRUTH_COLUMN
from ._columns import chat_label

__all__ = ["GroupTracker", "GSDGRPOTrainer", "SkipSampler",  # noqa: F822 (GSDGRPOTrainer: built on first use) "LIVE_METRICS", "TRACKER_TABLE", "tracker_table",
           "NAME", "DDOF", "EPS", "SCALES", "SOURCE", "NOT_REWARD", "is_log_file", "step_of", "infer_group_size",
           "generation_fingerprint", "find_trainer_state", "read_trainer_state", "chat_label", "write_step",
           "FILE_DESCRIPTION", "total_reward", "zero_std", "ZERO_STD_ATOL", "check_advantages"]

NAME = "trl"
DDOF = 1
EPS = 1e-4
SCALES = ("group", "batch", "none")
SOURCE = "TRL 1.16 GRPOTrainer, scale_rewards"

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


def is_log_file(path: Path) -> bool:
    return path.suffix == ".parquet" and _FILE.fullmatch(path.stem) is not None


def step_of(path: Path) -> int:
    return int(_FILE.fullmatch(path.stem).group(1))


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
        checkpoints = sorted((p for p in root.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
                             key=lambda p: int(p.name.split("-")[-1]))
        for cp in reversed(checkpoints):
            if (cp / "trainer_state.json").is_file():
                return cp / "trainer_state.json"
    return None


def read_trainer_state(path: Path) -> dict:
    """From ``trainer_state.json``: ``eval_steps`` (steps whose log holds evaluation metrics),
    ``zero_std`` ({step: TRL's training ``frac_reward_zero_std``}), ``global_step`` and
    ``skipped`` (entries whose step is not a whole number: a string, null, NaN, 1e400, ...)."""
    from .._errors import InputError

    try:
        state = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a readable TRL trainer_state.json ({type(exc).__name__}: {exc})") from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise InputError(f"{path}: not a TRL trainer_state.json (its log_history is "
                         f"{type(history).__name__ if history is not None else 'missing'}, not a list)")
    eval_steps, zero_std, skipped = set(), {}, 0
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
    global_step = _whole(state.get("global_step", 0))
    return {"eval_steps": sorted(eval_steps), "zero_std": zero_std, "global_step": global_step, "skipped": skipped}


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

    ``context``: a dict with ``group_size``, ``state`` (:func:`read_trainer_state` or None),
    ``state_path``, ``state_is_final`` (the state is the output_dir's own, written at the end,
    not a checkpoint's) and ``warnings``; this function adds ``group_size``,
    ``repeated_steps``, ``eval_steps``, ``trainer_silent`` and ``excluded_steps``.
    """
    from .._errors import InputError

    warnings = context["warnings"]
    state = context.get("state")
    last = state["global_step"] if state is not None and context.get("state_is_final") else None
    beyond = [ch.file_step for ch in chunks if last is not None and ch.file_step > last]
    if beyond:
        warnings.append(f"steps {_span(beyond)} are beyond the run's trainer_state.json (global_step {last}): "
                        "left-overs of an earlier attempt (resumed from an earlier checkpoint, or another run "
                        "in the same folder), left out")
        chunks = [ch for ch in chunks if ch.file_step <= last]
    repeated, eval_steps = [], []
    kept, previous = [], None
    for ch in chunks:
        if state is not None and ch.file_step in state["eval_steps"]:
            eval_steps.append(ch.file_step)
            continue
        if ch.fingerprint is not None and ch.fingerprint == previous:
            repeated.append(ch.file_step)
            continue
        previous = ch.fingerprint
        kept.append(ch)
    if eval_steps:
        warnings.append(f"steps {_span(eval_steps)} evaluated ({Path(context['state_path']).name}): their files hold "
                        "evaluation completions (TRL writes them under the training file name) and are left out")
    if repeated:
        warnings.append(f"{len(repeated)} file(s) repeat the previous step's generation (num_iterations or "
                        f"steps_per_generation > 1): counted once, at their first step; repeated steps {_span(repeated)}")
    if state is None:
        sizes = {ch.hashes.size for ch in kept}
        if len(sizes) > 1:
            warnings.append(f"the files hold different numbers of rows ({', '.join(map(str, sorted(sizes)))}): TRL writes "
                            "evaluation completions under the training file name; give the run's output_dir with its "
                            "trainer_state.json to leave the evaluation steps out")
    G = context.get("group_size")
    if G is None:
        per_file = [infer_group_size([ch.hashes[ch.prompt_ok]]) for ch in kept]
        G = infer_group_size(ch.hashes[ch.prompt_ok] for ch in kept)
        if G < 2:
            raise InputError("TRL log: cannot infer num_generations from the files (consecutive rows of one prompt "
                             f"come in runs whose greatest common divisor is {G}); pass --group-size G")
        distinct = sorted({g for g in per_file if g})
        if len(distinct) > 1:  # a file of one run with every block doubled is the only other cause
            raise InputError(f"TRL log: the files' blocks disagree (groups of {', '.join(map(str, distinct))} rows): "
                             "files of two runs with different num_generations in one folder? Name the files of "
                             "one run, or pass --group-size G")
    for index, ch in enumerate(kept):
        n = ch.hashes.size
        block = np.arange(n) // G
        if n % G:
            warnings.append(f"{ch.file.name}: {n} rows is not a multiple of the group size {G}; its last "
                            f"{n % G} row(s) form an incomplete group")
        first = ch.hashes[block * G]
        wrong = ch.prompt_ok & (ch.hashes != first)
        if wrong.any():
            at = int(np.flatnonzero(wrong)[0])
            raise InputError(f"{ch.file}: rows {at // G * G + 1}-{at // G * G + G} do not hold one prompt, so groups "
                             f"are not blocks of {G} rows; pass the run's num_generations with --group-size")
        ch.gkey = (np.int64(index) << 32) + block
        ch.gkey_ok = np.ones(n, bool)
        if n % G:
            ch.gkey_ok[n - n % G:] = False  # a block cut short: its group is incomplete
    context.update(group_size=G, repeated_steps=repeated, eval_steps=eval_steps, excluded_steps=beyond,
                   trainer_silent=state["zero_std"] if state is not None else {})
    return kept


def describe_groups(context) -> str:
    return (f"blocks of {context['group_size']} consecutive rows of one generation (num_generations, "
            f"{'given' if context.get('group_size_given') else 'inferred from the files'})")


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
    from .._errors import InputError

    cands = [c for c in columns if c not in NOT_REWARD and c in numeric]
    if not cands:
        raise InputError(f"no reward column (numeric columns other than step and advantage); columns: {', '.join(columns)}")
    return [(1.0, c) for c in cands]


def prepare(table, lines):
    """Keep the training rows of a table from a TRL version that marks evaluation rows (``mode``)."""
    if "mode" not in table.column_names:
        return table, lines
    import pyarrow as pa
    import pyarrow.compute as pc

    train = np.asarray(pc.fill_null(pc.equal(table.column("mode"), "train"), False).to_numpy(zero_copy_only=False),
                       dtype=bool)
    lines = (np.arange(1, table.num_rows + 1) if lines is None else lines)[train]
    return table.filter(pa.array(train)).drop_columns(["mode"]), lines



def total_reward(parts, coefs) -> np.ndarray:
    """The reward TRL normalises, in TRL's arithmetic: each function's reward cast to float32
    (``torch.float32``, None → NaN), multiplied by its float32 weight and summed in float32 with
    NaN counted as 0 (``nansum``); a row where every function returned None stays NaN
    (unscorable).  Returned as float64 holding float32 values.

    >>> total_reward(np.array([[0.1], [0.2]]), np.array([1.0, 1.0])) == np.float32(0.3)
    array([ True])
    """
    p = np.asarray(parts, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        p32 = p.astype(np.float32)
        w = np.asarray(coefs, dtype=np.float64).astype(np.float32).reshape(-1, 1)
        terms = p32 * w
        total = np.zeros(p.shape[1], np.float32)
        for term in terms:  # one pass per reward function, in order, as TRL's nansum over dim 1
            total = (total + np.where(np.isnan(term), np.float32(0), term)).astype(np.float32)
    total = total.astype(np.float64)
    total[np.isnan(p32).all(axis=0)] = np.nan
    return total


def zero_std(values, group, n_groups: int) -> np.ndarray:
    """TRL's test for a zero-std group, per group: ``torch.isclose(nanstd(r), 0)`` (atol 1e-8)
    with TRL's ``nanstd`` in float32 — the mean of the scorable rewards, the mean squared
    deviation times n/(n − 1), its square root; NaN (no std: fewer than two scorable rewards,
    or an infinite reward) is not close to 0.

    ``values``: the rewards as :func:`total_reward` returns them (NaN unscorable); ``group``: the
    dense group code of each row, rows of a group in their generation order.  Sums run in float32
    in row order, as torch's CPU kernel does for the group sizes tested (2 to 12); for larger
    groups torch sums in vector lanes and its last bit can differ, which matters only for a
    group of identical graded rewards whose float32 mean is inexact.

    >>> zero_std(np.array([0.0, 1e-8, 1.0, 1.0, np.nan, 0.5]), np.array([0, 0, 1, 1, 2, 2]), 3).tolist()
    [True, True, False]
    """
    v = np.asarray(values, dtype=np.float64).astype(np.float32)
    group = np.asarray(group, dtype=np.int64)
    order = np.argsort(group, kind="stable")
    g = group[order]
    x = v[order]
    ok = ~np.isnan(x)
    count = np.bincount(g, weights=ok, minlength=n_groups).astype(np.float32)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        mean = _f32_group_sums(np.where(ok, x, np.float32(0)), g, n_groups) / count
        dev = (x - mean[g]) ** 2
        var = _f32_group_sums(np.where(ok, dev, np.float32(0)), g, n_groups) / count
        corr = np.where(count > 1, count / (count - 1), np.float32(np.nan)).astype(np.float32)
        std = np.sqrt((var * corr).astype(np.float32))
    return np.abs(std) <= ZERO_STD_ATOL


def _f32_group_sums(x, g, n_groups):
    """Per-group sums in float32, each group summed in row order (rows sorted by group)."""
    out = np.zeros(n_groups, np.float32)
    if x.size == 0:
        return out
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    pos = np.arange(x.size) - np.repeat(starts, np.diff(np.r_[starts, x.size]))
    for j in range(int(pos.max()) + 1):  # one pass per position within the group (G passes)
        at = pos == j
        np.add.at(out, g[at], x[at])  # float32 adds: one row per group per pass, in order
    return out


def check_advantages(reward, advantage, group, n_groups: int, batch) -> dict:
    """The scaling the logged advantages show: ``"group"`` (A = (r − mean)/(std_group + 1e-4)),
    ``"batch"`` (one std over the generation: ``batch`` is each row's generation code) or
    ``"none"`` (A = r − mean), each evaluated in float32 from the rewards; ``None`` when none fits
    (other reward weights, another ``multi_objective_aggregation``).

    Returns ``{"scale": ..., "groups_checked": n, "max_error": e}``.
    """
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
    best = min(errors, key=errors.get)
    return {"scale": best if errors[best] <= 1e-2 else None, "groups_checked": int(n_groups),
            "max_error": errors[best]}


def trainer_silent_note(check) -> str | None:
    """What TRL's logged ``frac_reward_zero_std`` means under the scaling the advantages show."""
    if check and check.get("scale") == "batch":
        return ("scale_rewards='batch': TRL's frac_reward_zero_std then tests the std of the whole generation, "
                "not each group's, so it is not the silent fraction of the groups (a silent group still has "
                "advantage 0)")
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

    from ..atomic import atomic_path
    from ._columns import column

    n = len(prompts)
    data = {"step": np.full(n, int(step), dtype=np.int64), "prompt": column(prompts, n, "prompts").astype(str),
            "completion": column(completions, n, "completions").astype(str)}
    for name, values in rewards.items():
        data[name] = column(values, n, name).astype(np.float64)
    for name, values in (extra or {}).items():
        data[name] = column(values, n, name)
    data["advantage"] = np.zeros(n) if advantages is None else column(advantages, n, "advantages").astype(np.float64)
    path = Path(folder) / "completions" / f"completions_{int(step):05d}.parquet"
    with atomic_path(path) as tmp:
        pd.DataFrame(data).to_parquet(tmp, index=False)
    return path


# ---------------------------------------------------------------------------------------------
# Inside a live run: the tracker, the trainer subclass and the skipping sampler

#: Key of the parquet metadata that makes a tracker's table self-describing (read by ``gsd diagnose``).
TRACKER_TABLE = "gsd.table"

#: gsd's figures in TRL's logs, each logged as ``gsd/<name>``.
LIVE_METRICS = ("silent_frac", "silent_pred", "effective_ratio", "fidelity", "recommended_group_size", "skipped")


def _callable_name(func) -> str:
    """The name TRL gives a reward function (its metrics and log columns are named after it)."""
    import functools

    while isinstance(func, functools.partial):
        func = func.func
    return getattr(func, "__name__", type(func).__name__)


def _is_async(func) -> bool:
    import functools
    import inspect

    while isinstance(func, functools.partial):
        func = func.func
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(getattr(func, "__call__", None))


def _is_training(kwargs) -> bool:
    """TRL calls the reward functions in evaluation too; the bound ``log_extra`` it passes leads
    back to the trainer, whose model says which (called outside a trainer: training)."""
    model = getattr(getattr(kwargs.get("log_extra"), "__self__", None), "model", None)
    return True if model is None else bool(model.training)


def _prompt_key(value) -> str:
    """The text that identifies a prompt: the text itself, or a conversation's JSON (sorted keys),
    as the log reader hashes it."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    return str(value)


class GroupTracker:
    """Every group of a live TRL ``GRPOTrainer`` run, exactly, from inside its reward functions.

    ``tracker.wrap(reward_funcs)`` returns reward functions to give the trainer: each calls the
    user's function unchanged and records its rewards.  TRL calls each reward function once per
    generation with the rows in group order, so every group is seen exactly once whatever
    ``num_iterations``, ``steps_per_generation`` or ``logging_steps``; the tracker sums the
    functions with ``weights`` as TRL does (a row where every function returned None is left out,
    as TRL leaves it out of its group's mean and std).  Evaluation calls are not recorded.  A
    generation is numbered by the optimizer step that first uses it (as TRL numbers its
    completion files).

    Parameters
    ----------
    num_generations : int ≥ 2
        TRL's ``num_generations`` (G): a group is a block of G consecutive rows.
    weights : sequence of float, optional
        TRL's ``reward_weights`` (default: 1 each; :class:`GSDGRPOTrainer` takes the trainer's).
    threshold : float, optional
        Count total reward ≥ threshold as right for the posteriors and predictions.  Without it
        the live predictions need 0/1 totals (graded totals get the measured figures only).
        It never changes what is silent: every reward of the group equal, as TRL sees it.
    prompt_id : str, optional
        A dataset column that identifies a prompt (TRL passes dataset columns to the reward
        functions); default: the prompt itself (its text, or a conversation's JSON).
    prior : ``"empirical-bayes"`` (default), ``"uniform"``, ``"jeffreys"`` or (a, b)
        Prior of each prompt's solve rate.  Live, empirical Bayes is fitted to the rollouts
        recorded *before* each generation (uniform before the first; refitted when they have
        grown by a quarter); :meth:`diagnosis` fits it to the whole run, as ``gsd diagnose`` does.
    epsilon : float
        Fidelity target 1 − ε of the recommended group size.

    Attributes
    ----------
    metrics : list of dict
        Per recorded generation: ``step`` and the :data:`LIVE_METRICS` (see the docs page
        "gsd in a TRL run").
    warnings : list of str

    Examples
    --------
    >>> tracker = GroupTracker(2)
    >>> def correct(prompts, completions, **kw):
    ...     return [1.0 if c == "yes" else 0.0 for c in completions]
    >>> [f] = tracker.wrap([correct])
    >>> f(prompts=["a", "a", "b", "b"], completions=["yes", "no", "no", "no"])
    [1.0, 0.0, 0.0, 0.0]
    >>> tracker.metrics[-1]["silent_frac"], tracker.metrics[-1]["effective_ratio"]
    (0.5, 0.5)
    """

    def __init__(self, num_generations, *, weights=None, threshold=None, prompt_id=None, prior="empirical-bayes",
                 epsilon: float = 0.05):
        from .._errors import InputError
        from .._validate import _real, as_open_unit, as_scalar_group_size

        self.num_generations = as_scalar_group_size(num_generations, "num_generations", minimum=2)
        self.weights = None if weights is None else _as_weights(weights)
        if threshold is not None and _real(threshold) is None:
            raise InputError(f"threshold must be a finite number, got {threshold!r}")
        self.threshold = None if threshold is None else float(threshold)
        if prompt_id is not None and not (isinstance(prompt_id, str) and prompt_id):
            raise InputError(f"prompt_id must be the name of a dataset column, got {prompt_id!r}")
        self.prompt_id = prompt_id
        self.prior = _as_prior(prior)
        self.epsilon = float(as_open_unit(epsilon, "epsilon"))
        self.metrics: list[dict] = []
        self.warnings: list[str] = []
        self._functions = None  # names of the wrapped reward functions
        self._code: dict[str, int] = {}  # prompt key -> dense code, in order of first appearance
        self._keys: list[str] = []
        self._values: list = []  # per code: the prompt as the saved table holds it
        self._labels: list[str] = []
        self._n = np.zeros(16, np.int64)  # per code: rollouts and right answers recorded (capacity grows)
        self._k = np.zeros(16, np.int64)
        self._steps: list[int] = []
        self._group_prompt: list[np.ndarray] = []  # per generation: each group's prompt code
        self._parts: list[np.ndarray] = []  # per generation: (functions, rows) rewards, NaN for None
        self._totals: list[np.ndarray] = []
        self._pending = None
        self._graded = False
        self._prior_at = (0, None)  # (rollouts recorded, prior) at the last fit

    # -- wrapping

    def wrap(self, reward_funcs):
        """Reward functions for ``GRPOTrainer(reward_funcs=...)``: the same functions (same names,
        same results, async kept async) that also record their rewards here.  A list gives a
        list, one function one function."""
        import functools

        from .._errors import InputError

        single = callable(reward_funcs) and not isinstance(reward_funcs, (list, tuple))
        funcs = [reward_funcs] if single else list(reward_funcs)
        if self._functions is not None:
            raise InputError("this GroupTracker already wraps reward functions; use one tracker per trainer")
        if not funcs:
            raise InputError("reward_funcs is empty")
        for i, f in enumerate(funcs):
            if isinstance(f, str) or not callable(f) or hasattr(f, "parameters"):
                raise InputError(f"reward_funcs[{i}]: the tracker records the rewards of Python reward functions; "
                                 f"{f!r} is a reward model (score it inside a reward function to track it)")
            if getattr(f, "_gsd_tracker", None) is not None:
                raise InputError(f"reward_funcs[{i}] is already wrapped by a GroupTracker")
        if self.weights is not None and len(self.weights) != len(funcs):
            raise InputError(f"weights has {len(self.weights)} entries for {len(funcs)} reward functions")
        self._functions = [_callable_name(f) for f in funcs]

        def one(func, index):
            if _is_async(func):
                async def wrapped(*args, **kwargs):
                    rewards = await func(*args, **kwargs)
                    self._record(index, args, kwargs, rewards)
                    return rewards
            else:
                def wrapped(*args, **kwargs):
                    rewards = func(*args, **kwargs)
                    self._record(index, args, kwargs, rewards)
                    return rewards
            functools.update_wrapper(wrapped, func, assigned=("__module__", "__qualname__", "__doc__"), updated=())
            wrapped.__name__ = self._functions[index]
            wrapped._gsd_tracker = self
            return wrapped

        wrapped = [one(f, i) for i, f in enumerate(funcs)]
        return wrapped[0] if single else wrapped

    def _record(self, index, args, kwargs, rewards):
        from .._errors import InputError

        if not _is_training(kwargs):
            return
        prompts = kwargs.get("prompts", args[0] if args else None)
        if prompts is None:
            raise InputError("the tracked reward function was called without prompts (TRL passes prompts=...)")
        rewards = list(rewards)
        if len(rewards) != len(prompts):
            raise InputError(f"reward function {self._functions[index]!r} returned {len(rewards)} rewards for "
                             f"{len(prompts)} completions")
        r = np.array([np.nan if x is None else float(x) for x in rewards], dtype=np.float64)
        pend = self._pending
        if pend is not None and (pend["parts"][index] is not None or len(prompts) != len(pend["prompts"])):
            # A new generation began before every function reported (one raised): drop the partial one.
            self.warnings.append(f"a generation at step {pend['step']} was dropped: not every reward function "
                                 "returned for it")
            pend = None
        if pend is None:
            ids = None
            if self.prompt_id is not None:
                if self.prompt_id not in kwargs:
                    cols = sorted(k for k in kwargs if k not in ("prompts", "completions", "completion_ids",
                                                                 "trainer_state", "log_extra", "log_metric"))
                    raise InputError(f"prompt_id={self.prompt_id!r} is not a dataset column TRL passed to the reward "
                                     f"functions (columns: {', '.join(cols) or 'none'})")
                ids = list(kwargs[self.prompt_id])
            state = kwargs.get("trainer_state")
            step = int(state.global_step) + 1 if state is not None else (self._steps[-1] + 1 if self._steps else 1)
            pend = {"prompts": prompts, "ids": ids, "step": step, "parts": [None] * len(self._functions)}
        pend["parts"][index] = r
        if any(p is None for p in pend["parts"]):
            self._pending = pend
            return
        self._pending = None
        self._add_generation(pend)

    # -- one generation

    def _code_of(self, value) -> int:
        key = str(value) if self.prompt_id is not None else _prompt_key(value)
        code = self._code.get(key)
        if code is None:
            code = self._code[key] = len(self._keys)
            self._keys.append(key)
            structured = self.prompt_id is None and isinstance(value, (list, tuple))
            self._values.append(list(value) if structured else key)
            self._labels.append((chat_label(value) if structured else key)[:80])
            if code >= self._n.size:
                self._n = np.concatenate([self._n, np.zeros(self._n.size, np.int64)])
                self._k = np.concatenate([self._k, np.zeros(self._k.size, np.int64)])
        return code

    def _add_generation(self, pend):
        from .._errors import InputError
        from ..diagnose.readers import silent_groups

        G = self.num_generations
        source = pend["ids"] if self.prompt_id is not None else pend["prompts"]
        rows = len(source)
        if rows % G:
            raise InputError(f"the reward functions got {rows} rows, not a multiple of num_generations={G}: give the "
                             "tracker the trainer's num_generations")
        firsts = source[::G]
        if any(source[j] != firsts[j // G] for j in range(rows)):
            raise InputError(f"a block of num_generations={G} rows holds two prompts: the trainer's num_generations "
                             "differs from the tracker's")
        codes = np.fromiter((self._code_of(v) for v in firsts), np.int64, len(firsts))
        parts = np.stack(pend["parts"])
        w = np.ones(len(parts)) if self.weights is None else np.asarray(self.weights, np.float64)
        if self.weights is None and len(parts) > 1 and not self.metrics:
            self.warnings.append(f"weights not given: the {len(parts)} reward functions are summed with weight 1 "
                                 "(give the tracker the trainer's reward_weights)")
        unscorable = np.isnan(parts).all(axis=0)
        total = np.where(unscorable, np.nan, np.nansum(parts * w[:, None], axis=0))
        groups = total.reshape(-1, G)
        finite = np.isfinite(groups)
        m = finite.sum(axis=1)
        top = np.where(finite, groups, -np.inf).max(axis=1)
        bottom = np.where(finite, groups, np.inf).min(axis=1)
        multi = m >= 2
        silent = multi & silent_groups(top, bottom)
        right = self._right(groups, finite)
        gen = {"step": pend["step"], "silent_frac": float(silent.sum() / multi.sum()) if multi.any() else float("nan"),
               "effective_ratio": float((m * (multi & ~silent)).sum() / m.sum()) if m.sum() else float("nan"),
               "skipped": 0}
        gen.update(self._predictions(codes, m, right))
        self._steps.append(int(pend["step"]))
        self._group_prompt.append(codes)
        self._parts.append(parts)
        self._totals.append(total)
        self.metrics.append(gen)

    def _right(self, groups, finite):
        """Right answers per group (finite rows only), or None once the totals are graded."""
        if self._graded:
            return None
        vals = groups[finite]
        if self.threshold is not None:
            return (finite & (groups >= self.threshold)).sum(axis=1)
        if np.all((vals == 0.0) | (vals == 1.0)):
            return (finite & (groups == 1.0)).sum(axis=1)
        self._graded = True
        self.warnings.append("the total rewards are graded (not 0/1): from this generation on, no predictions; give "
                             "the tracker a threshold (reward >= threshold counts as right)")
        return None

    def _predictions(self, codes, m, right):
        """silent_pred and fidelity from each prompt's posterior before the generation; the
        recommended group size from the posteriors after it (counts updated here)."""
        from ..allocation import allocation_value, expected_silent_rate
        from ..diagnose.tables import expected_scale
        from ..posterior import BetaPosterior

        nan = float("nan")
        if right is None:
            return {"silent_pred": nan, "fidelity": nan, "recommended_group_size": nan}
        a0, b0 = self._prior_now()
        multi = m >= 2
        n, k = self._n[codes], self._k[codes]
        out = {"silent_pred": nan, "fidelity": nan}
        if multi.any():
            post = BetaPosterior(a0 + k[multi], b0 + (n - k)[multi], (a0, b0))
            out["silent_pred"] = float(expected_silent_rate(post, m[multi]).mean())
            scale = expected_scale(post.a, post.b).sum()
            out["fidelity"] = float(allocation_value(post, m[multi], "update").sum() / scale) if scale > 0 else nan
        np.add.at(self._n, codes, m)
        np.add.at(self._k, codes, right)
        seen = np.unique(codes)
        out["recommended_group_size"] = _half_group_size((a0 + self._k[seen]) / (a0 + b0 + self._n[seen]),
                                                         self.epsilon)
        return out

    def _prior_now(self):
        """The prior for the next predictions: empirical Bayes fitted to the rollouts recorded so
        far (uniform before any), refitted whenever they have grown by a quarter since the last
        fit (a fit costs ~0.1 s; the prior moves slowly once there are many rollouts), else the
        given one."""
        from ..posterior import PRIORS, fit_beta_prior

        if not isinstance(self.prior, str):
            return self.prior
        if self.prior != "empirical-bayes":
            return PRIORS[self.prior]
        size = len(self._keys)
        n, k = self._n[:size], self._k[:size]
        total = int(n.sum())
        if self._prior_at[1] is None or (total > 0 and total >= 1.25 * self._prior_at[0]):
            self._prior_at = (total, fit_beta_prior(k, n) if total > 0 else PRIORS["uniform"])
        return self._prior_at[1]

    # -- what the skipping sampler asks

    def silent_probability(self, prompts) -> np.ndarray:
        """Probability that the next group of ``num_generations`` answers to each prompt is silent
        (all right or all wrong), under the prompt's posterior now: the exact beta-binomial
        [B(a+G, b) + B(a, b+G)]/B(a, b) (:func:`gsd.expected_silent_rate`).  NaN for a prompt with
        no rollout recorded yet, and for every prompt once the totals are graded.

        ``prompts``: prompt texts / conversations, or values of the ``prompt_id`` column.
        """
        codes = np.fromiter((self._code.get(str(v) if self.prompt_id is not None else _prompt_key(v), -1)
                             for v in prompts), np.int64)
        return self._silent_probability_of_codes(codes)

    def _silent_probability_of_codes(self, codes) -> np.ndarray:
        from ..allocation import expected_silent_rate
        from ..posterior import BetaPosterior

        q = np.full(codes.size, np.nan)
        if self._graded:
            return q
        known = codes >= 0
        known[known] = self._n[codes[known]] > 0
        if known.any():
            a0, b0 = self._prior_now()
            n, k = self._n[codes[known]], self._k[codes[known]]
            q[known] = expected_silent_rate(BetaPosterior(a0 + k, b0 + n - k, (a0, b0)), self.num_generations)
        return q

    def _codes_of_keys(self, keys) -> np.ndarray:
        return np.fromiter((self._code.get(k, -1) for k in keys), np.int64, len(keys))

    def key(self, value) -> str:
        """The key that identifies a prompt (a dataset row's ``prompt``, or its ``prompt_id`` value)."""
        return str(value) if self.prompt_id is not None else _prompt_key(value)

    # -- the run as a log

    @property
    def generations(self) -> int:
        """Training generations recorded."""
        return len(self._steps)

    def _reward_name(self) -> str:
        from ..diagnose.readers import _reward_text

        names = self._functions or ["reward"]
        w = self.weights if self.weights is not None else [1.0] * len(names)
        return _reward_text(list(zip(w, names)))

    def _rows(self):
        """Per rollout (scorable rows only): prompt code, step, group number, total, parts."""
        from .._errors import InputError

        if not self._steps:
            raise InputError("the tracker has recorded no training generation yet")
        G = self.num_generations
        sizes = np.array([c.size for c in self._group_prompt])
        step = np.repeat(np.array(self._steps, np.int64), sizes * G)
        code = np.repeat(np.concatenate(self._group_prompt), G)
        group = np.repeat(np.arange(sizes.sum(), dtype=np.int64), G)
        total = np.concatenate(self._totals)
        parts = np.concatenate(self._parts, axis=1)
        keep = np.isfinite(total)
        return code[keep], step[keep], group[keep], total[keep], parts[:, keep]

    def _description(self) -> dict:
        reward_name = self._reward_name()
        return {"table": "GroupTracker", "version": 1, "prompt_col": "prompt", "step_col": "step",
                "group_col": "group", "reward_col": "reward", "group_size": self.num_generations,
                "threshold": self.threshold, "reward_name": reward_name, "weights": self.weights,
                "functions": self._functions,
                "group_by": f"blocks of {self.num_generations} rows of one generation, as the reward functions saw "
                            "them (gsd's GroupTracker inside TRL)",
                "silence": f"zero std of {reward_name!r} within each group (every reward equal), as the trainer "
                           "normalises it"}

    def rollout_log(self):
        """The recorded groups as a :class:`gsd.diagnose.RolloutLog` (prompt codes ordered as the
        log reader orders them, so :meth:`diagnosis` equals ``gsd diagnose`` on :meth:`save`'s table)."""
        import pandas as pd

        from ..diagnose.readers import RolloutLog

        code, step, group, total, _ = self._rows()
        hashes = pd.util.hash_array(np.array(self._keys, dtype=object), categorize=False).astype(np.int64)
        used = np.unique(code)
        order = np.argsort(hashes[used], kind="stable")
        rank = np.empty(len(self._keys), np.int64)
        rank[used[order]] = np.arange(used.size)
        from ..diagnose.readers import pair_codes

        gkey = pd.util.hash_array(group.astype(str).astype(object), categorize=True).astype(np.int64)
        gcode, _ = pair_codes(step, gkey)
        d = self._description()
        return RolloutLog(prompt=rank[code], step=step, reward=total,
                          labels=np.array(self._labels, dtype=object)[used[order]], hashes=hashes[used[order]],
                          files=[], fmt="table", trainer="trl", reward_name=d["reward_name"], group=gcode,
                          group_by=d["group_by"], silence=d["silence"], group_size=self.num_generations,
                          threshold=self.threshold, warnings=list(self.warnings))

    def diagnosis(self, *, level: float = 0.9, budget=None, half_life=None):
        """The run so far as :func:`gsd.diagnose.diagnose` sees it (same tables, same summary):
        the prior (empirical Bayes by default) fitted to the whole run, the tracker's threshold
        and epsilon."""
        from ..diagnose.tables import diagnose_log

        return diagnose_log(self.rollout_log(), threshold=self.threshold, prior=self.prior, epsilon=self.epsilon,
                            level=level, budget=budget, half_life=half_life)

    def save(self, path) -> Path:
        """Write the recorded groups as a self-describing parquet table: ``gsd diagnose PATH``
        (no flags) reads it back to :meth:`diagnosis`'s numbers (with a prior other than
        empirical Bayes, pass the same ``--prior``).

        Columns ``prompt`` (text, conversation, or the ``prompt_id`` value as text), ``step``,
        ``group`` (one number per group of the run), ``reward`` (the weighted total the trainer
        normalised) and one ``reward:<function>`` column per reward function (unweighted); the
        file's metadata (key ``gsd.table``) says so.
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        from .._errors import InputError
        from ..atomic import atomic_path

        path = Path(path)
        if path.suffix != ".parquet":
            raise InputError(f"path must end in .parquet (the table carries its description in parquet metadata), "
                             f"got {str(path)!r}")
        code, step, group, total, parts = self._rows()
        columns = {"prompt": pa.array(self._values).take(pa.array(code)),  # per rollout, gathered in pyarrow
                   "step": pa.array(step), "group": pa.array(group), "reward": pa.array(total)}
        for name, col in zip(self._functions, parts):
            columns[f"reward:{name}"] = pa.array(col)
        table = pa.table(columns).replace_schema_metadata({TRACKER_TABLE: json.dumps(self._description())})
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp)
        return path


def _half_group_size(p, epsilon, limit: int = 1 << 20) -> float:
    """Smallest G whose fidelity (:func:`gsd.fidelity`) reaches 1 − ε for at least half of the
    solve rates ``p`` (the lower median of their :func:`gsd.required_group_size`, found by
    bisection on G, since fidelity grows with G, without solving the prompts near 0 or 1 that
    need thousands); NaN beyond ``limit``."""
    from ..update import fidelity

    need, half = 1.0 - epsilon, -(-p.size // 2)

    def enough(G):
        return int((fidelity(p, G) >= need).sum()) >= half

    lo, hi = 1, 2
    while not enough(hi):
        if hi >= limit:
            return float("nan")
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return float(hi)


def _as_weights(weights) -> list:
    from .._errors import InputError
    from .._validate import _real

    try:
        w = [_real(x) for x in weights]
    except TypeError:
        raise InputError(f"weights must be a sequence of finite numbers, got {weights!r}") from None
    if not w or any(x is None for x in w):
        raise InputError(f"weights must be a non-empty sequence of finite numbers, got {weights!r}")
    return w


def _as_prior(prior):
    from .._errors import InputError
    from ..posterior import PRIORS, posterior_from_counts

    if isinstance(prior, str):
        if prior != "empirical-bayes" and prior not in PRIORS:
            raise InputError(f"prior must be 'empirical-bayes', {', '.join(map(repr, PRIORS))} or (a, b), got {prior!r}")
        return prior
    return tuple(posterior_from_counts(0, 0, prior=prior).prior)


def tracker_table(files):
    """The description a :meth:`GroupTracker.save` table carries (parquet metadata), when every
    file is one; else None."""
    import pyarrow.parquet as pq

    found = None
    for f in files:
        if Path(f).suffix != ".parquet":
            return None
        try:
            meta = pq.read_schema(f).metadata or {}
            desc = json.loads(meta[TRACKER_TABLE.encode()])
        except (OSError, KeyError, ValueError, TypeError):
            return None
        if not isinstance(desc, dict) or desc.get("table") != "GroupTracker":
            return None
        if found is not None and found.get("group_size") != desc.get("group_size"):
            return None
        found = desc
    return found


class SkipSampler:
    """TRL's ``RepeatSampler`` order (each prompt ``num_generations`` times, each generation batch
    ``repeat_count`` times) with prompts predicted silent skipped before generation.

    Prompts come up in turns (a fresh permutation of the dataset each time the last one is used
    up).  At its turn a prompt is skipped when its posterior probability of a silent group at
    the run's G is above ``skip_above``, unless it was skipped at its last ``max_skips`` turns;
    the batch is filled with the next prompts, so every generation batch has the same shape.
    A prompt without rollouts of its own is never skipped.
    """

    def __init__(self, keys, tracker: GroupTracker, *, batch_size: int, repeat_count: int, shuffle: bool, seed,
                 skip_above: float, max_skips: int):
        import torch

        self.keys = list(keys)
        self.tracker = tracker
        self.num_samples = len(self.keys)
        self.batch_size, self.repeat_count = int(batch_size), int(repeat_count)
        self.mini_repeat_count = tracker.num_generations
        self.shuffle = shuffle
        self.skip_above, self.max_skips = float(skip_above), int(max_skips)
        self.generator = torch.Generator()
        if seed is not None:
            self.generator.manual_seed(int(seed))
        self.streak = np.zeros(self.num_samples, np.int64)  # consecutive turns skipped
        self._queue = np.zeros(0, np.int64)
        self.pending: list[int] = []  # prompts skipped for each batch drawn and not yet generated
        self.skipped = 0
        self.turns = 0
        #: Per batch drawn: the dataset rows whose turn it was, and which were skipped.
        self.decisions: list[tuple[np.ndarray, np.ndarray]] = []

    def __len__(self) -> int:
        return (self.num_samples // self.batch_size) * self.batch_size * self.mini_repeat_count * self.repeat_count

    def _turns(self, count: int) -> np.ndarray:
        import torch

        out = []
        while count:
            if self._queue.size == 0:
                self._queue = (torch.randperm(self.num_samples, generator=self.generator).numpy() if self.shuffle
                               else np.arange(self.num_samples))
            take, self._queue = self._queue[:count], self._queue[count:]
            out.append(take)
            count -= take.size
        return np.concatenate(out)

    def _batch(self) -> np.ndarray:
        chosen, looked, skipped = [], [], []
        need = self.batch_size
        while need:
            rows = self._turns(need)
            q = self.tracker._silent_probability_of_codes(self.tracker._codes_of_keys([self.keys[i] for i in rows]))
            skip = (q > self.skip_above) & (self.streak[rows] < self.max_skips)
            self.streak[rows] = np.where(skip, self.streak[rows] + 1, 0)
            chosen.append(rows[~skip])
            looked.append(rows)
            skipped.append(skip)
            need -= int((~skip).sum())
        looked, skipped = np.concatenate(looked), np.concatenate(skipped)
        self.decisions.append((looked, skipped))
        self.turns += looked.size
        self.skipped += int(skipped.sum())
        self.pending.append(int(skipped.sum()))
        return np.concatenate(chosen)

    def __iter__(self):
        G = self.mini_repeat_count
        for _ in range(self.num_samples // self.batch_size):
            batch = self._batch().tolist()
            for _ in range(self.repeat_count):
                for index in batch:
                    for _ in range(G):
                        yield index

    def take_skipped(self) -> int:
        """Prompts skipped for the oldest batch not yet generated (batches are generated in the
        order they are drawn; the data loader draws one ahead)."""
        return self.pending.pop(0) if self.pending else 0


_TRAINER_CLASS = None


def __getattr__(name):
    if name == "GSDGRPOTrainer":
        global _TRAINER_CLASS
        if _TRAINER_CLASS is None:
            _TRAINER_CLASS = _trainer_class()
        return _TRAINER_CLASS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _trainer_class():
    try:
        from trl import GRPOTrainer
    except ImportError as exc:
        raise ImportError("GSDGRPOTrainer needs TRL: pip install 'gsd[trl]'") from exc

    class GSDGRPOTrainer(GRPOTrainer):
        """TRL's ``GRPOTrainer`` with gsd inside: every group tracked, gsd's figures in TRL's logs,
        and (``skip_above``) prompts predicted silent skipped before generation.

        It takes ``GRPOTrainer``'s arguments and these.

        Parameters
        ----------
        gsd_tracker : GroupTracker, optional
            The tracker (default: ``GroupTracker(num_generations)``).  Its reward functions are
            wrapped here unless they already are; its weights default to ``reward_weights``.
        skip_above : float in (0, 1), optional
            Skip a prompt at its turn when its posterior probability of a silent group at the
            run's G is above this (None, the default: skip nothing).
        max_skips : int ≥ 0
            Never skip a prompt at more than this many of its turns in a row (its solve rate moves
            as the model learns): it is drawn at least once every ``max_skips + 1`` turns.

        Each generation appends ``gsd/silent_frac``, ``gsd/silent_pred``, ``gsd/effective_ratio``,
        ``gsd/fidelity``, ``gsd/recommended_group_size`` and ``gsd/skipped`` to TRL's training
        metrics: they reach ``trainer.state.log_history`` and ``report_to`` beside TRL's own.
        ``gsd_skip_counts`` says how many prompts were skipped and the rollouts not spent on them.
        """

        def __init__(self, *args, gsd_tracker=None, skip_above=None, max_skips=4, **kwargs):
            from .._errors import InputError
            from .._validate import as_open_unit

            if skip_above is not None:
                skip_above = float(as_open_unit(skip_above, "skip_above"))
            if isinstance(max_skips, bool) or not isinstance(max_skips, (int, np.integer)) or max_skips < 0:
                raise InputError(f"max_skips must be an integer >= 0, got {max_skips!r}")
            if gsd_tracker is not None and not isinstance(gsd_tracker, GroupTracker):
                raise InputError(f"gsd_tracker must be a GroupTracker, got {type(gsd_tracker).__name__}")
            super().__init__(*args, **kwargs)
            if self.accelerator.num_processes > 1:
                raise InputError("GSDGRPOTrainer tracks one process: each process's reward functions see only its "
                                 "share of a group's rows")
            if getattr(self, "multi_objective_aggregation", "sum_then_normalize") != "sum_then_normalize":
                raise InputError("GSDGRPOTrainer follows multi_objective_aggregation='sum_then_normalize' (a group is "
                                 "silent when its weighted total has zero std)")
            tracker = gsd_tracker if gsd_tracker is not None else GroupTracker(self.num_generations)
            if tracker.num_generations != self.num_generations:
                raise InputError(f"gsd_tracker has num_generations={tracker.num_generations}, the trainer "
                                 f"{self.num_generations}")
            weights = [float(x) for x in self.reward_weights.tolist()]
            if tracker.weights is None:
                tracker.weights = weights
            elif len(tracker.weights) != len(weights) or not np.allclose(tracker.weights, weights):
                raise InputError(f"gsd_tracker weights {tracker.weights} differ from the trainer's reward_weights "
                                 f"{weights}")
            mine = [getattr(f, "_gsd_tracker", None) is tracker for f in self.reward_funcs]
            if not all(mine):
                if any(mine):
                    raise InputError("some reward functions are wrapped by gsd_tracker and some are not")
                self.reward_funcs = tracker.wrap(list(self.reward_funcs))
            if skip_above is not None and not hasattr(self.train_dataset, "__getitem__"):
                raise InputError("skip_above needs a map-style train_dataset (an IterableDataset has no sampler)")
            self.gsd_tracker = tracker
            self.gsd_skip_above, self.gsd_max_skips = skip_above, int(max_skips)
            self.gsd_sampler = None

        def _get_train_sampler(self, dataset=None):
            if self.gsd_skip_above is None:
                return super()._get_train_sampler(dataset)
            dataset = self.train_dataset if dataset is None else dataset
            tracker = self.gsd_tracker
            keys = [tracker.key(v) for v in dataset[tracker.prompt_id or "prompt"]]
            self.gsd_sampler = SkipSampler(keys, tracker, batch_size=self.args.generation_batch_size // self.num_generations,
                                           repeat_count=self.num_iterations * self.args.steps_per_generation,
                                           shuffle=self.shuffle_dataset, seed=self.args.seed,
                                           skip_above=self.gsd_skip_above, max_skips=self.gsd_max_skips)
            return self.gsd_sampler

        def _generate_and_score_completions(self, inputs):
            before = self.gsd_tracker.generations
            out = super()._generate_and_score_completions(inputs)
            if self.model.training and self.gsd_tracker.generations > before:
                gen = self.gsd_tracker.metrics[-1]
                if self.gsd_sampler is not None:
                    gen["skipped"] = self.gsd_sampler.take_skipped()
                for name in LIVE_METRICS:
                    self._metrics["train"][f"gsd/{name}"].append(float(gen[name]))
            return out

        @property
        def gsd_skip_counts(self) -> dict:
            """Over the training generations so far: prompts skipped to fill their batches, and the
            rollouts not spent on them (G each)."""
            skipped = int(sum(m["skipped"] for m in self.gsd_tracker.metrics))
            return {"generations": self.gsd_tracker.generations, "skipped_prompts": skipped,
                    "rollouts_saved": skipped * self.num_generations}

    GSDGRPOTrainer.__module__ = __name__
    return GSDGRPOTrainer
