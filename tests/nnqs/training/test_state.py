"""The variational state (:mod:`nnqs.training.state`): its streams are reproducible and
checkpointable, the window adapts ``n_samples``, and ``expect_and_grad`` gives the energy and
the gradient of the loss whether or not the graph is kept."""

import dataclasses

import pytest
import torch

from nnqs.training.settings import LocalEnergyConfig, SamplerConfig
from nnqs.training.state import VariationalState
from tests.models import make_model
from tests.systems import random_hamiltonian
from nnqs.training.state import UniqueWindow

H = random_hamiltonian(5, 2, 2, seed=3)


def state(seed=0, window=()):
    return VariationalState(make_model(5, 2, 2, seed=1), SamplerConfig(n_samples=300, unique_window=window),
                            LocalEnergyConfig(mode="exact"), seed=seed)


def test_the_same_seed_draws_the_same_samples_and_a_checkpoint_continues_the_stream():
    a, b, c = state(0), state(0), state(1)
    first, twin = a.sample(), b.sample()
    assert torch.equal(first.tokens, twin.tokens) and torch.equal(first.counts, twin.counts)
    saved = a.state_dict()
    after = a.sample()
    a.load_state_dict(saved)
    again = a.sample()
    assert torch.equal(after.tokens, again.tokens) and torch.equal(after.counts, again.counts)
    other = c.sample()
    assert not (other.tokens.shape == first.tokens.shape and torch.equal(other.counts, first.counts))


def test_the_window_adapts_n_samples():
    s = state(window=(50, 60))
    s.adapt(10)
    assert s.n_samples == round(300 * 1.25)
    s.adapt(100)
    assert s.n_samples == 300
    fixed = state()
    fixed.adapt(1)
    assert fixed.n_samples == 300


def test_expect_and_grad_is_the_same_with_and_without_the_graph():
    s = state()
    batch = s.sample()
    evaluation, whole = s.expect_and_grad(H, batch)
    _, chunked = s.expect_and_grad(H, batch, grad_chunk=3)   # batch.n_unique > 3: no graph, chunks
    assert batch.n_unique > 3 and evaluation.log_psi.requires_grad
    for g, h in zip(whole, chunked):
        torch.testing.assert_close(h, g, rtol=0, atol=1e-12)
    assert max(float(g.abs().max()) for g in whole if g is not None) > 1e-4
    exact = s.expect(H, batch, "exact", weights="counts").estimate.energy
    assert abs(evaluation.estimate.energy - exact) < 1e-12


def test_unique_window():
    w = UniqueWindow(100, 200, factor=1.25, min_samples=10, max_samples=10**6)
    assert w.update(1000, 50) == 1250
    assert w.update(1000, 300) == 800
    assert w.update(1000, 150) == 1000
    assert w.update(10**6, 1) == 10**6 and w.update(10, 10**5) == 10
    with pytest.raises(ValueError):
        UniqueWindow(5, 1)


@pytest.mark.parametrize("draw", ["multinomial", "without_replacement"])
def test_a_fresh_sample_reuses_the_samplers_log_prob(draw):
    """A batch just drawn from the model needs no full pass for its ``log p``: the sampler's
    (accumulated from the cached conditionals) equals the full pass to rounding (float64)."""
    s = state()
    s.sampler_cfg = dataclasses.replace(s.sampler_cfg, draw=draw, weights="psi2")
    batch = s.step_sample()
    full = s.expect(H, batch, "exact", graph=False)
    fresh = s.expect(H, batch, "exact", graph=False, fresh=True)
    torch.testing.assert_close(fresh.log_psi, full.log_psi, rtol=0, atol=1e-12)
    assert abs(fresh.estimate.energy - full.estimate.energy) < 1e-12
    assert s.expect(H, batch, "exact", fresh=True).log_psi.requires_grad   # a graph is always a full pass
