"""What a sampler needs from a model, and what it returns (docs/design.md §3-4).

Samplers know a model only through :class:`AutoregressiveModel`; they never import ``nnqs``.
Shapes are batch first; tokens take values 0 (empty), 1 (alpha), 2 (beta), 3 (double).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import torch


class DecodeCache(Protocol):
    """The per-row decoding state of a model (for example ``nnqs.KVCache``), allocated once
    for ``capacity`` rows; ``batch`` of them are live."""

    position: int
    batch: int

    @property
    def capacity(self) -> int: ...

    @property
    def nbytes(self) -> int:
        """Bytes of the live rows' state."""

    @property
    def allocated_nbytes(self) -> int:
        """Bytes allocated (``capacity`` rows)."""

    def reset(self, batch: int) -> None:
        """Empty the cache for ``batch <= capacity`` rows, at position 0."""

    def reorder(self, index: torch.Tensor, *, keep: int | None = None) -> None:
        """New row ``i`` := old row ``index[i]`` (prunes, duplicates, permutes; may change
        ``batch`` up to ``capacity``). ``keep``: the caller promises ``index[:keep] ==
        arange(keep)`` and in-range indices, so nothing is checked (no host synchronisation)."""


class AutoregressiveModel(Protocol):
    """An autoregressive distribution over ``N`` tokens with a cached decode path."""

    n_orbitals: int

    @property
    def device(self) -> torch.device:
        """Where the model's parameters (and its caches) live."""

    def conditionals(self, tokens: torch.Tensor) -> torch.Tensor:
        """Tokens ``[B, T<=N]`` -> ``p(t_i | t_<i)`` ``[B, T, 4]``, one uncached causal pass."""

    def log_prob(self, tokens: torch.Tensor) -> torch.Tensor:
        """Whole configurations ``[B, N]`` -> ``log p(x)`` ``[B]``."""

    def init_cache(self, batch: int, capacity: int | None = None) -> DecodeCache:
        """An empty cache for ``batch`` rows at position 0, allocated for ``capacity`` rows."""

    # The cache arguments are typed Any: a model takes the cache its own init_cache made (a
    # parameter typed DecodeCache would accept every cache, which a model need not).
    def prefill(self, tokens: torch.Tensor, cache: Any, *, validate: bool = True) -> torch.Tensor:
        """Fill an empty cache with one full pass over ``tokens`` ``[B, T]``, as ``T`` decode steps
        fed ``None, tokens[:, 0], ..., tokens[:, T-2]`` would; return ``p(t_i | t_<i)`` ``[B, T, 4]``."""

    def decode_step(self, tokens: torch.Tensor | None, cache: Any, *, validate: bool = True) -> torch.Tensor:
        """Feed the tokens ``[B]`` chosen at ``cache.position - 1`` (``None`` at position 0);
        return ``p(t_pos | prefix)`` ``[B, 4]`` and advance the cache by one position.
        ``validate=False``: the caller vouches for the token values (no host synchronisation)."""


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
