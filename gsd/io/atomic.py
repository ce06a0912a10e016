"""Atomic file writes: a reader never sees a half-written file.

Every file the package writes (reports, figures, run folders, sweep tables, plans) goes to a
temporary sibling ``.NAME.<pid>.<random>.tmp`` in the destination folder first, is flushed to
disk, and is then moved over the final name with :func:`os.replace` (atomic on POSIX and Windows
within one file system).  A process killed at any instant leaves the old file or the new one,
never half of one; a failed write removes its temporary file.

* :func:`write_atomic` — bytes or text;
* :func:`write_json` / :func:`read_json` — indented, strict JSON (NaN and ±inf become ``null``);
* :func:`write_table` — a DataFrame as parquet (or CSV for a ``.csv`` path);
* :func:`atomic_path` — a temporary path for writers that need one (``torch.save``, ...);
* :func:`remove_temps` — clear the temporary files a killed process left under a folder;
* :func:`replace_set` — replace several files of a folder as one set (all new or all old);
* :func:`make_folder` — create an output folder;
* :func:`entry_path` — the path of a name (an arm, a run, a variant, a file of a set) inside its
  folder, checked to stay there;
* :func:`check_writable` — before a command's work, whether a file option's path can be written
  (the CLI checks ``--figure``, ``--silent-figure`` and ``--output`` with it).

A destination that cannot be written (a read-only folder, a file where a folder is expected,
a folder where a file is expected, a full disk, a file-size limit, a pseudo file system such as
/proc) raises :class:`gsd.InputError` naming the path and the reason, which the command line
reports as one line; so does a file that :func:`read_json` finds damaged.

Only the standard library is imported here; numpy and pandas are used when given.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shutil
import uuid
from pathlib import Path

__all__ = [
    "write_atomic",
    "write_json",
    "read_json",
    "write_table",
    "atomic_path",
    "jsonable",
    "remove_temps",
    "replace_set",
    "make_folder",
    "entry_path",
    "check_writable",
    "writing",
    "TEMP_GLOB",
]

#: Glob matching the temporary files of this module (``.NAME.<pid>.<random>.tmp``).
TEMP_GLOB = ".*.tmp"

# OSErrors that say the destination cannot take the write: the user's choice of path (or disk),
# not a bug, so they become one-line input errors.  Anything else keeps its traceback.
_DESTINATION_ERRNOS = frozenset(
    getattr(errno, name)
    for name in (
        "EACCES",
        "EPERM",
        "EROFS",
        "ENOTDIR",
        "EISDIR",
        "EEXIST",
        "ENAMETOOLONG",
        "ENOSPC",
        "EDQUOT",
        "ELOOP",
        "EFBIG",
        "ENOENT",
        "EXDEV",
        "ENOTEMPTY",
    )
    if hasattr(errno, name)
)


def _unwritable(path, exc: OSError):
    """The InputError for an OSError that says ``path`` cannot be written."""
    from ..errors import InputError

    reason = {
        errno.ENOTDIR: "a file is in the way of a folder on the path",
        errno.EEXIST: "a file is in the way of a folder on the path",
        errno.EISDIR: "it is a folder, a file is expected",
        errno.ENOENT: "the folder cannot hold files (a pseudo file system such as /proc, or it vanished)",
        errno.EFBIG: "the file is larger than this process may write (file-size limit, or a full quota)",
    }.get(exc.errno or 0, exc.strerror or str(exc))
    return InputError(f"cannot write {str(path)!r}: {reason}")


@contextlib.contextmanager
def writing(path):
    """Turn any OS error raised while writing under ``path`` (a name too long, a full disk, a
    read-only or vanished folder) into one InputError naming the path and the reason."""
    from ..errors import InputError

    try:
        yield
    except InputError:
        raise
    except OSError as exc:
        raise _unwritable(path, exc) from None


def _writable_name(path) -> Path:
    """``path`` as a Path; a NUL character, which no file system accepts (the OS calls raise
    ValueError, not OSError), is the user's path error."""
    path = Path(path)
    if "\x00" in str(path):
        from ..errors import InputError

        raise InputError(f"cannot write {str(path)!r}: a path cannot hold a NUL character")
    return path


def _entry_fault(name) -> str | None:
    """Why ``name`` is not one plain entry of a folder (None when it is)."""
    if not isinstance(name, str):
        return f"a name must be text, got {type(name).__name__}"
    if name in ("", ".", ".."):
        return "it names no entry of its own"
    if "\x00" in name:
        return "a path cannot hold a NUL character"
    if "/" in name or "\\" in name or (os.altsep and os.altsep in name):
        return "a name cannot hold a path separator"
    return None


def entry_path(folder, name, *, what: str) -> Path:
    """``folder / name`` for a ``name`` that comes from a config, a file or a manifest, checked
    to be one plain entry of ``folder``: not empty, not ``.`` or ``..``, no path separator, no NUL.

    Every such name becomes a path here, so no arm, run, variant or manifest entry can make gsd
    write or delete outside the folder it was given (``'../../escape'`` is refused, not
    followed).  ``what`` names the name in the error: ``"campaign arm"``, ``"variant"``...
    """
    fault = _entry_fault(name)
    if fault is not None:
        from ..errors import InputError

        raise InputError(f"{what} {name!r}: {fault}; it becomes a folder or file name under {str(folder)!r}")
    return Path(folder) / name


def make_folder(path) -> Path:
    """Create the folder ``path`` (and its parents) if needed; returns it as a Path.

    A file where the folder (or a parent) should be, or a parent that cannot be written, raises
    :class:`gsd.InputError` naming the path.
    """
    path = _writable_name(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # every way mkdir fails is about the path (or its file system)
        raise _unwritable(path, exc) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise _unwritable(path, PermissionError(errno.EACCES, "permission denied (read-only folder)"))
    return path


def check_writable(path, option: str) -> Path:
    """Before any work: an InputError naming ``option`` when the file ``path`` could not be written
    later (a folder there, a file in the way of its folder, a read-only or pseudo file system).
    Probes by creating and removing a temporary file (this module's pattern) in the nearest
    folder that exists; creates nothing else."""
    from ..errors import InputError

    try:
        path = _writable_name(path)
    except InputError as exc:
        raise InputError(f"{option}: {exc}") from None
    if path.is_dir():
        raise InputError(f"{option}: cannot write {str(path)!r}: it is a folder, a file name is expected")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise InputError(f"{option}: cannot write {str(path)!r}: a file is in the way of a folder on the path")
    probe = folder / f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InputError(f"{option}: {_unwritable(path, exc)}") from None
    return path


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary sibling of ``path`` to write; on success it replaces ``path``.

    The parent folder is created.  If the block raises, the temporary file is removed and
    ``path`` is left as it was::

        with atomic_path(run / "checkpoint.pt") as tmp:
            torch.save(state, tmp)
    """
    path = _writable_name(path)
    make_folder(path.parent)
    if path.is_dir():
        raise _unwritable(path, IsADirectoryError(errno.EISDIR, "is a directory"))
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    except OSError as exc:
        if exc.errno not in _DESTINATION_ERRNOS:
            raise
        raise _unwritable(path, exc) from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path, data) -> Path:
    """Write ``data`` (str as UTF-8, or bytes) to ``path`` atomically; returns the path."""
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_bytes(payload)
    return path


def jsonable(obj):
    """Plain-Python copy of ``obj`` for strict JSON: numpy scalars/arrays → Python numbers/lists,
    NaN/±inf → None, Path → str, dict keys → str."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if hasattr(obj, "tolist") and hasattr(obj, "dtype"):  # numpy arrays and scalars
        obj = obj.tolist()
        if isinstance(obj, list):
            return jsonable(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_json(path, obj) -> Path:
    """Write ``obj`` as indented JSON atomically (keys in insertion order, NaN/±inf as ``null``,
    other non-JSON objects as their ``str``); returns the path."""
    return write_atomic(path, json.dumps(jsonable(obj), indent=2, allow_nan=False, default=str) + "\n")


def read_json(path):
    """The content of a JSON file; a damaged one (not UTF-8 JSON, e.g. cut short) raises
    :class:`gsd.InputError` naming it."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        from ..errors import InputError

        raise InputError(
            f"{str(path)!r} is damaged (not JSON: {str(exc).splitlines()[0][:80]}); "
            "delete it, or the folder, and run again"
        ) from None


def write_table(path, df) -> Path:
    """Write the DataFrame ``df`` (without its index) atomically: CSV if ``path`` ends in
    ``.csv``, parquet otherwise; returns the path."""
    path = Path(path)
    with atomic_path(path) as tmp:
        if path.suffix.lower() == ".csv":
            df.to_csv(tmp, index=False)
        else:
            try:
                df.to_parquet(tmp, index=False)
            except (TypeError, ValueError, NotImplementedError) as exc:
                if not type(exc).__module__.startswith("pyarrow"):
                    raise
                raise _unparquetable(path, df, exc) from None
    return path


class ParquetStream:
    """A parquet file written one table of numpy columns at a time (a row group each; its schema:
    the first's), for a table too long to hold whole.  Write it inside a staging folder
    (:func:`replace_set`), which moves it into place whole when the set is complete."""

    def __init__(self, path):
        self.path, self.writer = Path(path), None

    def __enter__(self):
        return self

    def write(self, columns: dict) -> None:
        import numpy as np
        import pyarrow as pa
        import pyarrow.parquet as pq

        arrays = {c: np.asarray(v) for c, v in columns.items()}
        table = pa.table({c: v.tolist() if v.dtype == object else v for c, v in arrays.items()})
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.path, table.schema)
        self.writer.write_table(table.cast(self.writer.schema))

    def __exit__(self, *exc):
        if self.writer is not None:
            self.writer.close()
        return False


def _unparquetable(path, df, exc):
    """The InputError for a table parquet cannot hold as it is: a column of mixed types (ids
    that are numbers in some rows and text in others) would have to change its values."""
    from ..errors import InputError

    for name in df.columns:
        col = df[name]
        if col.dtype == object:
            kinds = sorted({type(v).__name__ for v in col.dropna().tolist()})
            if len(kinds) > 1:
                return InputError(
                    f"cannot write {str(path)!r} as parquet: column {str(name)!r} mixes {', '.join(kinds)} "
                    "values and parquet holds one type per column; write .csv, or give the column one type"
                )
    return InputError(f"cannot write {str(path)!r} as parquet: {str(exc).splitlines()[0][:160]}")


def remove_temps(folder) -> list[Path]:
    """Delete the temporary files and staging folders (:data:`TEMP_GLOB`) that a killed writer
    left anywhere under ``folder`` (sub-folders included, e.g. a run's ``rollouts/``).

    Only for a folder no other live process is writing to (hold its lock,
    :func:`gsd.io.lock.hold_folder`); returns what was removed.
    """
    removed = []
    for tmp in sorted(Path(folder).rglob(TEMP_GLOB)):
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp.exists() or tmp.is_symlink():
            tmp.unlink(missing_ok=True)
        else:
            continue  # inside a staging folder removed above
        removed.append(tmp)
    return removed


# The staging folder of replace_set lists the names it replaces in this file once every file of
# the set is on disk; a staging folder without it is an unfinished set, thrown away.
_SET_MANIFEST = ".set-manifest.json"


@contextlib.contextmanager
def replace_set(folder, members=()):
    """Write a set of files into ``folder`` so that it holds the whole new set or the whole old one.

    Yields a staging folder (a hidden sibling of the files, ``.set.<pid>.<random>.tmp``): write
    every file of the new set there under its final name.  When the block ends, the staged files
    are moved over the old ones, and the names in ``members`` that the new set lacks are removed
    (a figure of the previous set that this one does not draw).  A block that raises (a full disk
    while the last file is written) leaves the folder as it was.  A process killed while moving
    leaves a complete staged set, which the next :func:`replace_set` on the folder finishes
    moving first.  Hold the folder's lock (:func:`gsd.io.lock.hold_folder`) around it::

        with hold_folder(out), replace_set(out, OUTPUT_FILES) as stage:
            write_table(stage / "steps.parquet", steps)
            write_json(stage / "summary.json", summary)
    """
    folder = make_folder(folder)
    for name in members:
        entry_path(folder, name, what="member of the set")
    for left in sorted(folder.glob(".set.*.tmp")):
        if left.is_symlink() or not left.is_dir():  # not a staging folder this module made
            left.unlink(missing_ok=True)
            continue
        _finish_set(left, folder)
    stage = folder / f".set.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        stage.mkdir()
        yield stage
        names = sorted(p.name for p in stage.iterdir() if not p.name.startswith("."))
        write_json(stage / _SET_MANIFEST, {"write": names, "remove": sorted(set(members) - set(names))})
        _fsync_dir(stage)
        _finish_set(stage, folder)
    except OSError as exc:
        if exc.errno not in _DESTINATION_ERRNOS:
            raise
        raise _unwritable(folder, exc) from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _finish_set(stage: Path, folder: Path) -> None:
    """Move a complete staged set into ``folder`` (idempotent); drop an incomplete one, and one
    whose manifest names anything but plain entries of the folder (it was not written by
    :func:`replace_set`: nothing it names outside the folder is moved or removed)."""
    try:
        manifest = json.loads((stage / _SET_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        shutil.rmtree(stage, ignore_errors=True)
        return
    if not isinstance(manifest, dict) or not all(
        isinstance(n, list) and all(_entry_fault(x) is None for x in n)
        for n in (manifest.get("write"), manifest.get("remove"))
    ):
        shutil.rmtree(stage, ignore_errors=True)
        return
    for name in manifest["write"]:
        if (stage / name).exists():  # absent: moved before a kill
            os.replace(stage / name, folder / name)
    for name in manifest["remove"]:
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            (folder / name).unlink()
    _fsync_dir(folder)
    shutil.rmtree(stage, ignore_errors=True)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system can sync a folder
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
