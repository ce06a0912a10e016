"""The user's numbers and files as the user wrote them: one number parser that keeps the text for
its messages, and one place where reading a user's file turns an OS error into an input error
naming the path.  Imports nothing heavy (the CLI uses it at start-up)."""

from __future__ import annotations

import contextlib
import math
import os

from ..errors import InputError

__all__ = ["parse_real", "reading", "refuse_binary"]

_INF_WORDS = frozenset({"inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"})


def parse_real(text, what: str) -> float:
    """``float(text)``, refusing a number that float64 cannot hold (``1e400`` is not ``inf``,
    ``1e-400`` is not ``0``): the error names ``what`` and shows the text as typed.

    NaN and inf written as such pass through (the caller's bounds judge them, showing the same
    text the user typed); a text that is not a number raises ValueError, as ``float`` does.
    """
    value = float(text)
    typed = str(text).strip().lower()
    if math.isinf(value) and typed not in _INF_WORDS:
        raise InputError(f"{what} = {str(text).strip()}: beyond float64's range (|x| <= 1.8e308)")
    if value == 0.0 and any(ch in "123456789" for ch in typed.split("e")[0]):
        raise InputError(
            f"{what} = {str(text).strip()}: below float64's smallest positive number (4.9e-324), it would be read as 0"
        )
    return value


@contextlib.contextmanager
def reading(path, what: str):
    """Turn any OS error raised while reading the user's file ``path`` (permission, a folder, a
    vanished file, an I/O error) into one InputError naming ``what`` and the path."""
    try:
        yield
    except InputError:
        raise
    except IsADirectoryError:
        raise InputError(f"{what}: {str(path)!r} is a folder, a file is expected") from None
    except OSError as exc:
        raise InputError(f"{what}: cannot read {str(path)!r} ({exc.strerror or type(exc).__name__})") from None


#: Bytes looked at, at each end of a text file, for NUL bytes.
SNIFF_BYTES = 1 << 16


def refuse_binary(path, what: str) -> None:
    """An InputError when a text file (CSV, JSONL) has a NUL byte in its first or last
    :data:`SNIFF_BYTES` bytes: a binary file under a text name, or a file of zeros (preallocated,
    sparse, or cut short by a crash), refused before any big read.  Text logs never hold NUL."""
    with reading(path, what):
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(SNIFF_BYTES)
            tail = b""
            if size > 2 * SNIFF_BYTES:
                fh.seek(size - SNIFF_BYTES)
                tail = fh.read(SNIFF_BYTES)
    for part, offset in ((head, 0), (tail, size - len(tail))):
        at = part.find(b"\x00")
        if at >= 0:
            zeros = (
                " (only NUL bytes there: a preallocated or sparse file, or one cut short by a crash?)"
                if part.count(b"\x00") == len(part)
                else ""
            )
            raise InputError(f"{what}: {str(path)!r} holds a NUL byte at byte {offset + at:,}: not a text file{zeros}")
