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
from nnqs.training.amplitude_sources import (
    full_pass_source,
    kv_cache_source,
    other_ranks_samples,
    shared_outside_amplitudes,
)
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
    """float64 ``[U]`` weights summing to 1 over all ranks: ``c_u / n_samples``, renormalised
    ``|psi|^2``, or renormalised ``p(x) / q(x)`` for a draw without replacement (``q``: its
    ``stats["inclusion"]``); normalised over every rank's samples."""
    if kind == "counts":
        return batch.weights
    if kind == "psi2":
        log_prob = batch.log_prob.to(torch.float64)
        top = log_prob.max() if log_prob.numel() else log_prob.new_tensor(-math.inf)
        top = comm.all_reduce(top, "max")
        unnormalised = (log_prob - top).exp()
        return unnormalised / comm.all_reduce(unnormalised.sum())
    if kind == "priority":   # p(x) / q(x), renormalised (samplers.without_replacement)
        log_w = batch.log_prob.to(torch.float64) - batch.stats["inclusion"].to(batch.log_prob.device).log()
        top = log_w.max() if log_w.numel() else log_w.new_tensor(-math.inf)
        unnormalised = (log_w - comm.all_reduce(top, "max")).exp()
        return unnormalised / comm.all_reduce(unnormalised.sum())
    raise ValueError(f"unknown weights {kind!r}")


def estimate_energy(e_loc: torch.Tensor, weights: torch.Tensor, n_samples: int,
                    comm: Communicator = LOCAL, draw_variance: torch.Tensor | None = None) -> EnergyEstimate:
    """Weighted mean and variance of complex local energies ``[U]`` (summed over all ranks).

    The standard error is ``sqrt(variance / n_samples)``, as if each of the ``n_samples`` draws
    had its own local energy. A semistochastic local energy (``draw_variance``: each unique
    sample's variance over its draws, :attr:`hamiltonians.LocalEnergyResult.draw_variance`) is
    drawn once per unique sample, so its noise is shared by the sample's copies: the error then
    adds ``sum_u (w_u^2 - w_u / n_samples) sigma_u^2`` (the draws' variance of ``sum_u w_u
    E_loc(x_u)``, less what ``variance / n_samples`` already counts of it).
    """
    energy = comm.all_reduce((weights * e_loc).sum())
    variance = float(comm.all_reduce((weights * (e_loc - energy).abs() ** 2).sum()))
    squared_error = variance / n_samples
    if draw_variance is not None:
        w = weights.to(torch.float64)
        shared = comm.all_reduce(((w * w - w / n_samples) * draw_variance.to(w.device)).sum())
        squared_error = max(squared_error + float(shared), 0.0)
    return EnergyEstimate(float(energy.real), variance, math.sqrt(squared_error))


def sample_space_energy(e_loc_sampled: torch.Tensor, batch: SampleBatch, comm: Communicator = LOCAL) -> float:
    """``<P_S psi|H|P_S psi> / <P_S psi|P_S psi>``: the energy of the state projected on the unique
    samples ``S`` of every rank, from the local energies over ``x'`` in ``S`` alone
    (:attr:`hamiltonians.LocalEnergyResult.e_loc_sampled`) with ``|psi|^2`` weights renormalised
    on ``S``. It is the energy of a state, so a variational upper bound on the ground-state
    energy; it is the network's own energy once ``S`` holds the network's whole support (before
    that it can lie above or below it: ``P_S psi`` is another state)."""
    weights = sample_weights(batch, "psi2", comm).to(e_loc_sampled.device)
    return float(comm.all_reduce((weights * e_loc_sampled).sum()).real)


def vmc_loss(log_psi: torch.Tensor, e_loc: torch.Tensor, weights: torch.Tensor, energy: complex) -> torch.Tensor:
    """Surrogate loss with ``grad = 2 Re sum_u w_u (E_loc - E)^* grad log psi``.

    ``Re[(a + ib)^* (l + i phi)] = a l + b phi`` for ``log psi = l + i phi``.
    """
    delta = (e_loc - energy).detach()
    w = weights.to(log_psi.real.dtype)
    real = delta.real.to(w.dtype)
    imag = delta.imag.to(w.dtype)
    return 2.0 * (w * (real * log_psi.real + imag * log_psi.imag)).sum()


def evaluate_local_energies(model, H: MolecularHamiltonian, tokens: torch.Tensor, log_psi: torch.Tensor,
                            mode: str, *, threshold: float = 0.0, amplitudes: str = "full",
                            draws: int = 0, generator: torch.Generator | None = None,
                            comm: Communicator = LOCAL) -> LocalEnergyResult:
    """``E_loc`` of the sampled tokens ``[U, N]`` (``log_psi`` of them given, detached), with the
    kernel's counts (connections, how many entered, amplitudes evaluated).

    Args:
        mode, threshold, draws, generator: see :func:`hamiltonians.local_energy` (``"exact"``,
            ``"truncated"``, ``"sampled"``, ``"semistochastic"``).
        amplitudes: how the amplitudes of connected ``x'`` outside the samples are computed:
            ``"cache"`` (decoded from the samples' KV cache,
            :func:`~nnqs.training.amplitude_sources.kv_cache_source`) or ``"full"`` (a full pass
            per ``x'``). Both give the same numbers.
        comm: with several ranks, the other ranks' samples (and their amplitudes) are gathered
            into an :class:`~hamiltonians.amplitudes.AmplitudeTable` and count as sampled, and
            with ``"full"`` the outside ``x'`` of every rank are evaluated once between them
            (:func:`~nnqs.training.amplitude_sources.shared_outside_amplitudes`): every mode gives the local energies a single
            process would compute for the union of the samples. The semistochastic mode's
            draws are each rank's own (its estimate is unbiased whatever the number of ranks,
            not equal to one process's), so each rank evaluates its own drawn ``x'``.
    """
    if amplitudes not in ("cache", "full"):
        raise ValueError(f"amplitudes must be 'cache' or 'full', got {amplitudes!r}")
    occ = tokens_to_occupations(tokens).to(torch.uint8)
    log_psi = log_psi.detach().to(torch.complex128)
    sampled_elsewhere = other_ranks_samples(occ, log_psi, comm)
    source, shared = full_pass_source(model), None
    if amplitudes == "cache" and mode != "sampled":
        source = kv_cache_source(model, tokens)
    elif comm.world_size > 1 and mode in ("exact", "truncated"):
        shared = shared_outside_amplitudes(model, H, occ, sampled_elsewhere, mode, threshold, comm)
        source = shared[0].source(source)
    result = local_energy(H, occ, mode=mode, threshold=threshold, amplitudes=source, log_psi_x=log_psi,
                          lookup=sampled_elsewhere, draws=draws, generator=generator)
    if shared is not None:  # the kernel's calls were lookups in the shared table; this rank evaluated its slice
        result.n_evaluated, result.amplitude_seconds = shared[1], shared[2]
    result.e_loc = result.e_loc.to(torch.complex128)
    assert result.e_loc_sampled is not None   # local_energy sets it in every mode
    result.e_loc_sampled = result.e_loc_sampled.to(torch.complex128)
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
