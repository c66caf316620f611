"""Known amplitudes: configurations whose ``log psi`` is already computed, looked up by key.

One :class:`AmplitudeTable` serves every place a local energy reuses amplitudes instead of
asking the network again: other processes' samples (they count as sampled, like the batch's
own rows) and the connected configurations outside the samples that the processes evaluated
once between them. :func:`hamiltonians.local_energy` takes one as ``lookup``; its
:meth:`AmplitudeTable.log_psi_fn` turns it into the ``occ' -> log psi`` callback with a
fallback for configurations it lacks.
"""

from __future__ import annotations

from typing import Callable

import torch

from hamiltonians.determinants import lookup_keys, pack_occupations, unique_keys, unpack_keys

__all__ = ["AmplitudeTable"]


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

    def log_psi_fn(self, fallback: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
        """``occ' [B, 2N] -> log psi [B]``: from the table where it has the row, else ``fallback``
        (called once, on the missing rows only)."""

        def fn(occ: torch.Tensor) -> torch.Tensor:
            where = self.find(occ)
            out = torch.zeros(occ.shape[0], dtype=self.log_psi.dtype, device=self.log_psi.device)
            found = where >= 0
            out[found] = self.log_psi[where[found]]
            missing = ~found
            if bool(missing.any()):
                out[missing] = fallback(occ[missing.to(occ.device)]).to(out.device, out.dtype)
            return out

        return fn
