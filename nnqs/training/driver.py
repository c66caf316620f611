"""The run loop: steps of a :class:`~nnqs.training.trainer.Trainer`, each followed by callbacks.

A callback is any callable ``(trainer, record) -> bool | None``; one that returns ``True``
stops the loop after the step (every callback still sees that step). The training layer's
own: :class:`StopOnPlateau` (the stopping rule). The application adds the metrics log, the
progress bar and the checkpoints (``nnqs.app.run``).
"""

from __future__ import annotations

import logging
from typing import Callable, Sequence

from nnqs.parallel.comm import LOCAL, Communicator
from nnqs.training.convergence import has_stopped_improving
from nnqs.training.settings import StopConfig
from nnqs.training.trainer import StepRecord, Trainer

log = logging.getLogger(__name__)

Callback = Callable[[Trainer, StepRecord], "bool | None"]


def run_steps(trainer: Trainer, until: int, callbacks: Sequence[Callback] = ()) -> bool:
    """Train until ``trainer.step == until`` or a callback asks to stop; returns whether one did."""
    while trainer.step < until:
        record = trainer.train_step()
        stop = False
        for callback in callbacks:
            stop = bool(callback(trainer, record)) or stop
        if stop:
            return True
    return False


class StopOnPlateau:
    """Stop once the energy of the run's last regime stopped improving (:class:`StopConfig`;
    :func:`nnqs.training.convergence.has_stopped_improving`).

    Rank 0 decides and every rank follows. ``energies`` / ``stderrs``: the trace of the steps
    before this one (from a resumed run's metrics), one entry per step from step 0.
    """

    def __init__(self, config: StopConfig, first_step: int, *, energies: Sequence[float] = (),
                 stderrs: Sequence[float] = (), comm: Communicator = LOCAL) -> None:
        self.config, self.first_step, self.comm = config, first_step, comm
        self.energies, self.stderrs = list(energies), list(stderrs)
        self.stopped = False

    def __call__(self, trainer: Trainer, record: StepRecord) -> bool:
        self.energies.append(record.energy)
        self.stderrs.append(record.stderr)
        if not self.config.window:
            return False
        first = self.first_step
        self.stopped = self.comm.broadcast_object(self.comm.is_main and has_stopped_improving(
            self.energies[first:], self.stderrs[first:], self.config.window, self.config.tolerance))
        if self.stopped:
            log.info("step %d: the energy stopped improving (window %d); stopping", trainer.step, self.config.window)
        return self.stopped
