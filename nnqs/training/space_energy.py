"""The network's energy on a fixed determinant space, minimised exactly.

On a set ``S`` of unique determinants the network's amplitudes ``psi(x)``, ``x in S``, have the
Rayleigh quotient

    E_S = sum_{x,y in S} psi(x)^* H_xy psi(y) / sum_{x in S} |psi(x)|^2,

the peer's "sample-space energy" with the samples replaced by a known space (a selected-CI
pool). It is variational on ``S``, needs no sampling and no statistics, and its gradient is the
VMC gradient with the local energies ``E_S(x) = (H_S psi)(x) / psi(x)`` and the weights
``|psi(x)|^2`` renormalised over ``S``:

    dE_S = 2 Re sum_x w_x (E_S(x) - E_S)^* d log psi(x)

(:func:`nnqs.training.estimators.vmc_loss`).

``E_S`` is not the network's energy: the network is normalised over the whole space, and what it
puts outside ``S`` is invisible to ``E_S`` however much energy it costs there, so lowering ``E_S``
can raise the whole-space energy. With ``draw`` (the network's unique samples), ``S`` is joined
every ``resample_every`` steps by the drawn determinants it lacks, so that the part of that weight
the draws reach enters the quotient. A diagnostic and study tool (``experiments/studies/space_energy*.py``);
no run minimises it.

Rules: ``H_S`` is built once per set (:func:`hamiltonians.exact.hamiltonian_matrix`, connections leaving
``S`` dropped) and reused every step; a step is one pass without gradients over ``S``, one sparse
product, and one pass with gradients in chunks of ``chunk`` rows (the activations of one chunk
held at a time); Adam, the learning rate decaying on a cosine to ``final_lr_ratio`` of itself.
The network ends with the parameters of its lowest ``E_S`` (steps are deterministic, but Adam
can overshoot). :func:`space_energy_reference` is the slow reference: the Rayleigh quotient on a
dense matrix, differentiated by autograd.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from hamiltonians.exact import hamiltonian_matrix
from hamiltonians.sci.state import merge
from nnqs.training.estimators import vmc_loss
from nnqs.wavefunction.tokens import occupations_to_tokens

__all__ = ["SPACE_CHUNK", "SpaceEnergyResult", "minimise_space_energy", "space_energy", "space_energy_reference"]

log = logging.getLogger(__name__)

#: Rows per pass with gradients (the activations of one such chunk are held at a time).
SPACE_CHUNK = 2048
#: The minimisation logs its progress every this many steps.
PROGRESS_EVERY = 25


@dataclass(frozen=True)
class SpaceEnergyResult:
    """``energy_before`` / ``energy``: ``E_S`` (Ha) before and after (the best reached);
    ``weight_in_space``: ``sum_{x in S} |psi(x)|^2`` after (the network is normalised over the
    whole space: ``1 -`` it is what the network puts outside ``S``); ``determinants``: ``|S|``;
    ``steps`` done; ``seconds``; ``joined``: determinants the network's draws added to ``S``
    (the last set: ``determinants`` includes them)."""

    energy_before: float
    energy: float
    weight_in_space: float
    determinants: int
    steps: int
    seconds: float
    joined: int = 0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _amplitudes(model, tokens: torch.Tensor, chunk: int) -> tuple[np.ndarray, float]:
    """``psi / max|psi|`` complex128 ``[D]`` on ``tokens`` and ``sum |psi|^2`` (unscaled)."""
    log_psi = model.log_psi_no_grad(tokens, chunk=chunk).to(torch.complex128)
    top = log_psi.real.max()
    psi = torch.exp(log_psi - top).cpu().numpy()
    return psi, float(torch.exp(2 * log_psi.real).sum())


def _energy_and_local(matrix, psi: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """``(E_S, E_S(x) [D], w [D])`` for amplitudes ``psi`` (``H`` real: real and imaginary parts
    apart)."""
    h_psi = matrix @ psi.real + 1j * (matrix @ psi.imag)
    w = np.abs(psi) ** 2
    w /= w.sum()
    local = h_psi / np.where(psi == 0, 1.0, psi)
    return float((w * local).sum().real), local, w


def space_energy(model, H, dets: torch.Tensor, *, chunk: int = SPACE_CHUNK) -> float:
    """``E_S`` (Ha) of ``model`` on unique determinants ``dets`` uint8 ``[D, 2N]``."""
    matrix, dets = hamiltonian_matrix(H, dets)
    psi, _ = _amplitudes(model, occupations_to_tokens(dets.long()), chunk)
    return _energy_and_local(matrix, psi)[0]


def minimise_space_energy(model, H, dets: torch.Tensor, *, steps: int, lr: float = 1e-3, final_lr_ratio: float = 0.1,
                          chunk: int = SPACE_CHUNK, callback=None, draw=None,
                          resample_every: int = 25) -> SpaceEnergyResult:
    """Adam on ``E_S`` (the module's rules) for ``steps`` steps over the unique determinants
    ``dets`` uint8 ``[D, 2N]`` in the network's orbital order; every parameter of ``model`` moves
    (amplitudes and phases); ``callback(step, E_S)`` sees each step's energy before its update
    (and the last). ``draw()``: the network's unique samples, uint8 ``[M, 2N]``, joined to the
    space before the first step and every ``resample_every`` steps (``None``: ``S`` stays
    ``dets``). The best parameters are those of the lowest ``E_S`` on the latest set. Returns the
    :class:`SpaceEnergyResult`."""
    began = time.perf_counter()
    base = dets.to(torch.uint8).cpu()
    params = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.Adam(params, lr=lr)
    best_state, best, first = None, math.inf, math.nan
    matrix = tokens = None
    done = joined = 0
    for step in range(steps + 1):
        if tokens is None or (draw is not None and step % resample_every == 0 and step < steps):
            space, joined = merge(H, base, draw()) if draw is not None else (base, 0)
            matrix, space = hamiltonian_matrix(H, space)
            tokens = occupations_to_tokens(space.long()).to(model.device)
            best = math.inf   # a new set: its own quotient
        psi, _ = _amplitudes(model, tokens, chunk)
        energy, local, w = _energy_and_local(matrix, psi)
        if step == 0:
            first = energy
        if callback is not None:
            callback(step, energy)
        if energy < best:
            best, best_state = energy, copy.deepcopy(model.state_dict())
        if step % PROGRESS_EVERY == 0 or step == steps:
            log.info("space energy step %d/%d: E_S = %.8f over %d determinants (%d drawn)", step, steps, energy,
                     len(w), joined)
        if step == steps:
            break
        for group in optimiser.param_groups:   # cosine from lr to lr * final_lr_ratio
            group["lr"] = lr * (final_lr_ratio + (1 - final_lr_ratio) * 0.5 * (1 + math.cos(math.pi * step / steps)))
        optimiser.zero_grad(set_to_none=True)
        local_t, w_t = torch.from_numpy(local).to(model.device), torch.from_numpy(w).to(model.device)
        for rows in torch.arange(tokens.shape[0], device=model.device).split(chunk):
            vmc_loss(model.log_psi(tokens[rows], validate=False), local_t[rows], w_t[rows], energy).backward()
        optimiser.step()
        done += 1
    if best_state is not None:
        model.load_state_dict(best_state)
    assert tokens is not None
    _, weight = _amplitudes(model, tokens, chunk)
    result = SpaceEnergyResult(first, best, weight, int(tokens.shape[0]), done, time.perf_counter() - began, joined)
    log.info("space energy: %.8f -> %.8f Ha over %d determinants (%d drawn) in %d steps (%.0f s); weight there %.6f",
             first, best, result.determinants, joined, done, result.seconds, weight)
    return result


def space_energy_reference(model, H, dets: torch.Tensor) -> torch.Tensor:
    """The slow reference: ``E_S`` as a differentiable scalar (autograd through the Rayleigh
    quotient on the dense ``H_S``; small spaces only)."""
    matrix, dets = hamiltonian_matrix(H, dets)
    dense = torch.from_numpy(matrix.toarray()).to(torch.complex128)
    psi = torch.exp(model.log_psi(occupations_to_tokens(dets.long())).to(torch.complex128))
    return ((psi.conj() @ (dense @ psi)) / (psi.conj() @ psi)).real
