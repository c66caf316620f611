"""The trainer: the gradient estimator against autograd of the exact Rayleigh quotient, the NaN
guard, the coarse local energies, and a short H2 run to within 1 mHa of FCI."""

import math

import pytest
import torch

from hamiltonians import from_pyscf
from nnqs.training.estimators import estimate_energy, local_energies, vmc_loss
from nnqs.training.fit import fit_hf
from nnqs.training.settings import LocalEnergyConfig, OptimConfig, SamplerConfig
from nnqs.training.trainer import PRECONDITIONERS, Trainer
from tests.models import make_model
from tests.nnqs.training.conftest import rayleigh_quotient
from tests.systems import random_hamiltonian


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


def hf(n, n_alpha, n_beta):
    return torch.tensor([[3] * min(n_alpha, n_beta) + [1 if n_alpha > n_beta else 2] * abs(n_alpha - n_beta)
                         + [0] * (n - max(n_alpha, n_beta))])


def test_nan_guard_rolls_back_to_the_last_finite_state(caplog):
    H = random_hamiltonian(4, 2, 1, seed=1)
    model = make_model(4, 2, 1, seed=2)
    trainer = Trainer(model, H, OptimConfig(steps=5, lr=1e-3, warmup=0, method="adamw"), SamplerConfig(n_samples=1000), seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    assert not trainer.train_step().rolled_back  # evaluates `before`, then updates
    with torch.no_grad():  # the update "went wrong": the network now gives NaN
        model.head.bias.fill_(float("nan"))
    record = trainer.train_step()
    assert record.rolled_back and trainer.guard.lr_scale == 0.5
    assert "rolled back" in caplog.text
    for k, v in model.state_dict().items():  # back to the last weights that gave finite values
        assert torch.equal(v, before[k]), k
    # A non-finite energy or gradient from finite weights is caught after the evaluation, and
    # the weights go back to those before the last update (the last ones evaluated as finite).
    good = {k: v.clone() for k, v in model.state_dict().items()}
    assert not trainer.train_step().rolled_back
    original = model.log_psi
    model.log_psi = lambda tokens, **kw: original(tokens, **kw) * float("nan")
    assert trainer.train_step().rolled_back and trainer.guard.lr_scale == 0.25
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
    fit_hf(model, hf(2, 1, 1), 0.9)
    optim = OptimConfig(steps=150, lr=0.01, warmup=10, method="adamw")
    trainer = Trainer(model, h2, optim, SamplerConfig(n_samples=10_000, unique_window=(), weights="psi2"), seed=0)
    for _ in range(optim.steps):
        trainer.train_step()
    fci = ground_state_energy(h2)
    energy = exact_variational_energy(model, h2)
    assert energy >= fci - 1e-10  # variational
    assert energy - fci < 1e-3, f"{1e3 * (energy - fci):.3f} mHa from FCI"
    assert math.isfinite(energy)


def test_semistochastic_steps_draw_from_their_own_stream():
    """The samples do not move when the local energies draw (the sampler's stream is untouched),
    the draws bound the amplitudes, and the same seed gives the same steps."""
    H = random_hamiltonian(5, 2, 2, seed=3)

    def steps(mode):
        model = make_model(5, 2, 2, seed=1)
        le = LocalEnergyConfig(mode=mode, threshold=0.05, draws=2)
        trainer = Trainer(model, H, OptimConfig(steps=3, method="adamw", lr=1e-3, warmup=0),
                          SamplerConfig(n_samples=30, unique_window=()), le, seed=0)
        return [trainer.train_step() for _ in range(3)]

    semi, again, truncated = steps("semistochastic"), steps("semistochastic"), steps("truncated")
    assert [r.energy for r in semi] == [r.energy for r in again]
    assert [r.n_unique for r in semi] == [r.n_unique for r in truncated]
    assert semi[0].n_unique == truncated[0].n_unique and semi[0].energy != truncated[0].energy
    assert all(s.n_amplitudes <= t.n_amplitudes + 2 * s.n_unique for s, t in zip(semi, truncated))


def test_coarse_steps_use_sampled_local_energies_then_the_fine_mode():
    """The first ``coarse_steps`` steps evaluate no amplitude outside the samples; their energy is
    the sampled-mode estimate and the later steps' the exact-mode one, on the same samples."""
    from nnqs.training.estimators import evaluate_local_energies

    H = random_hamiltonian(5, 2, 2, seed=3)  # 100 determinants, more than the 30 draws reach
    model = make_model(5, 2, 2, seed=1)
    optim = OptimConfig(steps=4, method="adamw", lr=1e-3, warmup=0)
    trainer = Trainer(model, H, optim, SamplerConfig(n_samples=30, unique_window=()),
                      LocalEnergyConfig(mode="exact", coarse_steps=2), seed=0)
    records = [trainer.train_step() for _ in range(4)]
    assert [r.n_amplitudes > 0 for r in records] == [False, False, True, True]
    assert [r.kept_fraction < 1 for r in records] == [True, True, False, False]
    batch = trainer.sample(30)
    with torch.no_grad():
        log_psi = model.log_psi(batch.tokens)
        energy = {}
        for step, mode in ((0, "sampled"), (1, "sampled"), (2, "exact"), (3, "exact")):
            evaluation = trainer.evaluate(batch, *trainer.local_energy_cfg.at(step))
            want = evaluate_local_energies(model, H, batch.tokens, log_psi, mode).e_loc
            torch.testing.assert_close(evaluation.e_loc, want, rtol=0, atol=1e-12)
            energy[mode] = evaluation.estimate.energy
    assert abs(energy["sampled"] - energy["exact"]) > 1e-3  # the modes differ here, so the checks above can fail


def test_a_resume_may_change_the_rule_after_the_adamw_phase():
    """A checkpoint of an AdamW-then-minSR run continues as AdamW-then-sr_top: AdamW's moments
    carry over into sr_top's steps; a checkpoint sharing no optimiser is refused."""
    H = random_hamiltonian(5, 2, 2, seed=3)

    def trainer(method):
        optim = OptimConfig(steps=4, method=method, adamw_steps=2, lr=1e-3, warmup=0, sr_top=4)
        return Trainer(make_model(5, 2, 2, seed=1), H, optim, SamplerConfig(n_samples=30, unique_window=()), seed=0)

    first = trainer("minsr")
    for _ in range(2):
        first.train_step()
    second = trainer("sr_top")
    second.load_state_dict(first.state_dict())
    adam = second.optimizers["adamw"].state_dict()["state"]
    assert all(torch.equal(adam[i]["exp_avg"], s["exp_avg"])
               for i, s in first.optimizers["adamw"].state_dict()["state"].items())
    records = [second.train_step() for _ in range(2)]
    assert [r.method for r in records] == ["sr_top", "sr_top"] and all(math.isfinite(r.energy) for r in records)
    only_minsr = {**first.state_dict(), "optimizers": {"minsr": first.optimizers["minsr"].state_dict()}}
    plain = Trainer(make_model(5, 2, 2, seed=1), H, OptimConfig(steps=4, method="adamw"), SamplerConfig(n_samples=30))
    with pytest.raises(KeyError):
        plain.load_state_dict(only_minsr)


@pytest.mark.parametrize("method", ["adamw", "sr_top"])
def test_the_chunked_gradient_equals_the_one_through_the_whole_graph(method):
    """Past ``grad_chunk`` unique samples, log psi is evaluated without a graph and the gradient
    back-propagated chunk by chunk: the same gradient (float64, 1e-12) and the same steps."""
    H = random_hamiltonian(5, 2, 2, seed=3)

    def trainer(grad_chunk):
        optim = OptimConfig(steps=3, method=method, adamw_steps=0, lr=1e-3, warmup=0, sr_top=4, grad_chunk=grad_chunk)
        return Trainer(make_model(5, 2, 2, seed=1), H, optim, SamplerConfig(n_samples=1000, unique_window=()), seed=0)

    whole, chunked = trainer(0), trainer(3)
    batch = whole.sample(1000)
    assert batch.n_unique > 2 * 3 and batch.n_unique % 3   # several chunks and a ragged last one
    assert whole.optim_cfg.keeps_graph(method, batch.n_unique) and not chunked.optim_cfg.keeps_graph(method, batch.n_unique)
    assert not chunked.optim_cfg.keeps_graph("minsr", 1)   # minSR's Jacobian needs no graph
    grads = []
    for t, graph in ((whole, True), (chunked, False)):
        evaluation = t.evaluate(batch, "exact", graph=graph)
        assert evaluation.log_psi.requires_grad == graph
        PRECONDITIONERS[method](t, batch, evaluation)
        grads.append(torch.cat([p.grad.flatten() for p in t.model.parameters()]))
    assert grads[0].abs().max() > 1e-3
    torch.testing.assert_close(grads[1], grads[0], rtol=0, atol=1e-12)
    whole, chunked = trainer(0), trainer(3)
    for _ in range(3):
        a, b = whole.train_step(), chunked.train_step()
        assert a.n_unique > 3 and abs(a.energy - b.energy) < 1e-12 and abs(a.grad_norm - b.grad_norm) < 1e-12
    for p, q in zip(whole.model.parameters(), chunked.model.parameters()):  # Adam divides by sqrt(v):
        torch.testing.assert_close(q, p, rtol=0, atol=1e-9)                 # rounding grows on tiny gradients
