"""The network's energy on a fixed space (:mod:`nnqs.training.space_energy`): the fast step's
gradient against autograd through the dense Rayleigh quotient; the minimisation against the
space's exact ground state."""

import numpy as np
import torch

from hamiltonians import from_pyscf
from hamiltonians.exact import hamiltonian_matrix
from hamiltonians.sci.diagonalise import diagonalise
from hamiltonians.sci.spaces import cisd
from nnqs.training.estimators import vmc_loss
from nnqs.training.fit import fit_to_state
from nnqs.training.space_energy import (
    _amplitudes,
    _energy_and_local,
    minimise_space_energy,
    space_energy,
    space_energy_reference,
)
from nnqs.wavefunction.tokens import occupations_to_tokens
from tests.models import make_model


def _lih():
    H = from_pyscf("Li 0 0 0; H 0 0 1.5949", "sto-3g")
    return H, cisd(H)


def _model(H, seed: int = 0):
    return make_model(H.n_orbitals, H.n_alpha, H.n_beta, seed=seed, dtype="float64", d_model=16, n_layers=2,
                      n_heads=2, phase_hidden=(32,))


def test_the_surrogate_gradient_is_the_gradient_of_the_rayleigh_quotient():
    H, state = _lih()
    model = _model(H, seed=3)
    matrix, dets = hamiltonian_matrix(H, state.dets)
    tokens = occupations_to_tokens(dets.long())
    psi, _ = _amplitudes(model, tokens, chunk=7)
    energy, local, w = _energy_and_local(matrix, psi)
    reference = space_energy_reference(model, H, state.dets)
    assert abs(float(reference.detach()) - energy) < 1e-12
    assert abs(space_energy(model, H, state.dets, chunk=5) - energy) < 1e-12
    expected = torch.autograd.grad(reference, list(model.parameters()), allow_unused=True)
    model.zero_grad()
    for rows in torch.arange(tokens.shape[0]).split(7):   # the chunked surrogate, as the fast step runs it
        vmc_loss(model.log_psi(tokens[rows]), torch.from_numpy(local)[rows], torch.from_numpy(w)[rows],
                 energy).backward()
    for p, g in zip(model.parameters(), expected, strict=True):
        want = torch.zeros_like(p) if g is None else g
        got = torch.zeros_like(p) if p.grad is None else p.grad
        assert torch.allclose(got, want, rtol=1e-9, atol=1e-11)
    assert sum(float(g.abs().sum()) for g in expected if g is not None) > 1e-3   # a real gradient was compared


def test_minimising_on_the_space_reaches_its_ground_state_and_keeps_the_best():
    """From a network fitted roughly to LiH's CISD, the minimisation takes ``E_S`` most of the way
    to CISD's own energy (the lowest on that space), never above where it began."""
    H, state = _lih()
    ground = diagonalise(H, state.dets).energy
    model = _model(H, seed=1)
    tokens = occupations_to_tokens(state.dets.long())
    fit_to_state(model, tokens, state.coefficients, steps=60, lr=1e-2, target_fidelity=0.9999)
    result = minimise_space_energy(model, H, state.dets, steps=150, lr=3e-3)
    assert result.energy_before - ground > 2e-4                      # the rough fit leaves something to gain
    assert result.energy - ground < 0.2 * (result.energy_before - ground)
    assert result.energy >= ground - 1e-10                           # variational on the space
    assert abs(space_energy(model, H, state.dets) - result.energy) < 1e-12   # it ends with the best parameters
    psi = np.exp(model.log_psi_no_grad(tokens).real.double().numpy() * 2)
    assert abs(result.weight_in_space - psi.sum()) < 1e-12 and result.weight_in_space <= 1 + 1e-12


def test_the_network_s_draws_join_the_space_and_its_quotient_is_the_union_s():
    """With ``draw``, the set is the space plus the drawn determinants it lacks (here: every LiH
    determinant outside CISD, so the union is the whole space and the quotient the network's exact
    energy, which the minimisation lowers towards FCI)."""
    from hamiltonians.determinants import enumerate_determinants
    from hamiltonians.exact import ground_state_energy
    from nnqs.training.estimators import exact_variational_energy

    H, state = _lih()
    every = enumerate_determinants(H.n_orbitals, H.n_alpha, H.n_beta).to(torch.uint8)
    model = _model(H, seed=1)
    fit_to_state(model, occupations_to_tokens(state.dets.long()), state.coefficients, steps=60, lr=1e-2,
                 target_fidelity=0.9999)
    calls = []
    result = minimise_space_energy(model, H, state.dets, steps=30, lr=3e-3, draw=lambda: calls.append(1) or every,
                                   resample_every=10)
    assert len(calls) == 3                                          # steps 0, 10, 20
    assert result.determinants == H.n_determinants == state.dets.shape[0] + result.joined
    assert abs(result.weight_in_space - 1) < 1e-12                  # the union holds all of the network's weight
    assert abs(exact_variational_energy(model, H) - result.energy) < 1e-10
    assert ground_state_energy(H) - 1e-10 <= result.energy < result.energy_before
