import itertools

import pytest
import scipy.stats
import torch

from nnqs.wavefunction.tokens import (
    ElectronConstraint,
    check_tokens,
    occupations_to_tokens,
    random_valid_tokens,
    tokens_to_occupations,
)


def test_token_occupation_round_trip_and_convention():
    occ = torch.tensor([[1, 0, 0, 1, 1, 1, 0, 0]])  # orbital 0 alpha, 1 beta, 2 double, 3 empty
    tokens = occupations_to_tokens(occ)
    assert tokens.tolist() == [[1, 2, 3, 0]]
    assert torch.equal(tokens_to_occupations(tokens), occ)
    every = torch.tensor(list(itertools.product(range(4), repeat=3)))
    assert torch.equal(occupations_to_tokens(tokens_to_occupations(every)), every)


def completable(constraint, prefix):
    """Whether some completion of ``prefix`` is valid (enumeration)."""
    rest = itertools.product(range(4), repeat=constraint.n_orbitals - len(prefix))
    full = torch.tensor([list(prefix) + list(r) for r in rest])
    return bool(constraint.is_valid(full).any())


def brute_force_allowed(constraint, prefix):
    """Token t is allowed iff some completion of prefix + [t] is valid."""
    return [completable(constraint, list(prefix) + [t]) for t in range(4)]


@pytest.mark.parametrize("n_alpha,n_beta", [(0, 0), (2, 1), (4, 4), (1, 3)])
def test_allowed_mask_equals_reachability(n_alpha, n_beta):
    """The mask allows exactly the tokens from which a valid completion exists."""
    constraint = ElectronConstraint(4, n_alpha, n_beta)
    for length in range(4):
        for prefix in itertools.product(range(4), repeat=length):
            if not completable(constraint, prefix):
                continue  # the mask is specified for valid prefixes only
            tokens = torch.tensor([list(prefix) + [0] * (4 - length)])
            mask = constraint.prefix_masks(tokens)[0, length].tolist()
            assert mask == brute_force_allowed(constraint, prefix), prefix


def test_random_valid_tokens_are_valid_and_uniform():
    constraint = ElectronConstraint(7, 3, 2)
    tokens = random_valid_tokens(constraint, 20_000, torch.Generator().manual_seed(1))
    assert constraint.is_valid(tokens).all()
    _, counts = torch.unique(tokens, dim=0, return_counts=True)
    assert counts.numel() == 35 * 21  # every one of the C(7,3) * C(7,2) configurations drawn
    assert scipy.stats.chisquare(counts.numpy()).pvalue > 1e-3  # against the uniform distribution


def test_bad_inputs_raise_value_error():
    with pytest.raises(ValueError, match="0..3"):
        check_tokens(torch.tensor([[0, 4]]))
    with pytest.raises(ValueError, match="shape"):
        check_tokens(torch.tensor([[0, 1, 2]]), n_orbitals=2)
    with pytest.raises(ValueError, match="integer"):
        check_tokens(torch.tensor([[0.0, 1.0]]))
    with pytest.raises(ValueError, match="n_alpha=5"):
        ElectronConstraint(4, 5, 0)
    with pytest.raises(ValueError, match="0 or 1"):
        occupations_to_tokens(torch.tensor([[2, 0]]))
