"""VMC pieces: the gradient estimator against autograd of the exact Rayleigh quotient, minSR,
the HF start, the NaN guard, and a short H2 run to within 1 mHa of FCI."""

import math
import warnings

import pytest
import torch

from hamiltonians import from_pyscf
from hamiltonians.exact import hamiltonian_matrix
from nnqs.training.settings import OptimConfig, SamplerConfig
from nnqs.training.sr import (log_psi_jacobian, log_psi_jacobian_reference, minsr_direction,
                              minsr_direction_reference)
from nnqs.wavefunction.tokens import occupations_to_tokens, random_valid_tokens
from nnqs.training.pretrain import pretrain_hf
from nnqs.training.estimators import estimate_energy, local_energies, vmc_loss
from nnqs.training.trainer import Trainer, learning_rate, method_at
from tests.models import make_model
from tests.systems import random_hamiltonian


@pytest.fixture(scope="module")
def small_system():
    H = random_hamiltonian(4, 2, 1)
    matrix, dets = hamiltonian_matrix(H)
    return H, torch.tensor(matrix.toarray()), occupations_to_tokens(dets.long())


def rayleigh_quotient(model, dense, tokens):
    psi = torch.exp(model.log_psi(tokens))
    return (psi.conj() @ (dense.to(psi.dtype) @ psi)).real / (psi.conj() @ psi).real


def test_vmc_gradient_equals_autograd_of_exact_energy(small_system):
    H, dense, tokens = small_system
    model = make_model(4, 2, 1, seed=3)
    exact = rayleigh_quotient(model, dense, tokens)
    g_exact = torch.autograd.grad(exact, list(model.parameters()))
    log_psi = model.log_psi(tokens)
    e_loc = local_energies(model, H, tokens, log_psi, "exact")
    weights = torch.softmax(2 * log_psi.real.detach(), 0)  # |psi|^2 over the whole space
    est = estimate_energy(e_loc, weights, 1)
    assert abs(est.energy - float(exact)) < 1e-12
    loss = vmc_loss(log_psi, e_loc, weights, complex((weights * e_loc).sum()))
    g_vmc = torch.autograd.grad(loss, list(model.parameters()))
    for a, b in zip(g_exact, g_vmc):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-12)


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


def hf(n, n_alpha, n_beta):
    return torch.tensor([[3] * min(n_alpha, n_beta) + [1 if n_alpha > n_beta else 2] * abs(n_alpha - n_beta)
                         + [0] * (n - max(n_alpha, n_beta))])


def test_pretrain_hf_reaches_target():
    model = make_model(5, 2, 2, seed=0)
    x = hf(5, 2, 2)
    p = pretrain_hf(model, x, 0.8)
    assert 0.8 <= p < 1.0
    with torch.no_grad():
        assert abs(float(model.log_prob(x).exp()) - p) < 1e-12


def test_learning_rate_schedule():
    cfg = OptimConfig(steps=100, lr=1.0, warmup=10, final_lr_ratio=0.1, method="adamw")
    assert learning_rate(0, cfg) == pytest.approx(0.1)
    assert learning_rate(9, cfg) == pytest.approx(1.0)
    assert learning_rate(10, cfg) == pytest.approx(1.0)
    assert learning_rate(100, cfg) == pytest.approx(0.1)
    assert 0.1 < learning_rate(50, cfg) < 1.0
    assert {method_at(s, cfg) for s in range(100)} == {"adamw"}


def test_adamw_then_minsr_schedule():
    cfg = OptimConfig(steps=100, lr=0.1, warmup=10, final_lr_ratio=0.1, method="minsr", adamw_steps=40,
                      adamw_lr=1e-3)
    assert [method_at(s, cfg) for s in (0, 39, 40, 99)] == ["adamw", "adamw", "minsr", "minsr"]
    assert learning_rate(0, cfg) == pytest.approx(1e-4)      # warm-up of the AdamW phase
    assert learning_rate(10, cfg) == pytest.approx(1e-3)
    assert learning_rate(39, cfg) < 2e-4                       # decayed by the end of the phase
    assert learning_rate(40, cfg) == pytest.approx(0.1)       # minSR starts at its peak
    assert learning_rate(100, cfg) == pytest.approx(0.01)
    # A run no longer than the AdamW phase is AdamW throughout; method = "adamw" ignores adamw_steps.
    short = OptimConfig(steps=10, method="minsr", adamw_steps=11, adamw_lr=1e-3, lr=0.1, warmup=0)
    assert short.adamw_phase == 10 and {method_at(s, short) for s in range(10)} == {"adamw"}
    assert learning_rate(0, short) == pytest.approx(1e-3)
    assert OptimConfig(steps=10, method="adamw", adamw_steps=5).adamw_phase == 10
    # The stopping rule looks at the last regime only: after AdamW (minSR runs) and the coarse phase.
    assert OptimConfig(steps=100, method="minsr", adamw_steps=40).stop_from == 40
    assert OptimConfig(steps=100, method="minsr", adamw_steps=40, coarse_steps=70).stop_from == 70
    assert OptimConfig(steps=100, method="adamw", adamw_steps=40).stop_from == 0
    assert OptimConfig(steps=100, method="adamw", coarse_steps=30).stop_from == 30
    with pytest.raises(ValueError, match="adamw_steps"):
        OptimConfig(adamw_steps=-1)


def test_nan_guard_rolls_back_to_the_last_finite_state(caplog):
    H = random_hamiltonian(4, 2, 1, seed=1)
    model = make_model(4, 2, 1, seed=2)
    trainer = Trainer(model, H, OptimConfig(steps=5, lr=1e-3, warmup=0, method="adamw"), SamplerConfig(n_samples=1000), seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert not trainer.train_step().rolled_back  # evaluates `before`, then updates
    with torch.no_grad():  # the update "went wrong": the network now gives NaN
        model.head.bias.fill_(float("nan"))
    record = trainer.train_step()
    assert record.rolled_back and trainer.lr_scale == 0.5
    assert "rolled back" in caplog.text
    for k, v in model.state_dict().items():  # back to the last weights that gave finite values
        assert torch.equal(v, before[k]), k
    # A non-finite energy or gradient from finite weights is caught after the evaluation, and
    # the weights go back to those before the last update (the last ones evaluated as finite).
    good = {k: v.clone() for k, v in model.state_dict().items()}
    assert not trainer.train_step().rolled_back
    original = model.log_psi
    model.log_psi = lambda tokens, **kw: original(tokens, **kw) * float("nan")
    assert trainer.train_step().rolled_back and trainer.lr_scale == 0.25
    del model.log_psi
    for k, v in model.state_dict().items():
        assert torch.equal(v, good[k]), k


@pytest.fixture(scope="module")
def h2():
    return from_pyscf("H 0 0 0; H 0 0 0.7414", "sto-3g")


def test_h2_vmc_reaches_1_mha(h2):
    """A fast VMC run on H2/STO-3G ends within 1 mHa of FCI (exact <H> over the space)."""
    from hamiltonians.exact import ground_state_energy
    from nnqs.training.estimators import exact_variational_energy

    torch.manual_seed(0)
    model = make_model(2, 1, 1, seed=0, dtype="float64", d_model=16, n_layers=2, n_heads=2, phase_hidden=(16,))
    pretrain_hf(model, hf(2, 1, 1), 0.9)
    optim = OptimConfig(steps=150, lr=0.01, warmup=10, weights="psi2", method="adamw")
    trainer = Trainer(model, h2, optim, SamplerConfig(n_samples=10_000, unique_window=()), seed=0)
    for _ in range(optim.steps):
        trainer.train_step()
    fci = ground_state_energy(h2)
    energy = exact_variational_energy(model, h2)
    assert energy >= fci - 1e-10  # variational
    assert energy - fci < 1e-3, f"{1e3 * (energy - fci):.3f} mHa from FCI"
    assert math.isfinite(energy)


def test_coarse_phase_schedule_and_validation():
    cfg = OptimConfig(steps=10, coarse_steps=3, local_energy="truncated", local_energy_threshold=1e-3)
    assert [cfg.local_energy_at(s) for s in (0, 2)] == [("sampled", 3e-2)] * 2
    assert [cfg.local_energy_at(s) for s in (3, 9, 10, None)] == [("truncated", 1e-3)] * 4
    coarse_truncated = OptimConfig(coarse_steps=5, coarse_local_energy="truncated", coarse_threshold=0.1)
    assert coarse_truncated.local_energy_at(4) == ("truncated", 0.1)
    assert coarse_truncated.local_energy_at(None) == ("truncated", 3e-3)
    assert OptimConfig().local_energy_at(0) == ("truncated", 3e-3)  # no coarse phase by default
    with pytest.raises(ValueError, match="coarse_local_energy"):
        OptimConfig(coarse_local_energy="exact")
    with pytest.raises(ValueError, match="coarse_steps"):
        OptimConfig(coarse_steps=-1)


def test_coarse_steps_use_sampled_local_energies_then_the_fine_mode():
    """The first ``coarse_steps`` steps evaluate no amplitude outside the samples; their energy is
    the sampled-mode estimate and the later steps' the exact-mode one, on the same samples."""
    from nnqs.training.estimators import evaluate_local_energies

    H = random_hamiltonian(5, 2, 2, seed=3)  # 100 determinants, more than the 30 draws reach
    model = make_model(5, 2, 2, seed=1)
    optim = OptimConfig(steps=4, method="adamw", lr=1e-3, warmup=0, coarse_steps=2, local_energy="exact")
    trainer = Trainer(model, H, optim, SamplerConfig(n_samples=30, unique_window=()), seed=0)
    records = [trainer.train_step() for _ in range(4)]
    assert [r.n_amplitudes > 0 for r in records] == [False, False, True, True]
    assert [r.kept_fraction < 1 for r in records] == [True, True, False, False]
    batch = trainer.sample(30)
    with torch.no_grad():
        log_psi = model.log_psi(batch.tokens)
        energy = {}
        for step, mode in ((0, "sampled"), (1, "sampled"), (2, "exact"), (None, "exact")):
            evaluation = trainer.evaluate(batch, step)
            want = evaluate_local_energies(model, H, batch.tokens, log_psi, mode).e_loc
            torch.testing.assert_close(evaluation.e_loc, want, rtol=0, atol=1e-12)
            energy[mode] = evaluation.estimate.energy
    assert abs(energy["sampled"] - energy["exact"]) > 1e-3  # the modes differ here, so the checks above can fail
