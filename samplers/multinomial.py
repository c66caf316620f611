"""Splitting integer counts over categories: a multinomial draw as a chain of binomials.

Exact in int64 for counts up to 2**53 (the float64 mantissa that ``torch.binomial`` works in),
vectorised over rows, on the device of the inputs, with no Python loop over rows.
"""

from __future__ import annotations

import torch


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
