"""Connected configurations decoded from the samples' KV cache equal the full pass (float64)."""

import pytest
import torch

from hamiltonians.molecular import permute_orbitals
from nnqs.wavefunction.branching import branch_log_psi, first_difference, prefix_state
from nnqs.wavefunction.tokens import occupations_to_tokens, random_valid_tokens, tokens_to_occupations
from tests.models import make_model
from tests.systems import random_hamiltonian


def excitation_rank(x: torch.Tensor, xp: torch.Tensor) -> torch.Tensor:
    """Electrons moved from ``x`` to ``xp`` (1 single, 2 double), from the occupations."""
    return (tokens_to_occupations(x) != tokens_to_occupations(xp)).sum(dim=1) // 2


@pytest.mark.parametrize("order", ["given", "reversed"])
@pytest.mark.parametrize("n_kv_heads", [1, 4])
def test_connected_amplitudes_equal_the_full_pass(order, n_kv_heads):
    n, n_alpha, n_beta = 8, 3, 2
    model = make_model(n, n_alpha, n_beta, seed=3, n_layers=3, n_heads=4, n_kv_heads=n_kv_heads, phase_hidden=(16,))
    H = random_hamiltonian(n, n_alpha, n_beta, seed=1)
    if order == "reversed":
        H = permute_orbitals(H, list(range(n))[::-1])
    x = random_valid_tokens(model.constraint, 12, torch.Generator().manual_seed(0))
    occ_p, _, parent = H.connected(tokens_to_occupations(x))
    xp = occupations_to_tokens(occ_p.long())
    ranks = excitation_rank(x[parent], xp)
    assert set(ranks.tolist()) == {1, 2}
    alpha_moved = ((xp & 1) != (x[parent] & 1)).any(dim=1)
    beta_moved = ((xp & 2) != (x[parent] & 2)).any(dim=1)
    assert ((ranks == 2) & (alpha_moved ^ beta_moved)).any()  # same-spin doubles
    assert ((ranks == 2) & alpha_moved & beta_moved).any()  # opposite-spin doubles
    state = prefix_state(model, x)
    with torch.no_grad():
        expected = model.log_psi(xp)
    got = branch_log_psi(model, state, xp, parent)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-12)
    first = first_difference(x[parent], xp)
    assert first.max() < n and len(first.unique()) >= 4  # many groups, each continued from its own position


def test_identity_last_position_and_invalid_branches():
    """x' == x (no changed position), a change only at the last position, a change at position 0,
    and an x' with the wrong electron count (log p = -inf, as from the full pass)."""
    model = make_model(5, 2, 2, seed=4)
    x = torch.tensor([[3, 1, 2, 0, 0], [1, 2, 0, 3, 0]])
    xp = torch.tensor([[3, 1, 2, 0, 0], [1, 2, 0, 0, 3], [3, 1, 2, 0, 0], [3, 0, 2, 0, 0]])
    parent = torch.tensor([0, 1, 1, 0])
    state = prefix_state(model, x)
    got = branch_log_psi(model, state, xp, parent)
    with torch.no_grad():
        expected = model.log_psi(xp, validate=False)
    assert first_difference(x[parent], xp).tolist() == [5, 3, 0, 1]
    torch.testing.assert_close(got[:3], expected[:3], rtol=0, atol=1e-12)
    assert got[3].real == expected[3].real == float("-inf")
    torch.testing.assert_close(got.imag, expected.imag, rtol=0, atol=1e-12)


def test_fork_copies_rows_up_to_a_position():
    model = make_model(6, 2, 2, seed=5)
    x = random_valid_tokens(model.constraint, 4, torch.Generator().manual_seed(2))
    state = prefix_state(model, x)
    index = torch.tensor([2, 2, 0])
    forked = state.cache.fork(index, 3)
    assert (forked.batch, forked.position) == (3, 3)
    assert torch.equal(forked.k[:, :, :, :3], state.cache.k[:, index, :, :3])
    assert torch.equal(forked.v[:, :, :, :3], state.cache.v[:, index, :, :3])
    with pytest.raises(ValueError, match="fork at positions"):
        state.cache.fork(index, 7)
