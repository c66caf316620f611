"""Determinants: occupation vectors, packed bit keys, enumeration of the valid space.

Conventions (docs/design.md §1): ``N`` spatial orbitals, ``2N`` spin orbitals interleaved as
``p = 2*i + s`` (``s = 0`` alpha, ``s = 1`` beta). A determinant is an occupation vector
``occ[p] in {0, 1}``; a batch is ``occ[B, 2N]`` of any integer or bool dtype.

Packed keys: spin orbital ``p`` is bit ``p % 63`` of word ``p // 63``, so a batch packs into a
LongTensor ``keys[B, W]`` with ``W = ceil(2N / 63)`` words, every word non-negative. For
``2N <= 63`` (every STO-3G molecule, N2 cc-pVDZ with a frozen core) ``W == 1``. Keys order
determinants deterministically (lexicographically over words), and two determinants are equal
iff their keys are.
"""

from __future__ import annotations

import itertools
import math

import torch

BITS_PER_WORD = 63
#: Rows packed or unpacked at once (their int64 bits are the transient: 8 bytes per spin orbital per row).
ROWS_PER_BLOCK = 16384

__all__ = [
    "BITS_PER_WORD",
    "n_words",
    "bit_table",
    "as_occupation",
    "pack_occupations",
    "unpack_keys",
    "unique_keys",
    "lookup_keys",
    "exclusive_cumsum",
    "aufbau_occupation",
    "enumerate_determinants",
    "n_determinants",
]


def n_words(n_spin_orbitals: int) -> int:
    """Number of int64 words ``W`` a packed key of ``n_spin_orbitals`` bits needs."""
    return max(1, (n_spin_orbitals + BITS_PER_WORD - 1) // BITS_PER_WORD)


def bit_table(n_spin_orbitals: int, device=None) -> torch.Tensor:
    """LongTensor ``[2N, W]``: row ``p`` is the packed key of the single bit ``p``."""
    w = n_words(n_spin_orbitals)
    table = torch.zeros(n_spin_orbitals, w, dtype=torch.int64)
    for p in range(n_spin_orbitals):
        table[p, p // BITS_PER_WORD] = 1 << (p % BITS_PER_WORD)
    return table.to(device)


def as_occupation(occ: torch.Tensor, n_spin_orbitals: int) -> torch.Tensor:
    """Validate a batch of occupation vectors and return it as uint8 ``[B, 2N]``.

    Accepts any integer or bool dtype and a single vector ``[2N]`` (returned as ``[1, 2N]``).
    """
    occ = torch.as_tensor(occ)
    if occ.dim() == 1:
        occ = occ.unsqueeze(0)
    if occ.dim() != 2 or occ.shape[1] != n_spin_orbitals:
        raise ValueError(
            f"occupations must have shape [B, {n_spin_orbitals}], got {tuple(occ.shape)}"
        )
    if occ.dtype.is_floating_point or occ.dtype.is_complex:
        raise TypeError(f"occupations must be an integer or bool tensor, got {occ.dtype}")
    return occ.to(torch.uint8)


def pack_occupations(occ: torch.Tensor) -> torch.Tensor:
    """Pack occupations ``[..., 2N]`` (0/1) into keys ``[..., W]`` (int64, see module doc).

    Rows are packed :data:`ROWS_PER_BLOCK` at a time: the bits pass through int64, eight
    times the occupations' bytes, and only one block of them is held."""
    n_so = occ.shape[-1]
    w = n_words(n_so)
    p = torch.arange(n_so, device=occ.device)
    weights = torch.bitwise_left_shift(torch.ones_like(p), p % BITS_PER_WORD)
    word = p // BITS_PER_WORD
    flat = occ.reshape(-1, n_so)
    keys = torch.zeros(flat.shape[0], w, dtype=torch.int64, device=occ.device)
    for s in range(0, flat.shape[0], ROWS_PER_BLOCK):
        bits = flat[s : s + ROWS_PER_BLOCK].to(torch.int64) * weights
        if w == 1:
            keys[s : s + ROWS_PER_BLOCK, 0] = bits.sum(dim=-1)
        else:
            keys[s : s + ROWS_PER_BLOCK].index_add_(-1, word, bits)
    return keys.reshape(*occ.shape[:-1], w)


def unpack_keys(keys: torch.Tensor, n_spin_orbitals: int, dtype=torch.uint8) -> torch.Tensor:
    """Inverse of :func:`pack_occupations`: keys ``[U, W]`` -> occupations ``[U, 2N]``, unpacked
    :data:`ROWS_PER_BLOCK` rows at a time (the shifts pass through int64)."""
    p = torch.arange(n_spin_orbitals, device=keys.device)
    word, shift = p // BITS_PER_WORD, p % BITS_PER_WORD
    out = torch.empty(keys.shape[0], n_spin_orbitals, dtype=dtype, device=keys.device)
    for s in range(0, keys.shape[0], ROWS_PER_BLOCK):
        out[s : s + ROWS_PER_BLOCK] = (torch.bitwise_right_shift(keys[s : s + ROWS_PER_BLOCK, word], shift) & 1).to(dtype)
    return out


def unique_keys(keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sorted unique keys ``[U, W]`` and the inverse map ``[M]`` of keys ``[M, W]``."""
    if keys.shape[1] == 1:
        uniq, inverse = torch.unique(keys[:, 0], sorted=True, return_inverse=True)
        return uniq.unsqueeze(1), inverse
    return torch.unique(keys, dim=0, sorted=True, return_inverse=True)


def lookup_keys(sorted_keys: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
    """Position of each ``query[M, W]`` key in ``sorted_keys[D, W]`` (sorted, unique), or -1."""
    if sorted_keys.shape[0] == 0:
        return torch.full((query.shape[0],), -1, dtype=torch.int64, device=query.device)
    if sorted_keys.shape[1] == 1:
        s, q = sorted_keys[:, 0].contiguous(), query[:, 0].contiguous()
        pos = torch.searchsorted(s, q).clamp_(max=s.shape[0] - 1)
        return torch.where(s[pos] == q, pos, torch.full_like(pos, -1))
    d = sorted_keys.shape[0]
    _, inverse = unique_keys(torch.cat([sorted_keys, query]))
    slot = torch.full((int(inverse.max()) + 1,), -1, dtype=torch.int64, device=query.device)
    slot[inverse[:d]] = torch.arange(d, device=query.device)
    return slot[inverse[d:]]


def exclusive_cumsum(bits: torch.Tensor) -> torch.Tensor:
    """``out[:, p] = sum_{q < p} bits[:, q]`` as int64 ``[B, 2N]`` (Jordan–Wigner parities)."""
    c = torch.cumsum(bits.to(torch.int64), dim=1)
    return c - bits.to(torch.int64)


def aufbau_occupation(n_orbitals: int, n_alpha: int, n_beta: int) -> torch.Tensor:
    """The lowest ``n_alpha`` alpha and ``n_beta`` beta orbitals occupied, uint8 ``[2N]``
    (the Hartree–Fock determinant in energy-ordered orbitals; see :func:`hf_occupation_in_order`)."""
    occ = torch.zeros(2 * n_orbitals, dtype=torch.uint8)
    occ[0 : 2 * n_alpha : 2] = 1
    occ[1 : 2 * n_beta : 2] = 1
    return occ


def occupations_in_order(occ: torch.Tensor, order: list[int]) -> torch.Tensor:
    """Occupations ``[D, 2N]`` over the original orbitals -> over positions, where position ``i``
    holds original spatial orbital ``order[i]`` (spin orbitals ``2i``, ``2i + 1`` follow it)."""
    spatial = torch.as_tensor(list(order), dtype=torch.long, device=occ.device)
    return occ[:, torch.stack((2 * spatial, 2 * spatial + 1), dim=1).reshape(-1)]


def hf_occupation_in_order(order: list[int], n_alpha: int, n_beta: int) -> torch.Tensor:
    """The HF occupation ``[2N]`` (lowest original orbitals occupied) when position ``i`` holds
    original spatial orbital ``order[i]``."""
    return occupations_in_order(aufbau_occupation(len(order), n_alpha, n_beta)[None], order)[0]


def n_determinants(n_orbitals: int, n_alpha: int, n_beta: int) -> int:
    """Size of the valid space, ``C(N, n_alpha) * C(N, n_beta)``."""
    return math.comb(n_orbitals, n_alpha) * math.comb(n_orbitals, n_beta)


def _strings(n_orbitals: int, n_el: int) -> torch.Tensor:
    combos = list(itertools.combinations(range(n_orbitals), n_el))
    out = torch.zeros(len(combos), n_orbitals, dtype=torch.uint8)
    if n_el > 0:
        idx = torch.tensor(combos, dtype=torch.int64)
        out.scatter_(1, idx, 1)
    return out


def enumerate_determinants(
    n_orbitals: int, n_alpha: int, n_beta: int, *, device=None
) -> torch.Tensor:
    """Every determinant with ``n_alpha`` alpha and ``n_beta`` beta electrons.

    Returns uint8 ``[D, 2N]``, ``D = C(N, n_alpha) * C(N, n_beta)``, sorted by packed key
    (so ``pack_occupations(result)`` is strictly increasing and usable with :func:`lookup_keys`).
    """
    if not (0 <= n_alpha <= n_orbitals and 0 <= n_beta <= n_orbitals):
        raise ValueError(
            f"cannot place {n_alpha} alpha and {n_beta} beta electrons in {n_orbitals} orbitals"
        )
    sa, sb = _strings(n_orbitals, n_alpha), _strings(n_orbitals, n_beta)
    da, db = sa.shape[0], sb.shape[0]
    occ = torch.empty(da, db, 2 * n_orbitals, dtype=torch.uint8)
    occ[:, :, 0::2] = sa[:, None, :]
    occ[:, :, 1::2] = sb[None, :, :]
    occ = occ.reshape(da * db, 2 * n_orbitals)
    keys = pack_occupations(occ)
    if keys.shape[1] == 1:
        order = torch.argsort(keys[:, 0])
    else:
        _, inverse = unique_keys(keys)
        order = torch.argsort(inverse)
    return occ[order].to(device)
