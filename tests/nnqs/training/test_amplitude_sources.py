"""nnqs.training.amplitude_sources: the network's sources equal its full pass, over chunks,
parents and rank slices."""

import torch

from hamiltonians.amplitudes import AmplitudeTable
from nnqs.parallel import LOCAL
from nnqs.training.amplitude_sources import (evaluate_in_slices, full_pass_source, kv_cache_source,
                                             occupation_log_psi)
from nnqs.wavefunction.tokens import random_valid_tokens, tokens_to_occupations
from tests.models import make_model


def test_evaluate_in_slices_equals_one_pass_per_configuration():
    model = make_model(8, 4, 3, seed=1, phase_hidden=(8,))
    tokens = torch.unique(random_valid_tokens(model.constraint, 4000, torch.Generator().manual_seed(2)), dim=0)
    occ = tokens_to_occupations(tokens).to(torch.uint8)
    got, evaluated, seconds = evaluate_in_slices(model, occ, LOCAL)
    with torch.no_grad():
        want = model.log_psi(tokens).to(torch.complex128)
    assert evaluated == tokens.shape[0] > 1024 and seconds > 0   # more than one chunk
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    torch.testing.assert_close(occupation_log_psi(model)(occ[:5]), want[:5], rtol=0, atol=1e-12)


def test_the_kv_cache_source_and_a_table_equal_the_full_pass():
    """Every ``x'`` decoded from its parent sample's cache, or looked up in a table with the full
    pass as fallback, has the full pass's ``log psi`` (float64, 1e-12)."""
    model = make_model(7, 3, 2, seed=4, phase_hidden=(8,))
    g = torch.Generator().manual_seed(5)
    samples = torch.unique(random_valid_tokens(model.constraint, 30, g), dim=0)
    others = torch.unique(random_valid_tokens(model.constraint, 200, g), dim=0)
    occ = tokens_to_occupations(others).to(torch.uint8)
    parent = torch.randint(0, samples.shape[0], (others.shape[0],), generator=g)
    with torch.no_grad():
        want = model.log_psi(others).to(torch.complex128)
    full = full_pass_source(model)(occ, parent)
    cached = kv_cache_source(model, samples)(occ, parent)
    torch.testing.assert_close(full, want, rtol=0, atol=1e-12)
    torch.testing.assert_close(cached, want, rtol=0, atol=1e-12)
    half = AmplitudeTable(occ[::2], want[::2] + 1.0)        # known (and marked) for every other row
    looked_up = half.source(full_pass_source(model))(occ, parent)
    torch.testing.assert_close(looked_up[::2], want[::2] + 1.0, rtol=0, atol=0)
    torch.testing.assert_close(looked_up[1::2], want[1::2], rtol=0, atol=1e-12)
