"""Assemble a run's chunks into its groups: one run (left-overs of other attempts left out), unusable
rows and the groups they belonged to left out, the trainer's groups coded, checked and described,
in a :class:`RolloutLog`; :func:`read_rollouts` goes from the log files to it.

A group that lost a row is *incomplete*: left out of the diagnosis and counted.  A run folder is
read as one run: files a resumed or an abandoned run left behind are detected and left out, with
a warning.  What the reader could not undo is said, one warning each.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..integrations.columns import pair_codes
from ..integrations.contract import RunContext
from ..validation import InputError
from .discover import TRAINER_HOOKS, discover_files, hooks_of
from .options import LogOptions
from .parse import MAX_LISTED, BadRow, Reader, read_file, reward_text

__all__ = ["RolloutLog", "read_rollouts", "silent_groups"]

# A later step's file older than an earlier one's by more than this was left by another attempt.
_MTIME_SLACK_S = 2.0


@dataclass
class RolloutLog:
    """The rollouts of a run in complete groups: one entry per rollout in ``prompt``, ``step``,
    ``group`` and ``reward``.

    Attributes
    ----------
    prompt : ndarray of int64
        Dense prompt code, 0 … P − 1 (``labels[code]`` is the prompt, ``hashes[code]`` its hash).
    step : ndarray of int64
        Training step of the rollout (a generation counted once, at its first step).
    group : ndarray of int64
        Dense group code: the rollouts the trainer normalised together.
    reward : ndarray of float64
        The reward the trainer normalises (weighted sum for several columns), before any threshold.
    labels, hashes : ndarray
        Per prompt: its first 80 characters (a chat prompt: its last user message) and its hash.
    files : list of str
        Files read, in order (repeated generations and evaluation files included).
    fmt, reward_name : str
        The format read and the reward used (``"a + 0.5*b"``).
    group_by, silence : str
        How groups were formed; how silence is measured.
    group_size : int or None
        TRL's ``num_generations`` (given or inferred); None for verl and tables.
    repeated_steps, missing_steps, eval_steps : list of int
        Steps whose file repeats the previous generation; steps from 1 to the last one with no
        file; steps left out as evaluation (TRL with ``trainer_state.json``).
    incomplete_groups, incomplete_rollouts : int
        Groups that lost a row, left out, and their usable rollouts.
    trainer_silent : dict
        TRL's own ``frac_reward_zero_std`` per step, when ``trainer_state.json`` was found.
    silent : ndarray of bool or None
        Per group, the trainer's own verdict "every reward equal" (its dtype, summation and
        tolerance: the format module's ``zero_std``); None: the generic rule of
        :func:`silent_groups`.
    unscorable_rollouts : int
        Rows kept in their group without a finite reward (TRL: every reward function returned
        None; the trainer leaves them out of the group's mean and std and trains them with
        advantage 0).
    extra_outputs : int
        Outputs of multi-output sessions that are not the session's final one (verl V1): in the
        log, not in the group's statistics.
    padding : ndarray of bool or None
        Per row, True where the trainer padded the row in rather than generated it (trl-cgrpo's
        empty, reward-less rows); they stay in their block, out of the rollouts counted as
        generation and as wasted.  None: every row was generated.
    excluded_steps : list of int
        Steps whose file was left out as a left-over of another attempt or run.
    silent_observable : bool
        False when every group is live and the trainer filters silent groups before the dump:
        the generation's silent share is not in the log.
    advantage_check : dict or None
        The scaling the logged advantages show (TRL: ``{"scale": "group" | "batch" | "none" | None,
        ...}``).
    trainer : str or None
        The trainer whose convention the update follows when the format does not say it (a table
        saved by gsd's ``GroupTracker`` in a TRL run: ``"trl"``); None: the format's.
    threshold : float or None
        The threshold the log itself declares (a table saved by gsd's ``GroupTracker``):
        :func:`diagnose_log` uses it when given none.
    warnings : list of str
        What the reader could not undo, one line each.
    bad_rows : list of BadRow
        The first 1000 unusable rows; ``bad_count`` counts all of them.
    counted : dict or None
        A log read as counts (:func:`gsd.diagnose.counted.read_counted`): ``{"groups": its group
        table (step, prompt, G, generated, n, k, silent, binary_silent), "rewards_as": how rewards
        were read as right/wrong, "threshold": the threshold they were counted with}``, and no
        rollout in ``prompt``, ``step``, ``reward``; None: a log of rollouts.
    """

    prompt: np.ndarray
    step: np.ndarray
    reward: np.ndarray
    labels: np.ndarray
    hashes: np.ndarray
    files: list
    fmt: str
    reward_name: str
    group: np.ndarray | None = None
    group_by: str = "prompt"
    silence: str = ""
    group_size: int | None = None
    repeated_steps: list = field(default_factory=list)
    missing_steps: list = field(default_factory=list)
    eval_steps: list = field(default_factory=list)
    incomplete_groups: int = 0
    incomplete_rollouts: int = 0
    trainer_silent: dict = field(default_factory=dict)
    silent: np.ndarray | None = None
    unscorable_rollouts: int = 0
    extra_outputs: int = 0
    padding: np.ndarray | None = None
    excluded_steps: list = field(default_factory=list)
    silent_observable: bool = True
    advantage_check: dict | None = None
    trainer: str | None = None
    threshold: float | None = None
    warnings: list = field(default_factory=list)
    bad_rows: list = field(default_factory=list)
    bad_count: int = 0
    counted: dict | None = None

    def __post_init__(self):
        if self.group is None:  # a log built by hand: one group per (step, prompt)
            self.group = pair_codes(self.step, self.prompt)[0]

    @property
    def padding_rows(self) -> int:
        """Rows a padding trainer put in its blocks (:attr:`padding`; a log read as counts: counted)."""
        if self.counted is not None:
            return int(self.counted.get("padding_rows", 0))
        return int(self.padding.sum()) if self.padding is not None else 0

    @property
    def rows(self) -> int:
        return int(self.prompt.size) if self.counted is None else int(self.counted["rows"])


def run_history(chunks, warnings):
    """A folder is read as one run.  A trainer writes its step files in step order, so in a folder
    where the file of some step is newer than every later step's file, those later files were
    left by an earlier attempt: a run resumed from an earlier checkpoint (or restarted in the
    same folder) rewrote the steps up to there and stopped, and the earlier attempt's later steps
    stayed behind.  They are left out when each is older than that newest file by more than a
    clock's slack and they are themselves in step order (a copied folder, whose times follow the
    copy's order, does not look like that)."""
    timed = [ch for ch in chunks if ch.mtime]
    if len(timed) < 2:
        return chunks, []
    times = np.array([ch.mtime for ch in timed])
    newest = int(np.argmax(times))
    tail = times[newest + 1 :]
    if not tail.size or not np.all(tail + _MTIME_SLACK_S < times[newest]) or not np.all(np.diff(tail) >= 0):
        return chunks, []
    stale_ids = {id(ch) for ch in timed[newest + 1 :]}
    stale = [ch.file_step for ch in timed[newest + 1 :]]
    warnings.append(
        f"steps {_span(stale)}: their files are older than the file of step {timed[newest].file_step} — "
        "left by an earlier attempt or another run in the same folder (a resume from an earlier checkpoint "
        "rewrites the steps after it), left out; name the files to read them anyway"
    )
    return [ch for ch in chunks if id(ch) not in stale_ids], stale


def _span(steps) -> str:
    steps = list(steps)
    return ", ".join(map(str, steps[:10])) + (f" ... ({len(steps)} in all)" if len(steps) > 10 else "")


def _assemble(reader: Reader, group_col, warnings):
    """Concatenate the chunks; drop unusable rows and the groups they belonged to."""
    chunks = [c for c in reader.chunks if c.hashes.size]
    if not chunks:
        return None
    hooks = hooks_of(reader.module)
    rows = _concatenate(chunks)
    h, step, reward, gkey, gkey_ok = rows["hash"], rows["step"], rows["reward"], rows["gkey"], rows["gkey_ok"]
    reward_ok = np.isfinite(reward)
    # A trainer that keeps a row without a finite reward in its group (TRL) counts it there.
    unscorable = rows["prompt_ok"] & ~reward_ok if hooks.UNSCORABLE_IN_GROUP else np.zeros(h.size, bool)
    usable = rows["prompt_ok"] & rows["step_ok"] & (reward_ok | unscorable) & gkey_ok & ~rows["conflict"]
    report_unusable(reader, chunks, rows, reward_ok | unscorable, group_col)
    blocks = hooks.GROUP_SIZE
    incomplete = _incomplete_rows(rows, usable, blocks)
    if not blocks:
        _place_unreadable_lines(reader.chunks, usable & ~incomplete, step, gkey, incomplete, warnings)
    keep = usable & ~incomplete
    counted = incomplete & (gkey_ok | blocks)  # a row without a key is not a group of its own
    lost_groups = pair_codes(step[counted], gkey[counted])[1]
    batch = np.concatenate([np.full(c.hashes.size, i, np.int64) for i, c in enumerate(chunks)])
    return {
        "hash": h[keep],
        "step": step[keep],
        "reward": reward[keep],
        "gkey": gkey[keep],
        "batch": batch[keep],
        "incomplete_groups": int(lost_groups),
        "incomplete_rollouts": int((incomplete & usable).sum()),
        "unscorable": int((unscorable & keep).sum()),
        "padding": np.concatenate([c.padding for c in chunks])[keep]
        if reader.pads and all(c.padding is not None for c in chunks)
        else None,
        "advantage": np.concatenate([c.advantage for c in chunks])[keep]
        if all(c.advantage is not None for c in chunks)
        else None,
        "verdict": np.concatenate(reader.verdicts)[keep]
        if reader.verdicts and len(reader.verdicts) == len(chunks)
        else None,
    }


def _concatenate(chunks) -> dict:
    """The chunks' rows end to end: prompt hash, step, reward, group key (the prompt's hash where
    the files carry none: the prompt text within the step), their validity and conflicts."""
    keyed = [c.gkey is not None for c in chunks]
    if any(keyed) and not all(keyed):
        raise InputError(
            "LOG: some files carry a group key and others do not (files of two trainers or versions "
            "in one folder?): name the files of one run"
        )
    rows = {
        "hash": np.concatenate([c.hashes for c in chunks]),
        "step": np.concatenate([c.steps for c in chunks]),
        "reward": np.concatenate([c.reward for c in chunks]),
        "prompt_ok": np.concatenate([c.prompt_ok for c in chunks]),
        "step_ok": np.concatenate([c.step_ok for c in chunks]),
        "conflict": np.concatenate(
            [c.conflict if c.conflict is not None else np.zeros(c.hashes.size, bool) for c in chunks]
        ),
    }
    if all(keyed):  # blocks, a group column or the trainer's keys
        rows["gkey"] = np.concatenate([c.gkey for c in chunks])
        rows["gkey_ok"] = np.concatenate([c.gkey_ok for c in chunks])
    else:  # the prompt text within the step
        rows["gkey"], rows["gkey_ok"] = rows["hash"], rows["prompt_ok"]
    return rows


def report_unusable(reader: Reader, chunks, rows, scored, group_col) -> None:
    """Count each unusable row once, with its first reason, and list the first :data:`MAX_LISTED`
    with their file and line (``scored``: a finite reward, or one the trainer keeps without)."""
    room = [max(MAX_LISTED - len(reader.bad_rows), 0)] * 5
    for count, listed in unusable_rows(reader, chunks, rows, scored, group_col, room):
        reader.bad_count += count
        reader.bad_rows.extend(listed[: max(MAX_LISTED - len(reader.bad_rows), 0)])


def unusable_rows(reader: Reader, chunks, rows, scored, group_col, room) -> list:
    """Per reason a row cannot be used, in the order they are tried (no prompt, no finite reward,
    no step, no group key, a contradiction): (how many rows, the first ``room[reason]`` of them
    as :class:`BadRow`); a row is counted under its first reason only."""
    hooks = hooks_of(reader.module)
    prompt_ok, step_ok, gkey_ok, conflict = rows["prompt_ok"], rows["step_ok"], rows["gkey_ok"], rows["conflict"]
    offsets = np.cumsum([0] + [c.hashes.size for c in chunks])
    out = []
    for (mask, why), space in zip(
        (
            (~prompt_ok, "no prompt"),
            (prompt_ok & ~scored, "reward is missing, not a number or not finite"),
            (prompt_ok & scored & ~step_ok, "step is missing or not an integer"),
            (
                prompt_ok & scored & step_ok & ~gkey_ok,
                f"no value in the group column {group_col!r}" if group_col else hooks.BAD_KEY,
            ),
            (prompt_ok & scored & step_ok & gkey_ok & conflict, hooks.CONFLICT),
        ),
        room,
    ):
        found = np.flatnonzero(mask)
        listed = []
        for i in found[: max(space, 0)].tolist():
            c = int(np.searchsorted(offsets, i, side="right") - 1)
            listed.append(BadRow(str(chunks[c].file), int(chunks[c].line_numbers()[i - offsets[c]]), why))
        out.append((int(found.size), listed))
    return out


def _incomplete_rows(rows, usable, blocks: bool) -> np.ndarray:
    """The rows of a group that lost a row (left out whole).  Rows whose group is known (step and
    key readable) mark it; blocks of rows (TRL) are known by position even when the row is
    unusable.  A row with no group key but a prompt and a step belonged to one of that prompt's
    groups of the step: which one is unknown, so they are all incomplete."""
    step, gkey, step_ok, gkey_ok = rows["step"], rows["gkey"], rows["step_ok"], rows["gkey_ok"]
    lost = step_ok & (gkey_ok | blocks) & ~usable
    pair = np.stack([step, gkey])
    incomplete = np.zeros(step.size, bool)
    if lost.any():
        incomplete = in_pairs(pair, np.unique(pair[:, lost], axis=1))
    orphan = step_ok & rows["prompt_ok"] & ~gkey_ok & (not blocks)  # not ~blocks: ~False is -1, an index array
    if orphan.any():
        by_prompt = np.stack([step, rows["hash"]])
        incomplete |= in_pairs(by_prompt, np.unique(by_prompt[:, orphan], axis=1))
    return incomplete


def _place_unreadable_lines(chunks, keep, step, gkey, incomplete, warnings) -> None:
    """Lines that are not rows (malformed JSON, CSV) belong to an unknown group of their file's
    step.  Where that step's groups otherwise all have one size (a trainer's fixed n), the groups
    short of it lost those lines and are marked ``incomplete`` (in place); elsewhere the loss
    cannot be placed, and is said."""
    for c in chunks:
        if not c.unattributed_bad:
            continue
        in_step = keep & (step == c.steps[0]) if c.steps.size else np.zeros(step.size, bool)
        if not in_step.any():
            continue
        inv, _ = pair_codes(step[in_step], gkey[in_step])
        sizes = np.bincount(inv)
        usual = Counter(sizes.tolist()).most_common(1)[0][0]
        short = sizes < usual
        if short.any() and short.sum() <= c.unattributed_bad and np.all((sizes <= usual) | (sizes % usual == 0)):
            incomplete[np.flatnonzero(in_step)[short[inv]]] = True
        else:
            warnings.append(
                f"{c.file.name}: {c.unattributed_bad} unreadable line(s) could not be placed in a group; "
                "the group(s) they belonged to may be counted short"
            )


def in_pairs(pair, bad_pairs):
    """Which columns of ``pair`` (2 × n) are among the columns of ``bad_pairs``: both numbered
    together, a pair is bad when its code is one of a bad pair's."""
    k = bad_pairs.shape[1]
    codes, n = pair_codes(np.r_[bad_pairs[0], pair[0]], np.r_[bad_pairs[1], pair[1]])
    bad = np.zeros(n, bool)
    bad[codes[:k]] = True
    return bad[codes[k:]]


def read_rollouts(paths, *, group_size: int | None = None, progress: bool | None = None, **options) -> RolloutLog:
    """Read rollout logs (verl, TRL or a plain table) into the trainer's groups.

    Parameters
    ----------
    paths : str, Path or list of them
        Files, folders or glob patterns: a TRL ``output_dir`` (or its ``completions/``), a verl
        ``rollout_data`` folder (or the run folder holding it beside ``validation_data``), tables.
    fmt : ``"auto"``, a trainer of :data:`gsd.integrations.TRAINERS` (``"trl"``, ``"verl"``, ...) or ``"table"``
        ``"auto"`` decides from the file names.
    reward : str, optional
        The reward whose zero std makes a group silent: a column / key, or a weighted sum
        ``"correct+0.5*fmt"`` (terms ``name`` or ``coef*name`` joined by ``+`` or ``-``).
        Default: verl's ``score``; TRL, the sum of its reward columns with weight 1 (TRL does not
        log its ``reward_weights``: give them here); a table, required.
    prompt_col, step_col : str, optional
        Prompt-id and step columns of a table (defaults ``prompt`` and ``step``; verl uses
        ``input``).  Without a step column, a file's step is the number its name ends with.
    group_col : str, optional
        A column (verl: a reward extra key) whose value identifies a group within a step, e.g. a
        dataset index: groups are exact even when a prompt text appears twice in a step.
    group_size : int, optional
        The size of a group that is a block of consecutive rows (TRL's ``num_generations``;
        default: inferred from the files).
    progress : bool, optional
        Show a progress bar over the files (default: when stderr is a terminal).

    Returns
    -------
    RolloutLog

    Raises
    ------
    InputError
        No file, an unreadable file, files of several runs or formats, a missing column, or no
        usable row at all.

    Examples
    --------
    >>> import json, tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> rows = [{"input": "q1", "output": "...", "score": s, "step": 1} for s in (0, 1, 1, 0)]
    >>> _ = (d / "1.jsonl").write_text("\\n".join(json.dumps(r) for r in rows) + "\\n")
    >>> log = read_rollouts(d)
    >>> log.fmt, log.rows, log.reward.tolist(), log.labels.tolist(), log.group_by
    ('verl', 4, [0.0, 1.0, 1.0, 0.0], ['q1'], 'rows of one step with the same input text')
    """
    opts = LogOptions.take(options, "read_rollouts")
    reward, prompt_col, step_col, group_col = opts.reward, opts.prompt_col, opts.step_col, opts.group_col
    group_size = checked_group_size(group_size)
    files, fmt, warnings, state_path, folders = discover_files(paths, opts.fmt)
    module = TRAINER_HOOKS.get(fmt)
    hooks = hooks_of(module)
    reward, group_col, declared, cols = columns_to_read(
        module, fmt, files, reward=reward, group_col=group_col, group_size=group_size, prompt=prompt_col, step=step_col
    )
    reader = _read_files(files, Reader(fmt, cols, reward), progress)
    context = run_context(module, group_size, warnings, state_path)
    excluded = _arrange_run(reader, module, folders, context, warnings)
    reader.pads = bool(context.state and context.state.get("pads"))
    got = _assemble(reader, group_col, warnings)
    if got is None or got["hash"].size == 0:
        detail = f"; first unusable row: {reader.bad_rows[0]}" if reader.bad_rows else ""
        raise InputError(f"LOG: no usable rollout in {len(files)} file(s){detail}")
    uniq, code, labels = _prompt_codes(got["hash"], reader.labels)
    group, n_groups = pair_codes(got["step"], got["gkey"])
    terms = reader.terms or []
    context.keyed = reader.keyed
    names = group_names(hooks, context, reward_text(terms), group_col, cols["prompt"])
    silent = _trainer_silent(hooks, got, group, n_groups)
    if hooks.REWARD_WEIGHTS_UNLOGGED and not reward and len(terms) > 1:
        warnings.append(unlogged_weights(names["reward_name"]))
    advantage_check = _check_groups(code, group, n_groups, got, module, group_col, silent, warnings)
    note = hooks.trainer_silent_note(advantage_check)
    if note and context.trainer_silent:
        warnings.append(note)
    missing = _missing_steps(module, reader, files, excluded, context, warnings)
    observable = silent_observable(hooks, silent, np.bincount(group, minlength=n_groups), warnings)
    if declared:
        names = {key: declared[key] for key in ("reward_name", "group_by", "silence", "group_size")}
    padded = count_warnings(got, reader, context, warnings)
    return RolloutLog(
        prompt=code,
        step=got["step"],
        reward=got["reward"],
        labels=labels,
        hashes=uniq,
        files=[str(f) for f in files],
        fmt=fmt,
        reward_name=names["reward_name"],
        group=group,
        group_by=names["group_by"],
        silence=names["silence"],
        group_size=names["group_size"],
        repeated_steps=context.repeated_steps,
        missing_steps=missing,
        eval_steps=context.eval_steps,
        incomplete_groups=got["incomplete_groups"],
        incomplete_rollouts=got["incomplete_rollouts"],
        trainer_silent=context.trainer_silent,
        silent=silent,
        unscorable_rollouts=got["unscorable"],
        extra_outputs=reader.extra_outputs,
        padding=padded,
        excluded_steps=excluded,
        silent_observable=observable,
        advantage_check=advantage_check,
        threshold=declared["threshold"] if declared else None,
        trainer=declared.get("trainer") if declared else None,
        warnings=warnings,
        bad_rows=reader.bad_rows,
        bad_count=reader.bad_count,
    )


def _read_files(files, reader: Reader, progress) -> Reader:
    """Every file read into the reader's chunks, with a progress bar over the files."""
    from ..io.progress import progress_bar

    disable = None if progress is None else not progress
    for path in progress_bar(files, desc="reading logs", unit="file", disable=disable, leave=False):
        read_file(path, reader)
    return reader


def _prompt_codes(hashes, labels: dict):
    """(the distinct prompt hashes, sorted; each row's code among them; each prompt's label)."""
    uniq, code = np.unique(hashes, return_inverse=True)
    return uniq, code.astype(np.int64).ravel(), np.array([labels[int(v)] for v in uniq.tolist()], dtype=object)


def checked_group_size(group_size):
    """The group size as an int (None: inferred), at least 2."""
    if group_size is not None:
        from ..validation import as_group_size

        group_size = int(as_group_size(group_size, "group_size"))
        if group_size < 2:
            raise InputError(f"group_size must be at least 2 (the trainer's group size), got {group_size}")
    return group_size


def columns_to_read(module, fmt, files, *, reward, group_col, group_size, prompt, step):
    """(reward, group column, the description a table saved by gsd's GroupTracker carries or
    None, the columns to read): a GroupTracker table says which columns it holds and how it was
    grouped; a group size or a group column the format cannot take is an InputError."""
    declared = None
    if module is None and reward is None and group_col is None:
        from ..integrations.tracker_table import read_description

        declared = read_description(files)
    if declared:
        reward, group_col = declared["reward_col"], declared["group_col"]
    if group_size is not None and not hooks_of(module).GROUP_SIZE:
        raise InputError(
            f"group_size is the number of consecutive rows of a group (TRL's num_generations); the {fmt} "
            "format groups by prompt or by --group-column"
        )
    if group_col is not None and not hooks_of(module).GROUP_COL:
        raise InputError(f"group_col: {fmt} groups are blocks of rows; use --group-size")
    defaults = (module.PROMPT_COL, module.STEP_COL) if module is not None else ("prompt", "step")
    cols = {
        "prompt": prompt or defaults[0],
        "step": step or defaults[1],
        "step_required": step is not None,
        "prompt_given": prompt is not None,
        "group": group_col,
        "silent": declared.get("silent_col") if declared else None,
    }
    return reward, group_col, declared, cols


def run_context(module, group_size, warnings, state_path) -> RunContext:
    """What the trainer module sees of the run: the group size given, the warnings so far, and
    the trainer's own state file when there is one (TRL's ``trainer_state.json``), read."""
    context = RunContext(
        group_size=group_size, group_size_given=group_size is not None, warnings=warnings, state_path=state_path
    )
    if state_path is None:
        return context
    context.state = module.read_state(state_path)
    context.state_is_final = Path(state_path).parent.name != "" and not Path(state_path).parent.name.startswith(
        "checkpoint-"
    )
    warnings.extend(context.state.get("notes", ()))
    if context.state.get("skipped"):
        warnings.append(
            f"{state_path.name}: {context.state['skipped']} log_history entr(ies) whose step is not a "
            "whole number were skipped"
        )
    return context


def _arrange_run(reader: Reader, module, folders, context, warnings) -> list:
    """A trainer's chunks as one run (left-overs of another attempt left out: a folder's run
    history) arranged by the trainer's module (its whole-run rules); the steps left out."""
    excluded: list = []
    if module is None or not any(c.hashes.size for c in reader.chunks):
        return excluded
    reader.chunks = [c for c in reader.chunks if c.hashes.size or c.unattributed_bad]
    if folders and hooks_of(module).RUN_HISTORY:  # files named one by one are read as named
        reader.chunks, excluded = run_history(reader.chunks, warnings)
    arrange = hooks_of(module).arrange
    if arrange is not None:
        reader.chunks = arrange([c for c in reader.chunks if c.hashes.size], context)
        excluded = sorted(set(excluded) | set(context.excluded_steps))
    return excluded


def group_names(hooks, context, reward_name: str, group_col, prompt_col) -> dict:
    """How the log's groups were formed and silence measured, in words, and the group size."""
    described = hooks.describe_groups(context)
    if group_col:
        group_by = f"rows of one step with the same {group_col!r}"
    elif described:
        group_by = described
    else:
        group_by = f"rows of one step with the same {prompt_col} text"
    return {
        "reward_name": reward_name,
        "group_by": group_by,
        "silence": f"zero std of {reward_name!r} within each group (every reward equal), as the trainer normalises it",
        "group_size": context.group_size if hooks.GROUP_SIZE else None,
    }


def _trainer_silent(hooks, got, group, n_groups):
    """Per group, the trainer's own verdict "every reward equal" (its ``zero_std`` rule, or the
    verdict a table saved), or None: the generic rule of :func:`silent_groups`."""
    silent = hooks.zero_std(got["reward"], group, n_groups) if hooks.zero_std is not None else None
    if got.get("verdict") is not None:  # a table that saved the trainer's verdict per group
        silent = np.zeros(n_groups, bool)
        np.logical_or.at(silent, group, got["verdict"] > 0)
    return silent


def _missing_steps(module, reader: Reader, files, excluded, context, warnings) -> list:
    """:func:`missing_steps` of the steps the chunks' files carry, the steps left out, repeated
    and evaluated."""
    have = (
        {c.file_step for c in reader.chunks if c.file_step is not None}
        | set(excluded)
        | set(context.repeated_steps)
        | set(context.eval_steps)
    )
    return missing_steps(module, have, files, warnings)


def missing_steps(module, have: set, files, warnings) -> list:
    """Steps from 1 to the last one with no file (when every file's name carries its step), with
    a warning: the figures are those of the logged rollouts.  ``have``: the steps accounted for."""
    if module is None:
        return []
    named = [module.step_of(Path(f)) for f in files]
    if not have or not all(s is not None for s in named):
        return []
    last = max(have)
    missing = sorted(set(range(1, last + 1)) - have) if last <= 10**7 else []
    if missing:
        warnings.append(
            f"{len(missing)} of the {last} steps have no log file ({_span(missing)}): the figures "
            "are those of the logged rollouts, not of the whole generation"
            + (" (TRL writes one file per logging step: logging_steps > 1)" if hooks_of(module).GROUP_SIZE else "")
        )
    return missing


def silent_observable(hooks, silent, sizes, warnings) -> bool:
    """False, with a warning, when every group is live and the trainer filters silent groups
    before the dump: the generation's silent share is not in the log (``sizes``: the groups')."""
    note = hooks.FILTER
    if not (note and silent is not None and sizes.size and not silent.any() and sizes.min() >= 2):
        return True
    warnings.append(
        f"no group is silent at any step: either none was, or the trainer removed them before the dump "
        f"({note}); the log cannot tell which, so the generation's silent share is not given "
        "(summary.silent_frac_dumped is that of the dumped groups)"
    )
    return False


def count_warnings(got, reader: Reader, context, warnings):
    """The counts the trainer module adds (short groups) and one warning per kind of row left out
    or counted apart; returns the padding rows (None: none)."""
    got["incomplete_groups"] += context.short_groups  # groups the trainer module found short
    got["incomplete_rollouts"] += context.short_rollouts
    if got["incomplete_groups"]:
        warnings.append(
            f"{got['incomplete_groups']} group(s) lost a row to an unusable line: incomplete, left out "
            f"({got['incomplete_rollouts']} usable rollouts in them)"
        )
    padded = got["padding"] if got.get("padding") is not None and got["padding"].any() else None
    n_pad = int(padded.sum()) if padded is not None else int(got.get("padded", 0))  # a log read as counts
    if n_pad:
        got["unscorable"] -= n_pad
        warnings.append(
            f"{n_pad} row(s) are padding, not generation: the trainer (trl-cgrpo: cgrpo/ "
            "metrics in trainer_state.json) stopped those prompts early and filled their block with "
            "empty, reward-less rows; they are left out of the rollouts and the wasted ones"
        )
    if got["unscorable"]:
        warnings.append(
            f"{got['unscorable']} rollout(s) have no finite reward (every reward function returned None, "
            "or an infinite reward): kept in their group as the trainer keeps them, out of its mean and std"
        )
    if reader.repeated_rows:
        warnings.append(
            f"{reader.repeated_rows} row(s) repeat an earlier row's key and reward (the same output "
            "written twice): counted once"
        )
    if reader.extra_outputs:
        warnings.append(
            f"{reader.extra_outputs} output(s) of multi-output sessions are not their session's final "
            "output: counted once per session, at its final output, as the trainer's advantage does"
        )
    return padded


def _check_groups(code, group, n_groups, got, module, group_col, silent, warnings):
    """Warnings about the groups the log allows (merged duplicates, several prompts in a group);
    where the log carries the advantages, the scaling they show, checked group by group."""
    sizes = np.bincount(group, minlength=n_groups)
    gstep = np.zeros(sizes.size, np.int64)
    gstep[group] = got["step"]
    group_warnings(sizes, gstep, pair_codes(group, code)[1] - sizes.size, module, group_col, warnings)
    check = hooks_of(module).check_advantages
    if check is None or got["advantage"] is None:
        return None
    return _advantage_check(code, group, n_groups, got, check, silent, warnings)


def group_warnings(sizes, gstep, mixed: int, module, group_col, warnings, weights=None) -> None:
    """Warnings about the groups (``sizes`` and steps ``gstep``, in the order of their (step, key)):
    several prompts in one group of a group column (``mixed``: the extra prompt-groups), groups
    of a multiple of the usual size (duplicated prompts merged), a size that changes by step.
    ``weights``: how many groups each entry stands for (distinct (step, size) pairs in the order
    of their first group: :class:`gsd.diagnose.counted.SizeTally`); default one each."""
    if mixed and group_col:
        warnings.append(
            f"the group column {group_col!r} puts several prompts in one group ({mixed} extra prompt-groups)"
        )
    if not hooks_of(module).GROUP_SIZE and not group_col and sizes.size:
        weights = np.ones(sizes.size, np.int64) if weights is None else np.asarray(weights, np.int64)
        values, first, inverse = np.unique(sizes, return_index=True, return_inverse=True)
        tally = np.bincount(inverse.ravel(), weights=weights, minlength=values.size)
        top_ = tally == tally.max()  # ties: the size seen first, as Counter(sizes).most_common
        usual = int(values[top_][np.argmin(first[top_])])
        merged = (sizes > usual) & (sizes % usual == 0) if usual > 1 else np.zeros(sizes.size, bool)
        if merged.any():
            steps = np.unique(gstep[merged])
            warnings.append(
                f"{int(weights[merged].sum())} group(s) hold a multiple of the usual {usual} rollouts (steps "
                f"{_span(steps.tolist())}): probably duplicated prompts merged into one group; "
                "log a group id or dataset index as a reward extra key and pass --group-column KEY"
            )
        # One size per step, but not the same at every step: two runs in one folder, or a changed n.
        steps_u, sidx = np.unique(gstep, return_inverse=True)
        top = np.zeros(steps_u.size, np.int64)
        bottom = np.full(steps_u.size, np.iinfo(np.int64).max)
        np.maximum.at(top, sidx, sizes)
        np.minimum.at(bottom, sidx, sizes)
        uniform = top == bottom
        if uniform.all() and np.unique(top).size > 1 and bottom.min() >= 2:
            sizes_seen = np.unique(top)
            warnings.append(
                "the group size changes between steps ("
                + ", ".join(f"{g} at steps {_span(steps_u[top == g].tolist())}" for g in sizes_seen.tolist())
                + "): two runs in one folder, or a run restarted with another rollout.n?"
            )


def _advantage_check(code, group, n_groups, got, check, silent, warnings):
    """Where the log carries the advantages, the scaling they show, checked group by group."""
    adv = got["advantage"]
    result = check(got["reward"], adv, group, n_groups, got["batch"])
    amax = np.zeros(n_groups)
    np.maximum.at(amax, group, np.abs(np.nan_to_num(adv, nan=0.0)))
    if not np.any(amax > 0):  # no advantages logged (zeros): nothing to check
        return None
    if result["scale"] is None:
        # TRL's float32 rounding leaves |A| up to ~1e-3 on a silent group of graded rewards.
        warnings.append(advantage_misfit(int((silent != (amax <= 1e-3)).sum()) if silent is not None else 0))
    return result


def unlogged_weights(reward_name: str) -> str:
    """The warning for a reward summed from several columns, each weighted 1 (TRL logs no weights)."""
    return (
        f"reward = {reward_name} with weight 1 each: TRL does not log its reward_weights; "
        "if the run weighted them, give the weights with --reward-column 'a+0.5*b'"
    )


def advantage_misfit(disagree: int) -> str:
    """The warning for logged advantages that fit no scaling (``disagree``: groups silent by the
    rewards and not by the advantages, or the reverse)."""
    return (
        "the logged advantages fit no scaling of the reward used (scale_rewards group, batch or none; "
        f"{disagree} group(s) silent under one and not the other): the reward weights probably differ "
        "from the run's reward_weights (give them with --reward-column 'a+0.5*b'), or the run "
        "aggregated rewards another way (multi_objective_aggregation)"
    )


def silent_groups(top, bottom):
    """A group is silent when its rewards are all equal: max − min within 1e-9 of the larger
    magnitude (float32 trainers round a sum such as 0.1 + 0.2 differently from 0.3)."""
    top = np.asarray(top, np.float64)
    bottom = np.asarray(bottom, np.float64)
    return (top - bottom) <= 1e-9 * np.maximum(1.0, np.maximum(np.abs(top), np.abs(bottom)))
