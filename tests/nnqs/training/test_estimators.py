"""Local energies through the training layer: KV-cache amplitudes equal full passes; anchors
count as sampled."""

import pytest
import torch

from hamiltonians import enumerate_determinants, local_energy
from nnqs.training.estimators import evaluate_local_energies, occupation_log_psi
from nnqs.training import estimators
from nnqs.wavefunction.tokens import occupations_to_tokens, random_valid_tokens, tokens_to_occupations
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


def _batch_and_anchors():
    model = make_model(7, 3, 2, seed=2, phase_hidden=(16,))
    H = random_hamiltonian(7, 3, 2, seed=3)
    tokens = torch.unique(random_valid_tokens(model.constraint, 40, torch.Generator().manual_seed(4)), dim=0)
    with torch.no_grad():
        log_psi = model.log_psi(tokens)
    return model, H, tokens, log_psi, enumerate_determinants(7, 3, 2)


def test_every_determinant_as_anchor_makes_sampled_mode_exact():
    model, H, tokens, log_psi, every = _batch_and_anchors()
    exact = evaluate_local_energies(model, H, tokens, log_psi, "exact")
    plain = evaluate_local_energies(model, H, tokens, log_psi, "sampled")
    anchored = evaluate_local_energies(model, H, tokens, log_psi, "sampled", anchors=every)
    assert (plain.e_loc - exact.e_loc).abs().max() > 1e-3  # the samples alone miss connections
    torch.testing.assert_close(anchored.e_loc, exact.e_loc, rtol=0, atol=1e-10)
    assert anchored.kept_fraction == 1.0
    assert anchored.n_evaluated == every.shape[0] - tokens.shape[0]  # the anchors that are not samples


@pytest.mark.parametrize("mode,threshold", [("sampled", 0.0), ("truncated", 0.05)])
def test_anchors_enter_as_sampled_rows(mode, threshold):
    """Reference: the kernel on the batch with the anchors appended as more rows (their local
    energies discarded), amplitudes from full passes."""
    model, H, tokens, log_psi, every = _batch_and_anchors()
    anchors = every[::4]
    got = evaluate_local_energies(model, H, tokens, log_psi, mode, threshold=threshold, anchors=anchors)
    occ = tokens_to_occupations(tokens).to(torch.uint8)
    extra = anchors[~(anchors[:, None, :] == occ[None]).all(-1).any(-1)]
    with torch.no_grad():
        extra_log_psi = model.log_psi(occupations_to_tokens(extra.long())).to(torch.complex128)
    table = torch.cat((occ, extra))
    ref = local_energy(H, table, occupation_log_psi(model), mode=mode, threshold=threshold,
                       log_psi_x=torch.cat((log_psi.to(torch.complex128), extra_log_psi)))
    torch.testing.assert_close(got.e_loc, ref.e_loc[: tokens.shape[0]], rtol=0, atol=1e-10)
    plain = evaluate_local_energies(model, H, tokens, log_psi, mode, threshold=threshold)
    assert got.kept_fraction > plain.kept_fraction


def test_exact_mode_ignores_anchors(monkeypatch):
    model, H, tokens, log_psi, every = _batch_and_anchors()
    plain = evaluate_local_energies(model, H, tokens, log_psi, "exact")

    def refuse(*args, **kwargs):
        raise AssertionError("exact mode evaluated the anchors")

    monkeypatch.setattr(estimators, "anchor_amplitudes", refuse)
    anchored = evaluate_local_energies(model, H, tokens, log_psi, "exact", anchors=every[::4])
    assert anchored.n_evaluated == plain.n_evaluated
    torch.testing.assert_close(anchored.e_loc, plain.e_loc, rtol=0, atol=0)
