"""Local energies through the training layer: KV-cache amplitudes equal full passes; the
sample-space energy."""

import pytest
import torch

from nnqs.training.estimators import evaluate_local_energies
from nnqs.wavefunction.tokens import random_valid_tokens, tokens_to_occupations
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


@pytest.mark.parametrize("mode,threshold", [("exact", 0.0), ("truncated", 0.05), ("sampled", 0.0)])
def test_the_sample_space_energy_is_the_dense_projection(mode, threshold):
    """``<P_S psi|H|P_S psi> / <P_S psi|P_S psi>`` over the sampled set S, from any mode's local
    energies, equals the dense matrix restricted to S (float64, 1e-10); it lies above the
    ground state, as a bound must."""
    from hamiltonians.exact import ground_state_energy, hamiltonian_matrix
    from hamiltonians.determinants import pack_occupations
    from nnqs.training.estimators import sample_space_energy
    from samplers import bas

    H = random_hamiltonian(6, 3, 2, seed=5)           # 300 determinants
    model = make_model(6, 3, 2, seed=3, phase_hidden=(16,))
    batch = bas.sample(model, 300, generator=torch.Generator().manual_seed(6))
    assert 20 < batch.n_unique < 300                   # a proper subset
    with torch.no_grad():
        log_psi = model.log_psi(batch.tokens)
        result = evaluate_local_energies(model, H, batch.tokens, log_psi, mode, threshold=threshold)
    got = sample_space_energy(result.e_loc_sampled, batch)
    matrix, dets = hamiltonian_matrix(H)
    where = {k: i for i, k in enumerate(pack_occupations(dets)[:, 0].tolist())}
    rows = [where[k] for k in pack_occupations(tokens_to_occupations(batch.tokens))[:, 0].tolist()]
    dense = torch.tensor(matrix.toarray())[rows][:, rows].to(torch.complex128)
    psi = torch.exp(log_psi.to(torch.complex128))
    want = float(((psi.conj() @ dense @ psi) / (psi.conj() @ psi)).real)
    assert got == pytest.approx(want, abs=1e-10, rel=0)
    assert got > ground_state_energy(H)
    if mode == "sampled":
        assert torch.equal(result.e_loc_sampled, result.e_loc)


def test_the_error_bar_counts_the_draws_noise_once_per_unique_sample():
    """``sum_u (w_u^2 - w_u / n) sigma_u^2`` is added to ``variance / n``: nothing for samples
    drawn once each, the shared noise of a sample that holds most draws."""
    from nnqs.training.estimators import estimate_energy

    e_loc = torch.tensor([1.0, 2.0, 4.0], dtype=torch.complex128)
    sigma2 = torch.tensor([0.5, 0.1, 0.2], dtype=torch.float64)
    ones = torch.full((3,), 1 / 3, dtype=torch.float64)
    plain = estimate_energy(e_loc, ones, 3)
    assert estimate_energy(e_loc, ones, 3, draw_variance=sigma2).stderr == pytest.approx(plain.stderr, rel=1e-12)
    heavy = torch.tensor([0.9, 0.05, 0.05], dtype=torch.float64)
    base = estimate_energy(e_loc, heavy, 1000)
    got = estimate_energy(e_loc, heavy, 1000, draw_variance=sigma2)
    extra = float(((heavy ** 2 - heavy / 1000) * sigma2).sum())
    assert got.stderr ** 2 == pytest.approx(base.stderr ** 2 + extra, rel=1e-12)
    assert got.energy == base.energy and got.variance == base.variance
