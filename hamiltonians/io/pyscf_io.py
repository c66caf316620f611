"""Molecular Hamiltonians from PySCF: SCF, MO integrals, frozen core / active space.

RHF for closed shells, ROHF for open shells (``spin = n_alpha - n_beta != 0``), internally stable
(a solution PySCF's stability analysis finds unstable is re-run from its rotated orbitals). MO integrals
come from ``pyscf.ao2mo``. With ``ncore`` doubly occupied inactive orbitals (frozen core) and an
active window ``A`` the CASCI effective Hamiltonian is

    h_eff = C_A^T (h + J[D_core] - 1/2 K[D_core]) C_A,    D_core = 2 C_core C_core^T
    E_core = E_nuc + tr[(h + 1/2 (J - 1/2 K)[D_core]) D_core]
    (pq|rs) = ao2mo over C_A

which is what ``pyscf.mcscf.CASCI`` diagonalises.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from hamiltonians.molecular import MolecularHamiltonian

__all__ = ["from_pyscf", "lowdin_hamiltonian", "build_molecule", "run_scf", "follow_instabilities", "integrals_from_scf", "to_pyscf_ci", "from_pyscf_ci",
           "dipole_operator"]

logger = logging.getLogger(__name__)


#: Atoms closer than this (Angstrom) are almost certainly a typo; PySCF does not say so.
MIN_ATOM_DISTANCE_ANGSTROM = 0.5
BOHR_IN_ANGSTROM = 0.52917721092


def _warn_close_atoms(atoms, unit: str) -> None:
    scale = BOHR_IN_ANGSTROM if str(unit).upper().startswith("B") else 1.0
    xyz = np.asarray([a[1] for a in atoms], dtype=float) * scale
    for i in range(len(xyz)):
        for j in range(i):
            d = float(np.linalg.norm(xyz[i] - xyz[j]))
            if d < MIN_ATOM_DISTANCE_ANGSTROM:
                logger.warning("atoms %d (%s) and %d (%s) are %.3f A apart (less than %.1f A): is the geometry "
                               "in the unit you meant?", j + 1, atoms[j][0], i + 1, atoms[i][0], d,
                               MIN_ATOM_DISTANCE_ANGSTROM)


#: Re-runs from an internally unstable SCF solution, at most.
MAX_STABILITY_ROUNDS = 3


def build_molecule(geometry, basis: str, *, charge: int = 0, spin: int = 0, unit: str = "Angstrom"):
    """A ``pyscf.gto.Mole``; ``geometry`` is a PySCF atom string or ``[(symbol, (x, y, z)), ...]``.

    Raises ``ValueError`` (one line) for an unknown basis or impossible charge/spin.
    """
    from pyscf import gto

    if not isinstance(geometry, str):
        geometry = [(str(a), tuple(float(c) for c in xyz)) for a, xyz in geometry]
    try:
        atoms = gto.format_atom(geometry, unit=1.0)
    except (RuntimeError, KeyError, ValueError, IndexError) as exc:
        raise ValueError(f"cannot parse geometry {geometry!r}: {exc}") from None
    unknown = sorted({a[0] for a in atoms if gto.charge(a[0]) == 0})
    if unknown:
        raise ValueError(f"unknown element(s) {', '.join(unknown)} in the geometry (use symbols such as H, Li, N)")
    nuclear = sum(gto.charge(a[0]) for a in atoms)
    _warn_close_atoms(atoms, unit)
    n_elec = nuclear - charge
    if n_elec < 0 or abs(spin) > n_elec or (n_elec + spin) % 2:
        raise ValueError(
            f"impossible electron count: {nuclear} nuclear charge - charge {charge} = {n_elec} electrons "
            f"cannot have spin 2S={spin}"
        )
    try:
        mol = gto.M(atom=geometry, basis=basis, charge=charge, spin=spin, unit=unit, verbose=0)
    except (RuntimeError, KeyError, ValueError, NotImplementedError) as exc:
        raise ValueError(f"cannot build molecule (basis {basis!r}, charge {charge}, spin {spin}): {exc}") from None
    return mol


def run_scf(mol, *, conv_tol: float = 1e-11):
    """Converged RHF (closed shell) or ROHF (open shell) object for ``mol``, internally stable
    (:func:`follow_instabilities`)."""
    from pyscf import scf

    mf = scf.RHF(mol) if mol.spin == 0 else scf.ROHF(mol)
    mf.conv_tol = conv_tol
    mf.kernel()
    if not mf.converged:
        logger.warning("SCF did not converge for %s; trying second-order SCF", mol.atom)
        mf = mf.newton()
        mf.kernel()
    if not mf.converged:
        raise RuntimeError("SCF did not converge")
    first = float(mf.e_tot)
    mf, rounds = follow_instabilities(mf)
    if rounds:
        logger.info("SCF was internally unstable: followed %d time(s), %.10f -> %.10f Ha", rounds, first, mf.e_tot)
    if not mf.converged:
        raise RuntimeError("SCF did not converge after following an internal instability")
    return mf


def follow_instabilities(mf, max_rounds: int = MAX_STABILITY_ROUNDS):
    """``(mf, rounds)``: a converged PySCF SCF object re-run from its rotated orbitals while
    ``mf.stability()`` finds an internal instability (a lower solution of the same kind: for
    stretched bonds PySCF's default guess often converges to an excited RHF), at most
    ``max_rounds`` times; ``rounds`` is how many re-runs were made."""
    for rounds in range(max_rounds):
        mo, *_ = mf.stability()
        if np.allclose(mo, mf.mo_coeff):
            return mf, rounds
        mf.kernel(mf.make_rdm1(mo, mf.mo_occ))
        if not mf.converged:
            return mf, rounds + 1
    return mf, max_rounds


def _resolve_window(n_mo, n_elec, spin, frozen_core, active_space):
    """``(ncore, nact, n_alpha_act, n_beta_act)``; active_space is ``(n_electrons, n_orbitals)``."""
    if active_space is None:
        ncore = int(frozen_core)
        nact = n_mo - ncore
        ne = n_elec - 2 * ncore
    else:
        ne, nact = (int(x) for x in active_space)
        if (n_elec - ne) % 2:
            raise ValueError(f"active space {active_space}: {n_elec - ne} inactive electrons is odd")
        ncore = (n_elec - ne) // 2
        if frozen_core and int(frozen_core) != ncore:
            raise ValueError(
                f"frozen_core={frozen_core} contradicts active_space={active_space} "
                f"(which implies {ncore} core orbitals)"
            )
    na, nb = (ne + spin) // 2, (ne - spin) // 2
    if ncore < 0 or nact <= 0 or ncore + nact > n_mo or (ne + spin) % 2 or not (0 <= nb <= na <= nact):
        raise ValueError(
            f"impossible window: {n_elec} electrons, spin {spin}, {n_mo} orbitals, "
            f"frozen_core={frozen_core}, active_space={active_space}"
        )
    return ncore, nact, na, nb


def integrals_from_scf(mf, ncore: int, nact: int):
    """``(constant, h1[nact, nact], eri[nact]*4)`` numpy arrays of the CASCI effective Hamiltonian."""
    from pyscf import ao2mo, scf

    mol = mf.mol
    mo = mf.mo_coeff
    hcore = mf.get_hcore()
    c_core, c_act = mo[:, :ncore], mo[:, ncore : ncore + nact]
    constant = mol.energy_nuc()
    veff = np.zeros_like(hcore)
    if ncore:
        dm_core = 2.0 * c_core @ c_core.T
        vj, vk = scf.hf.get_jk(mol, dm_core)
        veff = vj - 0.5 * vk
        constant += float(np.einsum("ij,ji->", hcore + 0.5 * veff, dm_core))
    h1 = c_act.T @ (hcore + veff) @ c_act
    h1 = 0.5 * (h1 + h1.T)  # exactly symmetric (removes ~1e-17 round-off)
    eri = ao2mo.restore(1, ao2mo.full(mol, c_act), nact)
    eri = 0.5 * (eri + eri.transpose(2, 3, 0, 1))  # exact (pq|rs) = (rs|pq), 8-fold symmetric
    return float(constant), h1, eri


def from_pyscf(
    geometry,
    basis: str,
    *,
    charge: int = 0,
    spin: int = 0,
    frozen_core: int = 0,
    active_space: tuple[int, int] | None = None,
    unit: str = "Angstrom",
    conv_tol: float = 1e-11,
    localise: str = "none",
) -> MolecularHamiltonian:
    """Build the molecular Hamiltonian of a molecule in the (RO)HF orbital basis.

    Args:
        geometry: PySCF atom string (``"N 0 0 0; N 0 0 1.1"``) or ``[(symbol, (x, y, z))]``.
        basis: basis set name (``"sto-3g"``, ``"cc-pvdz"``, ...).
        charge, spin: total charge and ``2S = n_alpha - n_beta`` (PySCF convention).
        frozen_core: number of lowest spatial orbitals kept doubly occupied.
        active_space: ``(n_electrons, n_orbitals)`` active window above the core
            (chemists' CAS(n_e, n_o)); the core is everything below it.
        localise: ``"none"``, or ``"pm"`` / ``"boys"``: the active orbitals Pipek-Mezey / Boys
            localised among themselves (a rotation inside the window: the CASCI energy is
            unchanged, but no determinant of them is Hartree-Fock's and their index says nothing
            about energy; the kind of active space brought for transition-metal chemistry).
    Returns:
        :class:`MolecularHamiltonian` (float64, CPU) whose ``source`` records the spec and
        ``hf_energy_pyscf``; unless localised, its HF-determinant diagonal equals the (RO)HF energy.
    """
    if localise not in ("none", "pm", "boys"):
        raise ValueError(f"localise must be 'none', 'pm' or 'boys', got {localise!r}")
    mol = build_molecule(geometry, basis, charge=charge, spin=spin, unit=unit)
    ncore, nact, na, nb = _resolve_window(mol.nao_nr(), mol.nelectron, mol.spin, frozen_core, active_space)
    mf = run_scf(mol, conv_tol=conv_tol)
    e_scf = float(mf.e_tot)
    if localise != "none":
        mf.mo_coeff = _localised(mol, mf.mo_coeff, ncore, nact, localise)
    constant, h1, eri = integrals_from_scf(mf, ncore, nact)
    source = {
        "kind": "pyscf",
        "geometry": geometry if isinstance(geometry, str) else [[a, list(map(float, x))] for a, x in geometry],
        "basis": basis,
        "charge": int(charge),
        "spin": int(spin),
        "frozen_core": int(ncore) if active_space is None else int(frozen_core),
        "active_space": list(active_space) if active_space is not None else None,
        "unit": unit,
        "n_core": int(ncore),
        "scf": type(mf).__name__,
        "hf_energy_pyscf": e_scf,
        **({"localise": localise} if localise != "none" else {}),
    }
    logger.info(
        "from_pyscf: %s/%s, %d core, %d active orbitals%s, (%d, %d) electrons, E_HF=%.10f",
        source["geometry"], basis, ncore, nact, "" if localise == "none" else f" ({localise} localised)", na, nb,
        e_scf,
    )
    return MolecularHamiltonian(
        nact, na, nb, constant, torch.from_numpy(np.ascontiguousarray(h1)),
        torch.from_numpy(np.ascontiguousarray(eri)), source=source,
    )


def _localised(mol, mo_coeff, ncore: int, nact: int, localise: str):
    """``mo_coeff`` with its active columns ``[ncore, ncore + nact)`` localised by ``localise``."""
    from pyscf import lo

    mo = np.array(mo_coeff, copy=True)
    mo[:, ncore:ncore + nact] = {"pm": lo.PM, "boys": lo.Boys}[localise](mol, mo[:, ncore:ncore + nact]).kernel()
    return mo


def lowdin_hamiltonian(geometry, basis: str, *, charge: int = 0, spin: int = 0,
                       unit: str = "Angstrom") -> MolecularHamiltonian:
    """The molecule's Hamiltonian in its Lowdin-orthogonalised atomic orbitals (localised, one per
    basis function; no SCF, so no determinant of them is Hartree-Fock's), float64, CPU; all
    electrons, every orbital."""
    from pyscf import ao2mo, lo

    mol = build_molecule(geometry, basis, charge=charge, spin=spin, unit=unit)
    c = lo.orth_ao(mol, "lowdin")
    n = c.shape[1]
    h1 = c.T @ (mol.intor("int1e_kin") + mol.intor("int1e_nuc")) @ c
    eri = ao2mo.restore(1, ao2mo.kernel(mol, c), n)
    na, nb = (mol.nelectron + mol.spin) // 2, (mol.nelectron - mol.spin) // 2
    source = {"kind": "pyscf", "orbitals": "lowdin", "basis": basis, "charge": int(charge), "spin": int(spin),
              "unit": unit, "geometry": geometry if isinstance(geometry, str) else
              [[a, list(map(float, x))] for a, x in geometry]}
    return MolecularHamiltonian(n, na, nb, float(mol.energy_nuc()), torch.from_numpy(np.ascontiguousarray(h1)),
                                torch.from_numpy(np.ascontiguousarray(eri)), source=source)


def dipole_operator(geometry, basis: str, *, charge: int = 0, spin: int = 0, frozen_core: int = 0,
                    active_space: tuple[int, int] | None = None, unit: str = "Angstrom", conv_tol: float = 1e-11):
    """The dipole moment as a function of the active 1-RDM, for the orbitals :func:`from_pyscf`
    builds from the same arguments (the SCF is rerun)::

        mu_k = constant[k] - sum_pq r[k, p, q] dm1[p, q]     (a.u., origin at 0)

    ``constant``: the nuclei's dipole minus the doubly occupied core's; ``r[k]``: ``<p|r_k|q>``
    over the active orbitals. Returns ``(constant [3], r [3, nact, nact], h1 [nact, nact],
    mo_coeff [nao, nact])``: ``h1`` the active one-electron integrals, for the caller to check that
    these orbitals are the ones it trained on (an orbital of the other sign, or another rotation
    of a degenerate pair, changes it), ``mo_coeff`` the active orbitals in the AO basis (PySCF's
    ``mol.ao_labels()`` order)."""
    mol = build_molecule(geometry, basis, charge=charge, spin=spin, unit=unit)
    ncore, nact, _, _ = _resolve_window(mol.nao_nr(), mol.nelectron, mol.spin, frozen_core, active_space)
    mf = run_scf(mol, conv_tol=conv_tol)
    _, h1, _ = integrals_from_scf(mf, ncore, nact)
    r_ao = mol.intor_symmetric("int1e_r", comp=3)
    mo = mf.mo_coeff
    c_core, c_act = mo[:, :ncore], mo[:, ncore:ncore + nact]
    nuclear = np.einsum("i,ix->x", mol.atom_charges(), mol.atom_coords())
    core = 2.0 * np.einsum("xij,ip,jp->x", r_ao, c_core, c_core)
    r_act = np.einsum("xij,ip,jq->xpq", r_ao, c_act, c_act)
    return nuclear - core, r_act, h1, c_act


def _ci_signs(occ, n: int, n_alpha: int, n_beta: int):
    """For determinants ``occ[D, 2N]``: the PySCF string indices ``(ia, ib)`` of each and the sign
    that maps PySCF's order (every alpha creator before every beta one) onto the interleaved one
    (one transposition per alpha ``i`` and beta ``j`` with ``j < i``)."""
    from pyscf.fci import cistring

    occ = np.asarray(occ, dtype=np.int64)
    alpha, beta = occ[:, 0::2], occ[:, 1::2]
    powers = 1 << np.arange(n, dtype=np.int64)
    ia = cistring.strs2addr(n, n_alpha, alpha @ powers)
    ib = cistring.strs2addr(n, n_beta, beta @ powers)
    beta_below = np.cumsum(beta, axis=1) - beta   # beta electrons below each orbital
    sign = 1 - 2 * ((alpha * beta_below).sum(1) % 2)
    return ia, ib, sign


def to_pyscf_ci(occ, amplitudes, n: int, n_alpha: int, n_beta: int) -> np.ndarray:
    """A PySCF FCI vector ``ci[n_alpha_strings, n_beta_strings]`` (``pyscf.fci``'s layout) from
    amplitudes ``[D]`` over determinants ``occ[D, 2N]`` in this package's interleaved Jordan–Wigner
    order (docs/design.md §1); determinants not given are 0."""
    from pyscf.fci import cistring

    amplitudes = np.asarray(amplitudes)
    ia, ib, sign = _ci_signs(occ, n, n_alpha, n_beta)
    ci = np.zeros((cistring.num_strings(n, n_alpha), cistring.num_strings(n, n_beta)), dtype=amplitudes.dtype)
    ci[ia, ib] = sign * amplitudes
    return ci


def from_pyscf_ci(ci, occ, n: int, n_alpha: int, n_beta: int) -> np.ndarray:
    """The amplitudes ``[D]`` of determinants ``occ[D, 2N]`` (interleaved order) in a PySCF FCI
    vector ``ci``: the inverse of :func:`to_pyscf_ci` on those determinants."""
    from pyscf.fci import cistring

    ia, ib, sign = _ci_signs(occ, n, n_alpha, n_beta)
    return sign * np.asarray(ci).reshape(cistring.num_strings(n, n_alpha), -1)[ia, ib]
