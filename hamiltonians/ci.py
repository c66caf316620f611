"""Truncated configuration interaction, exactly in this package's basis: CISD and CASCI.

Both diagonalise the Hamiltonian projected onto a set of determinants
(:func:`subspace_state`, with :func:`hamiltonians.exact.hamiltonian_matrix`, so the Jordan–Wigner
signs of docs/design.md §1 hold by construction):

* CISD: the Hartree–Fock determinant plus every spin-conserving single and double excitation
  of it (from :meth:`MolecularHamiltonian.connected`). Good near equilibrium.
* CASCI(n, m): every distribution of ``n`` active electrons over ``m`` active orbitals (the
  ``m`` orbitals around the Fermi level, counted in the original basis, which must be ordered by
  orbital energy as PySCF's canonical orbitals are), the orbitals below doubly occupied. It
  captures the static correlation of bond breaking, where the HF determinant carries little
  weight and CISD fails.

* CISD+CAS: the union of the two spaces. Its ground state is below both and holds both the
  static correlation of the active space and the doubles of the dynamic one.
* Selected CI (:func:`selected_ci`): any of these grown by CIPSI steps, each adding the
  determinants connected to the state that second-order perturbation theory
  (Epstein–Nesbet) ranks highest. It brings in the triples and quadruples that CISD lacks and
  that a network fitted to CISD then rarely samples.

Each gives a cheap, correctly signed, variational starting wavefunction for the network's
start (:mod:`nnqs.training.start`). Measurements: ``experiments/LOG.md``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from hamiltonians.determinants import enumerate_determinants, aufbau_occupation, occupations_in_order, unpack_keys
from hamiltonians.exact import hamiltonian_matrix, lowest_eigenpair


@dataclass(frozen=True)
class CIState:
    """``energy``; ``dets`` uint8 ``[D, 2N]`` (the reference first); ``coefficients`` float64
    ``[D]``, normalised, with a positive reference coefficient (or, if that vanishes, a positive
    largest one)."""

    energy: float
    dets: torch.Tensor
    coefficients: torch.Tensor


def subspace_state(H, dets: torch.Tensor, reference: torch.Tensor) -> CIState:
    """The lowest eigenstate of ``H`` projected onto the span of ``dets`` ``[D, 2N]``
    (duplicates dropped; ``reference`` ``[2N]`` must be one of them)."""
    dets = torch.unique(dets.to(torch.uint8).cpu(), dim=0)
    reference = reference.to(torch.uint8).cpu()
    is_ref = (dets == reference).all(dim=1)
    if not bool(is_ref.any()):
        raise ValueError("the reference determinant is not in the CI space")
    dets = torch.cat((dets[is_ref], dets[~is_ref]))
    matrix, dets = hamiltonian_matrix(H, dets)
    energy, vector = lowest_eigenpair(matrix)
    ref_row = int(torch.nonzero((dets == reference).all(dim=1))[0])
    if abs(vector[ref_row]) > 1e-12:
        vector = vector * np.sign(vector[ref_row])
    return CIState(energy, dets, torch.from_numpy(vector / np.linalg.norm(vector)))


def singles_doubles(H, reference: torch.Tensor) -> torch.Tensor:
    """``reference`` ``[2N]`` and every spin-conserving single and double excitation of it,
    uint8 ``[D, 2N]`` (from :meth:`MolecularHamiltonian.connected`, zero elements included)."""
    excited, _, _ = H.connected(reference[None], eps=-1.0)
    return torch.cat((reference[None], excited.to(torch.uint8).cpu()))


def cisd(H, reference: torch.Tensor | None = None) -> CIState:
    """The CISD ground state of ``H`` (closed or open shell).

    Args:
        reference: the reference determinant ``[2N]`` (default ``H.aufbau_occupation()``, the lowest
            orbitals; pass the permuted HF occupation when the orbitals were reordered).
    """
    hf = (H.aufbau_occupation() if reference is None else torch.as_tensor(reference)).to(torch.uint8).cpu()
    return subspace_state(H, singles_doubles(H, hf), hf)


def cas_window(n_orbitals: int, n_alpha: int, n_beta: int, n_electrons: int, n_active: int) -> tuple[int, int, int]:
    """``(core, active_alpha, active_beta)`` of CAS(``n_electrons``, ``n_active``) in a molecule
    of ``n_orbitals`` orbitals and ``(n_alpha, n_beta)`` electrons.

    Raises:
        ValueError: if the window does not fit (odd core, too many electrons or orbitals).
    """
    core, odd = divmod(n_alpha + n_beta - n_electrons, 2)
    active_a, active_b = n_alpha - core, n_beta - core
    if odd or core < 0 or not (0 <= active_a <= n_active and 0 <= active_b <= n_active):
        raise ValueError(f"CAS({n_electrons}, {n_active}) does not fit ({n_alpha}, {n_beta}) electrons: "
                         "the electrons outside it must fill whole core orbitals and the rest fit in it")
    if core + n_active > n_orbitals:
        raise ValueError(f"CAS({n_electrons}, {n_active}) needs {core + n_active} orbitals, "
                         f"the Hamiltonian has {n_orbitals}")
    return core, active_a, active_b


def cas_determinants(H, n_electrons: int, n_orbitals: int, order: list[int] | None = None):
    """``(dets [D, 2N], hf [2N])``: every determinant of CAS(``n_electrons``, ``n_orbitals``) and
    the HF determinant, over positions (``order[i]`` the original orbital at position ``i``;
    default: the original order). The active orbitals are original orbitals
    ``c .. c + n_orbitals - 1`` with ``c = (n_alpha + n_beta - n_electrons) / 2`` core orbitals
    below them, doubly occupied; the original orbitals must be in order of energy (PySCF's
    canonical orbitals, FCIDUMPs written from them).

    Raises:
        ValueError: if the window does not fit the molecule (see :func:`cas_window`).
    """
    n, na, nb = H.n_orbitals, H.n_alpha, H.n_beta
    order = list(range(n)) if order is None else list(order)
    core, active_a, active_b = cas_window(n, na, nb, n_electrons, n_orbitals)
    active = enumerate_determinants(n_orbitals, active_a, active_b)
    dets = torch.zeros(active.shape[0], 2 * n, dtype=torch.uint8)
    dets[:, : 2 * core] = 1
    dets[:, 2 * core : 2 * (core + n_orbitals)] = active
    hf = aufbau_occupation(n, na, nb)[None]
    return occupations_in_order(dets, order), occupations_in_order(hf, order)[0]


def casci(H, n_electrons: int, n_orbitals: int, order: list[int] | None = None) -> CIState:
    """The CASCI(``n_electrons``, ``n_orbitals``) ground state of ``H`` (see
    :func:`cas_determinants`); the reference is the HF determinant in position order."""
    dets, hf = cas_determinants(H, n_electrons, n_orbitals, order)
    return subspace_state(H, dets, hf)


def cisd_cas(H, n_electrons: int, n_orbitals: int, order: list[int] | None = None) -> CIState:
    """The ground state of ``H`` in the union of the CISD space (of the HF determinant) and the
    CAS(``n_electrons``, ``n_orbitals``) space (see :func:`cas_determinants`)."""
    dets, hf = cas_determinants(H, n_electrons, n_orbitals, order)
    return subspace_state(H, torch.cat((singles_doubles(H, hf), dets)), hf)


def pt2_selection(H, state: CIState, n_new: int, *, parents: int = 1024) -> torch.Tensor:
    """The ``n_new`` determinants outside ``state.dets`` with the largest Epstein–Nesbet
    second-order energies ``|<x'|H|psi>|^2 / (H_{x'x'} - E)``, uint8 ``[<= n_new, 2N]``.

    ``<x'|H|psi>`` is summed over the ``parents`` largest-``|c|`` determinants of the state only
    (bounding the work at ``parents`` times the connections per determinant), by
    :func:`hamiltonians.subspace.outside_sums`.
    """
    from hamiltonians.subspace import outside_sums  # compiled (Numba): imported where used

    top = torch.argsort(state.coefficients.abs(), descending=True)[:parents]
    unique, numerator = outside_sums(H, state.dets, state.coefficients[top], parents=top).result()
    numerator = torch.from_numpy(numerator[:, 0].copy())
    occ = unpack_keys(unique, H.n_spin_orbitals)
    gap = (H.diagonal(occ).to(torch.float64).cpu() - state.energy).clamp(min=1e-6)
    pt2 = numerator.square() / gap
    keep = torch.argsort(pt2, descending=True)[:n_new]
    return occ[keep]


def selected_ci(H, start: CIState, *, max_determinants: int, growth: float = 2.0, parents: int = 1024,
                on_round: Callable[[CIState], None] | None = None) -> CIState:
    """CIPSI from ``start``: add the ``(growth - 1) * D`` best determinants by
    :func:`pt2_selection` and rediagonalise, until the space holds ``max_determinants`` (or
    nothing is left to add). The reference (``start.dets[0]``) stays first; the energy falls
    variationally at every step. ``on_round(state)``, if given, sees the state after every
    round (an energy-against-size curve)."""
    if growth <= 1 or max_determinants < 1:
        raise ValueError(f"growth must be > 1 and max_determinants >= 1, got {growth}, {max_determinants}")
    state = start
    while state.dets.shape[0] < max_determinants:
        n_new = min(int((growth - 1) * state.dets.shape[0]) + 1, max_determinants - state.dets.shape[0])
        new = pt2_selection(H, state, n_new, parents=parents)
        if new.shape[0] == 0:
            break
        state = subspace_state(H, torch.cat((state.dets, new)), state.dets[0])
        if on_round is not None:
            on_round(state)
    return state
