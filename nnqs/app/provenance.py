"""Provenance: which code made a result (package version, git commit, a dirty tree).

Every result file records :func:`provenance` beside the effective config that made it:
``result.json``, the run folder's ``provenance.json`` (one entry per session of the run) and
every benchmark JSON.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
from functools import lru_cache
from pathlib import Path

#: The repository holding this package (when it runs from a checkout).
ROOT = Path(__file__).resolve().parents[2]


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@lru_cache(maxsize=1)
def provenance() -> dict:
    """``{"version", "commit", "dirty"}``: the package version, the git commit of the checkout
    the code runs from (``None`` outside a git checkout, e.g. an installed wheel) and whether
    its tracked files differ from that commit (``None`` when unknown)."""
    top = _git("rev-parse", "--show-toplevel")
    # an installed copy inside someone's checkout (a venv in a repository) is not that checkout's code
    commit = _git("rev-parse", "HEAD") if top is not None and Path(top).resolve() == Path(ROOT).resolve() else None
    dirty = None
    if commit is not None:
        status = _git("status", "--porcelain", "--untracked-files=no")
        dirty = None if status is None else bool(status)
    return {"version": _version(), "commit": commit, "dirty": dirty}


def _version() -> str | None:
    try:
        return importlib.metadata.version("nnqs")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout that is not installed
        return None


def describe() -> str:
    """One line: ``nnqs 0.1.0, commit abc1234 (dirty)``."""
    p = provenance()
    commit = "unknown commit" if p["commit"] is None else f"commit {p['commit'][:12]}"
    return f"nnqs {p['version']}, {commit}" + (" (dirty)" if p["dirty"] else "")
