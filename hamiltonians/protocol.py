"""What the project asks of a Hamiltonian: the :class:`Hamiltonian` protocol.

:class:`hamiltonians.molecular.MolecularHamiltonian` satisfies it (``isinstance`` checks it at run
time); every function that takes ``H`` is annotated with it, so that a type checker sees which of
its attributes the code uses. Conventions (docs/design.md §1): ``N`` spatial orbitals, ``2N``
interleaved spin orbitals (``2i`` alpha, ``2i + 1`` beta), occupations uint8 ``[B, 2N]`` in one
``(n_alpha, n_beta)`` sector, Jordan–Wigner signs in that order, energies in Hartree.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import torch

if TYPE_CHECKING:
    from hamiltonians.excitations import KernelTensors

__all__ = ["Hamiltonian"]


@runtime_checkable
class Hamiltonian(Protocol):
    """A number-conserving, spin-conserving fermionic Hamiltonian over one ``(n_alpha, n_beta)``
    sector, with the batched Slater–Condon kernel the local energies and selected CI use."""

    n_orbitals: int
    n_alpha: int
    n_beta: int
    constant: float
    h1: torch.Tensor
    eri: torch.Tensor
    source: dict[str, Any]
    chunk_size: int

    @property
    def n_spin_orbitals(self) -> int:
        """``2N``."""

    @property
    def n_electrons(self) -> int:
        """``n_alpha + n_beta``."""

    @property
    def n_determinants(self) -> int:
        """The determinants of the sector."""

    @property
    def kernel_tensors(self) -> KernelTensors:
        """The PyTorch kernel's precomputed tensors (:class:`hamiltonians.excitations.KernelTensors`)."""

    @property
    def device(self) -> torch.device: ...

    @property
    def dtype(self) -> torch.dtype: ...

    def to(self, device=None, dtype=None) -> Hamiltonian:
        """The same integrals on ``device`` / in ``dtype``."""

    def aufbau_occupation(self) -> torch.Tensor:
        """The lowest orbitals occupied, uint8 ``[2N]``."""

    def hf_energy(self) -> float:
        """The diagonal element of :meth:`aufbau_occupation`."""

    def samples_per_chunk(self, chunk: int | None = None) -> int:
        """Determinants per kernel chunk so that at most ``chunk`` elements are held."""

    def diagonal(self, occ: torch.Tensor) -> torch.Tensor:
        """``<x|H|x>`` for occupations ``[B, 2N]`` -> ``[B]``."""

    def connected(self, occ: torch.Tensor, *, chunk: int | None = None,
                  eps: float = 0.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(x' [M, 2N], <x'|H|x> [M], rows [M])``: every single and double of each row."""

    def screened_connections(self, occ: torch.Tensor, *, threshold: float = 0.0, eps: float = 0.0,
                             chunk: int | None = None, kernel: str = "auto",
                             expand: int | None = None) -> Iterator[tuple]:
        """``(keys, values, rows, batch_pos, n_nonzero)`` chunk by chunk (see the molecular kernel)."""

    def semistochastic_connections(self, occ: torch.Tensor, *, threshold: float, draws: int,
                                   generator: torch.Generator | None = None, eps: float = 0.0,
                                   chunk: int | None = None, kernel: str = "auto", expand: int | None = None,
                                   heat_bath: bool = True) -> Iterator[tuple]:
        """The screened connections plus ``draws`` magnitude-weighted draws of the rest per row."""
