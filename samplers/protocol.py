"""What a sampler needs from a model, and what it returns (DESIGN.md §3-4).

Samplers know a model only through :class:`AutoregressiveModel`; they never import ``nnqs``.
Shapes are batch first; tokens take values 0 (empty), 1 (alpha), 2 (beta), 3 (double).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import torch


@runtime_checkable
class DecodeCache(Protocol):
    """The per-row decoding state of a model (for example ``nnqs.cache.KVCache``).

    A cache may also offer ``reserve(rows)`` (room for ``rows`` rows without reallocating);
    the cached sampler calls it when it knows a bound on the frontier.
    """

    position: int

    @property
    def batch(self) -> int: ...

    @property
    def nbytes(self) -> int: ...

    def reorder(self, index: torch.Tensor) -> None:
        """New row ``i`` := old row ``index[i]`` (prunes, duplicates, permutes; may change B)."""


@runtime_checkable
class AutoregressiveModel(Protocol):
    """An autoregressive distribution over ``N`` tokens with a cached decode path."""

    n_orbitals: int

    def conditionals(self, tokens: torch.Tensor) -> torch.Tensor:
        """Tokens ``[B, T<=N]`` -> ``p(t_i | t_<i)`` ``[B, T, 4]``, one uncached causal pass."""

    def log_prob(self, tokens: torch.Tensor) -> torch.Tensor:
        """Whole configurations ``[B, N]`` -> ``log p(x)`` ``[B]``."""

    def init_cache(self, batch: int) -> DecodeCache:
        """An empty cache for ``batch`` rows at position 0."""

    def decode_step(self, tokens: torch.Tensor | None, cache: DecodeCache) -> torch.Tensor:
        """Feed the tokens ``[B]`` chosen at ``cache.position - 1`` (``None`` at position 0);
        return ``p(t_pos | prefix)`` ``[B, 4]`` and advance the cache by one position."""


@dataclass
class SampleBatch:
    """Unique samples with their multiplicities.

    Attributes:
        tokens: LongTensor ``[U, N]``, unique rows.
        counts: int64 ``[U]``, how many of the ``n_samples`` draws gave each row (sum = n_samples).
        log_prob: float64 ``[U]``, ``log p(x)`` accumulated from the conditionals while decoding.
        n_samples: the number of draws.
        stats: diagnostics (peak frontier rows, peak cache bytes, chunks, ...).
    """

    tokens: torch.Tensor
    counts: torch.Tensor
    log_prob: torch.Tensor
    n_samples: int
    stats: dict = field(default_factory=dict)

    @property
    def n_unique(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def weights(self) -> torch.Tensor:
        """``counts / n_samples`` as float64 ``[U]``."""
        return self.counts.double() / self.n_samples
