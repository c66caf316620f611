"""Freed memory handed back to the operating system.

glibc keeps the heap that many medium-sized arrays freed (the pieces of a sparse matrix, a hash
table's old buffers) for reuse, so a process's resident set stays at the peak of its largest
build long after it. :func:`release_freed_memory` (``malloc_trim(0)``) returns it; the builds of
selected CI call it when they end, so the resident set between phases is what is held. Elsewhere
(no glibc) it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

__all__ = ["release_freed_memory"]


@functools.lru_cache(maxsize=1)
def _trim():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc.malloc_trim
    except (OSError, AttributeError):
        return None


def release_freed_memory() -> bool:
    """Return the heap's freed pages to the system; whether it could (glibc's ``malloc_trim``)."""
    trim = _trim()
    if trim is None:
        return False
    trim(0)
    return True
