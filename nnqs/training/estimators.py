"""VMC estimators: sample weights, local energies, the energy and its error, the loss.

From BAS: unique ``x_u`` with weights ``w_u``; ``E = sum_u w_u E_loc(x_u)``; the loss's gradient
is ``2 Re sum_u w_u (E_loc(x_u) - E)^* grad log psi(x_u)`` (DESIGN §6).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from hamiltonians import MolecularHamiltonian, enumerate_determinants, local_energy
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


def sample_weights(batch: SampleBatch, kind: str = "counts") -> torch.Tensor:
    """float64 ``[U]`` weights summing to 1: ``c_u / n_samples`` or renormalised ``|psi|^2``."""
    if kind == "counts":
        return batch.weights
    if kind == "psi2":
        return torch.softmax(batch.log_prob.to(torch.float64), dim=0)
    raise ValueError(f"unknown weights {kind!r}")


def estimate_energy(e_loc: torch.Tensor, weights: torch.Tensor, n_samples: int) -> EnergyEstimate:
    """Weighted mean and variance of complex local energies ``[U]``."""
    energy = (weights * e_loc).sum()
    variance = float((weights * (e_loc - energy).abs() ** 2).sum())
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


def local_energies(model, H: MolecularHamiltonian, tokens: torch.Tensor, log_psi: torch.Tensor, mode: str) -> torch.Tensor:
    """complex128 ``E_loc`` ``[U]`` of the sampled tokens (``log_psi`` of them given, detached)."""
    occ = tokens_to_occupations(tokens).to(torch.uint8)
    result = local_energy(H, occ, occupation_log_psi(model), mode=mode,
                          log_psi_x=log_psi.detach().to(torch.complex128))
    return result.e_loc.to(torch.complex128)


@torch.no_grad()
def exact_variational_energy(model: TransformerWavefunction, H: MolecularHamiltonian) -> float:
    """``<psi|H|psi>`` summed over the whole valid space (``p`` is normalised exactly)."""
    occ = enumerate_determinants(H.n_orbitals, H.n_alpha, H.n_beta)
    tokens = occupations_to_tokens(occ.long()).to(model.device)
    log_psi = model.log_psi(tokens)
    e_loc = local_energies(model, H, tokens, log_psi, "exact")
    weights = torch.softmax(2 * log_psi.real.to(torch.float64), dim=0)  # |psi|^2, normalised
    return estimate_energy(e_loc, weights, 1).energy
