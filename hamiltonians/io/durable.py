"""Durable file replacement: after a crash or a power loss a file is either its old content or
the whole new one, never empty or half written.

The new content goes to a temporary file in the same folder, which is flushed to the disk
(``fsync``) before it is renamed over the old file; the folder is then flushed, so that the
rename itself survives (what databases and checkpointing libraries do). Every output of the
project (checkpoints, ``result.json``, FCIDUMP files, the reference cache) is written this way.
"""

from __future__ import annotations

import os
import tempfile
from typing import Callable

__all__ = ["durable_write", "fsync_folder"]


def durable_write(path: str | os.PathLike, write: Callable[[str], None], *,
                  previous: str | os.PathLike | None = None) -> None:
    """Call ``write(tmp_path)`` on a temporary file beside ``path``, ``fsync`` it, rename it to
    ``path`` and ``fsync`` the folder. The finished file gets the user's mode (``0666`` less
    the umask; the temporary file is ``0600``). On any error the temporary file is removed and
    ``path`` keeps its old content; an ``OSError`` (a full disk) names ``path``.

    ``previous``: the old ``path`` (if any) is renamed to it just before the new file takes its
    place, once the new one is on the disk: two generations, the last durable one kept until the
    next is (a crash between the two renames leaves only ``previous``)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        write(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o666 & ~_umask())
        if previous is not None and os.path.exists(path):
            os.replace(path, os.fspath(previous))
        os.replace(tmp, path)
    except BaseException as error:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(error, OSError) and error.errno is not None and error.filename in (None, tmp):
            raise OSError(error.errno, error.strerror, path) from error   # name the file being written
        raise
    fsync_folder(folder)


def fsync_folder(folder: str | os.PathLike) -> None:
    """``fsync`` a folder, so that the renames and new names in it are on the disk (a no-op
    where folders cannot be opened, e.g. on Windows)."""
    try:
        fd = os.open(os.fspath(folder), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
