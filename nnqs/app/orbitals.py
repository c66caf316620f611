"""Which orbitals a run solves in (``[molecule] orbitals``): the given ones, their SCF's, or natural ones.

A selected CI or a network pays for the basis it is given: in localised orbitals a delocalised
state spreads over many more determinants than in Hartree-Fock's, so a run in them needs a larger
space for the same energy; a stretched chain is the other way round.

Rules:

* ``"given"`` keeps the orbitals; ``"scf"`` rotates into the canonical orbitals (occupied first,
  each set by orbital energy: the aufbau determinant is the SCF one) of the lowest restricted SCF
  solution found in them (:func:`hamiltonians.references.scf.scf_in_basis`, from the lowest-index
  and the found reference determinants); ``"auto"`` keeps the given orbitals where one of their
  determinants is a Hartree-Fock one (:func:`hamiltonians.reference_determinant.lowest_determinant`:
  canonical orbitals in any order) or no SCF converges, and otherwise takes the set in which a small
  CIPSI (:data:`PROBE_SIZE` determinants from the reference determinant, :func:`probe_energy`)
  reaches the lower ``E_var``: the SCF's where the state is delocalised (near equilibrium), the
  given localised ones where it is not (stretched bonds, where a canonical basis spreads it).
  Past twice :data:`NATURAL_SIZE` determinants ``"auto"`` then tries that set's natural orbitals (as
  ``"natural"``; canonical orbitals holding a Hartree-Fock determinant too) and keeps them where a
  CIPSI of twice as many determinants as their state's (from CISD around the reference determinant
  in each set) reaches lower in them.
* ``"natural"`` takes the set ``"auto"`` would without that trial, then the natural orbitals
  (:func:`hamiltonians.rdm_matrices.natural_orbitals`, most occupied first) of the CIPSI state of
  :data:`NATURAL_SIZE` determinants grown from CISD around the reference determinant in it
  (:func:`natural_rotation`): a multireference state spreads over fewer determinants in its own
  natural orbitals. In natural orbitals the reference determinant is the aufbau one, the most occupied
  orbitals (:func:`natural_reference`: the leading determinant of the state they come from), not the
  lowest ``<D|H|D>``, which there is some other, minor configuration.
* The rotation itself is :func:`hamiltonians.orbitals.rotate_orbitals`.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import torch

from hamiltonians.molecular import MolecularHamiltonian
from hamiltonians.orbitals import ORBITALS, OrbitalChoice, rotate_orbitals

__all__ = ["NATURAL_SIZE", "PROBE_SIZE", "choose_orbitals", "cipsi", "natural_reference", "natural_rotation", "probe_energy"]

log = logging.getLogger(__name__)

#: Determinants of the CIPSI probe that compares two orbital sets (:func:`probe_energy`).
PROBE_SIZE = 512
#: Determinants of the CIPSI state whose natural orbitals ``"natural"`` takes (:func:`natural_rotation`).
NATURAL_SIZE = 8192


def choose_orbitals(H: MolecularHamiltonian, kind: str = "auto", found=None) -> OrbitalChoice:
    """The orbitals to solve ``H`` in (see the module); ``found``: ``H``'s reference determinant
    if already found (:class:`~hamiltonians.reference_determinant.FoundReference`).

    Raises:
        ValueError: an unknown ``kind``, or ``"scf"`` where no SCF converged.
    """
    if kind not in ORBITALS:
        raise ValueError(f"orbitals must be one of {', '.join(map(repr, ORBITALS))}, got {kind!r}")
    if kind == "given":
        return OrbitalChoice("given", "as given ([molecule] orbitals = \"given\")")
    from hamiltonians.reference_determinant import lowest_determinant

    found = found if found is not None else lowest_determinant(H)
    if kind != "scf" and not found.found_by.startswith("lowest"):
        base = OrbitalChoice("given", f"a Hartree-Fock determinant of the given orbitals ({found.found_by})")
        if kind == "natural" or H.n_determinants > 2 * NATURAL_SIZE:
            return _natural(H, base, compare=kind == "auto")
        return base
    base = _given_or_scf(H, kind, found)
    if kind == "scf" or (kind == "auto" and H.n_determinants <= 2 * NATURAL_SIZE):
        return base
    return _natural(H, base, compare=kind == "auto")


def _given_or_scf(H: MolecularHamiltonian, kind: str, found) -> OrbitalChoice:
    """``"scf"``, or ``"auto"``'s choice between the given orbitals (no HF determinant among them)
    and their SCF's by the CIPSI probe."""
    from hamiltonians.references.scf import scf_in_basis

    guesses = {"aufbau": H.aufbau_occupation().to(torch.uint8).cpu(), "reference determinant": found.occupation}
    scf = scf_in_basis(H, guesses)
    if scf.mf is None:
        if kind == "scf":
            raise ValueError("orbitals = 'scf': no SCF converged in the given orbitals")
        return OrbitalChoice("given", "no Hartree-Fock determinant among them, and no SCF converged in them")
    occupied = np.asarray(scf.mf.mo_occ, dtype=float)
    order = np.lexsort((np.asarray(scf.mf.mo_energy), -occupied))   # doubly, singly occupied, empty; by energy
    rotation = np.asarray(scf.mf.mo_coeff)[:, order]
    if kind == "scf":
        return OrbitalChoice("scf", f"SCF canonical orbitals ({scf.energy:.8f} Ha)", rotation, scf.energy)
    given, rotated = probe_energy(H, found.occupation), probe_energy(rotate_orbitals(H, rotation))
    probes = {"given": given, "scf": rotated}
    if not rotated < given:
        return OrbitalChoice("given", f"no Hartree-Fock determinant among them, but {PROBE_SIZE} CIPSI determinants "
                             f"reach lower in them than in their SCF's orbitals ({given:.8f} <= {rotated:.8f} Ha)",
                             None, scf.energy, probes)
    reason = (f"no Hartree-Fock determinant among the given orbitals, and {PROBE_SIZE} CIPSI determinants reach "
              f"lower in their SCF's canonical orbitals ({rotated:.8f} < {given:.8f} Ha; SCF {scf.energy:.8f} Ha)")
    return OrbitalChoice("scf", reason, rotation, scf.energy, probes)


def _natural(H: MolecularHamiltonian, base: OrbitalChoice, *, compare: bool) -> OrbitalChoice:
    """``base``'s orbitals rotated into the natural orbitals of a CIPSI state in them; with
    ``compare``, only where a CIPSI of twice that state's size (grown from CISD, as a run's start
    grows its space) reaches lower in those than in ``base``'s (else ``base``, the comparison
    recorded). At the state's own size the comparison would favour ``base``: where CISD is larger
    than :data:`NATURAL_SIZE` that state is CISD itself, variational in ``base``'s orbitals."""
    in_base = H if base.rotation is None else rotate_orbitals(H, base.rotation)
    rotation, natural = natural_rotation(in_base)
    where = "given" if base.rotation is None else "SCF"
    if compare and 2 * natural["size"] >= H.n_determinants:   # CISD past half the space: CIPSI reaches FCI in both
        reason = f"{base.reason}; the space holds no more than twice the natural orbitals' state ({natural['size']})"
        return dataclasses.replace(base, reason=reason, natural=natural)
    if compare:
        size = natural["compared_size"] = 2 * natural["size"]
        natural["energy_compared"], _ = cipsi(in_base, size)
        natural["energy_natural"], _ = cipsi(rotate_orbitals(in_base, rotation), size, "aufbau")
        log.info("%d CIPSI determinants: %.8f Ha in the %s orbitals, %.8f Ha in their natural ones", size,
                 natural["energy_compared"], where, natural["energy_natural"])
        if not natural["energy_natural"] < natural["energy_compared"] - 1e-6:
            reason = (f"{base.reason}; in the natural orbitals of {natural['size']} CIPSI determinants {size} reach "
                      f"no lower ({natural['energy_natural']:.8f} >= {natural['energy_compared']:.8f} Ha)")
            return dataclasses.replace(base, reason=reason, natural=natural)
    if base.rotation is not None:
        rotation = base.rotation @ rotation
    reason = f"natural orbitals of {natural['size']} CIPSI determinants ({natural['energy']:.8f} Ha) in the {where} orbitals"
    if compare:
        reason += (f", where {natural['compared_size']} reach lower ({natural['energy_natural']:.8f} < "
                   f"{natural['energy_compared']:.8f} Ha)")
    return OrbitalChoice("natural", f"{reason}; {base.reason}", rotation, base.scf_energy, base.probes, natural)


def probe_energy(H: MolecularHamiltonian, reference: torch.Tensor | None = None, size: int | None = None) -> float:
    """``E_var`` of CIPSI grown from ``reference`` (default: the one found,
    :func:`~hamiltonians.reference_determinant.lowest_determinant`) to ``size`` (:data:`PROBE_SIZE`)
    determinants: how compact the ground state is in ``H``'s orbitals."""
    return cipsi(H, size or PROBE_SIZE, "auto" if reference is None else reference, start="hf")[0]


def natural_rotation(H: MolecularHamiltonian, size: int | None = None) -> tuple[np.ndarray, dict]:
    """``(rotation [N, N], record)``: the natural orbitals of CIPSI's state of ``size``
    (:data:`NATURAL_SIZE`) determinants grown from CISD around ``H``'s reference determinant, as
    columns in ``H``'s orbitals, most occupied first; ``record``: that state's ``size`` and
    ``energy``, and the natural ``occupations``."""
    from hamiltonians.rdm_matrices import natural_orbitals
    from hamiltonians.sci.natural import one_rdm

    e_var, state = cipsi(H, size or NATURAL_SIZE)
    dm1a, dm1b = one_rdm(H.n_orbitals, state.dets, state.coefficients)
    occupations, rotation = natural_orbitals(dm1a + dm1b)
    log.info("natural orbitals of %d CIPSI determinants (%.8f Ha): occupations %s", state.size, e_var,
             " ".join(f"{x:.4f}" for x in occupations))
    return rotation, {"size": int(state.size), "energy": float(e_var),
                      "occupations": [round(float(x), 6) for x in occupations]}


def cipsi(H: MolecularHamiltonian, size: int, reference: str | torch.Tensor = "auto", *, start: str = "cisd"):
    """``(E_var, state)`` of CIPSI grown from ``start`` (``"hf"`` or ``"cisd"``) around ``H``'s
    reference determinant (``"auto"``: the one found; ``"aufbau"``: the most occupied orbitals, as
    in natural ones; or an occupation) to ``size`` determinants."""
    from hamiltonians.sci.solver import SelectedCI

    e_var, state = SelectedCI(start=start, max_size=size, pt2="none", extrapolation=(),
                              reference=reference).kernel(H)
    return float(e_var), state


def natural_reference(H: MolecularHamiltonian):
    """The reference determinant in natural orbitals (most occupied first): the aufbau one, as a
    :class:`~hamiltonians.reference_determinant.FoundReference`."""
    from hamiltonians.reference_determinant import FoundReference

    occupation = H.aufbau_occupation().to(torch.uint8).cpu()
    energy = float(H.diagonal(occupation[None].to(H.device))[0])
    return FoundReference(occupation, energy, "aufbau (the most occupied natural orbitals)", energy)
