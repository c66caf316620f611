"""The preconditioners (:mod:`nnqs.training.preconditioners`) as objects: each direction against
the written-out formula of its rule, from the per-sample Jacobian by plain autograd (float64)."""

import pytest
import torch

from nnqs.training.preconditioners import Identity, MinSR, TopSR, preconditioners
from nnqs.training.settings import LocalEnergyConfig, OptimConfig, SamplerConfig
from nnqs.training.sr import log_psi_jacobian_reference, minsr_direction_reference, top_sr_direction_reference
from nnqs.training.state import VariationalState
from tests.models import make_model
from tests.systems import random_hamiltonian


@pytest.fixture(scope="module")
def evaluated():
    H = random_hamiltonian(5, 2, 2, seed=3)
    state = VariationalState(make_model(5, 2, 2, seed=1), SamplerConfig(n_samples=200, unique_window=()),
                             LocalEnergyConfig(mode="exact"), seed=0)
    batch = state.sample()
    return H, state, batch


def flat(direction):
    return torch.cat([t.flatten() for t in direction.tensors])


def test_identity_is_the_energy_gradient_of_the_loss(evaluated):
    H, state, batch = evaluated
    evaluation, grads = state.expect_and_grad(H, batch)
    jac = log_psi_jacobian_reference(state.model, batch.tokens)
    _, gradient = minsr_direction_reference(jac, evaluation.e_loc.detach(), evaluation.weights)  # 2 Ot^T et
    state.model.zero_grad(set_to_none=True)
    direction = Identity()(state, batch, state.expect(H, batch))
    torch.testing.assert_close(flat(direction), gradient.to(flat(direction).dtype), rtol=0, atol=1e-10)
    torch.testing.assert_close(flat(direction), torch.cat([g.flatten() for g in grads]), rtol=0, atol=1e-12)


def test_minsr_is_the_sample_space_solve(evaluated):
    H, state, batch = evaluated
    with torch.no_grad():
        evaluation = state.expect(H, batch, graph=False)
    direction = MinSR(shift=1e-3)(state, batch, evaluation)
    jac = log_psi_jacobian_reference(state.model, batch.tokens)
    want, gradient = minsr_direction_reference(jac, evaluation.e_loc, evaluation.weights, shift=1e-3)
    torch.testing.assert_close(flat(direction), want, rtol=0, atol=1e-9)
    assert abs(float(direction.check) - float(gradient.norm())) < 1e-9
    assert flat(direction).abs().max() > 1e-4   # a direction that is not zero, so the check can fail


def test_top_sr_damps_the_gradient_along_the_top_samples_metric(evaluated):
    H, state, batch = evaluated
    state.model.zero_grad(set_to_none=True)
    evaluation = state.expect(H, batch)
    direction = TopSR(k=6, shift=1e-2)(state, batch, evaluation)
    jac = log_psi_jacobian_reference(state.model, batch.tokens)
    _, gradient = minsr_direction_reference(jac, evaluation.e_loc.detach(), evaluation.weights)
    top = torch.sort(evaluation.weights.detach(), descending=True, stable=True).indices[:6]
    want = top_sr_direction_reference(jac[top], evaluation.weights.detach()[top], gradient, shift=1e-2)
    torch.testing.assert_close(flat(direction), want, rtol=0, atol=1e-9)
    assert (flat(direction) - gradient).abs().max() > 1e-6   # damped: not the plain gradient


def test_each_rule_has_its_preconditioner_and_optimiser():
    rules = preconditioners(OptimConfig(grad_chunk=7, sr_top=5, sr_shift=2e-3))
    assert {k: (type(v), v.optimizer) for k, v in rules.items()} == {
        "adamw": (Identity, "adamw"), "minsr": (MinSR, "minsr"), "sr_top": (TopSR, "adamw")}
    assert rules["sr_top"].k == 5 and rules["minsr"].shift == 2e-3
    assert rules["adamw"].needs_graph(7) and not rules["adamw"].needs_graph(8) and not rules["minsr"].needs_graph(1)
