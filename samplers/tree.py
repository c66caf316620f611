"""The batched autoregressive sampling (BAS) tree walk shared by the cached and naive samplers.

At depth ``i`` the frontier holds unique prefixes ``[U, i]`` with counts ``[U]``. Each prefix's
count is split over the four tokens by a multinomial draw from ``p(t_i | prefix)``; children with
count 0 are dropped; the decoder follows the surviving children (``reorder``), each row's first
child in the row itself and the extra children appended (see :func:`children`). When the children
would exceed ``max_rows``, the first ``max_rows`` continue in the live decoder state and the rest
wait on a stack as plain tokens (no cache), to be resumed depth first; so at most ``max_rows``
rows of decoder state are ever alive, and a resumed chunk rebuilds its state from its prefix.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch

from samplers.multinomial import split_counts
from samplers.protocol import AutoregressiveModel, SampleBatch


class Decoder(Protocol):
    """How the tree walk gets ``p(t_L | prefix)`` for a frontier of prefixes ``[U, L]``."""

    def resume(self, prefix: torch.Tensor, max_rows: int | float) -> None:
        """Make the state ready for ``next_probs(prefix)`` (called when a chunk (re)starts);
        the chunk's frontier never exceeds ``max_rows`` (``math.inf``: no known bound)."""

    def next_probs(self, prefix: torch.Tensor) -> torch.Tensor:
        """``p(t_L | prefix)`` ``[U, 4]`` for prefixes ``[U, L]``."""

    def reorder(self, parent: torch.Tensor) -> None:
        """Follow the tree: new row ``j`` continues old row ``parent[j]``."""

    @property
    def nbytes(self) -> int:
        """Bytes of decoder state currently alive."""


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
    max_rows: int | None = None,
) -> SampleBatch:
    """Run BAS over ``n_orbitals`` positions; see the module docstring.

    Random numbers are consumed in the same order for any decoder, so two decoders that give the
    same conditionals return identical samples for the same generator state.
    """
    n_samples = check_n_samples(n_samples)
    limit = math.inf if max_rows is None else int(max_rows)
    if limit < 1:
        raise ValueError(f"the row budget must allow at least one row, got {max_rows}")
    root = (
        torch.zeros(1, 0, dtype=torch.long, device=device),
        torch.tensor([n_samples], dtype=torch.int64, device=device),
        torch.zeros(1, dtype=torch.float64, device=device),
    )
    stack = [root]
    done: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    stats = {"peak_rows": 0, "peak_state_bytes": 0, "peak_allocated_bytes": 0, "chunks": 0, "decode_rows": 0}
    while stack:
        prefix, counts, log_prob = stack.pop()
        stats["chunks"] += 1
        # A chunk's frontier is bounded by its draws and by the row limit.
        decoder.resume(prefix, min(limit, int(counts.sum())))
        while True:
            stats["peak_rows"] = max(stats["peak_rows"], prefix.shape[0])
            stats["peak_state_bytes"] = max(stats["peak_state_bytes"], decoder.nbytes)
            allocated = getattr(decoder, "allocated_nbytes", decoder.nbytes)
            stats["peak_allocated_bytes"] = max(stats["peak_allocated_bytes"], allocated)
            stats["decode_rows"] += prefix.shape[0]
            probs = decoder.next_probs(prefix)
            child_counts = split_counts(counts, probs, generator)
            parent, token = children(child_counts)
            counts = child_counts[parent, token]
            log_prob = log_prob[parent] + probs[parent, token].to(torch.float64).log()
            prefix = torch.cat((prefix[parent], token[:, None]), dim=1)
            if prefix.shape[1] == n_orbitals:
                done.append((prefix, counts, log_prob))
                break
            if parent.numel() > limit:
                # Depth first: the first chunk goes on in the live state, the rest wait as tokens.
                starts = range(int(limit), parent.numel(), int(limit))
                for s in reversed(starts):
                    rows = slice(s, s + int(limit))
                    stack.append((prefix[rows], counts[rows], log_prob[rows]))
                keep = slice(0, int(limit))
                parent, prefix, counts, log_prob = parent[keep], prefix[keep], counts[keep], log_prob[keep]
            decoder.reorder(parent)
    tokens, counts, log_prob = (torch.cat(parts) for parts in zip(*done))
    return SampleBatch(tokens=tokens, counts=counts, log_prob=log_prob, n_samples=n_samples, stats=stats)


def children(child_counts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(parent, token)`` of the children with a nonzero count in ``child_counts`` ``[U, 4]``.

    Order: first every row's first child (lowest token), in row order, so that row ``j`` of the
    next frontier continues row ``j`` of this one; then the extra children (second, third, ...
    child of a row) in row-major order. A decoder's ``reorder`` then sees an index that starts
    with ``arange(U)`` and has to copy only the extra rows.
    """
    nonzero = child_counts > 0
    first = nonzero.to(torch.uint8).argmax(dim=1)  # first nonzero token (0 for an empty row)
    has_child = nonzero.any(dim=1)
    rows = torch.arange(child_counts.shape[0], device=child_counts.device)
    if not bool(has_child.all()):
        rows = rows[has_child]
        first = first[has_child]
    nonzero[rows, first] = False
    extra_parent, extra_token = nonzero.nonzero(as_tuple=True)
    return torch.cat((rows, extra_parent)), torch.cat((first, extra_token))


def model_device(model) -> torch.device:
    """The device a model lives on (``model.device`` if it has one, else the CPU)."""
    return torch.device(getattr(model, "device", "cpu"))


def rows_for_budget(model: AutoregressiveModel, max_unique: int | None, max_cache_bytes: int | None) -> int | None:
    """The frontier row limit implied by ``max_unique`` and a cache byte budget."""
    if max_cache_bytes is None:
        return max_unique
    per_row = model.init_cache(1).nbytes
    rows = int(max_cache_bytes) // per_row
    if rows < 1:
        raise ValueError(f"max_cache_bytes={max_cache_bytes} cannot hold one row ({per_row} bytes)")
    return rows if max_unique is None else min(rows, int(max_unique))
