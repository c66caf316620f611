"""Atomic file writes and checkpoints: nothing half-written is ever left behind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import torch

from hamiltonians.io.durable import durable_write
from nnqs.errors import InputError


def atomic_write(path: str | Path, write: Callable[[str], None]) -> None:
    """Call ``write(tmp_path)`` on a temporary file in ``path``'s folder, then rename it to
    ``path``, durably (:func:`hamiltonians.io.durable.durable_write`: the file is flushed to the
    disk before the rename and the folder after it). The finished file gets the user's mode."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    durable_write(path, write)


def write_json(path: str | Path, data: dict) -> None:
    def write(tmp: str) -> None:
        with open(tmp, "w") as f:
            json.dump(data, f, indent=2, sort_keys=False)
            f.write("\n")

    atomic_write(path, write)


def save_checkpoint(path: str | Path, state: dict) -> None:
    """``torch.save`` through a temporary file; loadable with ``weights_only=True``. Written
    through a Python file object, so that a full disk is an ``OSError`` naming ENOSPC (given a
    path, ``torch.save`` reports it as an unexplained ``RuntimeError``)."""
    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            torch.save(state, f)

    atomic_write(path, write)


class CheckpointError(InputError):
    """A checkpoint file that cannot be read (truncated, garbage, not written by nnqs)."""


def load_checkpoint(path: str | Path, map_location=None) -> dict:
    """``torch.load(..., weights_only=True)``; any failure to read becomes a one-line
    :class:`CheckpointError` naming the file."""
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no checkpoint") from None
    except Exception as error:  # noqa: BLE001 - pickle, zip and OS errors all mean "unreadable"
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise CheckpointError(f"{path}: not a readable nnqs checkpoint ({type(error).__name__}: {first[:120]})") from None
    if not isinstance(state, dict) or "trainer" not in state:
        raise CheckpointError(f"{path}: not an nnqs checkpoint (no trainer state)")
    return state
