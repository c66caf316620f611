"""SIGTERM and SIGINT during a run: finish the step, write a checkpoint, stop.

A batch scheduler's time limit, ``kill`` or a pre-empted node sends SIGTERM; Ctrl-C sends
SIGINT. During the training loop the first one is recorded and the loop stops after the current
step (every process of a torchrun job at the same step: the flag is all-reduced each step), the
run writes its checkpoint and the CLI says ``stopped by SIGTERM at step N; continue with
--resume`` with exit code ``128 + signal``. A second signal, or the first one outside the
loop (during the start or the final evaluation, which have nothing to checkpoint midway), stops
at once (:class:`StopNow`); the last checkpoint stays as it was. Python may run a handler where
an exception is only printed ("Exception ignored in ...": a finaliser, a weakref callback), so
such a stop is also remembered and raised again when the loop starts or ends a step.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch

from nnqs.parallel.comm import LOCAL, Communicator

log = logging.getLogger(__name__)

#: The signals a run stops on.
SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopNow(BaseException):
    """A signal that stops the run at once (a second one, or one outside the step loop).
    A ``BaseException``, like ``KeyboardInterrupt``: nothing on its way catches it by accident,
    and the ``finally`` blocks it crosses still run (temporary files go, the folder's lock is
    released)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.name = signal.Signals(signum).name
        super().__init__(f"stopped by {self.name} at once")


class SignalStop:
    """Holds SIGTERM and SIGINT for a run (a context manager; in the main thread only, where
    Python delivers signals; elsewhere it does nothing) and is the loop's stopping callback.

    Attributes:
        received: the first signal's number while the loop runs, else ``None``.
    """

    def __init__(self, comm: Communicator = LOCAL) -> None:
        self.comm = comm
        self.received: int | None = None
        self._in_loop = False
        self._stop_now: int | None = None   # a signal that raised StopNow (raised again if swallowed)
        self._previous: dict[int, Callable[[int, FrameType | None], Any] | int | signal.Handlers | None] = {}

    @property
    def name(self) -> str | None:
        return None if self.received is None else signal.Signals(self.received).name

    def __enter__(self) -> "SignalStop":
        if threading.current_thread() is threading.main_thread():
            for signum in SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame) -> None:
        if self.received is not None or not self._in_loop:
            self._stop_now = signum
            raise StopNow(signum)
        self.received = signum
        log.warning("%s: stopping after this step with a checkpoint (a second signal stops at once)",
                    signal.Signals(signum).name)

    @contextlib.contextmanager
    def loop(self):
        """Inside, the first signal waits for the end of the step."""
        self._raise_if_stopped()
        self._in_loop = True
        try:
            yield self
        finally:
            self._in_loop = False

    def __call__(self, trainer, record) -> bool:
        """The loop's callback: stop when any process received a signal."""
        self._raise_if_stopped()
        flag = torch.tensor([0 if self.received is None else int(self.received)], dtype=torch.int64)
        agreed = int(self.comm.all_reduce(flag, "max")[0])
        if agreed and self.received is None:
            self.received = agreed   # another process's signal: stop with it
        return bool(agreed)

    def _raise_if_stopped(self) -> None:
        """Raise :class:`StopNow` again for a signal whose first one was swallowed where it was raised."""
        if self._stop_now is not None:
            raise StopNow(self._stop_now)
