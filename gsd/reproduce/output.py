"""Writing results to disk atomically: a reader never sees a half-written file.

Every file goes to a temporary name in the destination folder first and is then moved over the
final name with :func:`os.replace` (atomic on POSIX and Windows within one file system).
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from pathlib import Path

__all__ = ["write_atomic", "write_json", "save_figure", "FIGURE_DPI"]

#: Resolution of every PNG the package writes (small files, readable on screen).
FIGURE_DPI = 110


def write_atomic(path, data) -> Path:
    """Write ``data`` (str or bytes) to ``path`` through a temporary file and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the usual permissions
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json(path, obj) -> Path:
    """Write ``obj`` as indented JSON (NaN written as null) atomically."""
    return write_atomic(path, json.dumps(_jsonable(obj), indent=2, allow_nan=False) + "\n")


def _jsonable(obj):
    """Plain-Python copy of ``obj``: numpy scalars/arrays → Python numbers/lists, NaN/inf → None."""
    import math

    import numpy as np

    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Path):
        return str(obj)
    return obj


def save_figure(fig, path, *, dpi: int = FIGURE_DPI) -> Path:
    """Render ``fig`` to PNG in memory and write it atomically to ``path``; returns the path."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return write_atomic(path, buf.getvalue())
