"""From a :class:`~nnqs.runconfig.MoleculeConfig` to a Hamiltonian, its references and orbital order."""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass

import torch

from hamiltonians import MolecularHamiltonian, read_fcidump, reference_energies
from hamiltonians.determinants import hf_occupation, occupations_in_order
from nnqs.runconfig import ConfigError, MoleculeConfig
from nnqs.tokens import occupations_to_tokens

log = logging.getLogger(__name__)


@dataclass
class System:
    """The Hamiltonian the network sees (orbitals in autoregressive order) and its references.

    Attributes:
        hamiltonian: integrals with orbitals permuted into ``order``.
        order: ``order[i]`` is the original spatial orbital placed at position ``i``.
        hf_occupation: uint8 ``[2N]``, the Hartree–Fock determinant in this order (the lowest
            original orbitals occupied, wherever the order puts them).
        references: ``{"hf", "ccsd", "ccsd_t", "fci"}`` energies (None where unavailable).
    """

    hamiltonian: MolecularHamiltonian
    order: list[int]
    references: dict

    @property
    def hf_occupation(self) -> torch.Tensor:
        return hf_occupation_in_order(self.order, self.hamiltonian.n_alpha, self.hamiltonian.n_beta)

    @property
    def hf_tokens(self) -> torch.Tensor:
        """The Hartree–Fock determinant as tokens ``[1, N]``."""
        return occupations_to_tokens(self.hf_occupation[None].long())


def system_in_order(config: MoleculeConfig, H: MolecularHamiltonian, *, references: bool = True,
                    fci_max_determinants: int = 10**7) -> System:
    """The :class:`System` of integrals ``H`` already in ``config``'s autoregressive order (a
    run's saved integrals): the order is undone, and the system rebuilt as :func:`build_system`
    does from the original integrals (references there, where the lowest orbitals are HF)."""
    order = resolve_order(config.orbital_order, H.n_orbitals)
    original = permute_orbitals(H, sorted(range(H.n_orbitals), key=order.__getitem__))
    return _ordered_system(config, original, references, fci_max_determinants)


def hf_occupation_in_order(order: list[int], n_alpha: int, n_beta: int) -> torch.Tensor:
    """HF occupation ``[2N]`` when position ``i`` holds original orbital ``order[i]``."""
    return occupations_in_order(hf_occupation(len(order), n_alpha, n_beta)[None], order)[0]


def permute_orbitals(H: MolecularHamiltonian, order: list[int]) -> MolecularHamiltonian:
    """The same Hamiltonian with spatial orbital ``order[i]`` moved to position ``i``.

    ``h'[i, j] = h[order[i], order[j]]`` and ``(ij|kl)' = (order[i] order[j] | order[k] order[l])``.
    """
    n = H.n_orbitals
    if sorted(order) != list(range(n)):
        raise ConfigError(f"orbital_order must be a permutation of 0..{n - 1}, got {list(order)}")
    p = torch.as_tensor(order, device=H.h1.device)
    h1 = H.h1[p][:, p]
    eri = H.eri[p][:, p][:, :, p][:, :, :, p]
    source = dict(H.source, orbital_order=list(order))
    if "orbsym" in source:  # an FCIDUMP's per-orbital symmetry labels move with the orbitals
        source["orbsym"] = [source["orbsym"][i] for i in order]
    return MolecularHamiltonian(n, H.n_alpha, H.n_beta, H.constant, h1, eri, source=source)


def resolve_order(spec, n_orbitals: int) -> list[int]:
    if spec == "given":
        return list(range(n_orbitals))
    if spec == "reversed":
        return list(range(n_orbitals))[::-1]
    return [int(i) for i in spec]


def build_system(config: MoleculeConfig, *, references: bool = True, fci_max_determinants: int = 10**7) -> System:
    """Build the Hamiltonian (PySCF or FCIDUMP), its reference energies and orbital order.

    Raises:
        ConfigError: for an unknown basis, impossible electron counts, a bad orbital order.
        hamiltonians.FCIDUMPError: for a malformed FCIDUMP file.
    """
    if config.fcidump:
        H = read_fcidump(config.fcidump)
    else:
        from hamiltonians import from_pyscf

        with warnings.catch_warnings(record=True) as caught:  # PySCF warns before it fails
            warnings.simplefilter("always")
            try:
                H = from_pyscf(
                    config.geometry,
                    config.basis,
                    charge=config.charge,
                    spin=config.spin,
                    frozen_core=config.frozen_core,
                    active_space=tuple(config.active_space) or None,
                )
            except (RuntimeError, KeyError, ValueError, AssertionError) as error:
                if any("Basis" in str(w.message) for w in caught):
                    raise ConfigError(f"[molecule] unknown basis {config.basis!r}") from None
                message = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
                raise ConfigError(f"[molecule] cannot build {config.geometry!r}/{config.basis}: {message}") from None
        for w in caught:
            log.warning("PySCF: %s", w.message)
    return _ordered_system(config, H, references, fci_max_determinants)


def _ordered_system(config: MoleculeConfig, H: MolecularHamiltonian, references: bool,
                    fci_max_determinants: int) -> System:
    """References of the original integrals ``H``, then ``H`` moved into ``config``'s order."""
    refs: dict = {}
    if references:
        refs = reference_energies(H, fci_max_determinants=fci_max_determinants)
    order = resolve_order(config.orbital_order, H.n_orbitals)
    if order != list(range(H.n_orbitals)):
        H = permute_orbitals(H, order)
    log.info("system %s: N=%d, (%d, %d) electrons, references %s", config.name, H.n_orbitals, H.n_alpha, H.n_beta,
             {k: v for k, v in refs.items() if k != "notes"})
    return System(H, order, refs)
