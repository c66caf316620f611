"""BAS split across ``K`` processes: a shared top of the tree, then each rank's own subtrees.

Every rank walks the top of the tree with the same random stream (``generator``) until the
frontier holds at least ``prefixes_per_rank * K`` unique prefixes (or the configurations are
complete). The prefixes are then partitioned across the ranks **by count weight**
(:func:`partition_by_count`: every rank gets about ``n_samples / K`` draws, whatever the number of
prefixes), and each rank finishes its own subtrees with its own stream (``rank_generator``).

Why the union is a BAS sample of the same ``n_samples``: BAS is a chain of multinomial splits,
each conditioned only on its own prefix's count. Below the split every prefix's subtree is split
independently of the others, so which process (and which independent stream) splits it does not
change the distribution. For ``K = 1`` nothing is split and the sample is
:func:`samplers.bas.sample`'s, draw for draw.

The shared top costs every rank the same few decode steps (``prefixes_per_rank * K`` rows at most).
``share`` lets the caller make the top identical on all ranks (``nnqs.parallel`` broadcasts rank
0's), so that floating-point differences between machines cannot give two ranks different splits.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from samplers import bas
from samplers.bas import CachedDecoder
from samplers.protocol import AutoregressiveModel, SampleBatch
from samplers.tree import DEFAULT_MAX_CACHE_BYTES, Frontier, check_n_samples, row_budget, walk_tree

__all__ = ["DEFAULT_PREFIXES_PER_RANK", "partition_by_count", "sample_share", "walk_top"]

#: The top of the tree is shared until it has at least this many prefixes per rank: enough for
#: the count-weighted partition to balance the ranks' draws.
DEFAULT_PREFIXES_PER_RANK = 8

Partition = Callable[[torch.Tensor, int], torch.Tensor]


def partition_by_count(counts: torch.Tensor, world_size: int) -> torch.Tensor:
    """The rank that owns each prefix, balancing the draws (not the number of prefixes).

    Greedy longest-processing-time: prefixes in decreasing count (ties by index), each to the rank
    with the fewest draws so far (ties to the lowest rank). Deterministic, so every rank computes
    the same partition from the same top.

    Args:
        counts: int64 ``[U]``, the draws down each prefix.
        world_size: ``K >= 1``.

    Returns:
        int64 ``[U]`` rank of each prefix.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    values = counts.tolist()
    order = sorted(range(len(values)), key=lambda i: (-values[i], i))
    load = [0] * world_size
    owner = [0] * len(values)
    for i in order:
        rank = min(range(world_size), key=lambda r: (load[r], r))
        owner[i] = rank
        load[rank] += values[i]
    return torch.tensor(owner, dtype=torch.int64, device=counts.device)


@torch.no_grad()
def walk_top(
    model: AutoregressiveModel,
    n_samples: int,
    min_prefixes: int,
    *,
    generator: torch.Generator | None = None,
) -> Frontier:
    """The BAS frontier at the first depth with at least ``min_prefixes`` unique prefixes (or
    whole configurations, if the tree ends first)."""
    decoder = CachedDecoder(model, min(int(min_prefixes) * 4, check_n_samples(n_samples)))
    top = walk_tree(decoder, model.n_orbitals, n_samples, generator, model.device, decoder.cache.capacity,
                    stop_rows=min(int(min_prefixes), decoder.cache.capacity))
    return Frontier(top.tokens, top.counts, top.log_prob)


@torch.no_grad()
def sample_share(
    model: AutoregressiveModel,
    n_samples: int,
    *,
    rank: int,
    world_size: int,
    generator: torch.Generator | None = None,
    rank_generator: torch.Generator | None = None,
    prefixes_per_rank: int = DEFAULT_PREFIXES_PER_RANK,
    max_unique: int | None = None,
    max_cache_bytes: int = DEFAULT_MAX_CACHE_BYTES,
    share: Callable[[Frontier], Frontier] | None = None,
    partition: Partition = partition_by_count,
) -> SampleBatch:
    """Rank ``rank``'s part of one BAS sample of ``n_samples`` split over ``world_size`` ranks.

    Args:
        generator: the shared stream of the top (the same state on every rank).
        rank_generator: this rank's stream for its subtrees (independent of the other ranks').
        prefixes_per_rank: the top is split once it has ``prefixes_per_rank * world_size`` prefixes.
        share: applied to the top before it is partitioned (e.g. a broadcast from rank 0).
        partition: ``(counts [U], K) -> rank [U]``; :func:`partition_by_count` (tests pass wrong ones).

    Returns:
        The rank's unique samples; ``counts`` sum to its share of the draws, ``n_samples`` is the
        whole sample's (so the weights ``counts / n_samples`` sum to 1 over all ranks), and
        ``stats`` add ``split_depth``, ``split_prefixes`` and ``rank_draws``. The ranks' samples are
        disjoint. With ``world_size == 1``: exactly :func:`samplers.bas.sample` with ``generator``.
    """
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, world_size={world_size}), got {rank}")
    if prefixes_per_rank < 1:
        raise ValueError(f"prefixes_per_rank must be >= 1, got {prefixes_per_rank}")
    if world_size == 1:
        return bas.sample(model, n_samples, generator=generator, max_unique=max_unique,
                          max_cache_bytes=max_cache_bytes)
    rows = row_budget(model, max_unique, max_cache_bytes)
    top = walk_top(model, n_samples, min(prefixes_per_rank * world_size, rows), generator=generator)
    if share is not None:
        top = share(top)
    mine = partition(top.counts, world_size) == rank
    start = Frontier(top.prefix[mine], top.counts[mine], top.log_prob[mine])
    decoder = CachedDecoder(model, max(1, min(rows, int(start.counts.sum()))))
    batch = walk_tree(decoder, model.n_orbitals, n_samples, rank_generator, model.device, rows, start=start)
    batch.stats.update(split_depth=int(top.prefix.shape[1]), split_prefixes=int(top.counts.numel()),
                       rank_draws=int(start.counts.sum()))
    return batch
