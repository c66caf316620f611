"""A run folder belongs to one run at a time (docs/design.md §7).

:func:`claim_run_folder` takes an exclusive lock on ``OUT/.nnqs.lock`` for the run's lifetime
(``filelock``, so it works wherever PyTorch does) and records the holder's PID in
``OUT/.nnqs.owner``; a second run on the folder fails at once, naming that PID. A folder that
already holds a run is refused unless the run resumes it (``--resume``) or replaces it
(``--overwrite``, which deletes the previous outputs first). :func:`share_folder` holds a folder
the same way for objects of one process (PySCF's ``NNQSSolver`` and its copies) while any of them
lives. Temporary files that a killed
run left behind (``.NAME.*.tmp`` of :func:`nnqs.app.io.atomic_write`) are removed. A run that
fails before writing anything into a folder it created removes the folder again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import weakref
from pathlib import Path

from filelock import FileLock, Timeout

from nnqs.app.runconfig import ConfigError

log = logging.getLogger(__name__)

#: The files a run writes; one of them present means the folder holds a run.
RUN_OUTPUTS = ("checkpoint.pt", "checkpoint.prev.pt", "metrics.csv", "result.json", "convergence.png",
               "hamiltonian.fcidump", "orbitals.json",
               "analysis.json", "provenance.json")
LOCK, OWNER = ".nnqs.lock", ".nnqs.owner"


class FolderInUse(ConfigError):
    """The run folder is held by another process."""


def previous_outputs(out: Path) -> list[str]:
    return [name for name in RUN_OUTPUTS if (out / name).exists()]


def hold_folder(out: Path, hint: str = "wait for it or choose another --out") -> FileLock:
    """Take ``out``'s lock (``out`` exists) and record this process as its holder; ``FolderInUse``
    naming the holder when another process has it."""
    lock = FileLock(str(out / LOCK), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        holder = (out / OWNER).read_text().strip() if (out / OWNER).exists() else "another process"
        raise FolderInUse(f"{out} is in use by another nnqs run ({holder}); {hint}") from None
    try:
        (out / OWNER).write_text(f"pid {os.getpid()} on {socket.gethostname()}\n")
    except BaseException:
        lock.release()
        raise
    return lock


@contextlib.contextmanager
def reading(out: str | Path):
    """A reader's hold on run folder ``out`` (``analyse``, ``reference``): within the block no run
    can take the folder, and the block sees ``None``; where a run holds it now, the block sees its
    holder (``"pid N on HOST"``) and must only read (the run will write its ``result.json``)."""
    out = Path(out)
    lock = FileLock(str(out / LOCK), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        yield (out / OWNER).read_text().strip() if (out / OWNER).exists() else "another process"
        return
    except OSError:   # a folder one may read but not lock (read-only): nothing can run in it either
        yield None
        return
    try:
        yield None
    finally:
        lock.release()


_SHARED: dict[str, list] = {}   # resolved path -> [lock, number of living holders in this process]


def share_folder(out: str | Path, holder: object, hint: str) -> None:
    """Hold ``out`` (created if needed) for this process while ``holder`` lives: the first holder
    takes the lock (:func:`hold_folder`), later ones in this process share it, the last one's
    collection releases it. Another process's run or holder fails at once (``FolderInUse``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    key = str(out.resolve())
    if key not in _SHARED:
        _SHARED[key] = [hold_folder(out, hint), 0]
    _SHARED[key][1] += 1
    weakref.finalize(holder, _unshare, key)


def _unshare(key: str) -> None:
    held = _SHARED.get(key)
    if held is None:
        return
    held[1] -= 1
    if held[1] <= 0:
        del _SHARED[key]
        with contextlib.suppress(OSError):
            (Path(key) / OWNER).unlink()
        held[0].release()


@contextlib.contextmanager
def claim_run_folder(out: str | Path, *, resume: bool, overwrite: bool):
    """Hold ``out`` for one run (created if needed); see the module docstring.

    Raises:
        ConfigError: the folder is in use, or holds a run and neither ``resume`` nor
            ``overwrite`` is set, or both are.
        OSError: the folder cannot be created or written (the CLI reports it in one line).
    """
    if resume and overwrite:
        raise ConfigError("--resume continues a run and --overwrite replaces it: give one")
    out = Path(out)
    created = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    lock = hold_folder(out)
    failed = False
    try:
        existing = previous_outputs(out)
        if existing and not resume and not overwrite:
            raise ConfigError(f"{out} already holds a run ({', '.join(existing)}); continue it with --resume or "
                              "replace it with --overwrite")
        if overwrite:
            for name in existing:
                (out / name).unlink()
            log.info("--overwrite: removed %s from %s", ", ".join(existing) or "nothing", out)
        for stale in out.glob(".*.tmp"):
            stale.unlink()
            log.info("removed %s, left by an interrupted write", stale)
        yield out
    except BaseException:
        failed = True
        raise
    finally:
        with contextlib.suppress(OSError):
            (out / OWNER).unlink()
        lock.release()
        if failed and created and not any(p.name != LOCK for p in out.iterdir()):
            with contextlib.suppress(OSError):  # a run that failed before writing anything leaves no folder
                (out / LOCK).unlink()
                out.rmdir()
