"""The uncached baseline: the same BAS tree walk, recomputing the whole prefix at every step.

Every depth calls ``model.conditionals`` on the prefixes extended by a placeholder token, so
decoding costs ``O(L^2)`` attention work at depth ``L`` instead of ``O(L)``. It consumes the random
stream exactly like :func:`samplers.bas.sample`, so with the same seed both return identical samples.
"""

from __future__ import annotations

import torch

from samplers.protocol import AutoregressiveModel, SampleBatch
from samplers.tree import DEFAULT_MAX_CACHE_BYTES, row_budget, walk_tree


class UncachedDecoder:
    """``p(t_L | prefix)`` from a full causal pass over ``prefix + [placeholder]``."""

    nbytes = allocated_nbytes = 0  # no state between steps

    def __init__(self, model: AutoregressiveModel) -> None:
        self.model = model

    def resume(self, prefix: torch.Tensor) -> None:
        pass

    def next_probs(self, prefix: torch.Tensor) -> torch.Tensor:
        placeholder = prefix.new_zeros(prefix.shape[0], 1)  # row L never reads position L
        return self.model.conditionals(torch.cat((prefix, placeholder), dim=1))[:, -1]

    def reorder(self, parent: torch.Tensor, keep: int | None) -> None:
        pass


@torch.no_grad()
def sample(
    model: AutoregressiveModel,
    n_samples: int,
    *,
    generator: torch.Generator | None = None,
    max_unique: int | None = None,
    max_cache_bytes: int = DEFAULT_MAX_CACHE_BYTES,
) -> SampleBatch:
    """Same signature and samples as :func:`samplers.bas.sample`, without a cache.

    ``max_cache_bytes`` is translated into rows exactly as the cached sampler does, so both
    walk the tree in the same chunks.
    """
    rows = row_budget(model, max_unique, max_cache_bytes)
    return walk_tree(UncachedDecoder(model), model.n_orbitals, n_samples, generator, model.device, rows)
