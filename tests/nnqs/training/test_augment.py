"""The augmented step sample (:mod:`nnqs.training.augment`): the added configurations are the
largest second-order energies of the dense definition, and a step's energy over the augmented
sample is the network's energy projected on it."""

import pytest
import torch

from hamiltonians.determinants import enumerate_determinants
from hamiltonians.exact import hamiltonian_matrix
from nnqs.errors import InputError
from nnqs.training.augment import pt2_partners
from nnqs.training.settings import LocalEnergyConfig, SamplerConfig
from nnqs.training.state import VariationalState
from nnqs.wavefunction.tokens import occupations_to_tokens
from tests.models import make_model
from tests.systems import random_hamiltonian

H = random_hamiltonian(5, 2, 2, seed=3)


def dense_space():
    matrix, dets = hamiltonian_matrix(H, enumerate_determinants(5, 2, 2))
    return torch.tensor(matrix.toarray()), occupations_to_tokens(dets.long())


def test_the_partners_are_the_largest_second_order_energies():
    dense, tokens = dense_space()
    model = make_model(5, 2, 2, seed=1)
    with torch.no_grad():
        log_psi = model.log_psi(tokens)
    inside = torch.zeros(tokens.shape[0], dtype=torch.bool)
    inside[torch.randperm(tokens.shape[0], generator=torch.Generator().manual_seed(0))[:12]] = True
    psi = torch.exp(log_psi) * inside
    numerator = dense.to(psi.dtype) @ psi                       # <a|H|psi_S> for every a
    energy = -1.5
    score = numerator.abs().square() / (dense.diagonal() - energy).clamp(min=1e-6)
    score[inside] = -1.0
    expected = torch.argsort(score, descending=True)[:7]
    assert score[expected[-1]] > score[torch.argsort(score, descending=True)[7]] + 1e-9   # no tie at the cut
    got = pt2_partners(H, tokens[inside], log_psi[inside] + 3.0, 7, energy=energy, parents=100)   # any common factor
    assert torch.equal(got, tokens[expected])
    few = pt2_partners(H, tokens[inside], log_psi[inside], 7, energy=energy, parents=1)    # only the largest |psi|
    top = torch.nonzero(inside).flatten()[torch.argmax(log_psi[inside].real)]
    one = dense[:, top].abs().square() / (dense.diagonal() - energy).clamp(min=1e-6)
    one[inside] = -1.0
    assert torch.equal(few, tokens[torch.argsort(one, descending=True)[:7]])


def test_an_augmented_step_is_the_energy_projected_on_draw_and_partners():
    dense, tokens = dense_space()
    state = VariationalState(make_model(5, 2, 2, seed=1),
                             SamplerConfig(n_samples=8, unique_window=(), weights="psi2", draw="without_replacement",
                                           augment=10), LocalEnergyConfig(mode="sampled"), seed=0)
    drawn = state.step_sample()
    batch = state.augmented(H, drawn, energy=-1.0)
    assert batch.n_unique == 18 and batch.stats["augmented"] == 10
    assert torch.equal(batch.tokens[:8], drawn.tokens) and torch.equal(batch.counts[8:], torch.zeros(10, dtype=batch.counts.dtype))
    assert torch.equal(batch.stats["inclusion"][8:], torch.ones(10, dtype=batch.stats["inclusion"].dtype))
    keys = {tuple(t) for t in batch.tokens.tolist()}
    assert len(keys) == 18
    torch.testing.assert_close(batch.log_prob[8:], state.model.log_prob(batch.tokens[8:]).detach().double(),
                               rtol=0, atol=1e-12)
    evaluation = state.expect(H, batch, graph=False, fresh=True)
    index = {tuple(t): i for i, t in enumerate(tokens.tolist())}
    rows = torch.tensor([index[tuple(t)] for t in batch.tokens.tolist()])
    with torch.no_grad():
        psi = torch.exp(state.model.log_psi(batch.tokens))
    block = dense[rows][:, rows].to(psi.dtype)
    projected = float((psi.conj() @ block @ psi).real / (psi.conj() @ psi).real)
    assert abs(evaluation.estimate.energy - projected) < 1e-10


def test_augment_needs_weights_of_the_amplitudes():
    with pytest.raises(InputError, match="augment"):
        SamplerConfig(n_samples=10, augment=5, weights="counts")
    with pytest.raises(InputError, match="augment"):
        SamplerConfig(n_samples=10, augment=-1, weights="psi2")
    assert SamplerConfig(n_samples=10, augment=5, weights="psi2").augment == 5
