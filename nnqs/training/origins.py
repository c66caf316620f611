"""Where each determinant of a run's spaces came from, and what each origin contributes.

Rules (docs/design.md §6, "The network's share"):

* The origins, in the order a run meets them (:data:`ORIGINS`): ``"start"`` (the start's CI
  target, or the determinants a warm start was given), ``"connection"`` (added by the subspace
  loop's growth by connection), ``"network"`` (the network's samples during the loop) and
  ``"final_samples"`` (the trained network's final draws).
* The first origin recorded wins: within a cycle the connection growth is recorded before the
  network's samples, so a determinant both find counts as a connection's and the network is
  credited only with what the growth missed.
* :func:`origin_shares`: per origin, on a space's ground state ``c`` (unit norm): its
  determinants, its share of ``sum |c|^2``, and ``lowering_mha``: how much the Rayleigh quotient
  rises when that origin's coefficients are set to zero and the rest renormalised (no
  re-diagonalisation, so an upper estimate of what those determinants lower the energy by).
"""

from __future__ import annotations

import numpy as np
import torch

from hamiltonians.determinants import lookup_keys, pack_occupations, unique_keys
from hamiltonians.protocol import Hamiltonian
from hamiltonians.sci.state import SCIState

__all__ = ["ORIGINS", "Origins", "origin_shares"]

#: The origins of a determinant, by code (0, 1, 2, 3); -1 is "unknown" (e.g. a checkpoint from before).
ORIGINS = ("start", "connection", "network", "final_samples")


class Origins:
    """The origin of every determinant a run's spaces have held: packed keys (sorted) and a code
    of :data:`ORIGINS` each."""

    def __init__(self) -> None:
        self.keys = torch.empty(0, 1, dtype=torch.int64)
        self.codes = torch.empty(0, dtype=torch.int8)

    def __len__(self) -> int:
        return int(self.codes.numel())

    def add(self, dets: torch.Tensor, origin: str) -> int:
        """Record the rows of ``dets`` (uint8 ``[D, 2N]``) not recorded before as ``origin``'s;
        returns how many were new."""
        keys = pack_occupations(torch.as_tensor(dets).to(torch.uint8).cpu())
        if len(self) and keys.shape[0]:
            keys = keys[lookup_keys(self.keys, keys) < 0]
        if keys.shape[0] == 0:
            return 0
        keys, _ = unique_keys(keys)
        new = torch.full((keys.shape[0],), ORIGINS.index(origin), dtype=torch.int8)
        merged = torch.cat((self.keys, keys)) if len(self) else keys
        codes = torch.cat((self.codes, new))
        self.keys, inverse = unique_keys(merged)
        self.codes = torch.empty_like(codes)
        self.codes[inverse] = codes
        return int(keys.shape[0])

    def of(self, dets: torch.Tensor) -> torch.Tensor:
        """The code of each row of ``dets`` (int8 ``[D]``; -1 where none was recorded)."""
        dets = torch.as_tensor(dets).to(torch.uint8).cpu()
        if not len(self):
            return torch.full((dets.shape[0],), -1, dtype=torch.int8)
        pos = lookup_keys(self.keys, pack_occupations(dets))
        return torch.where(pos >= 0, self.codes[pos.clamp(min=0)], torch.tensor(-1, dtype=torch.int8))

    def state_dict(self) -> dict:
        return {"keys": self.keys, "codes": self.codes}

    @classmethod
    def from_state_dict(cls, saved: dict | None) -> Origins:
        origins = cls()
        if saved:
            origins.keys, origins.codes = saved["keys"], saved["codes"]
        return origins


def origin_shares(H: Hamiltonian, space: SCIState, origins: Origins) -> dict[str, dict]:
    """Per origin present in ``space`` (:data:`ORIGINS`, then ``"unknown"``): ``{"determinants",
    "weight", "lowering_mha"}`` on its ground state (see the module's rules; ``lowering_mha`` is
    ``None`` for an origin that holds the whole vector)."""
    from hamiltonians.exact import hamiltonian_matrix

    codes = origins.of(space.dets).numpy()
    c = space.coefficients.double().numpy()
    c = c / np.linalg.norm(c)
    matrix, _ = hamiltonian_matrix(H, space.dets)
    energy = float(c @ (matrix @ c))
    shares: dict[str, dict] = {}
    for code, name in [*enumerate(ORIGINS), (-1, "unknown")]:
        mine = codes == code
        if not mine.any():
            continue
        rest = np.where(mine, 0.0, c)
        norm = float(rest @ rest)
        lowering = None if norm < 1e-300 else 1e3 * (float(rest @ (matrix @ rest)) / norm - energy)
        shares[name] = {"determinants": int(mine.sum()), "weight": float(c[mine] @ c[mine]), "lowering_mha": lowering}
    return shares
