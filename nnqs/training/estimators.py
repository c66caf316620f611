"""VMC estimators: sample weights, local energies, the energy and its error, the loss.

From BAS: unique ``x_u`` with weights ``w_u``; ``E = sum_u w_u E_loc(x_u)``; the loss's gradient
is ``2 Re sum_u w_u (E_loc(x_u) - E)^* grad log psi(x_u)`` (docs/design.md §6).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from hamiltonians import LocalEnergyResult, MolecularHamiltonian, enumerate_determinants, local_energy
from nnqs.parallel.comm import LOCAL, Communicator
from nnqs.wavefunction.branching import branch_log_psi, prefix_state
from nnqs.wavefunction.model import TransformerWavefunction
from nnqs.wavefunction.tokens import occupations_to_tokens, tokens_to_occupations
from samplers import SampleBatch


@dataclass(frozen=True)
class EnergyEstimate:
    """``energy = sum_u w_u Re E_loc``; ``variance = sum_u w_u |E_loc - E|^2``;
    ``stderr = sqrt(variance / n_samples)`` (i.i.d. draws)."""

    energy: float
    variance: float
    stderr: float


def sample_weights(batch: SampleBatch, kind: str = "counts", comm: Communicator = LOCAL) -> torch.Tensor:
    """float64 ``[U]`` weights summing to 1 over all ranks: ``c_u / n_samples`` or renormalised
    ``|psi|^2`` (normalised over every rank's samples)."""
    if kind == "counts":
        return batch.weights
    if kind == "psi2":
        log_prob = batch.log_prob.to(torch.float64)
        top = log_prob.max() if log_prob.numel() else log_prob.new_tensor(-math.inf)
        top = comm.all_reduce(top, "max")
        unnormalised = (log_prob - top).exp()
        return unnormalised / comm.all_reduce(unnormalised.sum())
    raise ValueError(f"unknown weights {kind!r}")


def estimate_energy(e_loc: torch.Tensor, weights: torch.Tensor, n_samples: int,
                    comm: Communicator = LOCAL) -> EnergyEstimate:
    """Weighted mean and variance of complex local energies ``[U]`` (summed over all ranks)."""
    energy = comm.all_reduce((weights * e_loc).sum())
    variance = float(comm.all_reduce((weights * (e_loc - energy).abs() ** 2).sum()))
    return EnergyEstimate(float(energy.real), variance, math.sqrt(variance / n_samples))


def vmc_loss(log_psi: torch.Tensor, e_loc: torch.Tensor, weights: torch.Tensor, energy: complex) -> torch.Tensor:
    """Surrogate loss with ``grad = 2 Re sum_u w_u (E_loc - E)^* grad log psi``.

    ``Re[(a + ib)^* (l + i phi)] = a l + b phi`` for ``log psi = l + i phi``.
    """
    delta = (e_loc - energy).detach()
    w = weights.to(log_psi.real.dtype)
    real = delta.real.to(w.dtype)
    imag = delta.imag.to(w.dtype)
    return 2.0 * (w * (real * log_psi.real + imag * log_psi.imag)).sum()


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
    state = []

    def fn(occ: torch.Tensor, parent: torch.Tensor) -> torch.Tensor:
        if not state:
            state.append(prefix_state(model, tokens))
        xp = occupations_to_tokens(occ).to(model.device)
        return branch_log_psi(model, state[0], xp, parent.to(model.device)).to(torch.complex128)

    return fn


def evaluate_local_energies(model, H: MolecularHamiltonian, tokens: torch.Tensor, log_psi: torch.Tensor,
                            mode: str, *, threshold: float = 0.0, amplitudes: str = "full",
                            comm: Communicator = LOCAL) -> LocalEnergyResult:
    """``E_loc`` of the sampled tokens ``[U, N]`` (``log_psi`` of them given, detached), with the
    kernel's counts (connections, how many entered, amplitudes evaluated).

    Args:
        mode, threshold: see :func:`hamiltonians.local_energy` (``"exact"``, ``"truncated"``,
            ``"sampled"``).
        amplitudes: how the amplitudes of connected ``x'`` outside the samples are computed:
            ``"cache"`` (decoded from the samples' KV cache, :func:`branch_log_psi_fn`) or
            ``"full"`` (a full pass per ``x'``). Both give the same numbers.
        comm: with several ranks, the other ranks' samples (and their amplitudes) are gathered
            and count as sampled: an ``x'`` among them is looked up, so every mode gives the
            local energies a single process would compute for the union of the samples.
    """
    if amplitudes not in ("cache", "full"):
        raise ValueError(f"amplitudes must be 'cache' or 'full', got {amplitudes!r}")
    occ = tokens_to_occupations(tokens).to(torch.uint8)
    branches = None
    if amplitudes == "cache" and mode != "sampled":
        branches = branch_log_psi_fn(model, tokens)
    log_psi = log_psi.detach().to(torch.complex128)
    lookup = None
    if comm.world_size > 1:
        others = [r for r in range(comm.world_size) if r != comm.rank]
        all_occ, all_log_psi = comm.all_gather(occ), comm.all_gather(log_psi)
        lookup = (torch.cat([all_occ[r] for r in others]), torch.cat([all_log_psi[r] for r in others]))
    result = local_energy(H, occ, occupation_log_psi(model), mode=mode, threshold=threshold,
                          connected_log_psi_fn=branches, log_psi_x=log_psi, lookup=lookup)
    result.e_loc = result.e_loc.to(torch.complex128)
    return result


def local_energies(model, H: MolecularHamiltonian, tokens: torch.Tensor, log_psi: torch.Tensor, mode: str,
                   **options) -> torch.Tensor:
    """complex128 ``E_loc`` ``[U]`` of the sampled tokens (see :func:`evaluate_local_energies`)."""
    return evaluate_local_energies(model, H, tokens, log_psi, mode, **options).e_loc


@torch.no_grad()
def exact_variational_energy(model: TransformerWavefunction, H: MolecularHamiltonian) -> float:
    """``<psi|H|psi>`` summed over the whole valid space (``p`` is normalised exactly)."""
    occ = enumerate_determinants(H.n_orbitals, H.n_alpha, H.n_beta)
    tokens = occupations_to_tokens(occ.long()).to(model.device)
    log_psi = model.log_psi(tokens)
    e_loc = local_energies(model, H, tokens, log_psi, "exact")
    weights = torch.softmax(2 * log_psi.real.to(torch.float64), dim=0)  # |psi|^2, normalised
    return estimate_energy(e_loc, weights, 1).energy
