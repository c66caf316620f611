"""Local energies through the training layer: KV-cache amplitudes equal full passes."""

import pytest
import torch

from nnqs.training.estimators import evaluate_local_energies
from nnqs.wavefunction.tokens import random_valid_tokens
from tests.models import make_model
from tests.systems import random_hamiltonian


@pytest.mark.parametrize("mode,threshold", [("exact", 0.0), ("truncated", 0.05)])
def test_cache_amplitudes_equal_full_passes(mode, threshold):
    model = make_model(7, 3, 2, seed=2, phase_hidden=(16,))
    H = random_hamiltonian(7, 3, 2, seed=3)
    tokens = torch.unique(random_valid_tokens(model.constraint, 40, torch.Generator().manual_seed(4)), dim=0)
    with torch.no_grad():
        log_psi = model.log_psi(tokens)
    full = evaluate_local_energies(model, H, tokens, log_psi, mode, threshold=threshold, amplitudes="full")
    cache = evaluate_local_energies(model, H, tokens, log_psi, mode, threshold=threshold, amplitudes="cache")
    assert full.n_evaluated > 0 and cache.n_evaluated == full.n_evaluated
    torch.testing.assert_close(cache.e_loc, full.e_loc, rtol=0, atol=1e-10)
    if mode == "truncated":
        assert 0 < cache.kept_fraction < 1
    with pytest.raises(ValueError, match="amplitudes"):
        evaluate_local_energies(model, H, tokens, log_psi, mode, amplitudes="bogus")
