"""Shared molecules for the hamiltonians tests (STO-3G, built once per session)."""

import pytest

GEOMETRIES = {
    "H2": "H 0 0 0; H 0 0 0.7414",
    "LiH": "Li 0 0 0; H 0 0 1.5949",
    "H2O": "O 0 0 0; H 0 0.757 0.587; H 0 -0.757 0.587",
    "CH2": "C 0 0 0; H 0 0.9345 0.6505; H 0 -0.9345 0.6505",
}


@pytest.fixture(scope="session")
def molecules():
    from hamiltonians import from_pyscf

    cache = {}

    def get(name, **kw):
        key = (name, tuple(sorted(kw.items())))
        if key not in cache:
            cache[key] = from_pyscf(GEOMETRIES[name], kw.pop("basis", "sto-3g"), **kw)
        return cache[key]

    return get


def random_hamiltonian(n, n_alpha, n_beta, seed=0):
    """A random real Hamiltonian with 8-fold symmetric integrals (not a molecule)."""
    import torch

    from hamiltonians import MolecularHamiltonian

    g = torch.Generator().manual_seed(seed)
    h1 = torch.randn(n, n, generator=g, dtype=torch.float64)
    h1 = h1 + h1.T
    a = torch.randn(n, n, n, n, generator=g, dtype=torch.float64)
    a = a + a.permute(1, 0, 2, 3)
    a = a + a.permute(0, 1, 3, 2)
    a = a + a.permute(2, 3, 0, 1)
    return MolecularHamiltonian(n, n_alpha, n_beta, 0.7, h1, 0.1 * a)


def random_determinants(n, n_alpha, n_beta, count, seed=0):
    import torch

    g = torch.Generator().manual_seed(seed)
    occ = torch.zeros(count, 2 * n, dtype=torch.uint8)
    for s, ne in ((0, n_alpha), (1, n_beta)):
        idx = torch.argsort(torch.rand(count, n, generator=g), dim=1)[:, :ne]
        block = torch.zeros(count, n, dtype=torch.uint8)
        block.scatter_(1, idx, 1)
        occ[:, s::2] = block
    return occ
