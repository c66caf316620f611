"""``k`` distinct configurations drawn without replacement: stochastic beam search over the
autoregressive tree with the KV cache (Kool, van Hoof & Welling, ICML 2019).

Rules:

* Every configuration ``x`` gets a perturbed log-probability ``G_x = log p(x) + Gumbel``; the
  sample is the ``k`` largest ``G_x`` (the Gumbel-top-k trick: a draw of ``k`` without
  replacement, each next one in proportion to ``p`` among those left). The tree is walked depth
  by depth: a prefix's ``G`` is the largest of its completions', drawn top down by conditioning
  each child's Gumbel on its parent's maximum (the truncated Gumbel of Kool et al.'s appendix, in
  its numerically stable form), so keeping the ``k`` largest prefixes at each depth keeps
  exactly the ancestors of the ``k`` largest configurations. Masked tokens (``p = 0``) are never
  taken; when the valid space has at most ``k`` configurations, all of them come back.
* At most ``k`` rows of decoder state live at once (one ``decode_step`` per depth on the cache,
  then a gather of the kept rows, each parent's first kept child in the parent's own row, so
  that only the other rows are copied); random numbers are one uniform for the root's Gumbel,
  then one per (row, token) per depth.
* The batch's ``counts`` are 1 and ``n_samples`` is the number drawn. ``stats["threshold"]`` is
  ``kappa``, the ``(k + 1)``-th largest ``G`` over the whole space (the largest ``G`` of any
  prefix the beam discarded, at any depth; ``-inf`` when every configuration was drawn), and
  ``stats["inclusion"]`` each drawn ``x``'s probability of being drawn given ``kappa``,
  ``q(x) = 1 - exp(-exp(log p(x) - kappa))``: ``sum_x f(x) p(x) / q(x)`` over the sample is an
  unbiased estimate of ``E_p[f]`` (priority sampling; Duffield, Lund & Thorup 2007).
"""

from __future__ import annotations

import math

import torch

from samplers.bas import CachedDecoder
from samplers.protocol import AutoregressiveModel, SampleBatch
from samplers.tree import DEFAULT_MAX_CACHE_BYTES, row_budget

__all__ = ["sample_without_replacement", "inclusion_probability"]


def _log1mexp(a: torch.Tensor) -> torch.Tensor:
    """``log(1 - exp(a))`` for ``a <= 0``, accurate at both ends."""
    return torch.where(a > -math.log(2.0), torch.log(-torch.expm1(a)), torch.log1p(-torch.exp(a)))


def _conditioned(target: torch.Tensor, perturbed: torch.Tensor) -> torch.Tensor:
    """Gumbels ``perturbed [U, C]`` (``-inf`` where masked) shifted so that each row's maximum is
    ``target [U]``: ``-log(exp(-T) - exp(-Z) + exp(-G))`` with ``Z`` the row's maximum, written as
    Kool et al. do (appendix B.3) to stay finite."""
    top = perturbed.max(dim=1, keepdim=True).values
    v = target[:, None] - perturbed + _log1mexp((perturbed - top).clamp(max=0.0))
    shifted = target[:, None] - v.clamp(min=0.0) - torch.log1p(torch.exp(-v.abs()))
    return torch.where(torch.isfinite(perturbed), shifted, perturbed)


def _in_parents_rows(parent: torch.Tensor) -> torch.Tensor:
    """A permutation of ``m`` kept children (``parent [m]``, their rows in the last depth) that
    puts each parent's first child in the parent's own row where that row is ``< m``, and the
    other children in the rows left, in their order: new row ``i`` is child ``perm[i]``."""
    m = parent.numel()
    by_parent = torch.argsort(parent, stable=True)
    first = torch.ones(m, dtype=torch.bool, device=parent.device)
    first[1:] = parent[by_parent[1:]] != parent[by_parent[:-1]]
    stays = torch.zeros_like(first)
    stays[by_parent] = first
    stays &= parent < m
    row = torch.empty_like(parent)
    row[stays] = parent[stays]
    free = torch.ones_like(first)
    free[parent[stays]] = False
    row[~stays] = free.nonzero()[:, 0]
    perm = torch.empty_like(parent)
    perm[row] = torch.arange(m, device=parent.device)
    return perm


def inclusion_probability(log_prob: torch.Tensor, threshold: float) -> torch.Tensor:
    """``q(x) = 1 - exp(-exp(log p(x) - kappa))`` (float64): the probability that ``x`` beats the
    threshold ``kappa``; 1 for ``kappa = -inf``."""
    log_prob = log_prob.to(torch.float64)
    if threshold == -math.inf:
        return torch.ones_like(log_prob)
    return -torch.expm1(-torch.exp(log_prob - threshold))


@torch.no_grad()
def sample_without_replacement(model: AutoregressiveModel, k: int, *, generator: torch.Generator | None = None,
                               max_cache_bytes: int = DEFAULT_MAX_CACHE_BYTES) -> SampleBatch:
    """``k`` distinct configurations of ``model``'s distribution, drawn without replacement (see
    the module's rules); fewer when the valid space holds fewer.

    Args:
        model: satisfies :class:`samplers.protocol.AutoregressiveModel`.
        k: configurations wanted, ``>= 1``.
        generator: random generator on the model's device (``None``: the global one).
        max_cache_bytes: the cache's byte budget; it must hold ``k`` rows.
    """
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if row_budget(model, None, max_cache_bytes) < k:
        raise ValueError(f"max_cache_bytes={max_cache_bytes} holds fewer than k = {k} rows of the cache")
    device = model.device
    decoder = CachedDecoder(model, k)
    prefix = torch.zeros(1, 0, dtype=torch.long, device=device)
    log_prob = torch.zeros(1, dtype=torch.float64, device=device)
    # the root's G = log p(root) + Gumbel = a Gumbel: drawn, not fixed (fixing it would condition the
    # process on its maximum and bias kappa, hence q(x); the order of the draws would not change)
    root = torch.rand(1, generator=generator, dtype=torch.float64, device=device)
    gumbel = -torch.log(-torch.log(root.clamp(min=1e-300)))
    decoder.resume(prefix)
    threshold = -math.inf
    n = model.n_orbitals
    for depth in range(n):
        probs = decoder.next_probs(prefix).to(torch.float64)
        child_log_prob = log_prob[:, None] + probs.log()
        uniform = torch.rand(probs.shape, generator=generator, dtype=torch.float64, device=device)
        noise = -torch.log(-torch.log(uniform.clamp(min=1e-300)))
        perturbed = torch.where(probs > 0, child_log_prob + noise, torch.full_like(probs, -math.inf))
        shifted = _conditioned(gumbel, perturbed).flatten()
        n_valid = int(torch.isfinite(shifted).sum())
        order = torch.argsort(shifted, descending=True)
        taken = order[: min(k, n_valid)]
        if n_valid > k:   # the largest G discarded: a subtree's G is its best leaf's, so the (k+1)-th leaf's
            threshold = max(threshold, float(shifted[order[k]]))
        taken = taken[_in_parents_rows(taken // probs.shape[1])]
        parent, token = taken // probs.shape[1], taken % probs.shape[1]
        prefix = torch.cat((prefix[parent], token[:, None]), dim=1)
        log_prob = child_log_prob.flatten()[taken]
        gumbel = shifted[taken]
        if depth < n - 1:
            decoder.reorder(parent, keep=None)
    counts = torch.ones(prefix.shape[0], dtype=torch.int64, device=device)
    stats = {"threshold": threshold, "inclusion": inclusion_probability(log_prob, threshold),
             "perturbed": gumbel, "peak_rows": prefix.shape[0]}
    return SampleBatch(tokens=prefix, counts=counts, log_prob=log_prob, n_samples=int(prefix.shape[0]), stats=stats)
