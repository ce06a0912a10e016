"""Find a run's log files: folders searched, glob patterns matched, the trainer's format detected from the
file names, the files put in step order.

A folder is read as one run: one trainer's files in one dump folder (a verl validation dump
beside the training one is left out, with a note); files of two formats or of several runs are an
error, never a mix.  The format is a trainer's name (its module in :mod:`gsd.integrations` says
which files are its own and the step each name carries), ``"table"`` for any CSV, parquet or
JSONL file, or ``"auto"`` (from the file names).
"""

from __future__ import annotations

import glob as _glob
import os
import re
from pathlib import Path

from ..integrations import TRAINERS, trainer_modules
from ..integrations.contract import TABLE, TableHooks, resolve
from ..validation import InputError

__all__ = [
    "FORMATS",
    "TRAINER_HOOKS",
    "hooks_of",
    "find_log_files",
    "detect_format",
    "discover_files",
    "file_step",
]

#: Formats understood by :func:`gsd.diagnose.read_rollouts` (``"auto"`` guesses from the file names).
FORMATS = ("auto",) + TRAINERS + ("table",)

#: {name: the trainer module's hooks}, each checked against the contract (gsd.integrations.contract).
TRAINER_HOOKS = {name: resolve(module) for name, module in trainer_modules().items()}
_TABLE_SUFFIXES = (".csv", ".parquet", ".jsonl", ".json")


def hooks_of(module) -> TableHooks:
    """A trainer's hooks, or a plain table's (every optional hook at its default)."""
    return TABLE if module is None else module


def _walk(folder: Path, hidden: bool = False) -> list[Path]:
    """The files under ``folder`` (hidden files skipped unless ``hidden``; symlinked folders not
    followed), or an InputError for an unreadable or huge tree."""

    def unreadable(exc):
        raise InputError(f"LOG: cannot read the folder {str(exc.filename)!r} ({exc.strerror})")

    files, seen = [], 0
    for root, dirs, names in os.walk(folder, onerror=unreadable):
        dirs[:] = [d for d in dirs if hidden or not d.startswith(".")]
        seen += len(dirs) + len(names)
        if seen > _MAX_FOLDER_ENTRIES:
            raise InputError(
                f"LOG: {str(folder)!r} holds more than {_MAX_FOLDER_ENTRIES:,} files and folders; "
                "name the log files or the run's log folder"
            )
        files.extend(Path(root, n) for n in names if hidden or not n.startswith("."))
    return [p for p in files if p.is_file()]


# A folder is searched recursively; beyond this many entries it is not a log folder (``/``, a home).
_MAX_FOLDER_ENTRIES = 200_000


def _glob_files(pattern: str) -> list[Path]:
    """The files a glob pattern matches, sorted.  A ``**`` pattern is matched over a walk that does
    not follow symlinked folders and stops at :data:`_MAX_FOLDER_ENTRIES` entries (Python's own
    recursive glob follows them, and a symlink loop makes it walk for ever); ``*`` and ``?`` do not
    match a leading dot, as in glob."""
    import fnmatch

    parts = Path(pattern).parts
    if "**" not in parts:
        return sorted(Path(m) for m in _glob.glob(pattern) if Path(m).is_file())
    first = next(i for i, part in enumerate(parts) if _glob.has_magic(part))
    root = Path(*parts[:first]) if first else Path(".")
    rules = [None if part == "**" else re.compile(fnmatch.translate(part)) for part in parts[first:]]
    hidden_ok = [part.startswith(".") for part in parts[first:]]

    def match(names, i=0) -> bool:
        if i == len(rules):
            return not names
        if rules[i] is None:  # ** : zero or more folders
            return match(names, i + 1) or (bool(names) and not names[0].startswith(".") and match(names[1:], i))
        return (
            bool(names)
            and (hidden_ok[i] or not names[0].startswith("."))
            and bool(rules[i].match(names[0]))
            and match(names[1:], i + 1)
        )

    if not root.is_dir():
        return []
    found = [p for p in _walk(root, hidden=True) if match(p.relative_to(root).parts)]
    return sorted(found)


def _format_of(path: Path):
    for name, module in TRAINER_HOOKS.items():
        if module.is_log_file(path):
            return name
    return None


def _files_in_folder(folder: Path, fmt: str, notes: list) -> list[Path]:
    """The log files of one run under ``folder``: one format, one dump folder."""
    files = _walk(folder)
    claims = [_format_of(p) for p in files]  # a file goes to the first trainer that claims it
    by_fmt = {name: [p for p, c in zip(files, claims) if c == name] for name in TRAINER_HOOKS}
    present = [name for name in TRAINER_HOOKS if by_fmt[name]]
    if fmt == "auto" and len(present) > 1:
        found = " and ".join(f"{TRAINER_HOOKS[n].FILE_DESCRIPTION} files ({len(by_fmt[n])})" for n in present)
        raise InputError(
            f"LOG: {str(folder)!r} holds {found}: pass --format "
            f"{' or --format '.join(present)}, or name the folder of one run"
        )
    if fmt in TRAINER_HOOKS and not by_fmt[fmt]:
        module = TRAINER_HOOKS[fmt]
        # A dump under names the trainer does not use: every file of its type (the rows give the step).
        loose = [p for p in files if p.suffix.lower() in module.SUFFIXES]
        if not loose and present:
            other = present[0]
            raise InputError(
                f"format {fmt}: no {module.FILE_DESCRIPTION} file in {folder}, but "
                f"{len(by_fmt[other])} {TRAINER_HOOKS[other].FILE_DESCRIPTION} file(s): use --format {other}"
            )
        by_fmt[fmt] = loose
    chosen = fmt if fmt in TRAINER_HOOKS else (present[0] if fmt == "auto" and present else None)
    if chosen is None:
        return [p for p in files if p.suffix.lower() in _TABLE_SUFFIXES]
    module = TRAINER_HOOKS[chosen]
    found = by_fmt[chosen]
    folder_of = hooks_of(module).dump_folder
    parents = sorted({folder_of(p) for p in found})
    is_validation = hooks_of(module).is_validation_folder
    if len(parents) > 1 and is_validation is not None:
        training = [d for d in parents if not is_validation(d)]
        left = [d for d in parents if is_validation(d)]
        if len(training) == 1 and left:
            notes.append(
                f"read the training dump {training[0]}; left out the validation dump(s) " + ", ".join(map(str, left))
            )
            parents = training
            found = [p for p in found if folder_of(p) == training[0]]
    if len(parents) > 1:
        raise InputError(
            f"LOG: {str(folder)!r} holds {module.FILE_DESCRIPTION} files in {len(parents)} "
            f"folders ({', '.join(map(str, parents[:4]))}{', ...' if len(parents) > 4 else ''}): "
            "name the folder of one run (files of several runs are never mixed)"
        )
    return found


def discover_files(paths, fmt: str):
    """(files sorted by step, format, notes, run-state path or None, folders named)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    found: list[Path] = []
    notes: list[str] = []
    folders: list[Path] = []
    for raw in paths:
        text = str(raw)
        path = Path(text)
        if path.is_dir():
            found.extend(_files_in_folder(path, fmt, notes))
            folders.append(path)
        elif path.is_file():
            found.append(path)
        elif any(ch in text for ch in "*?["):
            matches = _glob_files(text)
            if not matches:
                raise InputError(f"LOG: the pattern {text!r} matches no file")
            found.extend(matches)
        elif path.exists():  # a FIFO, a socket, a device: reading it could block for ever
            raise InputError(f"LOG: {text!r} is not a regular file (a pipe, a socket or a device)")
        else:
            raise InputError(f"LOG: {text!r} is neither a file, a folder nor a glob pattern that matches")
    unique = list(dict.fromkeys(p.resolve() for p in found))
    named = [Path(str(raw)) for raw in paths if Path(str(raw)).is_file()]
    _refuse_scalar_logs(named + [p for p in found if p.name == "trainer_state.json"] if unique else paths, fmt)
    if not unique:
        expected = ", ".join(m.FILE_DESCRIPTION for m in TRAINER_HOOKS.values())
        raise InputError(
            f"LOG: no rollout log file found in {', '.join(map(str, paths))} "
            f"(expected {expected} or a CSV/parquet/JSONL table)"
        )
    if fmt == "auto":
        fmt = detect_format(unique)
    module = TRAINER_HOOKS.get(fmt)
    if module is not None:
        wrong = next((p for p in unique if p.suffix.lower() not in module.SUFFIXES), None)
        if wrong is not None:
            raise InputError(f"format {fmt} reads {module.FILE_DESCRIPTION} files, got {wrong}")
        by_step: dict[int, Path] = {}
        for p in unique:
            s = module.step_of(p)
            if s is None:
                continue
            if s in by_step:
                raise InputError(
                    f"LOG: step {s} is in two files, {by_step[s]} and {p} (two runs, or a validation "
                    "dump beside the training one?): name the files of one run"
                )
            by_step[s] = p
        parents = sorted({hooks_of(module).dump_folder(p) for p in unique})
        if len(parents) > 1:
            notes.append(f"files read from {len(parents)} folders: " + ", ".join(map(str, parents)))
    unique.sort(key=lambda p: (file_step(module, p) is None, file_step(module, p) or 0, str(p)))
    find_state = hooks_of(module).find_state
    state = find_state(folders or sorted({p.parent for p in unique})) if find_state else None
    return unique, fmt, notes, state, folders


def _refuse_scalar_logs(paths, fmt: str) -> None:
    """A scalar log (per-step metrics, no rollouts) given to ``gsd diagnose``: one line naming ``gsd scalars``."""
    if fmt not in ("auto", "table"):
        return
    from .scalars import scalar_log_kind

    for raw in paths:
        kind = scalar_log_kind(raw)
        if kind is not None:
            raise InputError(
                f"LOG: {str(raw)!r} is {kind}, per-step metrics without rollouts: read it with `gsd scalars {raw}`"
            )


def file_step(module, p: Path):
    """The step a file's name carries: the trainer's naming, else the number the name ends with."""
    if module is not None:
        return module.step_of(p)
    return _step_from_name(p)


def find_log_files(paths, fmt: str = "auto") -> list[Path]:
    """The log files named by ``paths`` (files, folders or glob patterns), sorted by step.

    A folder is searched recursively for ``completions_*.parquet`` (TRL), ``{step}.jsonl``
    (verl) or any table file, depending on ``fmt``; a folder holding both TRL and verl files,
    or one trainer's files in several folders (other than a verl validation dump beside the
    training one), is an error rather than a mix.
    """
    return discover_files(paths, fmt)[0]


def _step_from_name(p: Path):
    m = re.search(r"(\d{1,18})$", p.stem)
    return int(m.group(1)) if m else None


def detect_format(files) -> str:
    """The trainer whose dump files these all are (``"trl"``: ``completions_*.parquet``,
    ``"verl"``: ``{step}.jsonl``, ...), else ``"table"``."""
    kinds = {_format_of(Path(f)) for f in files}
    return kinds.pop() if len(kinds) == 1 and None not in kinds else "table"
