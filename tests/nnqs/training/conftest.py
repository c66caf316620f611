"""Shared by the training tests: a small system whose whole space is a dense matrix."""

import pytest
import torch

from hamiltonians.exact import hamiltonian_matrix
from nnqs.wavefunction.tokens import occupations_to_tokens
from tests.systems import random_hamiltonian


@pytest.fixture(scope="module")
def small_system():
    """``(H, dense H [D, D], tokens [D, N])`` of a random 4-orbital, (2, 1)-electron Hamiltonian."""
    H = random_hamiltonian(4, 2, 1)
    matrix, dets = hamiltonian_matrix(H)
    return H, torch.tensor(matrix.toarray()), occupations_to_tokens(dets.long())


def rayleigh_quotient(model, dense, tokens):
    """``<psi|H|psi> / <psi|psi>`` over the whole space, differentiable in the model's parameters."""
    psi = torch.exp(model.log_psi(tokens))
    return (psi.conj() @ (dense.to(psi.dtype) @ psi)).real / (psi.conj() @ psi).real
