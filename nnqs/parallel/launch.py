"""Join the process group that ``torchrun`` describes in the environment.

``torchrun --nproc_per_node=K -m nnqs run CONFIG.toml`` starts ``K`` processes with ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` set (multi-node: the same
with torchrun's rendezvous). The backend follows the device: gloo on CPU, NCCL on CUDA with one
GPU per rank (``cuda:LOCAL_RANK``). Without ``WORLD_SIZE`` (or with 1) nothing is initialised
and the run is the single process.
"""

from __future__ import annotations

import datetime
import logging
import os

import torch

from nnqs.parallel.comm import LOCAL, Communicator, ProcessGroup

log = logging.getLogger(__name__)

#: Seconds a collective waits for the other ranks before the job stops with an error.
DEFAULT_TIMEOUT_SECONDS = 600.0


def world_from_env() -> tuple[int, int, int]:
    """``(rank, world_size, local_rank)`` from torchrun's variables (``(0, 1, 0)`` without them)."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        local = int(os.environ.get("LOCAL_RANK", str(rank)))
    except ValueError as error:
        raise ValueError(f"RANK, WORLD_SIZE and LOCAL_RANK must be integers ({error})") from None
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"need 0 <= RANK < WORLD_SIZE, got RANK={rank}, WORLD_SIZE={world}")
    return rank, world, local


def init_from_env(device: str = "cpu", *, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS) -> tuple[Communicator, str]:
    """The communicator of this process and the device it should use.

    Args:
        device: the configured device; ``"cuda"`` becomes ``cuda:LOCAL_RANK`` under torchrun.
        timeout_seconds: how long a collective waits for a missing rank.

    Returns:
        ``(LOCAL, device)`` for a single process; otherwise a :class:`ProcessGroup` over gloo
        (CPU) or NCCL (CUDA) and this rank's device.
    """
    import torch.distributed as dist

    rank, world, local = world_from_env()
    if world == 1:
        return LOCAL, device
    if dist.is_initialized():
        return ProcessGroup(device), device
    cuda = torch.device(device).type == "cuda"
    if cuda:
        device = f"cuda:{local}"
        torch.cuda.set_device(local)
    backend = "nccl" if cuda else "gloo"
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_seconds),
                            # mypy checks the ** dict against every parameter; it only holds device_id
                            **({"device_id": torch.device(device)} if cuda else {}))  # type: ignore[arg-type]
    log.info("rank %d of %d (%s, %s)", rank, world, backend, device)
    return ProcessGroup(device), device


def shutdown() -> None:
    """Leave the process group, if one was joined."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
