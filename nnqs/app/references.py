"""The reference energies a run reports: the quick ones before its first step, the slow ones after.

Quick (seconds, even at 52 spin orbitals): HF, CCSD, CCSD(T), and FCI over at most
:data:`QUICK_FCI_DETERMINANTS` determinants. Slow (minutes to hours on a few cores): FCI of a
larger space (up to the run's FCI limit, :data:`FCI_MAX_DETERMINANTS`) and, beyond it, DMRG
(``[molecule] dmrg``). A slow reference never holds up the first step:

- one already in the cache (:mod:`hamiltonians.references.energies`) is reported from the start;
- one missing is computed after training, once ``result.json`` has been written without it
  (``[molecule] slow_references = true``, the default), and merged into ``result.json``;
- ``nnqs reference RUN`` computes them in a process of its own, during the run (the run reports
  them at its end from the cache) or after it (merged into ``RUN/result.json`` at once).

Every function here takes the Hamiltonian in its original orbital order (the references'
cache key is the molecule's, not the autoregressive order's).
"""

from __future__ import annotations

import logging

from hamiltonians.protocol import Hamiltonian
from hamiltonians.references.energies import reference_energies

log = logging.getLogger(__name__)

#: FCI (PySCF's direct_spin1) over at most this many determinants runs before the first step
#: (about a minute on one core); a larger FCI runs after training.
QUICK_FCI_DETERMINANTS = 2_000_000
#: Beyond this many determinants FCI is not attempted and DMRG is the reference.
FCI_MAX_DETERMINANTS = 10**7
#: The reference energies a run reports, in the order of ``result.json``.
KEYS = ("hf", "ccsd", "ccsd_t", "fci", "dmrg")


def plan(n_determinants: int, *, dmrg: bool = True,
         fci_max_determinants: int = FCI_MAX_DETERMINANTS) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """``(quick, slow, cached)`` methods for a space of ``n_determinants``.

    ``quick`` run before the first step, ``slow`` after training (or by ``nnqs reference``);
    ``cached`` are reported whenever the cache has them, whether or not this run computes them
    (a DMRG computed ahead of a ``dmrg = false`` run).
    """
    beyond_fci = n_determinants > fci_max_determinants
    quick_fci = n_determinants <= QUICK_FCI_DETERMINANTS or beyond_fci  # beyond: only its note
    quick = ("hf", "ccsd", "ccsd_t") + (("fci",) if quick_fci else ())
    slow: tuple[str, ...]
    cached: tuple[str, ...]
    if beyond_fci:
        slow, cached = (("dmrg",) if dmrg else ()), ("dmrg",)
    else:
        slow = cached = () if quick_fci else ("fci",)
    return quick, slow, cached


def quick_references(H: Hamiltonian, *, dmrg: bool = True, fci_max_determinants: int = FCI_MAX_DETERMINANTS) -> dict:
    """The references that run before the first step, and the slow ones already cached."""
    quick, slow, cached = plan(H.n_determinants, dmrg=dmrg, fci_max_determinants=fci_max_determinants)
    refs = reference_energies(H, quick, fci_max_determinants=fci_max_determinants, cached=cached)
    pending = [m for m in slow if refs.get(m) is None]
    if not dmrg and "dmrg" in cached and refs.get("dmrg") is None:
        log.warning("no DMRG reference: dmrg = false and none cached (`nnqs reference RUN` computes one)")
    if pending:
        log.info("%.3g determinants: the %s reference is computed after training (or by `nnqs reference RUN`), "
                 "not before the first step", H.n_determinants, " and ".join(m.upper() for m in pending))
    return refs


def all_references(H: Hamiltonian, *, dmrg: bool = True, fci_max_determinants: int = FCI_MAX_DETERMINANTS,
                   compute_slow: bool = True) -> dict:
    """The quick references and the slow ones: computed now with ``compute_slow`` (cached as
    each finishes), else only those the cache has."""
    quick, slow, cached = plan(H.n_determinants, dmrg=dmrg, fci_max_determinants=fci_max_determinants)
    methods = quick + (slow if compute_slow else ())
    return reference_energies(H, methods, fci_max_determinants=fci_max_determinants, cached=cached)


def pending(refs: dict, n_determinants: int, *, dmrg: bool = True,
            fci_max_determinants: int = FCI_MAX_DETERMINANTS) -> list[str]:
    """The slow methods ``refs`` lacks."""
    _, slow, _ = plan(n_determinants, dmrg=dmrg, fci_max_determinants=fci_max_determinants)
    return [m for m in slow if refs.get(m) is None]


#: ``result.json``'s energies beyond the network's own whose errors are reported: ``NAME_error_vs_REF_mha``.
COMPARED = {"subspace": "energy_subspace", "pt2": "energy_pt2", "extrapolated": "energy_extrapolated"}


def reference_fields(refs: dict, result: dict) -> dict:
    """The fields of ``result.json`` that depend on the references: the energies, the errors
    (mHa) against them of ``result``'s ``energy`` and ``energy_exact_variational``, and of each
    energy of :data:`COMPARED` it holds (``subspace_error_vs_*``, ``pt2_error_vs_*``,
    ``extrapolated_error_vs_*``), and the DMRG's details."""
    energy, exact = result.get("energy"), result.get("energy_exact_variational")

    def error(reference: float | None, value: float | None = energy) -> float | None:
        return None if reference is None or value is None else 1e3 * (value - reference)

    energies = {k: refs.get(k) for k in KEYS}
    return {
        "references": energies,
        "error_vs_fci_mha": error(energies["fci"]),
        "exact_error_vs_fci_mha": error(energies["fci"], exact),
        "error_vs_ccsd_t_mha": error(energies["ccsd_t"]),
        "error_vs_dmrg_mha": error(energies["dmrg"]),
        "dmrg": refs.get("details", {}).get("dmrg"),
        **{f"{name}_error_vs_{key}_mha": error(energies[key], result[field])
           for name, field in COMPARED.items() if result.get(field) is not None
           for key in ("fci", "ccsd_t", "dmrg")},
    }
