"""Causal self-attention and the pre-LayerNorm Transformer block.

One ``forward(x, cache=None, layer=0)`` serves both passes:

* ``cache is None``: the uncached full pass, ``x`` is ``[B, T, d_model]``, causal mask.
* ``cache`` given: ``x`` is ``[B, T, d_model]`` for positions ``cache.position ..
  cache.position + T - 1``; their keys/values are written into ``cache`` and each query
  attends to every cached position up to its own. ``T = 1`` is a decode step (no mask: the
  cache holds only the past); ``T > 1`` from position 0 is a prefill (the full pass that also
  fills the cache).

Grouped-query attention: query head ``h`` uses key/value head ``h // (H / H_kv)``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from nnqs.wavefunction.cache import KVCache


def expand_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """``[B, H_kv, T, d]`` -> ``[B, H_kv * groups, T, d]``, repeating each KV head ``groups`` times."""
    if groups == 1:
        return x
    b, h_kv, t, d = x.shape
    return x[:, :, None].expand(b, h_kv, groups, t, d).reshape(b, h_kv * groups, t, d)


def causal_attention_math(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``softmax(q k^T / sqrt(d) + causal mask) v`` written out, for ``[B, H, T, d]`` inputs: the
    numbers of ``F.scaled_dot_product_attention(q, k, v, is_causal=True)`` to rounding. Under
    ``torch.func.vmap`` its backward batches, where the fused CPU kernel's backward has no
    batching rule and falls back to a per-sample loop (with a warning)."""
    t = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5
    future = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    return scores.masked_fill(future, float("-inf")).softmax(dim=-1) @ v


def decode_attention_math(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """One decode step's attention written out: queries ``[B, H_kv, g, d]`` (the ``g`` query
    heads of each KV head), keys and values ``[B, H_kv, T, d]`` (the cache's past) ->
    ``[B, H_kv, g, d]``, no mask; the numbers of ``F.scaled_dot_product_attention(q, k, v)`` to
    rounding. Elementwise products and sums over a few positions, which ``torch.compile`` fuses
    into one loop (:meth:`nnqs.wavefunction.model.TransformerWavefunction.compile_passes`)."""
    scores = (q[:, :, :, None, :] * k[:, :, None, :, :]).sum(dim=-1, keepdim=True) * q.shape[-1] ** -0.5
    return (scores.softmax(dim=3) * v[:, :, None, :, :]).sum(dim=3)


@contextlib.contextmanager
def explicit_attention(model: nn.Module) -> Iterator[None]:
    """Inside, ``model``'s uncached full passes use :func:`causal_attention_math` instead of the
    fused kernel (for per-sample gradients by ``vmap``; see :func:`nnqs.training.sr.log_psi_jacobian`)."""
    layers = [m for m in model.modules() if isinstance(m, CausalSelfAttention)]
    before = [m.explicit for m in layers]
    for m in layers:
        m.explicit = True
    try:
        yield
    finally:
        for m, flag in zip(layers, before):
            m.explicit = flag


class CausalSelfAttention(nn.Module):
    """Multi-head (or grouped-query) causal self-attention.

    Args:
        d_model: input/output width.
        n_heads: query heads ``H``; ``d_head = d_model // n_heads``.
        n_kv_heads: key/value heads ``H_kv`` (divides ``H``).
        bias: whether the projections carry biases.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None = None, bias: bool = True) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.n_kv_heads = n_heads if n_kv_heads is None else n_kv_heads
        self.d_head = d_model // n_heads
        self.query = nn.Linear(d_model, n_heads * self.d_head, bias=bias)
        self.key_value = nn.Linear(d_model, 2 * self.n_kv_heads * self.d_head, bias=bias)
        self.out = nn.Linear(n_heads * self.d_head, d_model, bias=bias)
        self.explicit = False   # full passes by causal_attention_math (see explicit_attention)
        self.decode_attention: Callable[..., torch.Tensor] | None = None   # decode steps; None: the fused kernel

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, layer: int = 0) -> torch.Tensor:
        """``x``: ``[B, T, d_model]`` -> ``[B, T, d_model]`` (see the module docstring)."""
        b, t, _ = x.shape
        groups = self.n_heads // self.n_kv_heads
        q = self.query(x).view(b, t, self.n_heads, self.d_head).transpose(1, 2)
        k, v = self.key_value(x).view(b, t, 2, self.n_kv_heads, self.d_head).permute(2, 0, 3, 1, 4)
        start = 0 if cache is None else cache.position
        if cache is not None:
            k, v = cache.write(layer, k, v)  # [B, H_kv, start + t, d_head]
        if t == 1 and cache is not None:
            # The `groups` query heads sharing a KV head attend as `groups` query rows of it;
            # no mask: the cache holds only the past.
            q = q.reshape(b, self.n_kv_heads, groups, self.d_head)
            attend = self.decode_attention or F.scaled_dot_product_attention
            y = attend(q, k, v).reshape(b, self.n_heads, 1, self.d_head)
        elif start == 0:
            attend = causal_attention_math if self.explicit else _fused_causal
            y = attend(q, expand_kv(k, groups), expand_kv(v, groups))
        else:  # query i sits at position start + i and sees keys 0..start + i
            visible = torch.arange(start + t, device=x.device) <= torch.arange(start, start + t, device=x.device)[:, None]
            y = F.scaled_dot_product_attention(q, expand_kv(k, groups), expand_kv(v, groups), attn_mask=visible)
        return self.out(y.transpose(1, 2).reshape(b, t, self.n_heads * self.d_head))


def _fused_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class Block(nn.Module):
    """Pre-LayerNorm Transformer block: ``x + attn(ln(x))``, then ``x + mlp(ln(x))``."""

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int | None, mlp_ratio: int) -> None:
        super().__init__()
        self.norm_attn = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads, n_kv_heads)
        self.norm_mlp = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, mlp_ratio * d_model),
            nn.GELU(),
            nn.Linear(mlp_ratio * d_model, d_model),
        )

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, layer: int = 0) -> torch.Tensor:
        x = x + self.attn(self.norm_attn(x), cache, layer)
        return x + self.mlp(self.norm_mlp(x))
