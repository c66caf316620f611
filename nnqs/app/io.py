"""Atomic file writes and checkpoints: nothing half-written is ever left behind, and a checkpoint
keeps the generation before it until it is durable (a corrupt one falls back to that)."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Callable

import torch

from hamiltonians.io.durable import durable_write
from nnqs.errors import InputError

log = logging.getLogger(__name__)


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


#: The key of a checkpoint's integrity digest (:func:`content_digest` of the rest).
DIGEST = "sha256"


def previous_generation(path: str | Path) -> Path:
    """Where the generation before ``path`` is kept: ``checkpoint.pt`` -> ``checkpoint.prev.pt``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.prev{path.suffix}")


def content_digest(state) -> str:
    """SHA-256 of a checkpoint's content, walked in order: every tensor's dtype, shape and bytes,
    every other leaf's ``repr``, every key. A flipped bit anywhere in the data changes it (the
    zip container ``torch.save`` writes checks its headers, not the tensors' bytes)."""
    h = hashlib.sha256()

    def walk(x) -> None:
        if isinstance(x, torch.Tensor):
            t = x.detach().cpu().contiguous()
            h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        elif isinstance(x, dict):
            h.update(f"D{len(x)}".encode())
            for k, v in x.items():
                h.update(repr(k).encode())
                walk(v)
        elif isinstance(x, (list, tuple)):
            h.update(f"L{len(x)}".encode())
            for v in x:
                walk(v)
        else:
            h.update(repr(x).encode())

    walk(state)
    return h.hexdigest()


def save_checkpoint(path: str | Path, state: dict) -> None:
    """``torch.save`` through a temporary file, with the :func:`content_digest` of ``state``
    under ``"sha256"``; loadable with ``weights_only=True``. The checkpoint it replaces is kept
    as :func:`previous_generation` until this one is on the disk. Written through a Python file
    object, so that a full disk is an ``OSError`` naming ENOSPC (given a path, ``torch.save``
    reports it as an unexplained ``RuntimeError``)."""
    stamped = {**state, DIGEST: content_digest(state)}

    def write(tmp: str) -> None:
        with open(tmp, "wb") as f:
            torch.save(stamped, f)

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    durable_write(path, write, previous=previous_generation(path))


class CheckpointError(InputError):
    """A checkpoint file that cannot be read (truncated, garbage, not written by nnqs)."""


def read_checkpoint(path: str | Path, map_location=None) -> dict:
    """One checkpoint file: ``torch.load(..., weights_only=True)``, its digest checked (a
    checkpoint written before digests has none); any failure to read becomes a one-line
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
    digest = state.pop(DIGEST, None)
    if digest is not None and digest != content_digest(state):
        raise CheckpointError(f"{path}: not a readable nnqs checkpoint (its content does not match its sha256 digest)")
    return state


def has_checkpoint(path: str | Path) -> bool:
    """Whether ``path`` or its :func:`previous_generation` exists."""
    return Path(path).is_file() or previous_generation(path).is_file()


def load_checkpoint(path: str | Path, map_location=None) -> dict:
    """The checkpoint at ``path`` (:func:`read_checkpoint`), or, where that one is missing or
    unreadable, the generation before it (:func:`previous_generation`), with one warning that
    names what was skipped; :class:`CheckpointError` naming both when neither can be read."""
    try:
        return read_checkpoint(path, map_location)
    except CheckpointError as error:
        previous = previous_generation(path)
        if not previous.is_file():
            raise
        try:
            state = read_checkpoint(previous, map_location)
        except CheckpointError as second:
            raise CheckpointError(f"{error}; and the previous generation: {second}") from None
        step = state["trainer"].get("step") if isinstance(state["trainer"], dict) else None
        log.warning("%s: skipped; using the previous generation %s (step %s)", error, previous.name, step)
        return state
