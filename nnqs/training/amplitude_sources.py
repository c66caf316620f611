"""The amplitude sources of a network's local energies, and the processes' share of them.

A local energy (:func:`hamiltonians.local_energy`) asks one
:data:`hamiltonians.amplitudes.AmplitudeSource` for the amplitudes of connected ``x'`` outside
the samples. A network offers two: :func:`full_pass_source` (one full pass per ``x'``, in
chunks) and :func:`kv_cache_source` (each ``x'`` decoded from its parent sample's KV cache,
:mod:`nnqs.wavefunction.branching`); both give the same numbers. With several processes the
other ranks' samples are gathered into a table that counts as sampled
(:func:`other_ranks_samples`), and the outside ``x'`` of every rank are listed, merged, split,
evaluated once each and gathered (:func:`shared_outside_amplitudes`): the local energies are
then those one process would compute for the union of the samples. The collectives themselves
are :class:`nnqs.parallel.Communicator`'s.
"""

from __future__ import annotations

import time

import torch

from hamiltonians import MolecularHamiltonian
from hamiltonians.amplitudes import AmplitudeSource, AmplitudeTable, evaluate_in_chunks, from_parents, full_pass
from hamiltonians.determinants import n_words, unique_keys, unpack_keys
from hamiltonians.local_energy import DEFAULT_EPS
from nnqs.parallel.comm import LOCAL, Communicator
from nnqs.wavefunction.branching import PrefixState, branch_log_psi, prefix_state
from nnqs.wavefunction.model import TransformerWavefunction
from nnqs.wavefunction.tokens import occupations_to_tokens

__all__ = ["occupation_log_psi", "full_pass_source", "branch_log_psi_fn", "kv_cache_source", "other_ranks_samples",
           "evaluate_in_slices", "outside_keys", "shared_outside_amplitudes"]


def occupation_log_psi(model: TransformerWavefunction):
    """``occ [M, 2N] -> complex128 log psi [M]``, the callback the local-energy kernel needs."""

    def fn(occ: torch.Tensor) -> torch.Tensor:
        return model.log_psi(occupations_to_tokens(occ).to(model.device)).to(torch.complex128)

    return fn


def branch_log_psi_fn(model: TransformerWavefunction, tokens: torch.Tensor):
    """``(occ' [M, 2N], parent [M]) -> complex128 log psi [M]`` decoding each ``x'`` from the KV
    cache of its parent sample (``tokens[parent]``), from its first changed orbital on; one full
    pass over ``tokens`` fills the cache (see :mod:`nnqs.wavefunction.branching`), at the first
    call: when every ``x'`` is among the samples, nothing is computed."""
    state: list[PrefixState] = []

    def fn(occ: torch.Tensor, parent: torch.Tensor) -> torch.Tensor:
        if not state:
            state.append(prefix_state(model, tokens))
        xp = occupations_to_tokens(occ).to(model.device)
        return branch_log_psi(model, state[0], xp, parent.to(model.device)).to(torch.complex128)

    return fn


def full_pass_source(model: TransformerWavefunction) -> AmplitudeSource:
    """The network's full pass per ``x'`` (:func:`occupation_log_psi`), in chunks."""
    return full_pass(occupation_log_psi(model))


def kv_cache_source(model: TransformerWavefunction, tokens: torch.Tensor) -> AmplitudeSource:
    """Each ``x'`` decoded from the KV cache of its parent sample (:func:`branch_log_psi_fn`), in chunks."""
    return from_parents(branch_log_psi_fn(model, tokens))


def other_ranks_samples(occ: torch.Tensor, log_psi: torch.Tensor, comm: Communicator = LOCAL) -> AmplitudeTable:
    """Every other rank's samples ``[C, 2N]`` with their ``log psi``, in rank order (empty for one process)."""
    if comm.world_size == 1:
        return AmplitudeTable(occ[:0], log_psi[:0])
    others = [r for r in range(comm.world_size) if r != comm.rank]
    all_occ, all_log_psi = comm.all_gather(occ), comm.all_gather(log_psi)
    return AmplitudeTable(torch.cat([all_occ[r] for r in others]), torch.cat([all_log_psi[r] for r in others]))


def evaluate_in_slices(model, occ: torch.Tensor, comm: Communicator = LOCAL) -> tuple[torch.Tensor, int, float]:
    """complex128 ``log psi`` ``[M]`` of ``occ`` ``[M, 2N]`` (the same on every rank), no gradients:
    rank ``r`` evaluates its slice (:meth:`Communicator.my_slice`) in chunks and the slices are gathered.

    Returns:
        ``(log psi [M], evaluated here, seconds evaluating)``.
    """
    part = occ[comm.my_slice(occ.shape[0])]
    start = time.perf_counter()
    mine = evaluate_in_chunks(occupation_log_psi(model), part).to(device=occ.device, dtype=torch.complex128)
    seconds = time.perf_counter() - start
    every = torch.cat(comm.all_gather(mine)) if comm.world_size > 1 else mine
    return every, int(part.shape[0]), seconds


def outside_keys(H: MolecularHamiltonian, occ: torch.Tensor, known: AmplitudeTable, mode: str,
                 threshold: float) -> torch.Tensor:
    """Sorted unique packed keys ``[M, W]`` of the connected ``x'`` of ``occ`` ``[B, 2N]`` that
    the local energy in ``mode`` needs and that are neither rows of ``occ`` nor of ``known``."""
    cut = 0.0 if mode == "exact" else threshold
    table = torch.cat((occ, known.occ.to(occ.device, occ.dtype)))
    found = [torch.zeros(0, n_words(H.n_spin_orbitals), dtype=torch.int64, device=H.device)]
    for keys, _, _, pos, _ in H.screened_connections(table, threshold=cut, eps=DEFAULT_EPS, expand=occ.shape[0]):
        found.append(unique_keys(keys[pos < 0])[0])
    return unique_keys(torch.cat(found))[0]


def shared_outside_amplitudes(model, H: MolecularHamiltonian, occ: torch.Tensor, known: AmplitudeTable, mode: str,
                              threshold: float, comm: Communicator) -> tuple[AmplitudeTable, int, float]:
    """The amplitudes of every rank's connected ``x'`` outside the samples, each computed once.

    Each rank lists its own rows' outside ``x'`` (:func:`outside_keys`); the lists are
    gathered and merged; each rank evaluates its slice of the union
    (:func:`evaluate_in_slices`) and the slices are gathered. An ``x'`` connected to samples of
    several ranks is evaluated once instead of once per rank. The price is a second pass of the
    connection kernel over the rank's rows (cheap next to the amplitudes).

    Returns:
        ``(table of the union, evaluated here, seconds evaluating)``.
    """
    mine = outside_keys(H, occ, known, mode, threshold)
    union = unique_keys(torch.cat(comm.all_gather(mine)))[0]
    xp = unpack_keys(union, H.n_spin_orbitals, dtype=occ.dtype).to(occ.device)
    lp_all, evaluated, seconds = evaluate_in_slices(model, xp, comm)
    return AmplitudeTable.from_keys(union, lp_all.to(H.device), H.n_spin_orbitals, occ=xp), evaluated, seconds
