"""SR (:mod:`nnqs.training.sr`): the per-sample Jacobian against autograd; minSR's direction
against the dense formula and the exact gradient, float32 rounding; SR on the top samples
against the parameter-space solve."""

import warnings

import pytest
import torch

from nnqs.training.estimators import local_energies
from nnqs.training.sr import (log_psi_jacobian, log_psi_jacobian_reference, minsr_direction,
                              minsr_direction_reference, top_sr_direction, top_sr_direction_reference)
from nnqs.wavefunction.tokens import random_valid_tokens
from tests.models import make_model
from tests.nnqs.training.conftest import rayleigh_quotient


def test_minsr_gradient_and_direction(small_system):
    H, dense, tokens = small_system
    model = make_model(4, 2, 1, seed=4, phase_hidden=(6,))
    log_psi = model.log_psi(tokens)
    e_loc = local_energies(model, H, tokens, log_psi, "exact")
    weights = torch.softmax(2 * log_psi.real.detach(), 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # the written-out attention batches under vmap: no fallback warning
        jac = log_psi_jacobian(model, tokens, chunk=7)
    # The Jacobian equals autograd row by row, both parts (chunks of 7 cover a ragged end),
    # with the written-out attention and with the fused kernel.
    reference = log_psi_jacobian_reference(model, tokens)
    torch.testing.assert_close(jac, reference, rtol=0, atol=1e-12)
    torch.testing.assert_close(log_psi_jacobian(model, tokens, explicit=False), reference, rtol=0, atol=1e-12)
    assert float(jac[:, 0].abs().max()) > 0.1 and float(jac[:, 1].abs().max()) > 0.1
    direction, gradient = minsr_direction(jac, e_loc, weights, shift=1e-3)
    exact = rayleigh_quotient(model, dense, tokens)
    g_exact = torch.cat([g.flatten() for g in torch.autograd.grad(exact, list(model.parameters()))])
    torch.testing.assert_close(gradient, g_exact, rtol=0, atol=1e-10)
    # A small step along the SR direction lowers the exact energy.
    with torch.no_grad():
        offset = 0
        for p in model.parameters():
            p -= 1e-3 * direction[offset : offset + p.numel()].view_as(p)
            offset += p.numel()
    assert float(rayleigh_quotient(model, dense, tokens)) < float(exact)


@pytest.mark.parametrize("shared", [0, 3])
def test_minsr_direction_equals_dense_reference(shared):
    """The block-sparse solve equals the dense one, also when both halves share columns."""
    g = torch.Generator().manual_seed(shared)
    u, p = 9, 20
    jac = torch.randn(u, 2, p, generator=g, dtype=torch.float64)
    jac[:, 0, 12:] = 0                     # amplitude network: columns 0..11
    jac[:, 1, : 12 - shared] = 0           # phase network: columns 12-shared..19
    jac[:, :, 5] = 0                       # a parameter no sample touches
    e_loc = torch.complex(torch.randn(u, generator=g, dtype=torch.float64),
                          torch.randn(u, generator=g, dtype=torch.float64))
    weights = torch.rand(u, generator=g, dtype=torch.float64)
    weights /= weights.sum()
    fast = minsr_direction(jac, e_loc, weights, shift=1e-3)
    slow = minsr_direction_reference(jac, e_loc, weights, shift=1e-3)
    for a, b in zip(fast, slow):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)
    assert float(slow[0].norm()) > 0.1


def test_minsr_direction_of_a_float32_jacobian_is_float64_to_its_rounding():
    """A float32 Jacobian's Gram matrix is formed in float32: the direction stays within
    float32 rounding (amplified by the shifted solve) of the float64 formula's."""
    model = make_model(6, 3, 2, seed=5, dtype="float32")
    g = torch.Generator().manual_seed(1)
    tokens = torch.unique(random_valid_tokens(model.constraint, 80, generator=g), dim=0)
    jac = log_psi_jacobian(model, tokens)
    assert jac.dtype == torch.float32
    e_loc = torch.complex(torch.randn(len(tokens), generator=g, dtype=torch.float64),
                          torch.randn(len(tokens), generator=g, dtype=torch.float64))
    weights = torch.softmax(torch.randn(len(tokens), generator=g, dtype=torch.float64), 0)
    fast, _ = minsr_direction(jac, e_loc, weights, shift=1e-4)
    slow, _ = minsr_direction_reference(jac.double(), e_loc, weights, shift=1e-4)
    relative = float((fast - slow).norm() / slow.norm())
    assert 1e-9 < relative < 1e-4   # float32 rounding, not float64's, and not more


def test_the_jacobian_columns_follow_the_models_parameter_groups():
    """Amplitude parameters first, then the phase MLP's: the order of ``model.parameters()``
    that the update writes back in."""
    model = make_model(4, 2, 1, seed=6, phase_hidden=(6,))
    ordered = model.amplitude_parameters() + model.phase_parameters()
    assert [id(p) for p in ordered] == [id(p) for p in model.parameters() if p.requires_grad]
    assert all(not n.startswith("phase_net.") for n, _ in model.named_amplitude_parameters())
    assert len(model.phase_parameters()) == len(list(model.phase_net.parameters()))


@pytest.mark.parametrize("k,p", [(6, 20), (15, 8)])
def test_top_sr_direction_equals_the_parameter_space_solve(k, p):
    """Woodbury's ``2K x 2K`` solve equals ``(S_K + lambda I)^{-1} g`` solved in parameter space,
    with fewer samples than parameters and with more."""
    g = torch.Generator().manual_seed(k)
    jac = torch.randn(k, 2, p, generator=g, dtype=torch.float64)
    weights = torch.rand(k, generator=g, dtype=torch.float64) + 0.1
    gradient = torch.randn(p, generator=g, dtype=torch.float64)
    fast = top_sr_direction(jac, weights, gradient, shift=1e-2)
    slow = top_sr_direction_reference(jac, weights, gradient, shift=1e-2)
    torch.testing.assert_close(fast, slow, rtol=0, atol=1e-10 * float(slow.abs().max()))
    # a descent direction, and not the gradient itself: the top samples' directions are damped
    assert float(fast @ gradient) > 0
    cos = float(fast @ gradient / (fast.norm() * gradient.norm()))
    assert cos < 0.999


def test_a_top_sr_step_lowers_the_exact_energy(small_system):
    H, dense, tokens = small_system
    model = make_model(4, 2, 1, seed=4, phase_hidden=(6,))
    log_psi = model.log_psi(tokens)
    weights = torch.softmax(2 * log_psi.real.detach(), 0)
    exact = rayleigh_quotient(model, dense, tokens)
    gradient = torch.cat([g.flatten() for g in torch.autograd.grad(exact, list(model.parameters()))])
    top = torch.sort(weights, descending=True).indices[:4]
    direction = top_sr_direction(log_psi_jacobian(model, tokens[top]), weights[top], gradient, shift=1e-3)
    with torch.no_grad():
        offset = 0
        for p in model.parameters():
            p -= 1e-3 * direction[offset : offset + p.numel()].view_as(p) / float(direction.norm())
            offset += p.numel()
    assert float(rayleigh_quotient(model, dense, tokens)) < float(exact)
