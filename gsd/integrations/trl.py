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

The live hooks (:mod:`gsd.integrations.trl_live`: a tracker inside the reward functions, a
``GRPOTrainer`` subclass) build on this module; this module imports neither them nor gsd.diagnose.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import numpy as np

from . import TRUTH_COLUMN

__all__ = ["DDOF", "EPS", "SCALES", "SOURCE", "NOT_REWARD", "is_log_file", "step_of", "infer_group_size",
           "generation_fingerprint", "find_trainer_state", "read_trainer_state", "chat_label", "write_step",
           "FILE_DESCRIPTION"]

DDOF = 1
EPS = 1e-4
SCALES = ("group", "batch", "none")
SOURCE = "TRL 1.16 GRPOTrainer, scale_rewards"

#: How the file is named, for messages.
FILE_DESCRIPTION = "TRL's completions_{step:05d}.parquet"

#: Columns of the completions table that are not rewards.
NOT_REWARD = ("step", "prompt", "completion", "advantage", "mode", "image", "images", TRUTH_COLUMN)

_FILE = re.compile(r"completions_(\d+)")


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
    ``zero_std`` ({step: TRL's training ``frac_reward_zero_std``}) and ``global_step``."""
    from .._errors import InputError

    try:
        state = json.loads(Path(path).read_text(encoding="utf-8"))
        history = state["log_history"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: not a readable TRL trainer_state.json ({type(exc).__name__}: {exc})") from None
    eval_steps, zero_std = set(), {}
    for entry in history:
        if not isinstance(entry, dict) or "step" not in entry:
            continue
        step = int(entry["step"])
        if any(str(k).startswith("eval_") for k in entry):
            eval_steps.add(step)
        value = entry.get("frac_reward_zero_std")
        if isinstance(value, (int, float)) and math.isfinite(value):
            zero_std[step] = float(value)
    return {"eval_steps": sorted(eval_steps), "zero_std": zero_std, "global_step": int(state.get("global_step", 0))}


def chat_label(messages) -> str:
    """The label of a conversational prompt: its last user message (else its last message)."""
    if not isinstance(messages, (list, tuple)) or not messages:
        return str(messages)
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    last = (users or [m for m in messages if isinstance(m, dict)] or [{"content": str(messages[-1])}])[-1]
    content = last.get("content", "")
    if isinstance(content, list):  # multimodal content: its text parts
        content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


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


def tracker_table(files):
    """The description of a table saved by gsd's live tracker (kept for the log reader's present
    call; the table is gsd's own: :func:`gsd.integrations.tracker_table.read_description`)."""
    from .tracker_table import read_description

    return read_description(files)
