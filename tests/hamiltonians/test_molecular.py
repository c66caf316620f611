"""MolecularHamiltonian's integrals: what real orbitals cannot have is refused in one line."""

import pytest
import torch

from hamiltonians import from_pyscf


@pytest.mark.parametrize("edit, message", [
    (lambda h1, eri: (h1.to(torch.complex128), eri), "complex"),
    (lambda h1, eri: (h1, eri.index_put_((torch.tensor(0),) * 4, torch.tensor(float("inf"), dtype=torch.float64))), "finite"),
    (lambda h1, eri: (h1.index_put_((torch.tensor(0), torch.tensor(1)), torch.tensor(0.3, dtype=torch.float64)), eri), "h_pq != h_qp"),
    (lambda h1, eri: (h1, eri.index_put_((torch.tensor(0), torch.tensor(1), torch.tensor(1), torch.tensor(1)),
                                         torch.tensor(0.2, dtype=torch.float64))), "not symmetric"),
])
def test_integrals_that_real_orbitals_cannot_have_are_refused(edit, message):
    from hamiltonians import MolecularHamiltonian

    H = from_pyscf("H 0 0 0; H 0 0 0.7414", "sto-3g")
    h1, eri = edit(H.h1.clone(), H.eri.clone())
    with pytest.raises(ValueError, match=message):
        MolecularHamiltonian(2, 1, 1, H.constant, h1, eri)
