import itertools

import pytest
import torch

from samplers import exact
from tests.models import make_model


@pytest.mark.parametrize("n,n_alpha,n_beta", [(4, 2, 1), (5, 0, 5), (4, 3, 2), (3, 0, 0)])
def test_enumeration_equals_brute_force(n, n_alpha, n_beta):
    model = make_model(n, n_alpha, n_beta, seed=n)
    tokens, probs = exact.enumerate_support(model)
    every = torch.tensor(list(itertools.product(range(4), repeat=n)))
    with torch.no_grad():
        p_all = model.log_prob(every).exp()
    support = every[p_all > 0]
    assert tokens.shape == support.shape
    assert {tuple(r) for r in tokens.tolist()} == {tuple(r) for r in support.tolist()}
    with torch.no_grad():
        torch.testing.assert_close(probs, model.log_prob(tokens).exp(), rtol=0, atol=1e-12)
    assert abs(float(probs.sum()) - 1) < 1e-12


def test_enumeration_refuses_large_spaces():
    model = make_model(8, 4, 4)
    with pytest.raises(ValueError, match="small systems"):
        exact.enumerate_support(model, max_configurations=100)
