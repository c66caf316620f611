"""Batched autoregressive sampling with KV-cached decoding over unique prefixes (DESIGN.md §4)."""

from __future__ import annotations

import math

import torch

from samplers.protocol import AutoregressiveModel, SampleBatch
from samplers.tree import model_device, rows_for_budget, walk_tree


class CachedDecoder:
    """One ``decode_step`` per depth; the cache follows the tree through ``reorder``."""

    RESERVE_BYTES = 1 << 28  # on the CPU, allocate up to this much cache once for the largest frontier

    def __init__(self, model: AutoregressiveModel) -> None:
        self.model = model
        self.cache = None

    def resume(self, prefix: torch.Tensor, max_rows: int | float) -> None:
        # Rebuild the cache up to position L (a chunk resumed from the stack, or the root).
        self.cache = self.model.init_cache(prefix.shape[0])
        reserve = getattr(self.cache, "reserve", None)  # optional in DecodeCache
        if reserve is not None:
            # On the CPU, growing the cache step by step copies and page-faults it several times,
            # while rows reserved but never reached cost no memory: allocate once for the bound.
            # On CUDA reserved rows are real memory, so the cache grows; in both, never past it.
            rows = 0
            if prefix.device.type == "cpu":
                rows = int(min(max_rows, self.RESERVE_BYTES // max(self.cache.nbytes // prefix.shape[0], 1)))
            reserve(rows, max_rows=None if max_rows == math.inf else int(max_rows))
        for i in range(prefix.shape[1]):
            self.model.decode_step(prefix[:, i - 1] if i else None, self.cache)

    def next_probs(self, prefix: torch.Tensor) -> torch.Tensor:
        return self.model.decode_step(prefix[:, -1] if prefix.shape[1] else None, self.cache)

    def reorder(self, parent: torch.Tensor) -> None:
        self.cache.reorder(parent)

    @property
    def nbytes(self) -> int:
        return self.cache.nbytes

    @property
    def allocated_nbytes(self) -> int:
        """Bytes the cache's buffers hold, headroom rows included (``nbytes`` if it has none)."""
        return getattr(self.cache, "allocated_nbytes", self.cache.nbytes)


@torch.no_grad()
def sample(
    model: AutoregressiveModel,
    n_samples: int,
    *,
    generator: torch.Generator | None = None,
    max_unique: int | None = None,
    max_cache_bytes: int | None = None,
) -> SampleBatch:
    """Draw ``n_samples`` configurations; return the unique ones with counts.

    Args:
        model: satisfies :class:`samplers.protocol.AutoregressiveModel`.
        n_samples: number of draws, up to ``2**53`` (``1e12`` is routine).
        generator: random generator on the model's device (``None``: the global one).
        max_unique: most frontier rows decoded at once; beyond it the tree is walked depth first
            in chunks (see :mod:`samplers.tree`).
        max_cache_bytes: the same limit expressed as a byte budget for the live cache (the
            smaller of the two limits applies). During a ``reorder`` the old and new buffers
            coexist for a moment.

    Returns:
        :class:`SampleBatch`; ``stats["peak_state_bytes"]`` is the largest live cache seen
        (``cache.nbytes``), ``stats["peak_allocated_bytes"]`` the largest its buffers were.
    """
    rows = rows_for_budget(model, max_unique, max_cache_bytes)
    return walk_tree(CachedDecoder(model), model.n_orbitals, n_samples, generator, model_device(model), rows)
