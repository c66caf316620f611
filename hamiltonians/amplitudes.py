"""Amplitude sources: where the ``log psi`` of configurations outside a batch comes from.

A local energy (:func:`hamiltonians.local_energy`) needs the amplitudes of connected ``x'``
that are not in its batch. It asks one :data:`AmplitudeSource`, ``(occ' [M, 2N], parent [M])
-> complex log psi [M]``, where ``parent`` indexes the batch row ``x'`` is connected to (a
model may reuse what it computed for that row, e.g. its KV cache). The sources:

* :func:`full_pass`: a ``occ' -> log psi`` function (a network's full pass) in chunks;
* :func:`from_parents`: a ``(occ', parent) -> log psi`` function in chunks (the KV-cache
  branch decoding of :mod:`nnqs.wavefunction.branching` is one);
* :meth:`AmplitudeTable.source`: known amplitudes looked up by packed key, with another source
  for the configurations the table lacks (the outside ``x'`` several processes evaluated once
  between them).

An :class:`AmplitudeTable` also serves as a local energy's ``lookup``: more configurations with
known amplitudes (another process's samples) that count as part of the batch.
"""

from __future__ import annotations

from typing import Callable

import torch

from hamiltonians.determinants import lookup_keys, pack_occupations, unique_keys, unpack_keys

__all__ = ["AmplitudeTable", "AmplitudeSource", "full_pass", "from_parents", "evaluate_in_chunks", "DEFAULT_PSI_CHUNK"]

#: ``(occ' [M, 2N], parent [M]) -> complex log psi [M]`` (see the module docstring).
AmplitudeSource = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
#: Configurations per call of a network (larger chunks spill the activations out of the CPU's cache).
DEFAULT_PSI_CHUNK = 1024


def evaluate_in_chunks(fn, occ: torch.Tensor, psi_chunk: int = DEFAULT_PSI_CHUNK,
                       parent: torch.Tensor | None = None) -> torch.Tensor:
    """``fn(occ)`` (or ``fn(occ, parent)``) over ``occ`` ``[M, 2N]`` in chunks of ``psi_chunk``
    rows, without gradients: the one chunked evaluator of amplitudes; ``[M]``."""
    out: torch.Tensor | None = None   # one buffer, written in place: nothing small outlives a chunk's activations
    with torch.no_grad():
        for s in range(0, occ.shape[0], psi_chunk):
            args = (occ[s : s + psi_chunk],) if parent is None else (occ[s : s + psi_chunk], parent[s : s + psi_chunk])
            part = torch.as_tensor(fn(*args))
            if part.shape != (min(psi_chunk, occ.shape[0] - s),):
                raise ValueError(f"log_psi_fn must return shape [M], got {tuple(part.shape)}")
            if out is None:
                out = torch.empty(occ.shape[0], dtype=part.dtype, device=part.device)
            out[s : s + part.shape[0]] = part
            del part, args
    return torch.empty(0, dtype=torch.complex128) if out is None else out


def full_pass(log_psi_fn: Callable[[torch.Tensor], torch.Tensor],
              psi_chunk: int = DEFAULT_PSI_CHUNK) -> AmplitudeSource:
    """The source that calls ``log_psi_fn(occ')`` (e.g. a network's full pass) in chunks of
    ``psi_chunk`` rows; the parents are not used."""

    def source(occ: torch.Tensor, parent: torch.Tensor) -> torch.Tensor:
        return evaluate_in_chunks(log_psi_fn, occ, psi_chunk)

    return source


def from_parents(connected_log_psi_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                 psi_chunk: int = DEFAULT_PSI_CHUNK) -> AmplitudeSource:
    """The source that calls ``connected_log_psi_fn(occ', parent)`` in chunks of ``psi_chunk`` rows."""

    def source(occ: torch.Tensor, parent: torch.Tensor) -> torch.Tensor:
        return evaluate_in_chunks(connected_log_psi_fn, occ, psi_chunk, parent.to(occ.device))

    return source


class AmplitudeTable:
    """Rows ``occ`` uint8 ``[M, 2N]`` with their complex ``log_psi`` ``[M]``.

    The rows keep the order they were given in (:attr:`occ`, :attr:`log_psi`); lookups go
    through their packed keys, sorted once on first use. Rows are expected to be distinct.
    """

    def __init__(self, occ: torch.Tensor, log_psi: torch.Tensor) -> None:
        if occ.dim() != 2 or log_psi.shape != (occ.shape[0],):
            raise ValueError(f"occ must be [M, 2N] and log_psi [M], got {tuple(occ.shape)} and {tuple(log_psi.shape)}")
        self.occ = occ.to(torch.uint8)
        self.log_psi = log_psi
        self._sorted: tuple[torch.Tensor, torch.Tensor] | None = None  # (sorted keys, row of each)

    @classmethod
    def from_keys(cls, keys: torch.Tensor, log_psi: torch.Tensor, n_spin_orbitals: int,
                  occ: torch.Tensor | None = None) -> "AmplitudeTable":
        """A table of packed ``keys`` ``[M, W]`` (sorted and unique, as :func:`unique_keys` gives);
        ``occ``: their occupations when the caller has them unpacked already."""
        table = cls(unpack_keys(keys, n_spin_orbitals) if occ is None else occ, log_psi)
        table._sorted = (keys, torch.arange(keys.shape[0], device=keys.device))
        return table

    def __len__(self) -> int:
        return self.occ.shape[0]

    def find(self, occ: torch.Tensor) -> torch.Tensor:
        """The row of each configuration of ``occ`` ``[B, 2N]`` in the table, or -1 (int64 ``[B]``)."""
        return self.find_keys(pack_occupations(occ))

    def find_keys(self, keys: torch.Tensor) -> torch.Tensor:
        """The row of each packed key ``[B, W]`` in the table, or -1 (int64 ``[B]``)."""
        query = keys
        if self._sorted is None:
            keys, inverse = unique_keys(pack_occupations(self.occ))
            row = torch.empty(keys.shape[0], dtype=torch.int64, device=keys.device)
            row[inverse] = torch.arange(inverse.shape[0], device=keys.device)
            self._sorted = (keys, row)
        keys, row = self._sorted
        where = lookup_keys(keys, query.to(keys.device))
        if keys.shape[0] == 0:
            return where
        return torch.where(where >= 0, row[where.clamp(min=0)], where)

    def source(self, fallback: AmplitudeSource) -> AmplitudeSource:
        """The :data:`AmplitudeSource` that looks each ``x'`` up in the table and asks
        ``fallback`` (once, with their parents) for the ones it lacks."""

        def source(occ: torch.Tensor, parent: torch.Tensor) -> torch.Tensor:
            where = self.find(occ)
            out = torch.zeros(occ.shape[0], dtype=self.log_psi.dtype, device=self.log_psi.device)
            found = where >= 0
            out[found] = self.log_psi[where[found]]
            missing = ~found
            if bool(missing.any()):
                rows = missing.to(occ.device)
                out[missing] = fallback(occ[rows], parent[missing.to(parent.device)]).to(out.device, out.dtype)
            return out

        return source
