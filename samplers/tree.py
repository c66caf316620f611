"""The batched autoregressive sampling (BAS) tree walk shared by the cached and naive samplers.

At depth ``i`` the frontier holds unique prefixes ``[U, i]`` with counts ``[U]``. Each prefix's
count is split over the four tokens by a multinomial draw from ``p(t_i | prefix)``; children with
count 0 are dropped; the decoder follows the surviving children (``reorder``), each row's first
child in the row itself and the extra children appended (see :func:`children`). When the children
would exceed ``max_rows``, the first ``max_rows`` continue in the live decoder state and the rest
wait on a stack as plain tokens (no cache), to be resumed depth first; so at most ``max_rows``
rows of decoder state are ever alive, and a resumed chunk rebuilds its state from its prefix
(the cached decoder with one prefill pass).
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import torch

from samplers.protocol import AutoregressiveModel, SampleBatch


#: The default budget of a cached sampler's K/V cache (bytes): it is allocated at most once per
#: call, and the frontier is bounded by the rows it holds.
DEFAULT_MAX_CACHE_BYTES = 256 * 2**20


class Frontier(NamedTuple):
    """Unique prefixes ``[U, L]`` (long), the draws down each ``[U]`` (int64) and their
    ``log p(prefix)`` ``[U]`` (float64)."""

    prefix: torch.Tensor
    counts: torch.Tensor
    log_prob: torch.Tensor


class Decoder(Protocol):
    """How the tree walk gets ``p(t_L | prefix)`` for a frontier of prefixes ``[U, L]``."""

    def resume(self, prefix: torch.Tensor) -> None:
        """Make the state ready for ``next_probs(prefix)`` (called when a chunk (re)starts)."""

    def next_probs(self, prefix: torch.Tensor) -> torch.Tensor:
        """``p(t_L | prefix)`` ``[U, 4]`` for prefixes ``[U, L]``."""

    def reorder(self, parent: torch.Tensor, keep: int | None) -> None:
        """Follow the tree: new row ``j`` continues old row ``parent[j]``; ``parent[:keep]`` is
        ``arange(keep)`` (``None``: the decoder finds the rows with ``parent[j] == j``)."""

    @property
    def nbytes(self) -> int:
        """Bytes of decoder state currently alive."""

    @property
    def allocated_nbytes(self) -> int:
        """Bytes of decoder state allocated."""


def check_n_samples(n_samples: int) -> int:
    n = int(n_samples)
    if n != n_samples or n < 1 or n > 2**53:
        raise ValueError(f"n_samples must be an integer in [1, 2**53], got {n_samples!r}")
    return n


def walk_tree(
    decoder: Decoder,
    n_orbitals: int,
    n_samples: int,
    generator: torch.Generator | None,
    device: torch.device,
    max_rows: int,
    *,
    start: Frontier | None = None,
    stop_rows: int | None = None,
) -> SampleBatch:
    """Run BAS over ``n_orbitals`` positions with at most ``max_rows`` frontier rows; see the
    module docstring.

    Random numbers are consumed in the same order for any decoder, so two decoders that give the
    same conditionals return identical samples for the same generator state. The walk reads
    back from the device only the number of children at each depth (to size the next frontier).

    Args:
        start: continue from this frontier (prefixes of one length, with their counts and log
            probabilities) instead of the root; ``n_samples`` is then the whole sample's size
            (the weights' denominator), of which ``start`` carries a part.
        stop_rows: return the frontier itself, as prefixes ``[U, L]``, at the first depth where
            it holds at least this many rows (or at ``L = n_orbitals``); ``<= max_rows``.
            :mod:`samplers.split` walks the top of the tree this way.
    """
    n_samples = check_n_samples(n_samples)
    limit = int(max_rows)
    if limit < 1:
        raise ValueError(f"the row budget must allow at least one row, got {max_rows}")
    if stop_rows is not None and not 1 <= stop_rows <= limit:
        raise ValueError(f"stop_rows must be in [1, max_rows={limit}], got {stop_rows}")
    if start is None:
        start = Frontier(
            torch.zeros(1, 0, dtype=torch.long, device=device),
            torch.tensor([n_samples], dtype=torch.int64, device=device),
            torch.zeros(1, dtype=torch.float64, device=device),
        )
    stats = {"peak_rows": 0, "peak_state_bytes": 0, "peak_allocated_bytes": 0, "chunks": 0, "decode_rows": 0}
    if start.prefix.shape[1] == n_orbitals:  # already whole configurations
        return SampleBatch(tokens=start.prefix, counts=start.counts, log_prob=start.log_prob, n_samples=n_samples,
                           stats=stats)
    stack = [tuple(part[s : s + limit] for part in start) for s in reversed(range(0, start.counts.numel(), limit))]
    done: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    while stack:
        prefix, counts, log_prob = stack.pop()
        stats["chunks"] += 1
        decoder.resume(prefix)
        while True:
            rows = prefix.shape[0]
            stats["peak_rows"] = max(stats["peak_rows"], rows)
            stats["peak_state_bytes"] = max(stats["peak_state_bytes"], decoder.nbytes)
            stats["peak_allocated_bytes"] = max(stats["peak_allocated_bytes"], decoder.allocated_nbytes)
            stats["decode_rows"] += rows
            probs = decoder.next_probs(prefix)
            child_counts = split_counts(counts, probs, generator)
            parent, token = children(child_counts)
            counts = child_counts[parent, token]
            log_prob = log_prob[parent] + probs[parent, token].to(torch.float64).log()
            prefix = torch.cat((prefix[parent], token[:, None]), dim=1)
            if prefix.shape[1] == n_orbitals or (stop_rows is not None and parent.numel() >= stop_rows):
                done.append((prefix, counts, log_prob))
                break
            if parent.numel() > limit:
                # Depth first: the first chunk goes on in the live state, the rest wait as tokens.
                for s in reversed(range(limit, parent.numel(), limit)):
                    chunk = slice(s, s + limit)
                    stack.append((prefix[chunk], counts[chunk], log_prob[chunk]))
                keep = slice(0, limit)
                parent, prefix, counts, log_prob = parent[keep], prefix[keep], counts[keep], log_prob[keep]
            decoder.reorder(parent, rows)  # rows <= limit, so parent still starts with arange(rows)
    if not done:  # an empty start: a share of the tree with no prefixes
        empty = start.prefix.new_zeros(0, n_orbitals)
        return SampleBatch(tokens=empty, counts=start.counts[:0], log_prob=start.log_prob[:0],
                           n_samples=n_samples, stats=stats)
    tokens, counts, log_prob = (torch.cat(parts) for parts in zip(*done))
    return SampleBatch(tokens=tokens, counts=counts, log_prob=log_prob, n_samples=n_samples, stats=stats)


def children(child_counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(parent, token)`` of the children with a nonzero count in ``child_counts`` ``[U, 4]``.

    Every row has at least one nonzero count (a frontier row carries at least one draw).
    Order: first every row's first child (lowest token), in row order, so that row ``j`` of the
    next frontier continues row ``j`` of this one; then the extra children (second, third, ...
    child of a row) in row-major order. A decoder's ``reorder`` then sees an index that starts
    with ``arange(U)`` and has to copy only the extra rows.
    """
    nonzero = child_counts > 0
    first = nonzero.to(torch.uint8).argmax(dim=1)  # first nonzero token
    rows = torch.arange(child_counts.shape[0], device=child_counts.device)
    nonzero[rows, first] = False
    extra_parent, extra_token = nonzero.nonzero(as_tuple=True)
    return torch.cat((rows, extra_parent)), torch.cat((first, extra_token))


def row_budget(model: AutoregressiveModel, max_unique: int | None, max_cache_bytes: int) -> int:
    """The frontier row limit: what ``max_cache_bytes`` of cache holds, or ``max_unique`` if smaller."""
    per_row = model.init_cache(1).nbytes
    rows = int(max_cache_bytes) // per_row
    if rows < 1:
        raise ValueError(f"max_cache_bytes={max_cache_bytes} cannot hold one row ({per_row} bytes)")
    return rows if max_unique is None else min(rows, int(max_unique))


# --- splitting counts over categories: a multinomial draw as a chain of binomials --------------
def split_counts(counts: torch.Tensor, probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Draw ``Multinomial(counts[b], probs[b])`` for every row.

    Args:
        counts: int64 ``[B]``, non-negative.
        probs: ``[B, K]``, each row sums to 1 (zeros allowed).
        generator: the random generator (on the inputs' device).

    Returns:
        int64 ``[B, K]`` whose rows sum to ``counts``; a category with probability 0 gets 0.

    Category ``k`` receives ``Binomial(remaining, p_k / (p_k + ... + p_{K-1}))``; the last
    category receives what remains; when it has probability 0 the ratio before it is exactly 1,
    so it receives nothing.
    """
    probs = probs.to(torch.float64)
    remaining = counts.to(torch.float64)
    # tail[k] = p_k + ... + p_{K-1}, computed from the right so that rounding cannot push it
    # below p_k.
    tail = probs.flip(-1).cumsum(-1).flip(-1)
    out = torch.empty(probs.shape, dtype=torch.int64, device=probs.device)
    k_last = probs.shape[-1] - 1
    for k in range(k_last):
        ratio = torch.where(tail[:, k] > 0, probs[:, k] / tail[:, k], torch.zeros_like(tail[:, k]))
        drawn = torch.binomial(remaining, ratio.clamp_(0.0, 1.0), generator=generator)
        out[:, k] = drawn.to(torch.int64)
        remaining = remaining - drawn
    out[:, k_last] = remaining.to(torch.int64)
    return out
