"""Mean-field solutions in the Hamiltonian's own orbital basis (PySCF, custom integrals).

The orbitals of an FCIDUMP need not be Hartree–Fock's (localised, from another method, shuffled),
and an SCF over such integrals started from the lowest-index orbitals may converge nowhere, or
to an excited solution. :func:`scf_in_basis` runs PySCF's SCF (RHF for closed shells, ROHF
otherwise: the references CCSD and CCSD(T) build on) with ``h1``/``eri`` as given and the
identity overlap, from several initial guesses, each with a plain DIIS run, then with a level
shift and damping, then second-order (Newton) where it has not converged; a converged solution
is checked for internal instability (``mf.stability()``) and re-run from the rotated orbitals
while it is unstable. The lowest converged energy wins; every attempt is recorded.

Guesses are occupations ``[2N]`` (alpha and beta interleaved), made into diagonal densities:
the lowest-index determinant and the reference determinant found from the integrals
(:func:`hamiltonians.reference_determinant.lowest_determinant`). Its spin-adapted part is what
an R/ROHF can use (a broken-symmetry occupation gives the averaged closed-shell density). The
UHF energy (spin symmetry broken, from the same guesses) is recorded beside it: below the
restricted one it measures how far a single determinant is from the state (stretched bonds).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from hamiltonians.io.pyscf_io import follow_instabilities
from hamiltonians.protocol import Hamiltonian

__all__ = ["SCFResult", "scf_in_basis"]

log = logging.getLogger(__name__)

#: SCF energy convergence (Hartree) and cycles per attempt.
CONV_TOL, MAX_CYCLE = 1e-10, 200


@dataclass
class SCFResult:
    """Outcome of :func:`scf_in_basis`.

    Attributes:
        mf: the lowest converged restricted (RHF/ROHF) PySCF object, or ``None``.
        energy: its ``e_tot`` (``None`` when nothing converged).
        guess, method: the guess and the attempt (``"diis"``, ``"level shift"``, ``"newton"``) it
            came from.
        uhf_energy: the lowest converged UHF energy (``None`` when none converged).
        uhf, uhf_guess: that UHF's PySCF object and the guess it came from.
        attempts: one record per attempt: guess, method, kind, converged, energy, stability rounds.
    """

    mf: Any = None
    energy: float | None = None
    guess: str = ""
    method: str = ""
    uhf_energy: float | None = None
    uhf: Any = None
    uhf_guess: str = ""
    attempts: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"energy": self.energy, "guess": self.guess, "method": self.method, "uhf_energy": self.uhf_energy,
                "attempts": list(self.attempts)}


def _mean_field(H: Hamiltonian, kind: str):
    from pyscf import ao2mo, gto, scf

    n = H.n_orbitals
    h1 = H.h1.detach().cpu().double().numpy()
    eri = H.eri.detach().cpu().double().numpy()
    mol = gto.M(verbose=0)
    mol.nelectron = H.n_alpha + H.n_beta
    mol.spin = H.n_alpha - H.n_beta
    mol.incore_anyway = True
    mf = {"rhf": scf.RHF, "rohf": scf.ROHF, "uhf": scf.UHF}[kind](mol)
    mf.get_hcore = lambda *a, **k: h1
    mf.get_ovlp = lambda *a, **k: np.eye(n)
    mf.energy_nuc = lambda *a, **k: float(H.constant)
    mf._eri = ao2mo.restore(8, eri, n)
    mf.conv_tol, mf.max_cycle = CONV_TOL, MAX_CYCLE
    return mf


def _density(occupation: torch.Tensor, kind: str) -> np.ndarray:
    occ = occupation.to(torch.float64).numpy()
    alpha, beta = np.diag(occ[0::2]), np.diag(occ[1::2])
    if kind == "rhf":
        return alpha + beta
    return np.array([alpha, beta])


def _converge(H: Hamiltonian, kind: str, dm0: np.ndarray):
    """``(mf, method)`` of the first attempt that converges, else ``(None, last method)``."""
    for method in ("diis", "level shift", "newton"):
        mf = _mean_field(H, kind)
        if method == "level shift":
            mf.level_shift, mf.damp = 0.5, 0.5
        if method == "newton":
            mf = mf.newton()
        try:
            mf.kernel(dm0)
        except (np.linalg.LinAlgError, ValueError, RuntimeError) as error:   # a singular or NaN step
            log.debug("SCF %s %s failed: %s", kind, method, error)
            continue
        if mf.converged:
            return mf, method
    return None, method


def scf_in_basis(H: Hamiltonian, guesses: dict[str, torch.Tensor]) -> SCFResult:
    """Restricted (RHF/ROHF) and UHF solutions of ``H`` in its own orbitals from ``guesses``
    (``{name: occupation [2N]}``), each converged as the module says; see :class:`SCFResult`."""
    restricted = "rhf" if H.n_alpha == H.n_beta else "rohf"
    result = SCFResult()
    for kind in (restricted, "uhf"):
        for name, occupation in guesses.items():
            mf, method = _converge(H, kind, _density(occupation, kind))
            record: dict = {"guess": name, "kind": kind, "method": method, "converged": mf is not None,
                            "energy": None, "stability_rounds": 0}
            if mf is not None:
                mf, record["stability_rounds"] = follow_instabilities(mf)
                record["converged"], record["energy"] = bool(mf.converged), float(mf.e_tot)
            result.attempts.append(record)
            if not record["converged"]:
                continue
            energy = record["energy"]
            if kind == "uhf":
                if result.uhf_energy is None or energy < result.uhf_energy - 1e-10:
                    result.uhf_energy, result.uhf, result.uhf_guess = energy, mf, name
            elif result.energy is None or energy < result.energy - 1e-10:
                result.mf, result.energy, result.guess, result.method = mf, energy, name, method
    log.info("SCF in the given orbitals: %s %s (guess %s, %s), UHF %s", restricted.upper(),
             "did not converge" if result.energy is None else f"{result.energy:.10f}", result.guess or "-",
             result.method or "-", "did not converge" if result.uhf_energy is None else f"{result.uhf_energy:.10f}")
    return result
