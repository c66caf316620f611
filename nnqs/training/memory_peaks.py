"""The resident memory a run's phases actually took: the measurement the memory plan is held to.

Rules:

* A phase is a named block (``with phase("loop.diagonalise"): ...``). Its peak is the process's
  resident-set high-water mark (``VmHWM`` of ``/proc/self/status``) over the block: the mark is
  reset (``/proc/self/clear_refs`` ``5``, Linux) when a phase opens, and read when one opens or
  closes; every open phase takes the largest mark read while it was open, so nested phases give
  each level its own peak. A phase entered several times (one per cycle) keeps its largest.
* A phase's entry is the resident set when it opened (of the entry whose peak was kept): what
  the run held before the phase's own work, so that a peak splits into what was held and what the
  phase added.
* A phase hands the heap it freed back to the system when it ends
  (:func:`hamiltonians.release.release_freed_memory`), so that the next phase starts from what is
  held, not from the largest allocation so far.
* Phases are recorded into the :class:`PeakMemory` made current by :meth:`PeakMemory.recording`
  (a context variable); with none current, :func:`phase` costs nothing and records nothing, so
  library code marks its phases unconditionally.
* Where the mark cannot be reset (not Linux, a locked-down ``/proc``) the peaks are the process's
  peak so far (``getrusage``'s ``ru_maxrss``), and :attr:`PeakMemory.resettable` says so.
"""

from __future__ import annotations

import contextlib
import contextvars
import resource
import sys
from collections.abc import Iterator

from hamiltonians.release import release_freed_memory

__all__ = ["PeakMemory", "phase", "resident_bytes"]

_CURRENT: contextvars.ContextVar[PeakMemory | None] = contextvars.ContextVar("nnqs_peak_memory", default=None)


def _status(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def resident_bytes() -> int:
    """The process's resident set now (bytes; its peak so far where ``/proc`` is missing)."""
    now = _status("VmRSS")
    return now if now is not None else _max_rss()


def _max_rss() -> int:
    scale = 1 if sys.platform == "darwin" else 1024   # bytes on macOS, KiB on Linux
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * scale


def _reset() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class PeakMemory:
    """Peak resident bytes per phase (see the module).

    Attributes:
        peaks: ``{phase name: bytes}``, in the order the phases first opened.
        entries: ``{phase name: bytes}``, the resident set when the phase opened (the entry whose
            peak is kept).
        resettable: whether each peak is its phase's own (else the process's peak so far).
        baseline: the resident set when recording began (bytes).
    """

    def __init__(self) -> None:
        self.peaks: dict[str, int] = {}
        self.entries: dict[str, int] = {}
        self._open: list[str] = []
        self.resettable = _reset() and _status("VmHWM") is not None
        self.baseline = resident_bytes()

    def _mark(self) -> int:
        mark = _status("VmHWM") if self.resettable else None
        return mark if mark is not None else _max_rss()

    def _fold(self) -> None:
        mark = self._mark()
        for name in self._open:
            self.peaks[name] = max(self.peaks.get(name, 0), mark)

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Record ``name``'s peak over the block."""
        self._fold()
        entry, before = resident_bytes(), self.peaks.get(name, 0)
        self._open.append(name)
        self.peaks[name] = 0   # this entry's own peak, folded into the kept one below
        if self.resettable:
            _reset()
        try:
            yield
        finally:
            self._fold()
            self._open.remove(name)
            if self.peaks[name] >= before:
                self.entries[name] = entry
            self.peaks[name] = max(self.peaks[name], before)
            release_freed_memory()

    @contextlib.contextmanager
    def recording(self) -> Iterator[PeakMemory]:
        """Make this the recorder :func:`phase` writes to within the block."""
        token = _CURRENT.set(self)
        try:
            yield self
        finally:
            _CURRENT.reset(token)

    @property
    def peak(self) -> int:
        """The largest peak of any phase (the baseline where none ran)."""
        return max([self.baseline, *self.peaks.values()])

    def to_dict(self) -> dict:
        return {"peaks": dict(self.peaks), "entries": dict(self.entries), "peak": self.peak,
                "baseline": self.baseline, "resettable": self.resettable}


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """``name``'s peak into the current :class:`PeakMemory` (nothing where none records)."""
    recorder = _CURRENT.get()
    if recorder is None:
        yield
        return
    with recorder.phase(name):
        yield
