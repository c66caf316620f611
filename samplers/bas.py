"""Batched autoregressive sampling with KV-cached decoding over unique prefixes (docs/design.md §4)."""

from __future__ import annotations

import torch

from samplers.protocol import AutoregressiveModel, SampleBatch
from samplers.tree import DEFAULT_MAX_CACHE_BYTES, check_n_samples, row_budget, walk_tree

__all__ = ["CachedDecoder", "DEFAULT_MAX_CACHE_BYTES", "sample"]


class CachedDecoder:
    """One ``decode_step`` per depth through a cache allocated once for ``capacity`` rows; the
    cache follows the tree through ``reorder``, and a chunk starts with one ``prefill``."""

    def __init__(self, model: AutoregressiveModel, capacity: int) -> None:
        self.model = model
        self.cache = model.init_cache(0, capacity)

    def resume(self, prefix: torch.Tensor) -> None:
        self.cache.reset(prefix.shape[0])
        if prefix.shape[1]:
            self.model.prefill(prefix, self.cache, validate=False)

    def next_probs(self, prefix: torch.Tensor) -> torch.Tensor:
        previous = prefix[:, -1] if prefix.shape[1] else None
        return self.model.decode_step(previous, self.cache, validate=False)

    def reorder(self, parent: torch.Tensor, keep: int | None) -> None:
        self.cache.reorder(parent, keep=keep)

    @property
    def nbytes(self) -> int:
        return self.cache.nbytes

    @property
    def allocated_nbytes(self) -> int:
        return self.cache.allocated_nbytes


@torch.no_grad()
def sample(
    model: AutoregressiveModel,
    n_samples: int,
    *,
    generator: torch.Generator | None = None,
    max_unique: int | None = None,
    max_cache_bytes: int = DEFAULT_MAX_CACHE_BYTES,
) -> SampleBatch:
    """Draw ``n_samples`` configurations; return the unique ones with counts.

    Args:
        model: satisfies :class:`samplers.protocol.AutoregressiveModel`.
        n_samples: number of draws, up to ``2**53`` (``1e12`` is routine).
        generator: random generator on the model's device (``None``: the global one).
        max_unique: most frontier rows decoded at once; beyond it the tree is walked depth first
            in chunks (see :mod:`samplers.tree`).
        max_cache_bytes: the cache's byte budget (default 256 MiB); the row limit is the
            smaller of what it holds and ``max_unique``.

    The cache is allocated once, for the row limit or ``n_samples`` if that is smaller (the
    frontier never holds more rows than draws). ``stats["peak_state_bytes"]`` is the largest
    live cache seen (``cache.nbytes``), ``stats["peak_allocated_bytes"]`` the allocation.
    """
    rows = row_budget(model, max_unique, max_cache_bytes)
    decoder = CachedDecoder(model, min(rows, check_n_samples(n_samples)))
    return walk_tree(decoder, model.n_orbitals, n_samples, generator, model.device, rows)
