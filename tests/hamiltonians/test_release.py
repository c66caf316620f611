"""Freed heap handed back (:mod:`hamiltonians.release`): after many medium arrays are freed the
resident set stays up until :func:`release_freed_memory`, which brings it down (glibc only)."""

import sys

import numpy as np
import pytest

from hamiltonians.release import release_freed_memory
from nnqs.training.memory_peaks import resident_bytes

MIB = 2**20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_freed_pieces_are_returned():
    if not release_freed_memory():
        pytest.skip("no malloc_trim in this C library")
    before = resident_bytes()
    # 64 KiB pieces (below glibc's mmap threshold: they live on the heap), all freed but the last,
    # which pins the heap's top so that free() alone cannot shrink it
    pieces = [np.ones(8192) for _ in range(4000)]   # 250 MiB
    kept = pieces[-1]
    del pieces
    held = resident_bytes()
    assert release_freed_memory()
    released = resident_bytes()
    assert held - released > 100 * MIB, (before, held, released)
    assert kept.sum() == 8192
