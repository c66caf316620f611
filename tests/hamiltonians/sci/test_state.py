"""hamiltonians.sci.state: the one state type and the determinant set's rules."""

import torch

from hamiltonians.sci.diagonalise import diagonalise, projected_energy
from hamiltonians.sci.state import SCIState, merge, unique_determinants
from tests.hamiltonians.sci.helpers import random_subset

import pytest


def test_duplicates_are_dropped_in_first_occurrence_order(molecules):
    H = molecules("LiH")
    dets = random_subset(H, 30, seed=3)
    doubled = torch.cat((dets, dets[:10].flip(0)))
    unique, first = unique_determinants(H, doubled)
    assert torch.equal(unique, dets) and torch.equal(first, torch.arange(30))
    a, b = diagonalise(H, doubled), diagonalise(H, dets)
    assert a.energy == b.energy and torch.equal(a.dets, dets)
    with pytest.raises(ValueError, match="unique"):
        projected_energy(H, doubled, torch.ones(40))




def test_merge_appends_only_the_new_rows_and_a_state_round_trips(molecules):
    H = molecules("LiH")
    dets = random_subset(H, 40, seed=5)
    merged, n_new = merge(H, dets[:30], torch.cat((dets[20:], dets[:5])))
    assert n_new == 10 and torch.equal(merged, dets)
    state = diagonalise(H, dets)
    again = SCIState.from_dict(state.to_dict())
    assert again.energy == state.energy and torch.equal(again.coefficients, state.coefficients)
    assert again.nroots == 1 and again.size == 40 and again.spin_squares is None
