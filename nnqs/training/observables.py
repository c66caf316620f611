"""Observables of a trained network beyond its energy: RDMs, natural occupations, ``<S^2>`` and
any linear functional of the 1-RDM (a dipole moment), with standard errors.

The RDMs come from the local estimators of :mod:`hamiltonians.rdm` over fresh samples
(``n_samples`` draws, count weights) or over the whole space (``n_samples=None``: every valid
configuration with its exact ``|psi|^2``, no statistical error). Their orbital order is the
Hamiltonian's; :meth:`hamiltonians.rdm.RDMs.reordered` maps them back to a molecule's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from hamiltonians import MolecularHamiltonian
from hamiltonians.local_energy import evaluate_in_chunks
from hamiltonians.rdm import (
    RDMs,
    functional_from_moments,
    rdm_moments,
    rdms_from_moments,
    spin_square_coefficients,
    unseen_mass,
)
from nnqs.training.amplitude_sources import occupation_log_psi
from nnqs.wavefunction.tokens import tokens_to_occupations
from samplers import bas
from samplers.exact import enumerate_support

__all__ = ["Observables", "estimate_observables", "EXACT_MAX_CONFIGURATIONS"]

#: ``n_samples=None`` (an exact enumeration) is refused past this many configurations.
EXACT_MAX_CONFIGURATIONS = 2_000_000


@dataclass
class Observables:
    """What :func:`estimate_observables` measured.

    Attributes:
        rdms: :class:`hamiltonians.rdm.RDMs` with standard errors (none when exact) and the
            probability no draw reached (``rdms.unseen_mass``, Good-Turing's estimate).
        energy, energy_stderr: ``E = h1 . dm1 + 1/2 eri . dm2 + constant`` summed per sample
            with the plain estimator (the mean local energy); over an exact enumeration it equals
            ``rdms.energy(...)``, from samples the balanced elements give another estimate.
            ``spin_square`` alike.
        spin_square, spin_square_stderr: ``<S^2>``.
        natural_occupations: eigenvalues of ``dm1``, descending.
        functionals: ``name -> (value, stderr)`` of the extra linear functionals asked for.
        mode, n_samples (``None``: exact enumeration), n_unique, seconds.
    """

    rdms: RDMs
    energy: float
    energy_stderr: float
    spin_square: float
    spin_square_stderr: float
    natural_occupations: np.ndarray
    mode: str
    n_samples: int | None
    n_unique: int
    seconds: float
    functionals: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON-ready summary (no matrices but the natural occupations)."""
        return {"energy": self.energy, "energy_stderr": self.energy_stderr, "spin_square": self.spin_square,
                "spin_square_stderr": self.spin_square_stderr,
                "natural_occupations": [float(x) for x in self.natural_occupations],
                "functionals": {k: {"value": v, "stderr": e} for k, (v, e) in self.functionals.items()},
                "mode": self.mode, "n_samples": self.n_samples, "n_unique": self.n_unique,
                "unseen_mass": self.rdms.unseen_mass, "seconds": self.seconds}


def _energy_coefficients(H: MolecularHamiltonian) -> dict:
    """``E - constant`` as a linear functional of the spin-resolved RDMs (see :mod:`hamiltonians.rdm`)."""
    h1, eri = H.h1.double().cpu().numpy(), H.eri.double().cpu().numpy()
    return {"dm1a": h1.T, "dm1b": h1.T, "dm2aa": 0.5 * eri, "dm2bb": 0.5 * eri,
            "dm2ab": 0.5 * (eri + eri.transpose(2, 3, 0, 1))}


@torch.no_grad()
def estimate_observables(model, H: MolecularHamiltonian, *, n_samples: int | None = 100_000, mode: str = "exact",
                         threshold: float = 0.0, seed: int = 0, functionals: dict | None = None,
                         max_unique: int | None = None, estimator: str = "balanced") -> Observables:
    """RDMs, energy, ``<S^2>`` and natural occupations of ``model`` on ``H``.

    Args:
        n_samples: draws from ``|psi|^2`` (BAS, seeded by ``seed``); ``None`` enumerates the
            whole space (at most :data:`EXACT_MAX_CONFIGURATIONS`) with exact weights.
        mode, threshold: which connected ``x'`` enter (:func:`hamiltonians.rdm.rdm_moments`).
        functionals: more linear functionals of the RDMs, ``name -> {rdm name: coefficients}``.
        max_unique: the sampler's frontier budget.
        estimator: the elements' and extra functionals' estimator, ``"balanced"`` (bounded local
            values, honest error bars) or ``"plain"`` (:func:`hamiltonians.rdm.rdm_moments`);
            the energy and ``<S^2>`` are always ``"plain"`` (zero variance at an eigenstate).
    """
    started = time.perf_counter()
    if n_samples is None:
        if H.n_determinants > EXACT_MAX_CONFIGURATIONS:
            raise ValueError(f"an exact enumeration of {H.n_determinants} configurations is too large "
                             f"(at most {EXACT_MAX_CONFIGURATIONS}): give n_samples")
        tokens, _ = enumerate_support(model, max_configurations=EXACT_MAX_CONFIGURATIONS)
        weights, unseen = None, 0.0   # |psi|^2 of the amplitudes below: the state the ratios belong to
    else:
        generator = torch.Generator(device=model.device).manual_seed(seed)
        batch = bas.sample(model, n_samples, generator=generator, max_unique=max_unique)
        tokens, weights = batch.tokens, batch.weights.to(torch.float64)
        unseen = unseen_mass(batch.counts, n_samples)
    occ = tokens_to_occupations(tokens).to(torch.uint8)
    log_psi_fn = occupation_log_psi(model)
    log_psi_x = evaluate_in_chunks(log_psi_fn, occ).to(torch.complex128)
    if weights is None:   # normalised here: float32 conditionals leave the sum off 1 by ~1e-7
        weights = torch.exp(2 * (log_psi_x.real - log_psi_x.real.max()))
        weights = weights / weights.sum()
    wanted = {"energy": _energy_coefficients(H), "spin_square": spin_square_coefficients(H.n_orbitals)}
    wanted.update(functionals or {})
    moments = rdm_moments(H, occ.to(H.device), weights.to(H.device), log_psi_fn, mode=mode,
                          log_psi_x=log_psi_x.to(H.device), threshold=threshold, errors=n_samples is not None,
                          functionals=wanted, estimator=estimator,
                          functional_estimators={"energy": "plain", "spin_square": "plain"})
    rdms = rdms_from_moments(moments, H.n_orbitals, n_samples)
    rdms.unseen_mass, rdms.mode, rdms.estimator = unseen, mode, estimator
    values = {name: functional_from_moments(moments, name, n_samples) for name in wanted}
    energy, energy_err = values.pop("energy")
    s2, s2_err = values.pop("spin_square")
    return Observables(rdms=rdms, energy=energy + H.constant, energy_stderr=energy_err, spin_square=s2,
                       spin_square_stderr=s2_err, natural_occupations=rdms.natural_orbitals()[0], mode=mode,
                       n_samples=n_samples, n_unique=int(occ.shape[0]), seconds=time.perf_counter() - started,
                       functionals=values)

