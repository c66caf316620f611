"""A VMC step's sample augmented by the configurations its draw misses and the energy needs
(docs/design.md §6, ``[sampler] augment``).

With sampled local energies a step's energy and gradient see only the drawn configurations:
a determinant the network gives too little weight to is never drawn, so no gradient ever
raises it, and the step's energy stays at the lowest eigenvalue of ``H`` on the draws however
well the network fits them. The augmentation adds, to each step's draw ``S``, the ``m``
configurations ``a`` outside ``S`` with the largest Epstein–Nesbet second-order energies

    e_a = |<a|H|psi_S>|^2 / (H_aa - E),   psi_S = sum_{x in S} psi(x) |x>,

with the network's own amplitudes (complex: real and imaginary parts summed apart), ``<a|H|psi_S>``
summed over the ``parents`` largest ``|psi(x)|`` of ``S`` (:func:`hamiltonians.sci.connections.outside_sums`),
and ``E`` the last step's energy (the lowest diagonal element of ``S`` at the first step;
gaps floored at 1e-6 Ha). The added rows carry the network's ``log p`` (one full pass), counts
0 and inclusion probability 1 (they are included for sure): with ``|psi|^2`` weights over
``S + A`` the step's energy is the network's energy projected on ``S + A``, variational, and
its gradient reaches every added amplitude.
"""

from __future__ import annotations

import math

import torch

from hamiltonians.protocol import Hamiltonian
from nnqs.wavefunction.tokens import occupations_to_tokens, tokens_to_occupations
from samplers import SampleBatch

#: The largest ``|psi(x)|`` of a draw whose connections the second-order energies sum over.
PARENTS = 256


def pt2_partners(H: Hamiltonian, tokens: torch.Tensor, log_psi: torch.Tensor, n_new: int, *,
                 energy: float | None = None, parents: int = PARENTS) -> torch.Tensor:
    """The ``n_new`` configurations outside ``tokens`` ``[U, N]`` with the largest
    ``|<a|H|psi_S>|^2 / (H_aa - energy)`` (module docstring; :func:`hamiltonians.sci.connections.largest_pt2`),
    as tokens ``[<= n_new, N]`` in decreasing order; ``log_psi`` ``[U]`` complex, the amplitudes
    on ``tokens`` (any common factor)."""
    from hamiltonians.sci.connections import largest_pt2   # the compiled kernel: imported when first used

    if n_new <= 0 or tokens.shape[0] == 0:
        return tokens[:0]
    occ = tokens_to_occupations(tokens.cpu()).to(torch.uint8)
    log_psi = log_psi.detach().cpu().to(torch.complex128)
    amplitude = torch.exp(log_psi - log_psi.real.max())
    if energy is None or not math.isfinite(energy):
        energy = float(H.diagonal(occ).double().min())
    added = largest_pt2(H, occ, torch.stack((amplitude.real, amplitude.imag), dim=1), energy, n_new, parents=parents)
    return occupations_to_tokens(added.long()).to(tokens.device, tokens.dtype)


def augment(model, H: Hamiltonian, batch: SampleBatch, log_psi: torch.Tensor, n_new: int, *,
            energy: float | None = None, parents: int = PARENTS) -> SampleBatch:
    """``batch`` with :func:`pt2_partners` appended: their ``log p`` from a full pass of
    ``model`` (no graph), counts 0, inclusion 1; ``stats["augmented"]`` their number."""
    added = pt2_partners(H, batch.tokens, log_psi, n_new, energy=energy, parents=parents)
    with torch.no_grad():
        log_prob = model.log_prob(added).to(batch.log_prob.dtype).to(batch.log_prob.device)
    stats = dict(batch.stats, augmented=int(added.shape[0]))
    if "inclusion" in stats:
        stats["inclusion"] = torch.cat((stats["inclusion"], torch.ones_like(log_prob, dtype=stats["inclusion"].dtype)))
    return SampleBatch(tokens=torch.cat((batch.tokens, added.to(batch.tokens.dtype))),
                       counts=torch.cat((batch.counts, torch.zeros(added.shape[0], dtype=batch.counts.dtype,
                                                                   device=batch.counts.device))),
                       log_prob=torch.cat((batch.log_prob, log_prob)), n_samples=batch.n_samples, stats=stats)
