"""Amplitudes of configurations that branch from sampled ones, decoded from the KV cache.

A connected configuration ``x'`` (a single or double excitation of a sample ``x``) agrees with
``x`` on every position before its first changed orbital ``f``. So

    log p(x') = sum_{i<f} log p(x_i | x_<i)  +  log p(x'_f | x_<f)  +  sum_{i>f} log p(x'_i | x'_<i)

where the first two terms are read off ``x``'s conditionals (position ``f`` sees the same
prefix; only the chosen token differs), and the last sum needs the keys/values of positions
``0..f``, whose inputs (BOS, ``x_0 .. x_{f-1}``) are ``x``'s. One full pass over the samples
(:func:`prefix_state`) writes every layer's keys/values; :func:`branch_log_psi` copies the rows
and positions each ``x'`` needs (:meth:`KVCache.fork`) and computes only positions ``f+1..N-1``.
The phase MLP sees the whole ``x'``, as in :meth:`TransformerWavefunction.log_psi`.

The slow, obviously correct reference is ``model.log_psi(x')``; tests compare the two in
float64 to 1e-12. The saving grows with ``f``: an orbital order that puts the orbitals an
excitation changes late in the sequence saves most.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from nnqs.wavefunction.cache import KVCache
from nnqs.wavefunction.model import TransformerWavefunction
from nnqs.wavefunction.tokens import token_alpha, token_beta


@dataclass
class PrefixState:
    """What one full pass over samples ``x`` leaves for their branches.

    Attributes:
        tokens: LongTensor ``[B, N]``, the samples.
        log_conditionals: ``[B, N, 4]``, ``log p(t_i = k | x_<i)``.
        cache: keys/values of all ``N`` positions of every sample (position ``N``).
    """

    tokens: torch.Tensor
    log_conditionals: torch.Tensor
    cache: KVCache

    @property
    def prefix_log_prob(self) -> torch.Tensor:
        """``[B, N + 1]``: column ``f`` is ``sum_{i<f} log p(x_i | x_<i)``."""
        chosen = self.log_conditionals.gather(-1, self.tokens.unsqueeze(-1)).squeeze(-1)
        return torch.cat((torch.zeros_like(chosen[:, :1]), chosen.cumsum(dim=1)), dim=1)


@torch.no_grad()
def prefix_state(model: TransformerWavefunction, tokens: torch.Tensor) -> PrefixState:
    """One full pass over ``tokens`` ``[B, N]`` that keeps every layer's keys/values.

    Memory: ``2 * B * N * L * H_kv * d_head`` elements for the cache (its ``nbytes``).
    """
    tokens = tokens.to(device=model.device, dtype=torch.long)
    cache = model.init_cache(tokens.shape[0])
    log_cond = model.log_conditionals(tokens, cache=cache)
    return PrefixState(tokens, log_cond, cache)


def first_difference(x: torch.Tensor, xp: torch.Tensor) -> torch.Tensor:
    """LongTensor ``[M]``: the first position where ``xp`` differs from ``x`` (``N`` if nowhere)."""
    differs = xp != x
    n = x.shape[1]
    return torch.where(differs.any(dim=1), differs.to(torch.uint8).argmax(dim=1), torch.full_like(differs[:, 0], n, dtype=torch.long))


@torch.no_grad()
def branch_log_psi(model: TransformerWavefunction, state: PrefixState, xp: torch.Tensor,
                   parent: torch.Tensor) -> torch.Tensor:
    """``log psi(x')`` (complex ``[M]``) of configurations ``xp`` ``[M, N]``, where ``x' = xp[j]``
    shares a prefix with the sample ``state.tokens[parent[j]]`` (any sample will do; the longer
    the shared prefix, the less is computed).

    Equal to ``model.log_psi(xp)`` (up to round-off); ``xp`` need not be valid (an invalid one
    gets ``log p = -inf``, as from the full pass).
    """
    xp = xp.to(device=model.device, dtype=torch.long)
    parent = parent.to(device=model.device, dtype=torch.long)
    n = model.n_orbitals
    first = first_difference(state.tokens[parent], xp)
    log_p = state.prefix_log_prob[parent, first]  # sum over positions < f
    changed = first < n
    rows = changed.nonzero()[:, 0]
    f_rows = first[rows]
    log_p[rows] += state.log_conditionals[parent[rows], f_rows, xp[rows, f_rows]]  # position f
    tail = rows[f_rows < n - 1]
    if tail.numel():
        log_p[tail] += _tail_log_prob(model, state, xp[tail], parent[tail], first[tail])
    return torch.complex(0.5 * log_p, model.phase(xp, validate=False))


def _tail_log_prob(model: TransformerWavefunction, state: PrefixState, xp: torch.Tensor,
                   parent: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
    """``sum_{i>f} log p(x'_i | x'_<i)`` ``[M]`` for rows with ``f < N - 1``, one group per ``f``:
    the group's cache is forked from the parents' at position ``f + 1`` and the pass covers
    positions ``f+1..N-1`` only."""
    out = torch.empty(xp.shape[0], dtype=state.log_conditionals.dtype, device=xp.device)
    for f in first.unique().tolist():
        group = (first == f).nonzero()[:, 0]
        tokens = xp[group]
        cache = state.cache.fork(parent[group], f + 1)
        fed = tokens[:, :f]  # inputs of positions 1..f: the electrons the cache has seen
        cache.add_electrons(token_alpha(fed).sum(dim=1), token_beta(fed).sum(dim=1))
        log_cond = model.log_conditionals(tokens, cache=cache, validate=False)  # positions f+1..N-1
        chosen = log_cond.gather(-1, tokens[:, f + 1:].unsqueeze(-1)).squeeze(-1)
        out[group] = chosen.sum(dim=1)
    return out
