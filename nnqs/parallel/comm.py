"""The collectives a VMC step needs, for one process or a ``torch.distributed`` group.

A :class:`Communicator` is the single process: every collective returns its input (so code
written against it runs exactly as before when there is one process). :class:`ProcessGroup`
performs them over the default ``torch.distributed`` process group (gloo on CPU, NCCL on CUDA).
Tensors may live on any device and be real, complex or boolean; results come back on the
input's device with its dtype. A collective that fails because another rank is gone raises
:class:`RankLostError` with one line saying so.
"""

from __future__ import annotations

import contextlib
import datetime
import pickle
import re
from collections.abc import Callable
from typing import Any, TypeVar, cast

import torch

from nnqs.errors import ResourceError

T = TypeVar("T")


class RankLostError(ResourceError):
    """Another rank of the job is gone (died, killed, or timed out in a collective)."""


class Communicator:
    """One process: ``rank = 0``, ``world_size = 1``, and every collective is the identity."""

    rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that writes files and shows progress."""
        return self.rank == 0

    def my_slice(self, total: int) -> slice:
        """This rank's share of ``total`` items split into ``world_size`` contiguous slices as
        equal as can be (``total * rank // world_size`` to the next rank's start)."""
        return slice(total * self.rank // self.world_size, total * (self.rank + 1) // self.world_size)

    def all_reduce(self, tensor: torch.Tensor, op: str = "sum") -> torch.Tensor:
        """Sum (or ``op="max"``) of ``tensor`` over the ranks, the same on every rank."""
        if op not in ("sum", "max"):
            raise ValueError(f"op must be 'sum' or 'max', got {op!r}")
        return tensor

    def all_gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """Every rank's ``tensor`` (their first dimensions may differ), in rank order."""
        return [tensor]

    def sizes(self, n: int) -> list[int]:
        """Every rank's ``n``, in rank order."""
        return [int(n)]

    def broadcast(self, tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
        """``src``'s tensor on every rank; the others pass a tensor of its shape and dtype."""
        return tensor

    def broadcast_object(self, obj: T, src: int = 0) -> T:
        """``src``'s picklable ``obj`` on every rank (the others' argument is ignored)."""
        return obj

    def barrier(self) -> None:
        """Wait until every rank gets here."""

    def run_on_main(self, fn: Callable[[], T]) -> T:
        """``fn()`` computed on rank 0 alone and returned on every rank; if it raises, every
        rank raises the same exception (so an error on rank 0 ends the job everywhere). The
        others wait for it up to :data:`SETUP_TIMEOUT_SECONDS`, not the collective timeout."""
        return fn()

    def all_equal(self, tensor: torch.Tensor) -> bool:
        """Whether ``tensor`` is bitwise the same on every rank."""
        return True


#: The single process.
LOCAL = Communicator()


#: How long the other ranks wait for rank 0 in :meth:`Communicator.run_on_main` (its PySCF
#: references or DMRG can take hours); a rank 0 that dies is still noticed at once.
SETUP_TIMEOUT_SECONDS = 7 * 24 * 3600.0


class ProcessGroup(Communicator):
    """The default ``torch.distributed`` process group (already initialised), plus a gloo group
    with a long timeout for :meth:`run_on_main`.

    Args:
        device: where collectives run: CPU for gloo, this rank's GPU for NCCL.
    """

    def __init__(self, device: torch.device | str = "cpu") -> None:
        import torch.distributed as dist

        if not dist.is_initialized():
            raise RuntimeError("torch.distributed is not initialised (use nnqs.parallel.init_from_env)")
        self._dist = dist
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.device = torch.device(device)
        self._setup = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=SETUP_TIMEOUT_SECONDS))

    @contextlib.contextmanager
    def _guard(self, what: str):
        try:
            yield
        except RankLostError:
            raise
        except RuntimeError as error:  # gloo and NCCL raise DistBackendError, a RuntimeError
            raise RankLostError(f"rank {self.rank}: lost contact with the other ranks during {what} "
                                f"({_reason(error)}); "
                                "the job stops here, and `nnqs run ... --resume` continues from the last "
                                "checkpoint") from None

    def _to_wire(self, tensor: torch.Tensor) -> torch.Tensor:
        t = tensor.detach().to(self.device)
        if t.is_complex():
            t = torch.view_as_real(t)
        elif t.dtype == torch.bool:
            t = t.to(torch.uint8)
        return t.contiguous().clone()

    @staticmethod
    def _from_wire(wire: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        if like.is_complex():
            wire = torch.view_as_complex(wire.contiguous())
        return wire.to(device=like.device, dtype=like.dtype)

    def all_reduce(self, tensor: torch.Tensor, op: str = "sum") -> torch.Tensor:
        super().all_reduce(tensor, op)
        if op == "max" and tensor.is_complex():
            raise ValueError("max of complex tensors is undefined")
        wire = self._to_wire(tensor)
        with self._guard(f"all_reduce({op})"):
            self._dist.all_reduce(wire, op=self._dist.ReduceOp.SUM if op == "sum" else self._dist.ReduceOp.MAX)
        return self._from_wire(wire, tensor)

    def sizes(self, n: int) -> list[int]:
        counts = torch.zeros(self.world_size, dtype=torch.int64, device=self.device)
        counts[self.rank] = int(n)
        with self._guard("sizes"):
            self._dist.all_reduce(counts)
        return counts.tolist()

    def all_gather(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        sizes = self.sizes(tensor.shape[0])
        wire = self._to_wire(tensor)
        padded = wire.new_zeros((max(sizes),) + tuple(wire.shape[1:]))
        padded[: wire.shape[0]] = wire
        parts = [torch.empty_like(padded) for _ in sizes]
        with self._guard("all_gather"):
            self._dist.all_gather(parts, padded)
        return [self._from_wire(part[:n], tensor) for part, n in zip(parts, sizes)]

    def broadcast(self, tensor: torch.Tensor, src: int = 0) -> torch.Tensor:
        wire = self._to_wire(tensor)
        with self._guard("broadcast"):
            self._dist.broadcast(wire, src=src)
        return self._from_wire(wire, tensor)

    def broadcast_object(self, obj: T, src: int = 0, *, patient: bool = False) -> T:
        box = [obj if self.rank == src else None]
        with self._guard("broadcast_object"):
            if patient:  # over the gloo group with the long timeout
                self._dist.broadcast_object_list(box, src=src, group=self._setup)
            else:
                self._dist.broadcast_object_list(box, src=src,
                                                 device=self.device if self.device.type == "cuda" else None)
        return cast(T, box[0])   # src's object, on every rank after the broadcast

    def barrier(self) -> None:
        with self._guard("barrier"):
            self._dist.barrier()

    def run_on_main(self, fn: Callable[[], T]) -> T:
        outcome: tuple[str, Any] = ("ok", None)
        if self.is_main:
            try:
                outcome = ("ok", fn())
            except Exception as error:  # noqa: BLE001 - re-raised on every rank below
                outcome = ("error", error if _picklable(error) else RuntimeError(str(error)))
        kind, value = self.broadcast_object(outcome, patient=True)
        if kind == "error":
            raise value
        return value

    def all_equal(self, tensor: torch.Tensor) -> bool:
        mine = self._to_wire(tensor).flatten().view(torch.uint8)
        theirs = self.broadcast(mine.clone(), src=0)
        return bool(self.all_reduce(torch.tensor([int(not torch.equal(mine, theirs))]), "max").item() == 0)


def _reason(error: BaseException) -> str:
    """The backend's message in a few words: ``[file:line] Connection closed by peer [addr]``
    becomes ``Connection closed by peer [addr]``."""
    text = (str(error).strip().splitlines() or [type(error).__name__])[0]
    text = re.sub(r"^\[[^\]]*\]\s*", "", text)
    return text.split(". ")[0][:160]


def _picklable(error: BaseException) -> bool:
    try:
        pickle.loads(pickle.dumps(error))
        return True
    except Exception:  # noqa: BLE001
        return False
