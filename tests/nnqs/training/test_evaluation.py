"""The final evaluation (:mod:`nnqs.training.evaluation`) against its pieces computed apart."""

import pytest
import torch

from hamiltonians.exact import ground_state_energy
from nnqs.training.estimators import estimate_energy, evaluate_local_energies, exact_variational_energy
from nnqs.training.evaluation import final_evaluation
from nnqs.training.settings import LocalEnergyConfig, OptimConfig, SamplerConfig
from nnqs.training.driver import VMC, build_vmc
from tests.models import make_model
from tests.systems import random_hamiltonian


def trainer_for(mode: str, threshold: float, seed: int = 0, weights: str = "counts") -> VMC:
    H = random_hamiltonian(5, 2, 2, seed=3)     # 100 determinants, more than the draws reach
    model = make_model(5, 2, 2, seed=1)
    return build_vmc(model, H, OptimConfig(steps=1), SamplerConfig(n_samples=40, unique_window=(), weights=weights),
                   LocalEnergyConfig(mode=mode, threshold=threshold, coarse_steps=5), seed=seed)


@pytest.mark.parametrize("weights", ["counts", "psi2"])   # the evaluation weighs by counts either way
def test_truncated_evaluation_reports_its_bias_and_the_exact_energy(weights):
    trainer = trainer_for("truncated", 0.05, weights=weights)
    hf = torch.tensor([[3, 3, 0, 0, 0]])
    got = final_evaluation(trainer, hf, 40)
    # the same draws again, evaluated piece by piece
    again = trainer_for("truncated", 0.05)
    batch = again.state.sample(40)
    assert float((batch.weights - torch.softmax(batch.log_prob.double(), 0)).abs().max()) > 1e-3   # psi2 differs
    with torch.no_grad():
        log_psi = again.model.log_psi(batch.tokens)
        weights = batch.weights
        fine = evaluate_local_energies(again.model, again.H, batch.tokens, log_psi, "truncated", threshold=0.05)
        exact = evaluate_local_energies(again.model, again.H, batch.tokens, log_psi, "exact")
    truncated = estimate_energy(fine.e_loc, weights, batch.n_samples)
    assert got.local_energy == "truncated" and got.n_samples == 40 and got.n_unique == batch.n_unique
    assert got.energy == pytest.approx(truncated.energy, abs=1e-12) and got.energy_stderr == pytest.approx(truncated.stderr)
    bias = 1e3 * (truncated.energy - estimate_energy(exact.e_loc, weights, batch.n_samples).energy)
    assert got.truncation_bias_mha == pytest.approx(bias, abs=1e-9) and abs(bias) > 1e-6   # the check can fail
    assert got.energy_exact_variational == pytest.approx(exact_variational_energy(again.model, again.H), abs=1e-12)
    assert 0 < got.kept_fraction < 1
    with torch.no_grad():
        assert got.p_hf_final == pytest.approx(float(again.model.log_prob(hf).exp()), abs=1e-12)
    # the sample-space bound: the sampled mode's local energies with |psi|^2 weights on the samples
    sampled = evaluate_local_energies(again.model, again.H, batch.tokens, log_psi, "sampled").e_loc.real
    psi2 = torch.exp(2 * log_psi.real.detach())
    bound = float((psi2 * sampled).sum() / psi2.sum())
    assert got.sample_space_energy == pytest.approx(bound, abs=1e-12)
    assert got.sample_space_energy >= ground_state_energy(again.H) - 1e-12


def test_the_evaluation_uses_the_fine_mode_even_inside_the_coarse_phase():
    trainer = trainer_for("exact", 0.0)
    assert trainer.step < trainer.state.local_energy_cfg.coarse_steps
    got = final_evaluation(trainer, torch.tensor([[3, 3, 0, 0, 0]]))   # 10 x n_samples draws
    assert got.local_energy == "exact" and got.kept_fraction == 1.0 and got.truncation_bias_mha is None
    assert got.n_samples == 400
    assert set(got.to_dict()) >= {"energy", "energy_stderr", "variance", "evaluation_seconds"}
