"""Keep freed heap memory for reuse in a ``gsd`` process (glibc's ``mallopt``).

A large simulator step (10^5 prompts) makes a few dozen temporary arrays of hundreds of KB.
By default glibc hands memory of that size back to the system when it is freed (``mmap`` above
a threshold, and trimming the heap above twice that), so the next step touches fresh pages and
pays a page fault for every 4 KB: 15–20 % of a 10^5 × 64 step, measured with the numpy engine
before it kept its step's arrays from step to step (it now takes no page fault at that size
without this module, and its ratio to a plain numpy loop is the same with it or without).
Raising the two thresholds keeps that memory in the process for the next step.  The change is
process-wide and lasts until the process ends, so only the ``gsd`` command applies it
(:func:`gsd.cli.run`); a program that calls gsd as a library keeps its own allocator settings
(no library call changes them) and can ask for the same with the environment variables ``MALLOC_MMAP_THRESHOLD_=33554432
MALLOC_TRIM_THRESHOLD_=134217728``, or by calling :func:`keep_freed_memory`.
"""

from __future__ import annotations

import sys

__all__ = ["keep_freed_memory"]

#: Blocks up to this size come from the heap, not from their own mapping (glibc's largest
#: dynamic value on 64-bit systems).
MMAP_THRESHOLD = 32 << 20
#: Free memory at the top of the heap up to this size is kept, not returned.
TRIM_THRESHOLD = 128 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameter numbers


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds (:data:`MMAP_THRESHOLD`, :data:`TRIM_THRESHOLD`)
    for this process; False where the C library is not glibc (nothing changes there)."""
    import os

    try:
        if not sys.platform.startswith("linux") or not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"):
            return False
    except (ValueError, OSError, AttributeError):  # no such name: not glibc
        return False
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
            libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
        )
    except (OSError, AttributeError):
        return False
