"""Run a function on ``K`` local CPU processes joined over gloo, and collect what each returns.

For tests, benchmarks and notebooks: ``run_local(fn, 2, x)`` starts two fresh interpreters
(``spawn``), sets torchrun's variables in each, joins them into one process group and calls
``fn(comm, x)`` on both. ``fn`` must be importable by name (a module-level function). A rank that
raises makes the whole call raise with that rank's traceback; a call that outlives
``timeout_seconds`` is killed. Command-line runs use ``torchrun`` instead.
"""

from __future__ import annotations

import os
import pickle
import socket
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing as mp

from nnqs.parallel.comm import Communicator
from nnqs.parallel.launch import init_from_env, shutdown


class RankFailed(RuntimeError):
    """A rank of :func:`run_local` raised (the message holds its traceback) or never finished."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_local(fn: Callable[..., Any], world_size: int, *args: Any, threads: int = 1,
              timeout_seconds: float = 300.0, collective_timeout_seconds: float = 60.0) -> list[Any]:
    """``[fn(comm_0, *args), ..., fn(comm_{K-1}, *args)]`` from ``K = world_size`` processes.

    Args:
        fn: a module-level function ``(comm, *args) -> picklable``.
        threads: torch threads per process.
        timeout_seconds: the whole call's limit.
        collective_timeout_seconds: how long a collective waits for a missing rank.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    port = free_port()
    context = mp.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="nnqs-ranks-") as tmp:
        # Pickled here by value: multiprocessing would move tensors into shared memory instead,
        # behind the back of any NumPy array that views the same memory in this process.
        payload = pickle.dumps((fn, args))
        procs = [context.Process(target=_rank_main, daemon=True,
                                 args=(payload, rank, world_size, port, tmp, threads, collective_timeout_seconds))
                 for rank in range(world_size)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout_seconds
        for p in procs:
            p.join(max(deadline - time.monotonic(), 0.0))
        alive = [rank for rank, p in enumerate(procs) if p.is_alive()]
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
        outcomes, failures = [], []
        for rank in range(world_size):
            path = Path(tmp) / f"{rank}.pkl"
            if not path.exists():
                why = "still running at the timeout" if rank in alive else f"exited with code {procs[rank].exitcode}"
                failures.append(f"rank {rank} returned nothing ({why})")
                continue
            kind, value = pickle.loads(path.read_bytes())
            if kind == "error":
                failures.append(f"rank {rank} raised:\n{value}")
            outcomes.append(value)
    if failures:  # the first cause first: a rank that merely lost its peers comes last
        failures.sort(key=lambda text: "RankLostError" in text)
        raise RankFailed("\n".join(failures))
    return outcomes


def _rank_main(payload: bytes, rank: int, world_size: int, port: int, tmp: str, threads: int,
               collective_timeout: float) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE=str(world_size))
    torch.set_num_threads(threads)
    try:
        fn, args = pickle.loads(payload)
        comm: Communicator
        comm, _ = init_from_env("cpu", timeout_seconds=collective_timeout)
        outcome = ("ok", fn(comm, *args))
    except BaseException:  # noqa: BLE001 - reported to the parent
        outcome = ("error", traceback.format_exc())
    finally:
        shutdown()
    final = Path(tmp) / f"{rank}.pkl"
    partial = final.with_suffix(".tmp")
    partial.write_bytes(pickle.dumps(outcome))
    partial.replace(final)
