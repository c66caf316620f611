"""The run's callbacks (docs/design.md §6): the metrics CSV with the progress bar or log line,
and the checkpoints. Each is a ``(driver, record) -> None`` callable for a driver's ``run``
(:meth:`nnqs.training.driver.Driver.run`), beside the training layer's
:class:`~nnqs.training.callbacks.StopOnPlateau` and :class:`nnqs.app.signals.SignalStop`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, fields
from pathlib import Path

from nnqs.app.io import save_checkpoint
from nnqs.app.report import MetricsLog, readable_rows, write_csv
from nnqs.parallel.comm import LOCAL, Communicator

#: The per-interval step lines of a run without a progress bar (the CLI shows them off a terminal).
progress_log = logging.getLogger("nnqs.app.run.progress")


class Checkpoints:
    """A callback: a checkpoint to ``path`` after every ``every`` steps, once ``seconds`` passed
    since the last, and at the ``target`` step (rank 0 writes, atomically). The checkpoint holds
    the driver's ``state_dict()`` under ``"trainer"`` and what ``payload()`` returns beside it;
    ``metrics`` (a :class:`~nnqs.app.report.MetricsLog`) is flushed to the disk first."""

    def __init__(self, path: str | Path, *, every: int = 100, seconds: float = 60.0, target: int | None = None,
                 payload=dict, comm: Communicator = LOCAL, metrics: MetricsLog | None = None) -> None:
        self.path, self.every, self.seconds, self.target = Path(path), every, seconds, target
        self.payload, self.comm, self.metrics = payload, comm, metrics
        self.last = time.perf_counter()

    def save(self, driver) -> None:
        if self.comm.is_main:
            if self.metrics is not None:
                self.metrics.sync()  # the rows before the checkpoint are on the disk first
            save_checkpoint(self.path, {"trainer": driver.state_dict(), **self.payload()})
        self.last = time.perf_counter()

    def __call__(self, driver, record) -> None:
        due = time.perf_counter() - self.last >= self.seconds
        if driver.step % self.every == 0 or driver.step == self.target or due:
            self.save(driver)


class Progress:
    """A callback on rank 0: the step's row in ``metrics`` (a :class:`~nnqs.app.report.MetricsLog`
    writing ``metrics.csv``) and the progress ``bar`` (a ``tqdm``, or ``None``); with ``log_every``
    (a run without a bar: a log file, a batch job) also a log line every that many steps and at
    the ``target`` step (the last, or ``stop_after``'s), with the mean seconds per step since the
    previous line (a stop on a plateau or a signal ends without one)."""

    def __init__(self, metrics: MetricsLog, bar=None, target: int | None = None, log_every: int = 0) -> None:
        self.metrics, self.bar, self.target, self.log_every = metrics, bar, target, log_every
        self.seconds, self.steps = 0.0, 0

    def __call__(self, driver, record) -> None:
        row = self.metrics.append(record)
        self.seconds, self.steps = self.seconds + record.seconds, self.steps + 1
        if self.log_every and (driver.step % self.log_every == 0 or driver.step == self.target):
            total = self.bar.total if self.bar is not None else self.target
            progress_log.info("step %d/%s: E = %.8f +- %.1e Ha, %d unique samples, %.2f s per step", driver.step,
                              total, record.energy, record.stderr, record.n_unique, self.seconds / self.steps)
            self.seconds, self.steps = 0.0, 0
        if self.bar is None:
            return
        postfix = {"E": f"{record.energy:.6f}", "unique": record.n_unique,
                   "samples/s": f"{record.n_samples / max(record.seconds, 1e-9):.3g}"}
        if row["error_vs_fci_mha"] != "":
            postfix["dE_fci(mHa)"] = f"{row['error_vs_fci_mha']:.3f}"
        self.bar.set_postfix(postfix)
        self.bar.update(1)


class CycleLog:
    """A callback for the subspace loop: every cycle's record
    (:class:`nnqs.training.subspace.CycleRecord`) as a row of ``path`` (``subspace.csv``),
    the file rewritten atomically after each cycle. ``resume_cycle``: a loop resumed after that
    many cycles keeps the file's rows of the cycles before (those that read back whole)."""

    def __init__(self, path: str | Path, *, resume_cycle: int | None = None) -> None:
        self.path = Path(path)
        self.rows: list[dict] = []
        if resume_cycle is not None and self.path.exists():
            self.rows = readable_rows(self.path, resume_cycle, numbers=("energy",))

    def __call__(self, driver, record) -> None:
        self.rows.append(asdict(record))
        write_csv(self.path, [f.name for f in fields(record)], self.rows)
