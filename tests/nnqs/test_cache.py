"""The KV cache: sizes, in-place writes, reorder, the error paths, the classic derivation."""

import pytest
import torch
import torch.nn.functional as F

from nnqs.attention import CausalSelfAttention
from nnqs.cache import CacheFullError, KVCache
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


def test_reorder_gathers_rows_and_counts():
    cache = KVCache(2, 4, 1, 5, 3, dtype=torch.float64)
    cache.k.copy_(torch.arange(cache.k.numel(), dtype=torch.float64).view_as(cache.k))
    cache.v.copy_(-cache.k)
    cache.n_alpha = torch.tensor([0, 1, 2, 3])
    cache.position = 3
    old_k, old_v = cache.k.clone(), cache.v.clone()
    index = torch.tensor([3, 1, 1, 0, 2])
    cache.reorder(index)
    assert cache.batch == 5 and cache.position == 3
    assert torch.equal(cache.k[:, :, :, :3], old_k[:, index, :, :3])
    assert torch.equal(cache.v[:, :, :, :3], old_v[:, index, :, :3])
    assert cache.n_alpha.tolist() == [3, 1, 1, 0, 2]


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


def test_reorder_copies_only_what_changes_and_reuses_buffers():
    torch.manual_seed(0)
    cache = KVCache(2, 6, 2, 5, 3, dtype=torch.float64)
    cache.k.copy_(torch.randn_like(cache.k))
    cache.v.copy_(torch.randn_like(cache.v))
    cache.n_alpha = torch.arange(6)
    cache.position = 3

    def check(index, before):
        old_k, old_v = before
        assert cache.batch == len(index) and cache.k[0].shape == (len(index), 2, 5, 3)
        assert torch.equal(cache.k[:, :, :, :3], old_k[:, index, :, :3])
        assert torch.equal(cache.v[:, :, :, :3], old_v[:, index, :, :3])
        assert cache.n_alpha.tolist() == [int(old_alpha[i]) for i in index]
        assert cache.nbytes == 2 * len(index) * 5 * 2 * 2 * 3 * 8

    for index in ([0, 1, 2, 3, 4, 5],  # identity: no copy
                  [0, 1, 2, 5, 4, 3],  # permutation in place (sources overlap the written rows)
                  [0, 1, 3, 3],  # shrink in place
                  [0, 1, 2, 3, 0, 2],  # grow: first children keep their rows, extras appended
                  [0, 1, 2, 3, 4, 5, 5, 1, 0]):  # grow past the capacity
        before = (cache.k.clone(), cache.v.clone())
        old_alpha = cache.n_alpha.clone()
        storage = cache.k.untyped_storage().data_ptr()
        cache.reorder(torch.tensor(index))
        check(torch.tensor(index), before)
        if len(index) <= 6:
            assert cache.k.untyped_storage().data_ptr() == storage  # buffers reused
    assert cache.capacity >= cache.batch and cache.allocated_nbytes >= cache.nbytes


def test_reserve_keeps_written_rows_and_later_growth_reuses_the_buffers():
    torch.manual_seed(1)
    cache = KVCache(2, 3, 2, 5, 3, dtype=torch.float64)
    cache.k.copy_(torch.randn_like(cache.k))
    cache.v.copy_(torch.randn_like(cache.v))
    cache.position = 2
    old_k, old_v = cache.k.clone(), cache.v.clone()
    cache.reserve(8)
    assert cache.capacity == 8 and cache.batch == 3 and cache.nbytes == 2 * 3 * 5 * 2 * 2 * 3 * 8
    assert torch.equal(cache.k[:, :, :, :2], old_k[:, :, :, :2])
    assert torch.equal(cache.v[:, :, :, :2], old_v[:, :, :, :2])
    storage = cache.k.untyped_storage().data_ptr()
    index = torch.tensor([0, 1, 2, 2, 1, 0, 0, 1])
    cache.reorder(index)  # grows to the reserved 8 rows in place
    assert cache.k.untyped_storage().data_ptr() == storage
    assert torch.equal(cache.k[:, :, :, :2], old_k[:, index, :, :2])
    assert torch.equal(cache.v[:, :, :, :2], old_v[:, index, :, :2])
    cache.reserve(4)  # smaller than the capacity: nothing happens
    assert cache.capacity == 8 and cache.k.untyped_storage().data_ptr() == storage


def test_growth_headroom_never_passes_max_rows():
    cache = KVCache(1, 8, 1, 3, 2, dtype=torch.float64)
    cache.position = 1
    cache.reorder(torch.arange(9) % 8)  # 9 > 8 rows: 25% headroom
    assert cache.capacity == 10
    capped = KVCache(1, 8, 1, 3, 2, dtype=torch.float64)
    capped.position = 1
    capped.reserve(0, max_rows=9)  # reserves nothing, caps growth
    assert capped.capacity == 8
    capped.reorder(torch.arange(9) % 8)
    assert capped.capacity == 9 and capped.allocated_nbytes == capped.nbytes
