"""Shared test systems: random Hamiltonians and determinants (not molecules)."""

import torch

from hamiltonians import MolecularHamiltonian


def random_hamiltonian(n, n_alpha, n_beta, seed=0):
    """A random real Hamiltonian with 8-fold symmetric integrals (not a molecule), float64."""
    g = torch.Generator().manual_seed(seed)
    h1 = torch.randn(n, n, generator=g, dtype=torch.float64)
    h1 = h1 + h1.T
    a = torch.randn(n, n, n, n, generator=g, dtype=torch.float64)
    a = a + a.permute(1, 0, 2, 3)
    a = a + a.permute(0, 1, 3, 2)
    a = a + a.permute(2, 3, 0, 1)
    return MolecularHamiltonian(n, n_alpha, n_beta, 0.7, h1, 0.1 * a)


def random_determinants(n, n_alpha, n_beta, count, seed=0):
    """``count`` random occupations ``[count, 2N]`` (uint8) with the given electrons."""
    g = torch.Generator().manual_seed(seed)
    occ = torch.zeros(count, 2 * n, dtype=torch.uint8)
    for s, ne in ((0, n_alpha), (1, n_beta)):
        idx = torch.argsort(torch.rand(count, n, generator=g), dim=1)[:, :ne]
        block = torch.zeros(count, n, dtype=torch.uint8)
        block.scatter_(1, idx, 1)
        occ[:, s::2] = block
    return occ


def localised_chain(n_atoms, spacing_bohr, basis="sto-3g"):
    """A linear hydrogen chain (``n_atoms`` even, ``spacing_bohr`` apart) with its integrals in
    Lowdin-orthogonalised atomic orbitals (localised, one per atom in STO-3G), float64."""
    from hamiltonians.io.pyscf_io import lowdin_hamiltonian

    return lowdin_hamiltonian([("H", (0.0, 0.0, i * spacing_bohr)) for i in range(n_atoms)], basis, unit="Bohr")
