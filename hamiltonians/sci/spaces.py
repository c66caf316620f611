"""CI spaces, exactly in this package's basis: CISD, CASCI and their union.

Each diagonalises the Hamiltonian projected onto a set of determinants (:func:`ci_state`, with
:func:`hamiltonians.sci.diagonalise.diagonalise`, so the Jordan–Wigner signs of docs/design.md §1
hold by construction):

* CISD: the Hartree–Fock determinant plus every spin-conserving single and double excitation
  of it (from :meth:`MolecularHamiltonian.connected`). Good near equilibrium.
* CASCI(n, m): every distribution of ``n`` active electrons over ``m`` active orbitals (the
  ``m`` orbitals around the Fermi level, counted in the original basis, which must be ordered by
  orbital energy as PySCF's canonical orbitals are), the orbitals below doubly occupied. It
  captures the static correlation of bond breaking, where the HF determinant carries little
  weight and CISD fails.

* CISD+CAS: the union of the two spaces. Its ground state is below both and holds both the
  static correlation of the active space and the doubles of the dynamic one.

Any of them grown by CIPSI (:func:`hamiltonians.sci.grow.grow` with ``select="pt2"``) brings in
the triples and quadruples that CISD lacks. Each is a cheap, correctly signed, variational
starting wavefunction (the network's start, :mod:`nnqs.training.start`, and
:class:`hamiltonians.sci.solver.SelectedCI`). A CI state's determinants are the reference first,
then the others in packed-key order; its vector's reference coefficient is positive.
"""

from __future__ import annotations

import torch

from hamiltonians.determinants import aufbau_occupation, enumerate_determinants, occupations_in_order
from hamiltonians.protocol import Hamiltonian
from hamiltonians.sci.diagonalise import diagonalise
from hamiltonians.sci.state import SCIState


def reference_first(dets: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """The unique rows of ``dets`` ``[D, 2N]``, ``reference`` ``[2N]`` first and the others in
    packed-key order (``ValueError`` if ``reference`` is not among them)."""
    dets = torch.unique(dets.to(torch.uint8).cpu(), dim=0)
    is_ref = (dets == reference.to(torch.uint8).cpu()).all(dim=1)
    if not bool(is_ref.any()):
        raise ValueError("the reference determinant is not in the CI space")
    return torch.cat((dets[is_ref], dets[~is_ref]))


def ci_state(H: Hamiltonian, dets: torch.Tensor, reference: torch.Tensor, *, v0=None) -> SCIState:
    """The lowest eigenstate of ``H`` projected onto the span of ``dets`` ``[D, 2N]``
    (duplicates dropped; ``reference`` ``[2N]`` must be one of them), in the order of
    :func:`reference_first`; ``v0`` (aligned with that order) warm-starts Lanczos."""
    dets = reference_first(dets, reference)
    return diagonalise(H, dets, v0=v0, tol=1e-12, reference=reference)


def singles_doubles(H: Hamiltonian, reference: torch.Tensor) -> torch.Tensor:
    """``reference`` ``[2N]`` and every spin-conserving single and double excitation of it,
    uint8 ``[D, 2N]`` (from :meth:`MolecularHamiltonian.connected`, zero elements included)."""
    excited, _, _ = H.connected(reference[None], eps=-1.0)
    return torch.cat((reference[None], excited.to(torch.uint8).cpu()))


def cisd(H: Hamiltonian, reference: torch.Tensor | None = None) -> SCIState:
    """The CISD ground state of ``H`` (closed or open shell).

    Args:
        reference: the reference determinant ``[2N]`` (default ``H.aufbau_occupation()``, the lowest
            orbitals; pass the permuted HF occupation when the orbitals were reordered).
    """
    hf = (H.aufbau_occupation() if reference is None else torch.as_tensor(reference)).to(torch.uint8).cpu()
    return ci_state(H, singles_doubles(H, hf), hf)


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


def cas_determinants(H: Hamiltonian, n_electrons: int, n_orbitals: int, order: list[int] | None = None):
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


def casci(H: Hamiltonian, n_electrons: int, n_orbitals: int, order: list[int] | None = None) -> SCIState:
    """The CASCI(``n_electrons``, ``n_orbitals``) ground state of ``H`` (see
    :func:`cas_determinants`); the reference is the HF determinant in position order."""
    dets, hf = cas_determinants(H, n_electrons, n_orbitals, order)
    return ci_state(H, dets, hf)


def cisd_cas(H: Hamiltonian, n_electrons: int, n_orbitals: int, order: list[int] | None = None) -> SCIState:
    """The ground state of ``H`` in the union of the CISD space (of the HF determinant) and the
    CAS(``n_electrons``, ``n_orbitals``) space (see :func:`cas_determinants`)."""
    dets, hf = cas_determinants(H, n_electrons, n_orbitals, order)
    return ci_state(H, torch.cat((singles_doubles(H, hf), dets)), hf)
