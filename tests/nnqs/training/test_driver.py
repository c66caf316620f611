"""The drivers (:mod:`nnqs.training.driver`): the run loop (steps until the target or a
callback's stop; the stopping rule equals ``has_stopped_improving`` on the last regime's trace)
and VMC's step (the gradient estimator against autograd of the exact Rayleigh quotient, the
coarse local energies, the update rules, the chunked gradient, and a short H2 run to within
1 mHa of FCI)."""

import math

import pytest
import torch

from hamiltonians import from_pyscf
from nnqs.training.callbacks import StopOnPlateau
from nnqs.training.convergence import has_stopped_improving
from nnqs.training.driver import Driver, StepRecord, build_vmc
from nnqs.training.estimators import estimate_energy, local_energies, vmc_loss
from nnqs.training.fit import fit_hf
from nnqs.training.settings import LocalEnergyConfig, OptimConfig, SamplerConfig, StopConfig
from tests.models import make_model
from tests.nnqs.training.conftest import rayleigh_quotient
from tests.systems import random_hamiltonian
from nnqs.training.driver import learning_rate, limit_norm, method_at
from nnqs.training.settings import last_regime_start


def run_steps(driver, until, callbacks):
    return driver.run(until, callbacks)


class FakeTrainer(Driver):
    """Takes "steps" from a given energy trace."""

    def __init__(self, energies, stderr=0.01):
        self.energies, self.stderr, self.step = list(energies), stderr, 0

    def train_step(self) -> StepRecord:
        record = StepRecord(self.step, self.energies[self.step], self.stderr, 0.0, 1, 1, 0.1, 0.0, 0.0)
        self.step += 1
        return record


def test_every_callback_sees_every_step_until_the_target():
    trainer, seen = FakeTrainer(range(10)), []
    stopped = run_steps(trainer, 6, [lambda t, r: seen.append(("a", r.step)), lambda t, r: seen.append(("b", r.step))])
    assert not stopped and trainer.step == 6
    assert seen == [(name, s) for s in range(6) for name in ("a", "b")]
    assert not run_steps(trainer, 6, []) and trainer.step == 6   # already there: no step


def test_a_callback_stops_the_loop_after_all_callbacks_saw_that_step():
    trainer, later = FakeTrainer(range(10)), []
    stopped = run_steps(trainer, 10, [lambda t, r: r.step == 3, lambda t, r: later.append(r.step)])
    assert stopped and trainer.step == 4 and later == [0, 1, 2, 3]


@pytest.mark.parametrize("first", [0, 7])
def test_stop_on_plateau_is_the_convergence_rule_on_the_last_regime(first):
    """Falling for 20 steps, then flat: the callback stops at the first step where
    ``has_stopped_improving`` holds on the trace from ``first`` on, and not before."""
    energies = [-float(min(s, 20)) for s in range(60)]
    window = 5
    expected = next(s for s in range(60) if has_stopped_improving(energies[first : s + 1], [0.01] * (s + 1 - first),
                                                                  window, 1.0))
    trainer = FakeTrainer(energies)
    rule = StopOnPlateau(StopConfig(window=window), first)
    assert run_steps(trainer, 60, [rule]) and trainer.step == expected + 1 and rule.stopped
    assert expected >= 20


def test_stop_on_plateau_continues_a_resumed_trace_and_is_off_by_default():
    energies = [-float(min(s, 20)) for s in range(60)]
    whole = FakeTrainer(energies)
    run_steps(whole, 60, [StopOnPlateau(StopConfig(window=5), 0)])
    resumed = FakeTrainer(energies)
    resumed.step = 15   # as if from a checkpoint: the trace so far comes from the metrics
    rule = StopOnPlateau(StopConfig(window=5), 0, energies=energies[:15], stderrs=[0.01] * 15)
    run_steps(resumed, 60, [rule])
    assert resumed.step == whole.step < 60
    off = FakeTrainer([math.nan] * 30)
    assert not run_steps(off, 30, [StopOnPlateau(StopConfig(), 0)]) and off.step == 30

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
    trainer = build_vmc(model, h2, optim, SamplerConfig(n_samples=10_000, unique_window=(), weights="psi2"), seed=0)
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
        trainer = build_vmc(model, H, OptimConfig(steps=3, method="adamw", lr=1e-3, warmup=0),
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
    trainer = build_vmc(model, H, optim, SamplerConfig(n_samples=30, unique_window=()),
                      LocalEnergyConfig(mode="exact", coarse_steps=2), seed=0)
    records = [trainer.train_step() for _ in range(4)]
    assert [r.n_amplitudes > 0 for r in records] == [False, False, True, True]
    assert [r.kept_fraction < 1 for r in records] == [True, True, False, False]
    batch = trainer.state.sample(30)
    with torch.no_grad():
        log_psi = model.log_psi(batch.tokens)
        energy = {}
        for step, mode in ((0, "sampled"), (1, "sampled"), (2, "exact"), (3, "exact")):
            evaluation = trainer.state.expect(trainer.H, batch, *trainer.state.local_energy_cfg.at(step))
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
        return build_vmc(make_model(5, 2, 2, seed=1), H, optim, SamplerConfig(n_samples=30, unique_window=()), seed=0)

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
    plain = build_vmc(make_model(5, 2, 2, seed=1), H, OptimConfig(steps=4, method="adamw"), SamplerConfig(n_samples=30))
    with pytest.raises(KeyError):
        plain.load_state_dict(only_minsr)


@pytest.mark.parametrize("method", ["adamw", "sr_top"])
def test_the_chunked_gradient_equals_the_one_through_the_whole_graph(method):
    """Past ``grad_chunk`` unique samples, log psi is evaluated without a graph and the gradient
    back-propagated chunk by chunk: the same gradient (float64, 1e-12) and the same steps."""
    H = random_hamiltonian(5, 2, 2, seed=3)

    def trainer(grad_chunk):
        optim = OptimConfig(steps=3, method=method, adamw_steps=0, lr=1e-3, warmup=0, sr_top=4, grad_chunk=grad_chunk)
        return build_vmc(make_model(5, 2, 2, seed=1), H, optim, SamplerConfig(n_samples=1000, unique_window=()), seed=0)

    whole, chunked = trainer(0), trainer(3)
    batch = whole.state.sample(1000)
    assert batch.n_unique > 2 * 3 and batch.n_unique % 3   # several chunks and a ragged last one
    assert whole.optim_cfg.keeps_graph(method, batch.n_unique) and not chunked.optim_cfg.keeps_graph(method, batch.n_unique)
    assert not chunked.optim_cfg.keeps_graph("minsr", 1)   # minSR's Jacobian needs no graph
    grads = []
    for t, graph in ((whole, True), (chunked, False)):
        evaluation = t.state.expect(t.H, batch, "exact", graph=graph)
        assert evaluation.log_psi.requires_grad == graph
        t.preconditioners[method](t.state, batch, evaluation).apply(t.model)
        grads.append(torch.cat([p.grad.flatten() for p in t.model.parameters()]))
    assert grads[0].abs().max() > 1e-3
    torch.testing.assert_close(grads[1], grads[0], rtol=0, atol=1e-12)
    whole, chunked = trainer(0), trainer(3)
    for _ in range(3):
        a, b = whole.train_step(), chunked.train_step()
        assert a.n_unique > 3 and abs(a.energy - b.energy) < 1e-12 and abs(a.grad_norm - b.grad_norm) < 1e-12
    for p, q in zip(whole.model.parameters(), chunked.model.parameters()):  # Adam divides by sqrt(v):
        torch.testing.assert_close(q, p, rtol=0, atol=1e-9)                 # rounding grows on tiny gradients


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
    fine, coarse = LocalEnergyConfig(), LocalEnergyConfig(coarse_steps=70)
    assert last_regime_start(OptimConfig(steps=100, method="minsr", adamw_steps=40), fine) == 40
    assert last_regime_start(OptimConfig(steps=100, method="minsr", adamw_steps=40), coarse) == 70
    assert last_regime_start(OptimConfig(steps=100, method="adamw", adamw_steps=40), fine) == 0
    assert last_regime_start(OptimConfig(steps=100, method="adamw"), LocalEnergyConfig(coarse_steps=30)) == 30
    with pytest.raises(ValueError, match="adamw_steps"):
        OptimConfig(adamw_steps=-1)


@pytest.mark.parametrize("weights", ["psi2", "priority"])
def test_a_step_drawn_without_replacement_over_the_whole_space_is_exact(small_system, weights):
    """k past the support: every configuration once, so both weightings are |psi|^2 and the step's
    energy is the exact Rayleigh quotient; with fewer, k distinct configurations."""
    from nnqs.errors import InputError

    H, dense, tokens = small_system
    model = make_model(4, 2, 1, seed=3)
    exact = float(rayleigh_quotient(model, dense, tokens))
    sampler = SamplerConfig(n_samples=10 * tokens.shape[0], unique_window=(), weights=weights,
                            draw="without_replacement")
    trainer = build_vmc(model, H, OptimConfig(steps=2, method="adamw", lr=1e-3, warmup=0), sampler,
                        LocalEnergyConfig(mode="exact"), seed=0)
    record = trainer.train_step()
    assert record.n_unique == tokens.shape[0] and abs(record.energy - exact) < 1e-12
    trainer.state.n_samples = 5
    batch = trainer.state.step_sample()
    assert batch.n_unique == 5 and torch.unique(batch.tokens, dim=0).shape[0] == 5
    for bad in ({"weights": "counts"}, {"weights": "psi2", "unique_window": (10, 20)}):
        with pytest.raises(InputError, match="without_replacement"):
            SamplerConfig(draw="without_replacement", **bad)
    with pytest.raises(InputError, match="priority"):
        SamplerConfig(weights="priority")


def test_limit_norm_clips_or_normalises():
    """Clipping leaves a small gradient alone; ``normalize`` scales any gradient to norm ``clip``
    (1 when clip is 0); both return the norm before."""
    def grads(scale):
        params = [torch.nn.Parameter(torch.zeros(3, dtype=torch.float64)), torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))]
        params[0].grad = scale * torch.tensor([1.0, 2.0, 2.0], dtype=torch.float64)
        params[1].grad = scale * torch.tensor([0.0, 0.0], dtype=torch.float64)
        return params

    def norm(params):
        return math.sqrt(sum(float((p.grad ** 2).sum()) for p in params))

    small, large = grads(0.01), grads(10.0)
    assert limit_norm(small, 1.0) == pytest.approx(0.03, abs=1e-15) and norm(small) == pytest.approx(0.03, abs=1e-15)
    assert limit_norm(large, 1.0) == pytest.approx(30.0) and norm(large) == pytest.approx(1.0, abs=1e-7)  # torch adds 1e-6
    for clip, target in ((1.0, 1.0), (0.5, 0.5), (0.0, 1.0)):
        small = grads(0.01)
        assert limit_norm(small, clip, normalize=True) == pytest.approx(0.03, abs=1e-15)
        assert norm(small) == pytest.approx(target, abs=1e-12)
    zero = grads(0.0)
    assert limit_norm(zero, 1.0, normalize=True) == 0.0 and norm(zero) == 0.0


@pytest.mark.parametrize("method", ["adamw", "sr_top", "minsr"])
def test_normalize_gives_every_adamw_step_one_norm(method):
    """With ``[optim] normalize`` the direction AdamW applies has norm ``clip`` every step (the
    step's record keeps the norm before); minSR's SGD step is only clipped."""
    H = random_hamiltonian(5, 2, 2, seed=3)
    optim = OptimConfig(steps=3, method=method, adamw_steps=0, lr=1e-3, warmup=0, sr_top=4, clip=0.25, normalize=True)
    vmc = build_vmc(make_model(5, 2, 2, seed=1), H, optim, SamplerConfig(n_samples=500, unique_window=()), seed=0)
    for _ in range(3):
        record = vmc.train_step()
        after = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in vmc.model.parameters() if p.grad is not None))
        if method == "minsr":
            assert after <= 0.25 + 1e-12
        else:
            assert after == pytest.approx(0.25, rel=1e-9) and record.grad_norm != pytest.approx(0.25, rel=1e-3)
