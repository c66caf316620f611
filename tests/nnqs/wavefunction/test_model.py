"""Cached decode vs uncached full pass, normalisation, the autoregressive property."""

import itertools

import pytest
import torch

from nnqs import ModelConfig, WavefunctionConfig
from nnqs.wavefunction.attention import CausalSelfAttention
from nnqs.wavefunction.consistency import cached_conditionals
from nnqs.wavefunction.tokens import ElectronConstraint, random_valid_tokens
from tests.models import make_model


def electrons_for(n_orbitals, seed):
    g = torch.Generator().manual_seed(seed)
    n_alpha = int(torch.randint(0, n_orbitals + 1, (1,), generator=g))
    n_beta = int(torch.randint(0, n_orbitals + 1, (1,), generator=g))
    return n_alpha, n_beta


@pytest.mark.parametrize("batch", [1, 257])
@pytest.mark.parametrize("n_heads,n_kv_heads", [(1, 1), (4, 1), (4, 4)])
@pytest.mark.parametrize("n_layers", [1, 3])
@pytest.mark.parametrize("n_orbitals", [1, 2, 3, 7, 16])
def test_decode_equals_full_pass(n_orbitals, n_layers, n_heads, n_kv_heads, batch):
    seed = n_orbitals * 100 + n_layers * 10 + n_heads + n_kv_heads
    n_alpha, n_beta = electrons_for(n_orbitals, seed)
    model = make_model(n_orbitals, n_alpha, n_beta, seed=seed, n_layers=n_layers,
                       n_heads=n_heads, n_kv_heads=n_kv_heads)
    tokens = random_valid_tokens(model.constraint, batch, torch.Generator().manual_seed(seed))
    with torch.no_grad():
        full = model.conditionals(tokens)
    cached = cached_conditionals(model, tokens)
    assert cached.shape == (batch, n_orbitals, 4)
    torch.testing.assert_close(cached, full, rtol=0, atol=1e-12)


@pytest.mark.parametrize("n_kv_heads", [1, 2])
def test_decode_after_reorder_equals_full_pass_on_reordered_prefixes(n_kv_heads):
    n, batch = 9, 31
    model = make_model(n, 4, 3, seed=7, n_layers=3, n_heads=4, n_kv_heads=n_kv_heads)
    tokens = random_valid_tokens(model.constraint, batch, torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(11)
    reorders = {
        2: torch.randperm(batch, generator=g),                       # permutation
        4: torch.randint(0, batch, (2 * batch,), generator=g),       # duplication (B grows)
        6: torch.randperm(2 * batch, generator=g)[: batch // 2],     # pruning (B shrinks)
    }
    cache = model.init_cache(batch, capacity=2 * batch)
    rows = tokens.clone()
    with torch.no_grad():
        p = model.decode_step(None, cache)
        for i in range(1, n):
            if i in reorders:
                cache.reorder(reorders[i])
                rows = rows[reorders[i]]
                p = p[reorders[i]]
                assert cache.batch == rows.shape[0]
            torch.testing.assert_close(p, model.conditionals(rows)[:, i - 1], rtol=0, atol=1e-12)
            p = model.decode_step(rows[:, i - 1], cache)
        torch.testing.assert_close(p, model.conditionals(rows)[:, n - 1], rtol=0, atol=1e-12)


def all_token_strings(n):
    return torch.tensor(list(itertools.product(range(4), repeat=n)))


@pytest.mark.parametrize("n,n_alpha,n_beta", [(1, 0, 1), (3, 0, 0), (4, 2, 1), (5, 5, 0), (6, 3, 3), (6, 6, 6)])
def test_normalised_over_valid_space_and_zero_off_it(n, n_alpha, n_beta):
    model = make_model(n, n_alpha, n_beta, seed=n)
    x = all_token_strings(n)
    with torch.no_grad():
        log_p = model.log_prob(x)
    valid = model.constraint.is_valid(x)
    assert not torch.isnan(log_p).any()
    assert torch.isneginf(log_p[~valid]).all()
    assert abs(float(log_p[valid].exp().sum()) - 1.0) < 1e-12


def test_prefix_conditionals_equal_full_pass_rows():
    model = make_model(8, 3, 5, seed=3)
    x = random_valid_tokens(model.constraint, 16, torch.Generator().manual_seed(0))
    with torch.no_grad():
        full = model.conditionals(x)
        for t in (1, 4, 8):
            torch.testing.assert_close(model.conditionals(x[:, :t]), full[:, :t], rtol=0, atol=1e-12)


def test_log_prob_is_sum_of_log_conditionals():
    model = make_model(8, 3, 5, seed=2)
    x = random_valid_tokens(model.constraint, 64, torch.Generator().manual_seed(0))
    with torch.no_grad():
        cond = model.conditionals(x)
        expected = cond.gather(-1, x[..., None]).squeeze(-1).log().sum(-1)
        torch.testing.assert_close(model.log_prob(x), expected, rtol=0, atol=1e-12)
        log_psi = model.log_psi(x)
    assert log_psi.is_complex()
    torch.testing.assert_close(log_psi.real, 0.5 * expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(log_psi.imag, model.phase(x), rtol=0, atol=0)


def test_autoregressive_property():
    """Changing token i changes no conditional at positions <= i, and (generically) some later one."""
    n = 7
    model = make_model(n, 3, 3, seed=5, n_layers=3)
    x = random_valid_tokens(model.constraint, 16, torch.Generator().manual_seed(4))
    with torch.no_grad():
        base = model.conditionals(x)
        for i in range(n):
            flipped = x.clone()
            flipped[:, i] = (flipped[:, i] + 1 + torch.arange(16) % 3) % 4  # always a different token
            new = model.conditionals(flipped)
            assert torch.equal(new[:, : i + 1], base[:, : i + 1])
            if i < n - 1:
                assert (new[:, i + 1 :] - base[:, i + 1 :]).abs().max() > 1e-6


def test_float32_agreement():
    model = make_model(16, 8, 7, seed=9, dtype="float32", n_layers=4, n_kv_heads=2)
    x = random_valid_tokens(model.constraint, 128, torch.Generator().manual_seed(0))
    with torch.no_grad():
        diff = (model.conditionals(x) - cached_conditionals(model, x)).abs().max()
    assert model.dtype == torch.float32
    assert diff < 2e-6


def test_gradients_finite_and_phase_separate():
    model = make_model(6, 2, 3, seed=1)
    x = random_valid_tokens(model.constraint, 10, torch.Generator().manual_seed(0))
    model.log_prob(x).sum().backward()
    grads = [p.grad for p in model.phase_net.parameters()]
    assert all(g is None for g in grads)  # the phase never enters p(x)
    assert all(torch.isfinite(p.grad).all() for p in model.blocks.parameters() if p.grad is not None)


def test_invalid_tokens_raise_value_error():
    model = make_model(4, 2, 2)
    with pytest.raises(ValueError, match="0..3"):
        model.log_prob(torch.tensor([[0, 1, 2, 4]]))
    with pytest.raises(ValueError, match="shape"):
        model.conditionals(torch.tensor([[0, 1, 2, 3, 0]]))  # longer than N
    with pytest.raises(ValueError, match="shape"):
        model.log_prob(torch.tensor([[0, 1, 2]]))  # a prefix is not a configuration
    with pytest.raises(ValueError, match="shape"):
        model.conditionals(torch.tensor([0, 1, 2, 3]))
    with pytest.raises(ValueError, match="0..3"):
        model.log_psi(torch.tensor([[-1, 1, 2, 3]]))


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="divisible"):
        WavefunctionConfig(n_orbitals=4, n_alpha=1, n_beta=1, d_model=10, n_heads=4)
    with pytest.raises(ValueError, match="n_kv_heads"):
        WavefunctionConfig(n_orbitals=4, n_alpha=1, n_beta=1, n_heads=4, n_kv_heads=3)
    with pytest.raises(ValueError, match="n_beta=5"):
        WavefunctionConfig(n_orbitals=4, n_alpha=1, n_beta=5)
    with pytest.raises(ValueError, match="dtype"):
        WavefunctionConfig(n_orbitals=4, n_alpha=1, n_beta=1, dtype="float16")


def test_cache_takes_model_dtype_and_is_not_in_state_dict():
    model = make_model(5, 2, 2)
    cache = model.init_cache(3)
    assert cache.k.dtype == torch.float64 and cache.k.device == model.device
    assert not any("cache" in key for key in model.state_dict())
    assert model.constraint == ElectronConstraint(5, 2, 2)


def test_model_config_lists_the_architecture_once():
    """``[model]`` settings plus a molecule's sizes give the wavefunction config, field for field."""
    architecture = ModelConfig(d_model=24, n_layers=2, n_heads=3, phase_hidden=[16], dtype="float64")
    config = architecture.for_system(6, 2, 3)
    assert (config.n_orbitals, config.n_alpha, config.n_beta) == (6, 2, 3)
    assert config.architecture == architecture and config.phase_hidden == (16,)
    with pytest.raises(ValueError, match="n_alpha=7"):
        architecture.for_system(6, 7, 3)


def test_the_decode_step_makes_no_host_synchronisation(monkeypatch):
    """With validated tokens (the sampler's path), ``decode_step`` and ``KVCache.reorder`` read no
    tensor back to the host: every call that would (``item``, ``tolist``, ``bool``/``int``/``float``
    of a tensor, ``cpu``, ``numpy``) is patched to count, and none is made. On a GPU each would
    stall the decode loop; here the count is the same without one. (A data-dependent shape inside
    an operator, e.g. ``nonzero``, is not seen here: on CUDA, ``torch.cuda.set_sync_debug_mode``.)"""
    model = make_model(8, 3, 3, seed=2)
    tokens = random_valid_tokens(model.constraint, 16, torch.Generator().manual_seed(3))
    cache = model.init_cache(16)
    model.decode_step(None, cache)
    calls = []
    for name in ("item", "tolist", "__bool__", "__int__", "__float__", "__index__", "cpu", "numpy"):
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _name=name, _original=original, **kwargs):
            calls.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    index = torch.arange(15, -1, -1)
    for pos in range(1, 8):
        model.decode_step(tokens[:, pos - 1], cache, validate=False)
        cache.reorder(index, keep=0)
        tokens = tokens[index]
    monkeypatch.undo()
    assert calls == [], sorted(set(calls))
    # the counting itself works: a validated step reads the tokens back
    with monkeypatch.context() as patch:
        seen = []
        patch.setattr(torch.Tensor, "item", lambda self: seen.append(1) or 0)
        patch.setattr(torch.Tensor, "__bool__", lambda self: seen.append(1) or True)
        patch.setattr(torch.Tensor, "__int__", lambda self: seen.append(1) or 0)
        fresh = model.init_cache(16)
        model.decode_step(None, fresh)
        model.decode_step(tokens[:, 0], fresh, validate=True)
    assert seen


def test_the_chunked_pass_without_gradients_equals_the_whole_pass():
    model = make_model(6, 2, 3, seed=4, dtype="float64")
    tokens = random_valid_tokens(ElectronConstraint(6, 2, 3), 50, generator=torch.Generator().manual_seed(1))
    whole = model.log_psi(tokens)
    chunked = model.log_psi_no_grad(tokens, chunk=7)
    assert not chunked.requires_grad   # equal up to the batch size's rounding
    torch.testing.assert_close(chunked, whole.detach(), rtol=0, atol=1e-12)


def test_the_compiled_passes_equal_the_eager_ones():
    """``compile_passes``: the same log psi and gradients (float64) for any batch and prefix
    length through one dynamic compilation, the same decoded conditionals; passes under
    ``torch.func`` (minSR's Jacobian) stay eager."""
    from nnqs.training.sr import log_psi_jacobian

    model = make_model(6, 2, 3, seed=5, n_kv_heads=2)
    tokens = random_valid_tokens(ElectronConstraint(6, 2, 3), 40, generator=torch.Generator().manual_seed(2))
    params = list(model.parameters())

    def values_and_gradients():
        log_psi = model.log_psi(tokens)
        return log_psi.detach(), torch.autograd.grad((log_psi.real * 1.3 + log_psi.imag).sum(), params)

    eager, eager_grads = values_and_gradients()
    eager_prefix = model.log_conditionals(tokens[:17, :4]).detach()
    eager_decoded = cached_conditionals(model, tokens)
    jacobian = log_psi_jacobian(model, tokens[:5])
    model.compile_passes()
    compiled_pass, calls = model._compiled_pass, []
    model._compiled_pass = lambda x: calls.append(tuple(x.shape)) or compiled_pass(x)
    compiled, compiled_grads = values_and_gradients()
    torch.testing.assert_close(compiled, eager, rtol=0, atol=1e-12)
    for a, b in zip(compiled_grads, eager_grads):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)
    prefix = model.log_conditionals(tokens[:17, :4])
    assert torch.equal(prefix.isinf(), eager_prefix.isinf())
    torch.testing.assert_close(prefix[~prefix.isinf()], eager_prefix[~prefix.isinf()], rtol=0, atol=1e-12)
    assert calls == [(40, 6), (17, 4)]
    assert all(m.decode_attention is None   # float64 decodes with the fused kernel
               for m in model.modules() if isinstance(m, CausalSelfAttention))
    torch.testing.assert_close(cached_conditionals(model, tokens), eager_decoded, rtol=0, atol=1e-12)
    torch.testing.assert_close(log_psi_jacobian(model, tokens[:5]), jacobian, rtol=0, atol=1e-12)
    assert len(calls) == 2
    model.compile_passes(False)
    assert model._compiled_pass is None


def test_a_compiled_float32_network_decodes_as_the_eager_one():
    model = make_model(6, 2, 3, seed=6, dtype="float32")
    tokens = random_valid_tokens(ElectronConstraint(6, 2, 3), 30, generator=torch.Generator().manual_seed(3))
    eager = cached_conditionals(model, tokens)
    model.compile_passes()
    layers = [m for m in model.modules() if isinstance(m, CausalSelfAttention)]
    assert all(m.decode_attention is not None for m in layers)
    torch.testing.assert_close(cached_conditionals(model, tokens), eager, rtol=0, atol=1e-6)
    model.compile_passes(False)
    assert all(m.decode_attention is None for m in layers)
