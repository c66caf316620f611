"""The training layer's callbacks and the NaN guard (docs/design.md §6).

A callback is any callable ``(driver, record) -> bool | None`` given to a driver's ``run``; it
sees every step's record, and one that returns ``True`` stops the loop after that step (every
callback still sees it). Here: :class:`StopOnPlateau` (the stopping rule). The application's
(``nnqs.app.callbacks``): the metrics CSV and progress line, the checkpoints, and the signal
stop (``nnqs.app.signals.SignalStop``).

:class:`RollBack` is the NaN guard a driver consults inside its step (it must act between the
evaluation and the update, where a callback, called after the step, cannot): it keeps the last
weights and optimiser states that gave a finite energy and gradient, and a non-finite step goes
back to them at half the learning rate.
"""

from __future__ import annotations

import copy
import logging
from typing import Callable, Sequence

import torch

from nnqs.parallel.comm import LOCAL, Communicator
from nnqs.training.convergence import has_stopped_improving
from nnqs.training.settings import StopConfig

log = logging.getLogger(__name__)

#: ``(driver, record) -> bool | None``; ``True`` stops the run after this step.
Callback = Callable[..., "bool | None"]


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

    def __call__(self, driver, record) -> bool:
        self.energies.append(record.energy)
        self.stderrs.append(record.stderr)
        if not self.config.window:
            return False
        first = self.first_step
        self.stopped = self.comm.broadcast_object(self.comm.is_main and has_stopped_improving(
            self.energies[first:], self.stderrs[first:], self.config.window, self.config.tolerance))
        if self.stopped:
            log.info("step %d: the energy stopped improving (window %d); stopping", driver.step, self.config.window)
        return self.stopped


class RollBack:
    """The last good model and optimiser states; a non-finite step goes back to them and
    halves the learning rate (:attr:`lr_scale`, which carries over between update rules)."""

    def __init__(self, model, optimizers: dict[str, torch.optim.Optimizer]) -> None:
        self.model, self.optimizers = model, optimizers
        self.lr_scale = 1.0
        self.mark_good()

    def mark_good(self) -> None:
        self._good = {"model": copy.deepcopy(self.model.state_dict()),
                      "optimizers": copy.deepcopy(optimizer_states(self.optimizers))}

    def roll_back(self, step: int) -> None:
        self.model.load_state_dict(self._good["model"])
        load_optimizer_states(self.optimizers, self._good["optimizers"])
        self.lr_scale *= 0.5
        log.warning("step %d: non-finite energy or gradient; rolled back to the last good state and "
                    "halved the learning rate (scale now %.3g)", step, self.lr_scale)


def optimizer_states(optimizers: dict[str, torch.optim.Optimizer]) -> dict:
    return {name: opt.state_dict() for name, opt in optimizers.items()}


def load_optimizer_states(optimizers: dict[str, torch.optim.Optimizer], states: dict) -> None:
    """Each configured optimiser's state from ``states``; one the checkpoint lacks (an update
    rule new to the run, e.g. a resume that changed ``[optim] method`` after the AdamW phase)
    starts fresh. A checkpoint whose optimisers are all unknown here is a ``KeyError``."""
    if states and not set(states) & set(optimizers):
        raise KeyError(f"optimizers {sorted(states)} in the checkpoint, {sorted(optimizers)} configured")
    for name, opt in optimizers.items():
        if name in states:
            opt.load_state_dict(states[name])
        else:
            log.info("the %s update rule is new to this run: its optimiser starts fresh", name)
