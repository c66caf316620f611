"""The KV cache: sizes, in-place reorder within the allocation, prefill == decode, the error
paths, the classic derivation."""

import pytest
import torch
import torch.nn.functional as F

from nnqs.wavefunction.attention import CausalSelfAttention
from nnqs.wavefunction.cache import CacheFullError, KVCache
from nnqs.wavefunction.tokens import random_valid_tokens
from tests.models import make_model


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
def test_nbytes_matches_formula_and_tensors(dtype, n_kv_heads):
    name = {torch.float32: "float32", torch.float64: "float64", torch.bfloat16: "bfloat16"}[dtype]
    model = make_model(11, 3, 3, dtype=name, d_model=32, n_layers=3, n_heads=4, n_kv_heads=n_kv_heads)
    batch, n, layers, d_head = 13, 11, 3, 8
    cache = model.init_cache(batch)
    bytes_per_element = torch.finfo(dtype).bits // 8
    assert cache.nbytes == 2 * batch * n * layers * n_kv_heads * d_head * bytes_per_element
    real = sum(t.numel() * t.element_size() for t in (cache.k, cache.v))
    assert cache.nbytes == real
    assert cache.k[0].shape == (batch, n_kv_heads, n, d_head)
    cache.reorder(torch.tensor([0, 0, 5]))
    assert cache.nbytes == 2 * 3 * n * layers * n_kv_heads * d_head * bytes_per_element


def filled_cache(batch, capacity, position, seed=0):
    """A float64 cache (2 layers, 2 KV heads, 5 positions, d_head 3) with random K/V in its
    first ``position`` positions and distinct electron counts per row."""
    torch.manual_seed(seed)
    cache = KVCache(2, batch, 2, 5, 3, capacity=capacity, dtype=torch.float64)
    cache.k.copy_(torch.randn_like(cache.k))
    cache.v.copy_(torch.randn_like(cache.v))
    cache.add_electrons(torch.arange(batch), 10 * torch.arange(batch))
    cache.position = position
    return cache


@pytest.mark.parametrize("trusted", [False, True])
def test_reorder_gathers_rows_in_place_without_allocating(trusted):
    cache = filled_cache(6, capacity=9, position=3)
    storage = cache.k.untyped_storage().data_ptr()
    for index in ([0, 1, 2, 3, 4, 5],  # identity: no copy
                  [0, 1, 2, 5, 4, 3],  # permutation in place (sources overlap the rows written)
                  [5, 1, 2, 0, 4, 3],  # rows that stay after rows that move (the beam's order)
                  [4, 1, 4, 3, 0, 5],  # duplicates among them, a row read and written
                  [0, 1, 3, 3],  # shrink
                  [0, 1, 2, 3, 0, 2],  # grow: first children keep their rows, extras appended
                  [0, 1, 2, 3, 4, 5, 5, 1, 0]):  # grow to the capacity
        index = torch.tensor(index)
        old_k, old_v = cache.k.clone(), cache.v.clone()
        old_alpha, old_beta = cache.n_alpha.clone(), cache.n_beta.clone()
        keep = int((index[: cache.batch] == torch.arange(min(cache.batch, len(index)))).cumprod(0).sum())
        cache.reorder(index, keep=keep if trusted else None)
        assert cache.batch == len(index) and cache.position == 3
        assert torch.equal(cache.k[:, :, :, :3], old_k[:, index, :, :3])
        assert torch.equal(cache.v[:, :, :, :3], old_v[:, index, :, :3])
        assert torch.equal(cache.n_alpha, old_alpha[index]) and torch.equal(cache.n_beta, old_beta[index])
        assert cache.nbytes == 2 * len(index) * 5 * 2 * 2 * 3 * 8
        assert cache.k.untyped_storage().data_ptr() == storage  # never reallocated
    assert cache.allocated_nbytes == 2 * 9 * 5 * 2 * 2 * 3 * 8


def test_reorder_and_reset_never_grow_past_the_capacity():
    cache = filled_cache(3, capacity=4, position=2)
    with pytest.raises(CacheFullError, match="4 allocated rows"):
        cache.reorder(torch.tensor([0, 1, 2, 2, 1]))
    with pytest.raises(CacheFullError, match="4 allocated rows"):
        cache.reset(5)
    cache.reset(4)
    assert (cache.batch, cache.position) == (4, 0)
    assert cache.n_alpha.tolist() == [0] * 4 and cache.n_beta.tolist() == [0] * 4


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
@pytest.mark.parametrize("length", [1, 4, 7])
def test_prefilled_cache_equals_the_decoded_one(n_kv_heads, length):
    """One prefill pass leaves the cache exactly as ``length`` decode steps do (float64, 1e-12):
    same keys, values, electron counts and position, and the next decode step agrees."""
    model = make_model(7, 3, 3, seed=2, n_layers=3, n_heads=4, n_kv_heads=n_kv_heads)
    tokens = random_valid_tokens(model.constraint, 6, torch.Generator().manual_seed(1))
    with torch.no_grad():
        decoded = model.init_cache(6)
        steps = [model.decode_step(None, decoded)]
        steps += [model.decode_step(tokens[:, i - 1], decoded) for i in range(1, length)]
        prefilled = model.init_cache(6, capacity=9)
        probs = model.prefill(tokens[:, :length], prefilled)
        assert prefilled.position == decoded.position == length
        torch.testing.assert_close(prefilled.k[:, :, :, :length], decoded.k[:, :, :, :length], rtol=0, atol=1e-12)
        torch.testing.assert_close(prefilled.v[:, :, :, :length], decoded.v[:, :, :, :length], rtol=0, atol=1e-12)
        assert torch.equal(prefilled.n_alpha, decoded.n_alpha) and torch.equal(prefilled.n_beta, decoded.n_beta)
        torch.testing.assert_close(probs, torch.stack(steps, dim=1), rtol=0, atol=1e-12)
        if length < 7:
            index = torch.tensor([0, 1, 2, 3, 4, 5, 5, 2])
            prefilled.reorder(index)
            following = model.decode_step(tokens[index, length - 1], prefilled)
            full = model.conditionals(tokens[index])[:, length]
            torch.testing.assert_close(following, full, rtol=0, atol=1e-12)


def test_prefill_needs_an_empty_cache():
    model = make_model(4, 2, 1)
    cache = model.init_cache(2)
    model.decode_step(None, cache)
    with pytest.raises(ValueError, match="empty cache"):
        model.prefill(torch.zeros(2, 2, dtype=torch.long), cache)


def test_error_paths():
    model = make_model(3, 1, 1)
    cache = model.init_cache(2)
    with pytest.raises(ValueError, match="BOS"):
        model.decode_step(torch.tensor([0, 1]), cache)
    model.decode_step(None, cache)
    with pytest.raises(ValueError, match="needs the tokens"):
        model.decode_step(None, cache)
    with pytest.raises(ValueError, match="does not match"):
        model.decode_step(torch.tensor([0, 1, 2]), cache)
    with pytest.raises(ValueError, match="0..3"):
        model.decode_step(torch.tensor([0, 4]), cache)
    with pytest.raises(ValueError, match=r"shape \[B\]"):
        model.decode_step(torch.tensor([[0, 1]]), cache)
    with pytest.raises(IndexError, match="out of range"):
        cache.reorder(torch.tensor([0, 2]))
    with pytest.raises(IndexError, match="out of range"):
        cache.reorder(torch.tensor([-1]))
    with pytest.raises(ValueError, match="1-D integer"):
        cache.reorder(torch.tensor([0.0]))
    model.decode_step(torch.tensor([0, 1]), cache)
    model.decode_step(torch.tensor([1, 0]), cache)
    with pytest.raises(CacheFullError, match="only 3 positions"):
        model.decode_step(torch.tensor([1, 0]), cache)


def test_classic_cached_attention_derivation():
    """One attention layer, no bias, no output projection, no positions: decoding token by
    token with a (batch, heads, time, head_dim) cache equals full causal attention."""
    torch.manual_seed(0)
    batch, heads, time, d_model = 3, 2, 6, 8
    attn = CausalSelfAttention(d_model, heads, bias=False).double()
    attn.out = torch.nn.Identity()
    x = torch.randn(batch, time, d_model, dtype=torch.float64)
    with torch.no_grad():
        full = attn(x)
        # the textbook formula, written out
        q = attn.query(x).view(batch, time, heads, -1).transpose(1, 2)
        k, v = attn.key_value(x).view(batch, time, 2, heads, -1).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / (d_model // heads) ** 0.5
        scores = scores.masked_fill(torch.ones(time, time, dtype=torch.bool).triu(1), float("-inf"))
        textbook = (F.softmax(scores, -1) @ v).transpose(1, 2).reshape(batch, time, d_model)
        cache = KVCache(1, batch, heads, time, d_model // heads, dtype=torch.float64)
        steps = []
        for t in range(time):
            steps.append(attn(x[:, t : t + 1], cache, layer=0))
            cache.advance()
        cached = torch.cat(steps, dim=1)
    assert cache.k[0].shape == (batch, heads, time, d_model // heads)
    torch.testing.assert_close(cached, full, rtol=0, atol=1e-10)
    torch.testing.assert_close(textbook, full, rtol=0, atol=1e-10)
