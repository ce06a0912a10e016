"""Scalar metric logs, read as their writers write them: one row per logged step, one column per metric.

A run without per-rollout dumps still has its trainer's per-step scalars.  Each format is read
from what its writer puts on disk:

* ``trl``: TRL's ``trainer_state.json`` (``Trainer.save_state``; also in every ``checkpoint-N/``):
  ``log_history`` is a list of dicts, one per ``Trainer.log`` call, each with ``step``; evaluation
  entries (keys ``eval_*``) and the end-of-training summary (``train_runtime`` …) are left out.
* ``tensorboard``: a folder of ``events.out.tfevents.*`` files (torch's ``SummaryWriter``,
  tensorboardX, transformers' ``TensorBoardCallback``), read with TensorBoard's own
  ``EventAccumulator`` (the ``tensorboard`` package: ``pip install '.[scalars]'`` in the checkout).  Every scalar
  tag at its logged step.  transformers' JSON of the ``TrainingArguments`` (tag ``args``) is the run's config.
* ``wandb``: an offline run folder (``wandb/offline-run-*/``, or its ``run-*.wandb`` file), the
  records W&B's SDK appends (LevelDB-log framing, one protobuf ``Record`` each), read with the
  ``wandb`` package's own protobuf classes; the history rows and the run's config.  The step is
  transformers' ``train/global_step`` when logged (TRL under ``report_to="wandb"``), else W&B's ``_step``.
* ``verl``: verl's ``trainer.logger=[file]`` JSONL (``verl.utils.tracking.FileLogger``): one
  ``{"step": s, "data": {metric: value}}`` per line.
* ``table``: any CSV / JSONL / JSON / parquet with one row per step (W&B's history export,
  ``run.history()``'s frame, a hand-made log): the step column is ``step``, ``global_step``,
  ``train/global_step``, ``_step`` or ``Step`` (the first found), or ``step_col``.

Only ``import gsd.diagnose.scalars`` is light; pandas loads on reading, ``tensorboard`` and
``wandb`` only for their formats.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import InputError, MissingExtra
from ..io.numbers import DroppedValues, step_array, step_number

__all__ = ["SCALAR_FORMATS", "ScalarLog", "read_scalars", "SCALARS_EXTRA", "scalar_log_kind"]

SCALAR_FORMATS = ("trl", "tensorboard", "wandb", "verl", "table")
#: The extra that installs the TensorBoard reader.
SCALARS_EXTRA = ".[scalars]"  # typed in the gsd checkout (grpo-gsd is not on the registry yet)
_STEP_COLUMNS = ("step", "global_step", "train/global_step", "_step", "Step")
# keys of TRL's end-of-training entry in log_history (one entry, at the last step)
_TRL_SUMMARY = ("train_runtime", "train_loss", "train_samples_per_second", "train_steps_per_second", "total_flos")
_TABLE_SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")


@dataclass
class ScalarLog:
    """A run's per-step scalars.

    Attributes
    ----------
    metrics : pandas.DataFrame
        Index ``step`` (int, increasing, one row per logged step); one float column per metric, named as
        the writer named it (TRL's TensorBoard / W&B keys keep their ``train/`` prefix).  NaN where a
        step did not log that metric.
    fmt : str
        One of :data:`SCALAR_FORMATS`.
    source : str
        The file or folder read.
    config : dict
        The run's configuration when the log holds it (TensorBoard's ``args`` text, W&B's config), else {}.
    notes : list of str
        What was left out and why.
    dropped : dict
        {metric: number of its values left out because they are not numbers}.
    """

    metrics: object
    fmt: str
    source: str
    config: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    dropped: dict = field(default_factory=dict)


def _frame(rows: dict, source: str):
    """{step: {metric: value}} → the metrics frame (steps sorted)."""
    import pandas as pd

    if not rows:
        raise InputError(f"{source}: no per-step scalar metrics in it")
    df = pd.DataFrame.from_dict(rows, orient="index").sort_index()
    df.index = df.index.astype("int64")
    df.index.name = "step"
    return df.astype("float64")


def _add(rows: dict, step: int, key: str, value, dropped: DroppedValues) -> None:
    """One metric value at its (checked) step; a value that is not a number is counted in ``dropped``."""
    v = dropped.take(key, value)
    if v is not None:
        rows.setdefault(step, {})[key] = v


# ------------------------------------------------------------------------------------------ TRL


def _read_trl(path: Path) -> ScalarLog:
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a readable trainer_state.json ({type(exc).__name__}: {exc})") from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise InputError(f"{path}: not a TRL / transformers trainer_state.json (no log_history list)")
    rows, evals, summary, dropped = {}, 0, 0, DroppedValues()
    for i, entry in enumerate(history):
        if not isinstance(entry, dict) or "step" not in entry:
            raise InputError(f"{path}: log_history[{i}] has no step: {str(entry)[:80]}")
        step = step_number(entry["step"], f"{path}: log_history[{i}]")
        if any(k.startswith("eval_") for k in entry):
            evals += 1
            continue
        if any(k in entry for k in _TRL_SUMMARY):
            summary += 1
            continue
        for k, v in entry.items():
            if k != "step":
                _add(rows, step, k, v, dropped)
    notes = dropped.notes()
    if evals:
        notes.append(f"{evals} evaluation entries (eval_*) left out")
    config = {
        k: state[k]
        for k in ("global_step", "max_steps", "logging_steps", "train_batch_size")
        if isinstance(state.get(k), int)
    }
    return ScalarLog(_frame(rows, str(path)), "trl", str(path), config, notes, dropped.counts)


# ---------------------------------------------------------------------------------- TensorBoard


def _event_dir(path: Path) -> Path:
    if path.is_file():
        return path.parent
    dirs = sorted({f.parent for f in path.rglob("events.out.tfevents.*") if f.is_file()})
    if not dirs:
        raise InputError(f"{path}: no TensorBoard event files (events.out.tfevents.*) under it")
    if len(dirs) > 1:
        shown = ", ".join(str(d) for d in dirs[:4]) + (f", ... ({len(dirs)} folders)" if len(dirs) > 4 else "")
        raise InputError(f"{path}: event files of {len(dirs)} runs ({shown}); name one run's folder")
    return dirs[0]


def _read_tensorboard(path: Path) -> ScalarLog:
    try:
        from tensorboard.backend.event_processing.event_accumulator import (
            EventAccumulator,
        )
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("tensorboard"):
            raise
        raise MissingExtra(
            f"reading TensorBoard event files needs the tensorboard package: pip install '{SCALARS_EXTRA}' in the gsd checkout",
            name="tensorboard",
        ) from None
    folder = _event_dir(path)
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})  # 0: keep every event
    acc.Reload()
    tags = acc.Tags()
    rows, dropped = {}, DroppedValues()
    for tag in tags.get("scalars", []):
        for ev in acc.Scalars(tag):
            _add(rows, step_number(ev.step, f"{folder}: tag {tag!r}"), tag, ev.value, dropped)
    config = {}
    if "args/text_summary" in tags.get("tensors", []):  # transformers' TensorBoardCallback: the TrainingArguments
        try:
            config = json.loads(acc.Tensors("args/text_summary")[-1].tensor_proto.string_val[0].decode())
        except (ValueError, IndexError, UnicodeDecodeError):
            config = {}
    notes = []
    if any(t.startswith("train/") for t in tags.get("scalars", [])):
        # transformers' end-of-training summary is logged as train/train_runtime ... at the last step
        for tag in ("train/" + k for k in _TRL_SUMMARY):
            for row in rows.values():
                row.pop(tag, None)
    return ScalarLog(
        _frame(rows, str(folder)),
        "tensorboard",
        str(folder),
        config if isinstance(config, dict) else {},
        notes + dropped.notes(),
        dropped.counts,
    )


# ------------------------------------------------------------------------------------------ W&B

_WANDB_MAGIC = b":W&B"
_WANDB_BLOCK = 32768  # LevelDB-log blocks; a record header is 7 bytes: crc32 (4), length (2), type (1)
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _wandb_records(data: bytes, source: str):
    """The payloads of a W&B ``.wandb`` file (header ``:W&B``, key 0xBEE1, version 0; LevelDB-log
    framing: a record is split at 32 KiB block ends into FIRST / MIDDLE / LAST pieces), and whether
    the file ends in a torn record (a run still writing, or killed mid-write)."""
    if data[:4] != _WANDB_MAGIC or len(data) < 7:
        raise InputError(f"{source}: not a W&B run file (it does not start with ':W&B')")
    crc0 = [zlib.crc32(bytes([t])) for t in range(5)]
    pos, pieces, torn = 7, [], False
    while pos < len(data):
        room = _WANDB_BLOCK - pos % _WANDB_BLOCK
        if room < 7:  # the block's tail is padding
            pos += room
            continue
        if pos + 7 > len(data):
            torn = True
            break
        crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0 and length == 0 and crc == 0:  # zero padding to the block's end
            pos += room
            continue
        body = data[pos + 7 : pos + 7 + length]
        if len(body) < length or kind not in (_FULL, _FIRST, _MIDDLE, _LAST) or zlib.crc32(body, crc0[kind]) != crc:
            torn = True
            break
        pos += 7 + length
        if kind == _FULL:
            yield body
            pieces = []
        elif kind == _FIRST:
            pieces = [body]
        elif pieces:
            pieces.append(body)
            if kind == _LAST:
                yield b"".join(pieces)
                pieces = []
    if torn or pieces:
        yield None


def _wandb_value(item):
    text = item.value_json
    if text:
        try:
            return json.loads(text)
        except ValueError:
            return None
    return None


def _read_wandb(path: Path) -> ScalarLog:
    files = [path] if path.is_file() else sorted(path.glob("run-*.wandb")) or sorted(path.rglob("run-*.wandb"))
    if not files:
        raise InputError(f"{path}: no W&B run file (run-*.wandb) in it")
    if len(files) > 1:
        raise InputError(
            f"{path}: {len(files)} W&B run files ({', '.join(str(f) for f in files[:3])}...); name one run's folder"
        )
    try:
        from google.protobuf.message import DecodeError
        from wandb.proto import wandb_internal_pb2 as pb
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith(("wandb", "google")):
            raise
        raise MissingExtra(
            f"reading a W&B run file needs the wandb package: pip install '{SCALARS_EXTRA}' in the gsd checkout",
            name="wandb",
        ) from None
    source = str(files[0])
    history, config, notes = [], {}, []
    for payload in _wandb_records(files[0].read_bytes(), source):
        if payload is None:
            notes.append("the run file ends in a torn record (a run still writing, or killed): read up to it")
            break
        rec = pb.Record()
        try:
            rec.ParseFromString(payload)
        except DecodeError:  # the framing was right, the content is not a Record
            notes.append("a record that does not parse was skipped")
            continue
        kind = rec.WhichOneof("record_type")
        if kind == "history":
            row = {}
            for item in rec.history.item:
                key = item.key or "/".join(item.nested_key)
                row[key] = _wandb_value(item)
            history.append(row)
        elif kind in ("config", "run"):
            updates = rec.config.update if kind == "config" else rec.run.config.update
            for item in updates:
                value = _wandb_value(item)
                # a config file's keys are {"value": v, "desc": ...}; the run record's are the values themselves
                wrapped = isinstance(value, dict) and "value" in value and set(value) <= {"value", "desc"}
                config[item.key or "/".join(item.nested_key)] = value["value"] if wrapped else value
    step_key = "train/global_step" if any("train/global_step" in h for h in history) else "_step"
    rows, dropped = {}, DroppedValues()
    for h in history:
        step = h.get(step_key)
        if step is None:
            continue
        step = step_number(step, f"{source}: history row")
        for k, v in h.items():
            if k != step_key and not k.startswith("_"):
                _add(rows, step, k, v, dropped)
    notes += dropped.notes()
    for row in rows.values():
        for k in ("train/" + k for k in _TRL_SUMMARY):
            row.pop(k, None)
    return ScalarLog(_frame(rows, source), "wandb", source, config, notes, dropped.counts)


# ----------------------------------------------------------------------------------------- verl


def _jsonl(path: Path):
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot be read ({type(exc).__name__}: {exc})") from None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield n, json.loads(line)
        except ValueError:
            raise InputError(f"{path}:{n}: not a JSON line: {line[:80]!r}") from None


def _read_verl(path: Path) -> ScalarLog:
    rows, dropped = {}, DroppedValues()
    for n, obj in _jsonl(path):
        if not (isinstance(obj, dict) and "step" in obj and isinstance(obj.get("data"), dict)):
            raise InputError(f'{path}:{n}: not a verl file-logger line ({{"step": ..., "data": {{...}}}})')
        step = step_number(obj["step"], f"{path}:{n}")
        for k, v in obj["data"].items():
            _add(rows, step, k, v, dropped)
    return ScalarLog(_frame(rows, str(path)), "verl", str(path), notes=dropped.notes(), dropped=dropped.counts)


# ---------------------------------------------------------------------------------------- table


def _read_table(path: Path, step_col=None) -> ScalarLog:
    import pandas as pd

    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            df = pd.read_csv(path)
        elif suffix == ".parquet":
            df = pd.read_parquet(path)
        elif suffix == ".jsonl":
            df = pd.DataFrame([obj for _, obj in _jsonl(path)])
        else:
            obj = json.loads(path.read_text())  # a list of rows, or {column: values}
            df = pd.DataFrame(obj if isinstance(obj, (list, dict)) else [])
    except (OSError, ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise InputError(f"{path}: not a readable table ({type(exc).__name__}: {exc})") from None
    if step_col is None:
        step_col = next((c for c in _STEP_COLUMNS if c in df.columns), None)
        if step_col is None:
            raise InputError(
                f"{path}: no step column (looked for {', '.join(_STEP_COLUMNS)}; "
                f"name one with --step-col): columns {list(df.columns)[:12]}"
            )
    elif step_col not in df.columns:
        raise InputError(f"step_col {step_col!r} is not a column of {path}: {list(df.columns)[:12]}")
    steps = pd.to_numeric(df[step_col], errors="coerce")
    notes = []
    empty = df[step_col].isna()  # rows of other keys only (W&B's system rows): no step, left out
    if empty.any():
        notes.append(f"{int(empty.sum())} rows without a {step_col!r} value left out")
        df, steps = df[~empty], steps[~empty]
    if steps.isna().any():
        bad = df[step_col][steps.isna()].iloc[0]
        raise InputError(f"{path}: column {step_col!r} must hold integer steps, got {bad!r}")
    steps = step_array(steps.to_numpy(), f"{path}: column {step_col!r}")
    metrics, dropped = _numeric_columns(df, step_col, notes)
    if not metrics:
        raise InputError(f"{path}: no numeric metric columns beside {step_col!r}")
    notes += dropped.notes()
    # one row per step; a later row of the same step (W&B logs some keys in rows of their own) fills the gaps
    table = pd.DataFrame(metrics, index=df.index).groupby(steps).first()
    table.columns = [str(c) for c in table.columns]
    table.index.name = "step"
    return ScalarLog(table, "table", str(path), notes=notes, dropped=dropped.counts)


def _numeric_columns(df, step_col, notes: list):
    """{column: float64 values} of the metric columns: a column with some numbers keeps them and
    counts its other cells (text, bool) as dropped; a column without any number is named in the
    notes.  Columns named ``_*`` (W&B's own) are left out."""
    import pandas as pd

    metrics, dropped, text = {}, DroppedValues(), []
    for c in df.columns:
        if c == step_col or str(c).startswith("_"):
            continue
        col = df[c]
        if col.dtype == bool:  # true/false is not a metric value (TRL's JSON reader says the same)
            col = col.where(False)
        elif col.dtype == object:
            col = col.mask(col.map(type).isin((bool, np.bool_)))
        values = pd.to_numeric(col, errors="coerce").astype("float64")
        lost = df[c].notna() & values.isna()
        if lost.all() and lost.any():
            text.append(str(c))
            continue
        dropped.add(str(c), df[c][lost].iloc[0] if lost.any() else None, int(lost.sum()))
        metrics[str(c)] = values.to_numpy()
    if text:
        notes.append(f"columns without a number left out: {', '.join(text[:8])}")
    return metrics, dropped


# ---------------------------------------------------------------------------------------- entry


def scalar_log_kind(path) -> str | None:
    """What scalar log ``path`` is, by its name (a verl file-logger JSONL: by its first line), or None.

    A file: TRL's ``trainer_state.json``, a TensorBoard event file, a W&B ``.wandb`` run file, a verl
    file-logger JSONL (first line ``{"step": ..., "data": {...}}``). A folder: one holding a
    ``trainer_state.json``, TensorBoard event files or a W&B run (what :func:`read_scalars` finds
    in it). ``gsd diagnose`` names ``gsd scalars`` for these instead of reading them as tables.
    """
    path = Path(path)
    if path.is_dir():
        try:
            fmt, _ = _detect(path)
        except InputError:
            return None
        return _KINDS[fmt]
    name = path.name
    if name == "trainer_state.json":
        return _KINDS["trl"]
    if name.startswith("events.out.tfevents."):
        return _KINDS["tensorboard"]
    if name.endswith(".wandb"):
        return _KINDS["wandb"]
    if path.suffix.lower() == ".jsonl" and path.is_file():
        try:
            with path.open("rb") as f:
                first = json.loads(f.readline(1 << 20) or b"null")
        except (OSError, ValueError):
            return None
        if isinstance(first, dict) and set(first) == {"step", "data"} and isinstance(first["data"], dict):
            return _KINDS["verl"]
    return None


_KINDS = {
    "trl": "TRL's trainer_state.json",
    "tensorboard": "a TensorBoard run",
    "wandb": "a W&B run",
    "verl": "verl's file-logger metrics",
}


def _detect(path: Path) -> tuple[str, Path]:
    if path.is_dir():
        for candidate in (path / "trainer_state.json",):
            if candidate.is_file():
                return "trl", candidate
        if any(path.glob("run-*.wandb")):
            return "wandb", path
        if any(path.rglob("events.out.tfevents.*")):
            return "tensorboard", path
        wandb_runs = sorted(path.glob("wandb/offline-run-*")) + sorted(path.glob("offline-run-*"))
        if len(wandb_runs) == 1:
            return "wandb", wandb_runs[0]
        raise InputError(f"{path}: holds no trainer_state.json, TensorBoard events or W&B run file; name the file")
    name = path.name
    if name == "trainer_state.json":
        return "trl", path
    if name.startswith("events.out.tfevents."):
        return "tensorboard", path
    if name.endswith(".wandb"):
        return "wandb", path
    if path.suffix.lower() == ".jsonl":
        for _, first in _jsonl(path):
            if isinstance(first, dict) and set(first) == {"step", "data"} and isinstance(first["data"], dict):
                return "verl", path
            break
        return "table", path
    if path.suffix.lower() in _TABLE_SUFFIXES:
        return "table", path
    raise InputError(
        f"{path}: not a scalar log gsd knows (trainer_state.json, a TensorBoard or W&B run, "
        f"a verl file-logger JSONL, or a {'/'.join(_TABLE_SUFFIXES)} table); give --format"
    )


def read_scalars(path, *, fmt: str = "auto", step_col: str | None = None) -> ScalarLog:
    """Read a run's per-step scalar metrics (formats: module docstring).

    Parameters
    ----------
    path : str or Path
        A file or a folder: TRL's ``output_dir`` or a ``checkpoint-N/`` (its ``trainer_state.json``), a
        TensorBoard run folder or event file, a W&B offline run folder or ``.wandb`` file (or the
        ``wandb/`` folder holding one run), a verl file-logger JSONL, or a table.
    fmt : {"auto", "trl", "tensorboard", "wandb", "verl", "table"}, optional
        Default: from the name and the first line.
    step_col : str, optional
        A table's step column (default: the first of ``step``, ``global_step``, ``train/global_step``,
        ``_step``, ``Step``).

    Returns
    -------
    ScalarLog
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"path {str(path)!r} does not exist")
    if fmt not in ("auto",) + SCALAR_FORMATS:
        raise InputError(f"fmt must be one of {('auto',) + SCALAR_FORMATS}, got {fmt!r}")
    if fmt == "auto":
        fmt, path = _detect(path)
    elif fmt == "trl" and path.is_dir():
        path = path / "trainer_state.json"
        if not path.is_file():
            raise InputError(f"{path}: no such file (TRL's output_dir holds it after save_state or a checkpoint)")
    if fmt in ("verl", "table") and path.is_dir():
        raise InputError(f"{path}: a {fmt} log is one file; name it")
    if fmt == "trl":
        return _read_trl(path)
    if fmt == "tensorboard":
        return _read_tensorboard(path)
    if fmt == "wandb":
        return _read_wandb(path)
    if fmt == "verl":
        return _read_verl(path)
    return _read_table(path, step_col)
