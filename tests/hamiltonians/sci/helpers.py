"""Shared references for the selected-CI tests: the dense matrix, random subsets of the space,
and PySCF's FCI roots of a random Hamiltonian."""

import numpy as np
import pytest
import torch

from hamiltonians.determinants import lookup_keys, pack_occupations
from hamiltonians.exact import hamiltonian_matrix
from tests.systems import random_hamiltonian

#: A random Hamiltonian of 6 orbitals and (3, 3) electrons (400 determinants) for the roots.
H6 = random_hamiltonian(6, 3, 3, seed=2)


def dense(H):
    """The full dense matrix ``[F, F]``, the determinants, and a function mapping determinants to its rows."""
    matrix, full = hamiltonian_matrix(H)
    keys = pack_occupations(full)

    def rows(dets):
        pos = lookup_keys(keys, pack_occupations(dets))
        assert bool((pos >= 0).all())
        return pos.numpy()

    return matrix.toarray(), full, rows


def random_subset(H, size, seed):
    """``size`` determinants of ``H``'s space in a seeded random order."""
    _, full = hamiltonian_matrix(H)
    g = torch.Generator().manual_seed(seed)
    return full[torch.randperm(full.shape[0], generator=g)[:size]]


def pyscf_roots(nroots, shift=0.0, ss=None):
    """PySCF's ``direct_spin1`` roots of :data:`H6` (with its spin penalty when ``shift``)."""
    pytest.importorskip("pyscf")
    from pyscf import fci

    solver = fci.direct_spin1.FCI()
    solver.conv_tol = 1e-12
    if shift:
        solver = fci.addons.fix_spin_(solver, shift=shift, ss=ss)
    e, c = solver.kernel(H6.h1.numpy(), H6.eri.numpy(), 6, (3, 3), ecore=H6.constant, nroots=nroots)
    return np.asarray(e), c
