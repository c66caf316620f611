"""Reference energies (HF, CCSD, CCSD(T), FCI) with PySCF, cached in a small JSON file.

Every method runs on the Hamiltonian's own integrals (a PySCF SCF object whose ``h1``/``eri``
are ``H``'s, orbital basis = identity), so the references belong to exactly the Hamiltonian
the network sees: frozen-core/active-space Hamiltonians get frozen-core CCSD and CASCI, FCIDUMP
and OpenFermion inputs work too. Closed shells use RHF/RCCSD; open shells ROHF and UCCSD /
UCCSD(T) on the ROHF reference (PySCF's route for ``cc.CCSD(rohf)``). FCI runs where the space
is at most ``fci_max_determinants``; a method that fails or is skipped maps to ``None`` and its
reason goes to ``result["notes"]``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from typing import Any

import numpy as np
import torch
from filelock import FileLock, Timeout

from hamiltonians.io.durable import durable_write
from hamiltonians.protocol import Hamiltonian

__all__ = ["reference_energies", "store_reference", "default_cache_path", "METHODS", "OPTIONAL_METHODS"]

logger = logging.getLogger(__name__)

METHODS = ("hf", "ccsd", "ccsd_t", "fci")
#: Computed only when asked for: ``dmrg`` (block2, extrapolated in the discarded weight; minutes).
OPTIONAL_METHODS = ("dmrg",)
_SPEC_KEYS = ("geometry", "basis", "charge", "spin", "frozen_core", "active_space", "unit")


def default_cache_path() -> str:
    """``$NNQS_REFERENCE_CACHE`` or ``$XDG_CACHE_HOME/nnqs/references.json`` (``~/.cache``)."""
    env = os.environ.get("NNQS_REFERENCE_CACHE")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "nnqs", "references.json")


def _cache_key(H: Hamiltonian) -> str:
    src = H.source or {}
    if src.get("kind") == "pyscf":
        spec = {k: src.get(k) for k in _SPEC_KEYS}
        return "pyscf:" + json.dumps(spec, sort_keys=True)
    digest = hashlib.sha256()
    digest.update(np.asarray([H.n_orbitals, H.n_alpha, H.n_beta], dtype=np.int64).tobytes())
    digest.update(np.float64(H.constant).tobytes())
    digest.update(np.round(H.h1.detach().cpu().double().numpy(), 10).tobytes())
    digest.update(np.round(H.eri.detach().cpu().double().numpy(), 10).tobytes())
    return "integrals:" + digest.hexdigest()


def _load(path):
    """The cache's entries; a file that is not a JSON object is moved aside
    (``PATH.corrupt-<time>``, with a warning) and counts as empty."""
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except OSError as error:
        logger.warning("reference cache %s unreadable (%s): not used", path, error.strerror or error)
        return {}
    except ValueError as error:
        data, reason = None, f"not JSON: {error}"
    else:
        reason = f"a JSON {type(data).__name__}, not an object"
    if isinstance(data, dict):
        return data
    aside = f"{path}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}"
    try:
        os.replace(path, aside)
        logger.warning("reference cache %s is %s; moved aside to %s", path, reason, aside)
    except OSError:
        logger.warning("reference cache %s is %s; not used", path, reason)
    return {}


def _lock(path) -> FileLock:
    """The cache's lock (``PATH.lock``): one process at a time reads, merges and writes it."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    return FileLock(f"{path}.lock", timeout=600)


def _store(path, key: str, entry: dict) -> None:
    """Merge ``entry`` under ``key`` into the cache file at ``path``, under its lock (the other
    keys as they are on the disk now, not as they were when this process last read them)."""
    with _lock(path):
        cache = _load(path)
        cache[key] = entry
        _save(path, cache)


def _save(path, data):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)

    def write(tmp):
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)

    durable_write(path, write)


def _scf(H: Hamiltonian):
    """The mean-field solution the references build on (:func:`hamiltonians.references.scf.scf_in_basis`
    from the lowest-index determinant and the reference determinant found from the integrals), and
    that determinant."""
    from hamiltonians.reference_determinant import lowest_determinant
    from hamiltonians.references.scf import scf_in_basis

    found = lowest_determinant(H)
    guesses = {"aufbau": H.aufbau_occupation().to(torch.uint8).cpu()}
    if not found.is_aufbau:
        guesses["reference determinant"] = found.occupation
    return scf_in_basis(H, guesses), found


def _compute_dmrg(H: Hamiltonian, out, notes, details, options):
    from hamiltonians.references.dmrg import dmrg_available, dmrg_energy

    if not dmrg_available():
        notes["dmrg"] = "block2 is not installed (pip install 'nnqs[dmrg]')"
        return
    try:
        result = dmrg_energy(H, **options)
    except Exception as exc:  # noqa: BLE001 - a reference that failed is reported, not fatal
        notes["dmrg"] = f"DMRG failed: {type(exc).__name__}: {exc}"
        return
    out["dmrg"] = result.energy
    details["dmrg"] = result.to_dict()


#: Without PySCF, FCI comes from :mod:`hamiltonians.exact` up to this many determinants.
EXACT_FCI_MAX_DETERMINANTS = 1_000_000
NO_PYSCF = "PySCF is not installed (pip install 'nnqs[chem]')"


def _compute_without_pyscf(H: Hamiltonian, methods, fci_max_determinants, out, notes, details):
    """HF from the Hamiltonian itself; FCI by :mod:`hamiltonians.exact` for small spaces."""
    from hamiltonians.exact import ground_state_energy

    for m in methods:
        if m == "hf":
            out["hf"] = float(H.hf_energy())
        elif m == "fci" and H.n_determinants <= min(fci_max_determinants, EXACT_FCI_MAX_DETERMINANTS):
            out["fci"] = float(ground_state_energy(H))
        else:
            notes[m] = NO_PYSCF
    logger.warning("%s: %s skipped", NO_PYSCF, ", ".join(sorted(notes)) or "nothing")
    return out, notes, details


def _compute(H: Hamiltonian, methods, fci_max_determinants, dmrg_options):
    out: dict[str, float] = {}
    notes: dict[str, str] = {}
    details: dict[str, Any] = {}
    if "dmrg" in methods:
        _compute_dmrg(H, out, notes, details, dmrg_options)
        methods = [m for m in methods if m != "dmrg"]
    if not methods:
        return out, notes, details
    try:
        from pyscf import cc, fci
    except ImportError:
        return _compute_without_pyscf(H, methods, fci_max_determinants, out, notes, details)

    scf, found = _scf(H)
    mf = scf.mf
    details["scf"], details["reference_determinant"] = scf.to_dict(), found.to_dict()
    if mf is None:
        notes["hf"] = "SCF in the given orbitals converged from no guess; 'hf' is the reference determinant's <D|H|D>"
    if "hf" in methods:
        out["hf"] = float(scf.energy) if scf.energy is not None else found.energy
        if scf.energy is not None and abs(scf.energy - found.energy) > 1e-6:
            notes["hf"] = (f"the orbitals are not this SCF solution's: the reference determinant's <D|H|D> is "
                           f"{found.energy:.10f} ({found.found_by})")
    if {"ccsd", "ccsd_t"} & set(methods):
        if mf is None or H.n_electrons < 2:
            for m in ("ccsd", "ccsd_t"):
                notes.setdefault(m, "no SCF reference or fewer than 2 electrons")
        else:
            try:
                mycc = cc.CCSD(mf)
                mycc.conv_tol = 1e-10
                mycc.kernel()
                if not mycc.converged:
                    raise RuntimeError("CCSD did not converge")
                out["ccsd"] = float(mycc.e_tot)
                if "ccsd_t" in methods:
                    out["ccsd_t"] = float(mycc.e_tot + mycc.ccsd_t())
            except Exception as exc:  # noqa: BLE001
                notes["ccsd"] = notes["ccsd_t"] = f"{type(exc).__name__}: {exc}"
    if "fci" in methods:
        d = H.n_determinants
        if d > fci_max_determinants:
            notes["fci"] = f"determinant space {d:.3g} exceeds fci_max_determinants={fci_max_determinants:.3g}"
        else:
            solver = fci.direct_spin1.FCI()
            solver.conv_tol = 1e-12
            solver.max_cycle = 500
            e, _ = solver.kernel(
                H.h1.detach().cpu().double().numpy(), H.eri.detach().cpu().double().numpy(),
                H.n_orbitals, (H.n_alpha, H.n_beta), ecore=float(H.constant),
            )
            out["fci"] = float(e)
    return out, notes, details


def _compute_and_cache(H: Hamiltonian, todo, fci_max_determinants, key, entry, cache_path, dmrg_options) -> dict:
    """Compute ``todo`` into the cache ``entry`` and write it (best effort); return the entry."""
    logger.info("computing reference energies %s for %s", todo, key[:80])
    energies, notes, details = _compute(H, todo, fci_max_determinants, dmrg_options)
    for m in todo:
        entry["energies"][m] = energies.get(m)
        if m in notes:
            entry["notes"][m] = notes[m]
        else:
            entry["notes"].pop(m, None)
        if m in details:
            entry["details"][m] = details[m]
    missing = {m for m, note in entry["notes"].items()
               if note == NO_PYSCF or note.startswith("block2 is not installed")}
    saved = {**entry, "energies": {k: v for k, v in entry["energies"].items() if k not in missing}}
    if cache_path:  # what could not run for a missing package is not cached: it runs once installed
        try:
            _store(cache_path, key, saved)
        except (OSError, Timeout) as error:  # a cache is best effort
            logger.warning("reference energies not cached: cannot write %s (%s)", cache_path,
                           getattr(error, "strerror", None) or error)
    return saved


def store_reference(H_or_spec, method: str, energy: float, details: dict | None = None, *,
                    cache_path: str | os.PathLike | None = None) -> None:
    """Put a reference computed elsewhere (e.g. a saved DMRG result) into the cache for ``H``,
    beside what the cache holds for it, so that :func:`reference_energies` reports it.

    ``H_or_spec`` is a :class:`MolecularHamiltonian` or a :func:`from_pyscf` spec; ``details``
    (bond dimensions, discarded weights, ...) is kept as the method's details.
    """
    if method not in METHODS + OPTIONAL_METHODS:
        raise ValueError(f"unknown reference method {method!r}; choose from {METHODS + OPTIONAL_METHODS}")
    if not np.isfinite(energy):
        raise ValueError(f"reference energy for {method} is not finite: {energy!r}")
    if isinstance(H_or_spec, dict):
        from hamiltonians.io.pyscf_io import from_pyscf

        H_or_spec = from_pyscf(**H_or_spec)
    cache_path = cache_path or default_cache_path()
    key = _cache_key(H_or_spec)
    with _lock(cache_path):
        cache = _load(cache_path)
        entry = cache.get(key, {"energies": {}, "notes": {}})
        entry.setdefault("details", {})
        entry["energies"][method] = float(energy)
        entry["notes"].pop(method, None)
        entry["details"].pop(method, None)   # an earlier computation's details are not this energy's
        if details is not None:
            entry["details"][method] = details
        cache[key] = entry
        _save(cache_path, cache)


def reference_energies(
    H_or_spec,
    methods=METHODS,
    *,
    cache_path: str | os.PathLike | None | bool = None,
    fci_max_determinants: int = 10_000_000,
    recompute: bool = False,
    dmrg_options: dict | None = None,
    cached: tuple[str, ...] = (),
) -> dict:
    """Reference energies of a Hamiltonian (Hartree), computed on demand and cached.

    Args:
        H_or_spec: a :class:`MolecularHamiltonian`, or a dict of :func:`from_pyscf` keyword
            arguments (``geometry``, ``basis``, optional ``charge``, ``spin``, ``frozen_core``,
            ``active_space``).
        methods: subset of ``("hf", "ccsd", "ccsd_t", "fci", "dmrg")``; ``dmrg`` (block2,
            see :mod:`hamiltonians.references.dmrg`) is the extrapolated energy.
        cache_path: JSON cache file; ``None`` -> :func:`default_cache_path`; ``False`` -> none.
        recompute: compute ``methods`` again even if cached.
        dmrg_options: keyword arguments of :func:`hamiltonians.references.dmrg.dmrg_energy` (``bond_dims``,
            ``symmetry``, ``threads``, ...) for a DMRG computed now; the cached result records them.
        cached: more methods reported only if the cache has them, never computed (a run that
            must not start an hours-long DMRG still reports one computed ahead of it).
    Returns:
        ``{method: float | None, ..., "notes": {method: reason}, "details": {method: dict}}``;
        ``hf`` is the energy of the HF determinant (lowest n_alpha/n_beta orbitals) of ``H``;
        ``details["dmrg"]`` holds the bond dimensions, discarded weights, sweep energies and
        the extrapolation's uncertainty. A DMRG that could not run (block2 missing) is not
        cached, so it runs once block2 is installed.
    """
    methods = tuple(methods)
    unknown = set(methods) - set(METHODS) - set(OPTIONAL_METHODS)
    if unknown:
        raise ValueError(f"unknown reference methods {sorted(unknown)}; choose from {METHODS + OPTIONAL_METHODS}")
    if isinstance(H_or_spec, dict):
        from hamiltonians.io.pyscf_io import from_pyscf

        H = from_pyscf(**H_or_spec)
    else:
        H = H_or_spec
    if cache_path is None:
        cache_path = default_cache_path()
    key = _cache_key(H)
    cache = _load(cache_path) if cache_path else {}
    entry = cache.get(key, {"energies": {}, "notes": {}})
    entry.setdefault("details", {})
    todo = [m for m in methods if recompute or m not in entry["energies"]]
    # the quick methods first, then DMRG (minutes to hours), each batch cached as it finishes
    for batch in ([m for m in todo if m != "dmrg"], [m for m in todo if m == "dmrg"]):
        if batch:
            entry = _compute_and_cache(H, batch, fci_max_determinants, key, entry, cache_path, dmrg_options or {})
    reported = methods + tuple(m for m in cached if m not in methods and m in entry["energies"])
    result = {m: entry["energies"].get(m) for m in reported}
    result["notes"] = {m: entry["notes"][m] for m in reported if m in entry["notes"]}
    result["details"] = {m: entry["details"][m] for m in reported if m in entry["details"]}
    return result
