"""The determinants outside a set ``S`` that a state on ``S`` reaches, summed and ranked.

Rules (docs/design.md §5):

* :func:`outside_sums` is the one place that sums ``sum_i w_i <a|H|x_i>^k`` over parents ``x_i``
  of ``S`` for every ``a`` outside ``S``, through the compiled kernel where it is available
  (:meth:`MolecularHamiltonian.screened_connections`, whose batch is ``S``, so ``batch_pos >= 0``
  marks ``a`` in ``S``) and :class:`hamiltonians.sci.key_sums.KeySums`; contributions to each
  ``a`` are summed over all parents before anything is squared or ranked. With ``n_buckets > 1``
  each pass keeps only the ``a`` whose key hash falls in a range of buckets, which bounds memory.
* :func:`extend_by_connection` holds at most ``max_bytes`` of sums: where the connections could
  exceed it (:func:`connections_per_parent` times ``D``, every connection distinct), a first pass
  over one of :data:`PROBE_BUCKETS` hash buckets counts that bucket's distinct ``a`` (a uniform
  sample of them), and the other buckets follow in as few passes as fit ``max_bytes``, each
  table sized from the count; the ranking is global (each ``a`` lies in one bucket).
* Two rankings use it: :func:`extend_by_connection` by ``|<a|H|psi_S>|`` (the subspace loop's
  and the roots' growth) and :func:`pt2_selection` by ``N_a^2 / (D_a - E)`` (CIPSI); EN-PT2
  (:mod:`hamiltonians.sci.pt2`) sums the same quantities.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import torch

from hamiltonians.determinants import as_occupation, n_words, unpack_keys
from hamiltonians.protocol import Hamiltonian
from hamiltonians.release import release_freed_memory
from hamiltonians.sci.key_sums import KeySums, diagonal_of_keys
from hamiltonians.sci.state import SCIState, require_unique

log = logging.getLogger(__name__)

__all__ = ["outside_sums", "extend_by_connection", "pt2_selection", "largest_pt2", "connections_per_parent",
           "EXTEND_MAX_BYTES"]

#: Default memory for the extension's sums in one pass (bytes).
EXTEND_MAX_BYTES = 2 << 30
#: Hash buckets of the extension's first pass when its sums might not fit (one is summed, to count).
PROBE_BUCKETS = 64
#: Headroom on a bucket range's counted distinct ``a`` when its table is sized.
_SIZE_MARGIN = 1.1


def connections_per_parent(H: Hamiltonian, dets, sample: int = 256) -> float:
    """Mean nonzero singles and doubles of the first ``sample`` rows of ``dets`` (an upper bound
    per parent on the distinct ``a`` the set reaches: every connection distinct)."""
    rows = dets[: min(sample, dets.shape[0])]
    return sum(p[4] for p in H.screened_connections(rows, threshold=math.inf)) / max(1, rows.shape[0])


def outside_sums(H: Hamiltonian, dets, weights, *, parents=None, powers=(1,), into: KeySums | None = None, insert: bool = True,
                 n_buckets: int = 1, bucket: int = 0, bucket_end: int | None = None, capacity: int = 1 << 16,
                 chunk: int | None = None) -> KeySums:
    """Sums over parents of ``weights[i, k] * <a|H|x_i>**powers[k]`` for every ``a`` outside ``S``.

    Args:
        dets: ``S``, unique uint8 ``[D, 2N]`` (the set ``a`` must lie outside of).
        weights: float64 ``[P, K]`` (or ``[P]`` for ``K = 1``), one row per parent.
        parents: int64 ``[P]`` rows of ``dets`` connected (default every row, ``P = D``).
        powers: ``K`` exponents (1 or 2) of the matrix element per column.
        into: add to this :class:`KeySums` (default a new one); ``insert=False`` only updates
            the ``a`` it already holds.
        n_buckets, bucket, bucket_end: keep only the ``a`` of hash buckets ``[bucket, bucket_end)``
            (default ``bucket`` alone; a new table's partition).
        capacity: a new table's distinct ``a`` before it first grows.
    Returns:
        the :class:`KeySums`; ``result()`` gives the keys ``[U, W]`` of the ``a`` and their sums ``[U, K]``.
    """
    occ = as_occupation(dets, H.n_spin_orbitals).cpu()
    weights = np.asarray(torch.as_tensor(weights, dtype=torch.float64).cpu().numpy())
    powers = np.asarray(powers, dtype=np.int64)
    weights = weights.reshape(weights.shape[0], len(powers)) if weights.ndim == 1 or weights.size == 0 else weights
    if weights.shape[1] != powers.shape[0] or not set(powers.tolist()) <= {1, 2}:
        raise ValueError(f"weights [P, {weights.shape[1]}] need that many powers, each 1 or 2, got {powers.tolist()}")
    if parents is not None:
        parents = torch.as_tensor(parents, dtype=torch.int64).cpu()
        occ, expand = torch.cat((occ[parents], occ)), parents.shape[0]
    else:
        expand = occ.shape[0]
    if weights.shape[0] != expand:
        raise ValueError(f"{weights.shape[0]} weight rows for {expand} parents")
    sums = KeySums(len(powers), n_words(H.n_spin_orbitals), n_buckets=n_buckets, bucket=bucket, bucket_end=bucket_end,
                   capacity=capacity) if into is None else into
    if expand == 0:
        return sums
    squared = powers == 2
    for keys, vals, rows, pos, _ in H.screened_connections(occ, threshold=0.0, chunk=chunk, expand=expand):
        out = (pos < 0).numpy()
        v = vals.double().numpy()[out]
        contrib = weights[rows.numpy()[out]] * v[:, None]
        if squared.any():
            contrib[:, squared] *= v[:, None]
        sums.add(keys.numpy()[out], contrib, insert=insert)
    return sums


def extend_by_connection(H: Hamiltonian, dets, coefficients, n_new: int, *, chunk: int | None = None,
                         max_bytes: int = EXTEND_MAX_BYTES) -> torch.Tensor:
    """The ``n_new`` determinants outside ``S`` with the largest ``|<a|H|psi_S>|``,
    ``psi_S = sum_i c_i |x_i>`` over every ``x_i`` of ``dets`` (unique ``[D, 2N]``), uint8
    ``[<= n_new, 2N]`` in decreasing order (fewer if fewer ``a`` are connected), holding at most
    about ``max_bytes`` of sums at a time (hash-bucketed passes, as the module says)."""
    dets = require_unique(H, dets)
    c = torch.as_tensor(coefficients, dtype=torch.float64)
    n_new = max(0, int(n_new))
    bound = connections_per_parent(H, dets) * dets.shape[0]
    n_buckets = 1 if KeySums.bytes_for(int(bound), 1) <= max_bytes else PROBE_BUCKETS
    kept: list[tuple[torch.Tensor, np.ndarray]] = []   # each pass's best n_new keys and |sums|
    peak = 0

    def one_pass(lo: int, hi: int, capacity: int) -> int:
        """Sum buckets ``[lo, hi)``, keep their best ``n_new``; returns their distinct count."""
        nonlocal peak
        sums = outside_sums(H, dets, c, n_buckets=n_buckets, bucket=lo, bucket_end=hi, capacity=capacity, chunk=chunk)
        keys, values = sums.result()
        score = np.abs(values[:, 0])
        top = np.argsort(-score, kind="stable")[:n_new]
        kept.append((keys[torch.from_numpy(top)].clone(), score[top].copy()))
        peak, count = max(peak, sums.peak_bytes), keys.shape[0]
        del sums, keys, values, score
        release_freed_memory()
        return count

    # the one pass, or the probe (bucket 0 of PROBE_BUCKETS), sized at most at its share of the bound
    first = one_pass(0, 1, int(min(1 << 16, bound / n_buckets)) + 16)
    if n_buckets > 1:   # the probe's count sizes the other buckets' passes
        per_bucket = max(1, first)
        width = max(1, int(max_bytes // KeySums.bytes_for(int(_SIZE_MARGIN * per_bucket), 1)))
        for lo in range(1, n_buckets, width):
            hi = min(n_buckets, lo + width)
            one_pass(lo, hi, int(_SIZE_MARGIN * per_bucket * (hi - lo)) + 16)
    keys, scores = torch.cat([k for k, _ in kept]), np.concatenate([v for _, v in kept])
    top = np.argsort(-scores, kind="stable")[:n_new]
    log.debug("extension: %d pass(es) over %d bucket(s), peak %.1f MiB", len(kept), n_buckets, peak / 2**20)
    return unpack_keys(keys[torch.from_numpy(top)], H.n_spin_orbitals)


def pt2_selection(H: Hamiltonian, state: SCIState, n_new: int, *, parents: int = 1024) -> torch.Tensor:
    """The ``n_new`` determinants outside ``state.dets`` with the largest Epstein–Nesbet
    second-order energies ``|<x'|H|psi>|^2 / (H_{x'x'} - E)``, uint8 ``[<= n_new, 2N]``
    (:func:`largest_pt2` of the state)."""
    return largest_pt2(H, state.dets, state.coefficients, state.energy, n_new, parents=parents)


def largest_pt2(H: Hamiltonian, dets, amplitudes: torch.Tensor, energy: float, n_new: int, *,
                parents: int = 1024) -> torch.Tensor:
    """The ``n_new`` determinants outside ``dets`` (unique ``[D, 2N]``) with the largest
    ``|<x'|H|psi>|^2 / (H_{x'x'} - energy)`` (gaps floored at 1e-6), uint8 ``[<= n_new, 2N]``,
    largest first.

    ``amplitudes``: ``psi`` on ``dets``, ``[D]`` real or ``[D, K]`` real columns whose sums'
    squares add (a complex ``psi`` as its real and imaginary parts). ``<x'|H|psi>`` is summed
    over the ``parents`` largest-``|psi|`` determinants only (bounding the work at ``parents``
    times the connections per determinant), by :func:`outside_sums`.
    """
    columns = amplitudes.to(torch.float64).reshape(amplitudes.shape[0], -1)
    top = torch.argsort(columns.square().sum(dim=1), descending=True)[:parents]
    unique, sums = outside_sums(H, dets, columns[top], parents=top, powers=(1,) * columns.shape[1]).result()
    numerator2 = torch.from_numpy(np.square(sums).sum(axis=1))
    gap = (torch.from_numpy(diagonal_of_keys(H, unique.numpy())) - energy).clamp(min=1e-6)   # no unpacking
    keep = torch.argsort(numerator2 / gap, descending=True)[:n_new]
    return unpack_keys(unique[keep], H.n_spin_orbitals)
