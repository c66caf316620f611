"""The written-out causal and decode attention against the fused kernel, and its switch on a model."""

import pytest
import torch
import torch.nn.functional as F

from nnqs.wavefunction.attention import (
    CausalSelfAttention,
    causal_attention_math,
    decode_attention_math,
    explicit_attention,
)
from nnqs.wavefunction.tokens import random_valid_tokens
from tests.models import make_model


@pytest.mark.parametrize("shape", [(3, 2, 1, 4), (2, 4, 7, 8), (5, 1, 13, 3)])
def test_written_out_causal_attention_equals_the_fused_kernel(shape):
    g = torch.Generator().manual_seed(sum(shape))
    q, k, v = (torch.randn(*shape, generator=g, dtype=torch.float64) for _ in range(3))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(causal_attention_math(q, k, v), expected, rtol=0, atol=1e-12)
    # causal: the first query sees only the first key
    torch.testing.assert_close(causal_attention_math(q, k, v)[..., 0, :], v[..., 0, :], rtol=0, atol=1e-12)


@pytest.mark.parametrize("shape", [(3, 2, 1, 1, 4), (2, 1, 4, 7, 8), (5, 2, 2, 13, 3)])
def test_written_out_decode_attention_equals_the_fused_kernel(shape):
    b, h_kv, groups, t, d = shape   # groups query heads per KV head, t cached positions
    g = torch.Generator().manual_seed(sum(shape))
    q = torch.randn(b, h_kv, groups, d, generator=g, dtype=torch.float64)
    k, v = (torch.randn(b, h_kv, t + 2, d, generator=g, dtype=torch.float64)[:, :, :t] for _ in range(2))  # strided
    torch.testing.assert_close(decode_attention_math(q, k, v), F.scaled_dot_product_attention(q, k, v),
                               rtol=0, atol=1e-12)


def test_the_compiled_decode_attention_equals_the_fused_kernel():
    from nnqs.wavefunction.model import _compiled_decode_attention

    g = torch.Generator().manual_seed(7)
    for b, h_kv, groups, t, d in ((3, 2, 1, 1, 4), (5, 2, 2, 13, 3)):   # one compilation, dynamic shapes
        q = torch.randn(b, h_kv, groups, d, generator=g, dtype=torch.float64)
        k, v = (torch.randn(b, h_kv, t + 2, d, generator=g, dtype=torch.float64)[:, :, :t] for _ in range(2))
        torch.testing.assert_close(_compiled_decode_attention()(q, k, v), F.scaled_dot_product_attention(q, k, v),
                                   rtol=0, atol=1e-12)


@pytest.mark.parametrize("n_kv_heads", [None, 1])
def test_explicit_attention_gives_the_same_log_psi_and_switches_back(n_kv_heads):
    model = make_model(7, 3, 2, seed=4, dtype="float64", n_heads=4, n_kv_heads=n_kv_heads)
    tokens = random_valid_tokens(model.constraint, 50, generator=torch.Generator().manual_seed(0))
    layers = [m for m in model.modules() if isinstance(m, CausalSelfAttention)]
    fused = model.log_psi(tokens)
    with explicit_attention(model):
        assert layers and all(m.explicit for m in layers)
        written_out = model.log_psi(tokens)
    assert not any(m.explicit for m in layers)
    torch.testing.assert_close(written_out, fused, rtol=0, atol=1e-12)
