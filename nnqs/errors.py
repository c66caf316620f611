"""The errors nnqs raises on purpose, under one base.

* :class:`NNQSError`: the base of every error below.
* :class:`InputError` (a ``ValueError``): the user's input is wrong: a config key, a file, a
  command-line argument, a checkpoint that belongs to another run. The CLI prints its message
  as one line and exits 2. Subclasses: :class:`nnqs.app.runconfig.ConfigError` (and
  :class:`nnqs.app.folder.FolderInUse`), :class:`nnqs.app.io.CheckpointError`.
  :class:`hamiltonians.FCIDUMPError` is the one input error outside (``hamiltonians`` imports
  nothing of ``nnqs``); the CLI treats it alike (:data:`nnqs.app.cli.USER_ERRORS`).
* :class:`ResourceError` (a ``RuntimeError``): the run cannot go on where it is (a process of
  the job was lost, the KV cache is full): one line, exit 1.

Any other exception is a bug: the CLI lets it through (traceback, exit 1).

This module imports nothing, so every layer may import it (``tests/test_layers.py``).
"""

from __future__ import annotations

__all__ = ["NNQSError", "InputError", "ResourceError"]


class NNQSError(Exception):
    """The base of the errors nnqs raises on purpose."""


class InputError(NNQSError, ValueError):
    """Bad input from the user (config, file, argument): one line, exit code 2 from the CLI."""


class ResourceError(NNQSError, RuntimeError):
    """The run cannot go on where it is (a lost process, a full cache): one line, exit code 1."""
