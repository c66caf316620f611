"""DMRG reference energies through ``block2`` (beyond exact diagonalisation).

``block2`` (Zhai et al., J. Chem. Phys. 159, 234801 (2023)) is the field's standard ab initio
DMRG code; it is an optional extra (``pip install 'nnqs[dmrg]'``) and imported only here.

The protocol is the usual one for a reference energy: sweeps at increasing bond dimensions
``M`` (noise in the first half of the sweeps at each ``M``, none in the last half), the energy and
the largest discarded weight of the last sweep at each ``M``, and a linear fit of ``E``
against the discarded weight over the largest ``M`` values, extrapolated to zero discarded
weight; a bond dimension whose last sweep ended above the HF energy (trapped) is left out. The
reported uncertainty is a fifth of the extrapolation distance (the common rule of
thumb, e.g. Olivares-Amaya et al., J. Chem. Phys. 142, 034102 (2015)).

The Hamiltonian is solved in its own ``(n_alpha, n_beta)`` sector with ``SZ`` symmetry (the
same space as :mod:`hamiltonians.exact` and the network), or with ``symmetry = "su2"`` in the
spin-adapted space of ``S = (n_alpha - n_beta) / 2``: the same energy whenever the sector's
ground state has that spin (every closed-shell molecule here), with a bond dimension that
counts spin multiplets rather than states (so a given ``M`` holds more of the state). Either
way over the integrals as they are:
``h1`` and chemists' ``(pq|rs)``, constant included; the orbitals are reordered for the MPS
by ``block2``'s Fiedler ordering, which does not change the energy.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import asdict, dataclass

import numpy as np

from hamiltonians.protocol import Hamiltonian

__all__ = ["DMRGResult", "DMRGSolver", "dmrg_available", "dmrg_energy", "dmrg_label"]

logger = logging.getLogger(__name__)

DEFAULT_BOND_DIMS = (250, 500, 750, 1000)
#: Fresh starts (next seeds) after a start trapped above HF at every bond dimension.
RESTARTS = 2


def dmrg_available() -> bool:
    """Whether ``block2`` can be imported."""
    try:
        import pyblock2.driver.core  # noqa: F401
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class DMRGResult:
    """A DMRG reference.

    Attributes:
        energy: the extrapolated energy (Hartree).
        uncertainty: a fifth of ``|energy - variational|``.
        variational: the lowest sweep energy (at the largest ``M``), an upper bound.
        bond_dims, discarded_weights, energies: the last sweep at each bond dimension.
        fit_points: how many of the largest ``M`` entered the linear fit.
        symmetry: ``"sz"`` or ``"su2"`` (see :func:`dmrg_energy`).
    """

    energy: float
    uncertainty: float
    variational: float
    bond_dims: tuple[int, ...]
    discarded_weights: tuple[float, ...]
    energies: tuple[float, ...]
    fit_points: int
    symmetry: str = "sz"

    @property
    def extrapolated(self) -> bool:
        """Whether ``energy`` lies below the variational one (a fit was used); a single bond
        dimension, or energies that do not fall with the discarded weight, report the lowest
        variational energy instead, with an ``uncertainty`` that bounds nothing."""
        return self.energy < self.variational

    def to_dict(self) -> dict:
        out = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}
        out["extrapolated"] = self.extrapolated
        return out


def dmrg_label(details: dict | None) -> str:
    """How to name a DMRG reference from its :meth:`DMRGResult.to_dict`: ``"DMRG
    (extrapolated)"``, or when no fit was used ``"DMRG (M = 500, variational)"`` (``None``:
    ``"DMRG"``)."""
    if not details or "energy" not in details or "variational" not in details:   # e.g. stored from elsewhere
        return "DMRG"
    if details["energy"] < details["variational"]:
        return "DMRG (extrapolated)"
    return f"DMRG (M = {max(details.get('bond_dims') or [0])}, variational)"


def extrapolate(discarded_weights, energies, fit_points: int = 3) -> tuple[float, float, int]:
    """Linear fit of ``E`` against the discarded weight over the last ``fit_points`` entries
    (the largest bond dimensions); returns ``(E at zero weight, uncertainty, points used)``.

    With fewer than two distinct weights the lowest energy is returned with zero uncertainty.
    A fit whose slope is not positive (energies that do not fall with the discarded weight:
    sweeps not converged) is not used: the lowest energy is returned and the uncertainty is
    the spread of the energies fitted."""
    dw = np.asarray(discarded_weights, dtype=float)[-fit_points:]
    e = np.asarray(energies, dtype=float)[-fit_points:]
    best = float(np.min(energies))
    if dw.size < 2 or np.ptp(dw) <= 0:
        return best, 0.0, int(dw.size)
    slope, intercept = np.polyfit(dw, e, 1)
    if slope <= 0:
        logger.warning("DMRG energies do not fall with the discarded weight; no extrapolation")
        return best, float(np.ptp(e)), int(dw.size)
    intercept = float(min(intercept, best))  # the extrapolation never lies above a variational energy
    return intercept, abs(best - intercept) / 5, int(dw.size)


def untrapped_bond_dims(last: dict, hf_energy: float) -> tuple[int, ...]:
    """The bond dimensions (increasing) whose last sweep ended below ``hf_energy``.

    ``last`` maps ``M`` to ``(discarded weight, energy)``. An MPS above the HF energy is not in
    the ground state's basin (trapped sweeps), so its point would bend the extrapolation; it is
    left out with a warning. If every ``M`` is above HF, all are kept (nothing better to fit).
    """
    trapped = [m for m in sorted(last) if last[m][1] > hf_energy]
    if trapped:
        logger.warning("DMRG: M = %s ended above the HF energy %.6f (trapped sweeps); left out of the fit",
                       trapped, hf_energy)
    return tuple(m for m in sorted(last) if m not in trapped) or tuple(sorted(last))


def _new_driver(scratch: str, symmetry: str, threads: int | None, memory_gib: float, seed: int):
    """A block2 ``DMRGDriver`` in ``symmetry`` (``"sz"`` or ``"su2"``) with its random stream seeded."""
    from pyblock2.driver.core import DMRGDriver, SymmetryTypes

    driver = DMRGDriver(scratch=scratch, symm_type=SymmetryTypes.SZ if symmetry == "sz" else SymmetryTypes.SU2,
                        n_threads=threads, stack_mem=int(memory_gib * 2**30))
    driver.bw.b.Random.rand_seed(seed)
    return driver


def dmrg_energy(
    H: Hamiltonian,
    *,
    bond_dims=DEFAULT_BOND_DIMS,
    sweeps_per_bond_dim: int = 4,
    threads: int | None = None,
    memory_gib: float = 2.0,
    scratch: str | None = None,
    symmetry: str = "sz",
    seed: int = 1,
) -> DMRGResult:
    """The DMRG ground-state energy of ``H`` in its ``(n_alpha, n_beta)`` sector.

    Args:
        H: a :class:`hamiltonians.MolecularHamiltonian`.
        bond_dims: increasing bond dimensions ``M``; each gets ``sweeps_per_bond_dim`` sweeps.
        threads: OpenMP threads for block2 (default: its own choice).
        memory_gib: block2's stack memory.
        scratch: a folder for block2's files (default: a temporary folder, removed after).
        symmetry: ``"sz"`` (the ``(n_alpha, n_beta)`` sector) or ``"su2"`` (spin
            ``S = (n_alpha - n_beta) / 2``; see the module docstring).
        seed: block2's random stream, which draws the starting MPS (block2 takes 0 for the
            clock). A start whose sweeps all end above HF (trapped: H2O / STO-3G, SU2, M = 10-40
            from seed 3) is drawn again from the next seed, up to :data:`RESTARTS` times.

    Raises:
        ImportError: block2 is not installed (``pip install 'nnqs[dmrg]'``).
    """
    try:
        import pyblock2.driver.core  # noqa: F401
    except ImportError as exc:
        raise ImportError("DMRG references need block2: pip install 'nnqs[dmrg]'") from exc
    if symmetry not in ("sz", "su2"):
        raise ValueError(f"symmetry must be 'sz' or 'su2', got {symmetry!r}")
    bond_dims = tuple(int(m) for m in bond_dims)
    if not bond_dims or any(m < 1 for m in bond_dims) or list(bond_dims) != sorted(bond_dims):
        raise ValueError(f"bond_dims must be positive and increasing, got {list(bond_dims)}")
    if sweeps_per_bond_dim < 2:
        raise ValueError("sweeps_per_bond_dim must be >= 2 (noise-free sweeps end each bond dimension)")
    schedule = [m for m in bond_dims for _ in range(sweeps_per_bond_dim)]
    # Noise in the first half of the sweeps at every M (1e-4 at the first, 1e-5 after), none in
    # the last half (noise at the first M alone can leave the sweeps stuck far above the ground
    # state: experiments/LOG.md).
    noises = [(1e-4 if m == bond_dims[0] else 1e-5) if i < sweeps_per_bond_dim // 2 else 0.0
              for m in bond_dims for i in range(sweeps_per_bond_dim)]
    thresholds = [1e-7] * len(schedule)
    from hamiltonians.reference_determinant import lowest_determinant

    hf_energy = lowest_determinant(H).energy   # the reference determinant's <D|H|D>, whatever the orbitals
    for attempt in range(1 + RESTARTS):   # a start trapped above HF at every M is drawn again
        with tempfile.TemporaryDirectory(prefix="nnqs-dmrg-", dir=scratch) as tmp:
            driver = _new_driver(tmp, symmetry, threads, memory_gib, seed + attempt)
            driver.initialize_system(n_sites=H.n_orbitals, n_elec=H.n_electrons, spin=H.n_alpha - H.n_beta)
            h1 = H.h1.detach().cpu().double().numpy()
            eri = H.eri.detach().cpu().double().numpy()
            mpo = driver.get_qc_mpo(h1e=h1, g2e=eri, ecore=float(H.constant), reorder="fiedler", iprint=0)
            ket = driver.get_random_mps(tag="GS", bond_dim=bond_dims[0], nroots=1)
            driver.dmrg(mpo, ket, n_sweeps=len(schedule), bond_dims=schedule, noises=noises, thrds=thresholds,
                        iprint=0)
            sweep_m, sweep_dw, sweep_e = driver.get_dmrg_results()
            del driver
        last = {}  # bond dimension -> (discarded weight, energy) of its last sweep
        for m, dw, e in zip(sweep_m, sweep_dw, sweep_e):
            last[int(m)] = (float(dw), float(np.asarray(e).ravel()[0]))
        if min(e for _, e in last.values()) < hf_energy:
            break
        logger.warning("DMRG: every bond dimension ended above HF from seed %d; starting again from seed %d",
                       seed + attempt, seed + attempt + 1)
    ms = untrapped_bond_dims(last, hf_energy)
    dws = tuple(last[m][0] for m in ms)
    es = tuple(last[m][1] for m in ms)
    energy, uncertainty, points = extrapolate(dws, es)
    result = DMRGResult(energy, uncertainty, float(min(es)), ms, dws, es, points, symmetry)
    logger.info("DMRG (%s): E(M=%d) = %.8f, extrapolated %.8f +- %.2g Ha", symmetry.upper(), ms[-1], es[-1],
                energy, uncertainty)
    return result


class DMRGSolver:
    """block2 DMRG (spin-adapted, SU2) as PySCF's ``fcisolver``: the DMRG-CASCI / DMRG-CASSCF
    reference for active spaces beyond FCI (``mc.fcisolver = DMRGSolver(...)``; ``mc2step``).

    ``kernel(h1e, eri, norb, nelec, ci0=None, ecore=0)`` returns ``(e_tot, state)``: the last
    sweep's (variational) energy at the largest bond dimension, and a dict holding the RDMs of that
    MPS, which ``make_rdm1`` / ``make_rdm12`` return in PySCF's conventions (block2's spin-free
    ``dm2[p,q,r,s] = sum <p+ q+ r s>`` becomes PySCF's ``dm2.transpose(0, 3, 1, 2)``).

    Attributes:
        bond_dims, sweeps_per_bond_dim, noise: the sweep schedule (noise in the first half of each
            bond dimension's sweeps).
        threads, memory_gib, scratch: block2's OpenMP threads, stack memory and scratch folder.
        seed: block2's random stream (the starting MPS; 0 is block2's clock).
        conv_tol: the Davidson solver's energy threshold per sweep; the RDMs' error goes as its
            square root (1e-8 left them ~1e-4 off the FCI solver's on N2 / STO-3G CAS(6, 6)).
    """

    nroots = 1

    def __init__(self, bond_dims=(250, 500), sweeps_per_bond_dim: int = 6, noise: float = 1e-5,
                 threads: int | None = None, memory_gib: float = 2.0, scratch: str | None = None,
                 seed: int = 1, conv_tol: float = 1e-10) -> None:
        self.bond_dims, self.sweeps_per_bond_dim, self.noise = tuple(bond_dims), sweeps_per_bond_dim, noise
        self.seed, self.conv_tol = seed, conv_tol
        self.threads, self.memory_gib, self.scratch = threads, memory_gib, scratch
        self.converged = True
        self.calls = 0

    def dump_flags(self, verbose=None) -> None:
        logger.info("DMRGSolver: SU2, bond dimensions %s, %d sweeps each", list(self.bond_dims),
                    self.sweeps_per_bond_dim)

    def kernel(self, h1e, eri, norb, nelec, ci0=None, ecore=0, **kwargs):
        from pyscf import ao2mo
        from pyscf.fci.addons import _unpack_nelec

        n_alpha, n_beta = _unpack_nelec(nelec)
        eri = ao2mo.restore(1, np.asarray(eri, dtype=np.float64), norb)
        schedule = [m for m in self.bond_dims for _ in range(self.sweeps_per_bond_dim)]
        noises = [self.noise if i < self.sweeps_per_bond_dim // 2 else 0.0
                  for _ in self.bond_dims for i in range(self.sweeps_per_bond_dim)]
        with tempfile.TemporaryDirectory(prefix="nnqs-dmrgscf-", dir=self.scratch) as tmp:
            driver = _new_driver(tmp, "su2", self.threads, self.memory_gib, self.seed)
            driver.initialize_system(n_sites=norb, n_elec=n_alpha + n_beta, spin=n_alpha - n_beta)
            mpo = driver.get_qc_mpo(h1e=np.asarray(h1e, dtype=np.float64), g2e=eri, ecore=float(ecore),
                                    reorder="fiedler", iprint=0)
            ket = driver.get_random_mps(tag="GS", bond_dim=schedule[0], nroots=1)
            energy = driver.dmrg(mpo, ket, n_sweeps=len(schedule), bond_dims=schedule, noises=noises,
                                 thrds=[self.conv_tol] * len(schedule), iprint=0)
            state = {"energy": float(energy), "dm1": np.asarray(driver.get_1pdm(ket)),
                     "dm2": np.asarray(driver.get_2pdm(ket)).transpose(0, 3, 1, 2)}
            del driver
        self.calls += 1
        logger.info("DMRGSolver: CAS(%d, %d), M = %d: E = %.10f", n_alpha + n_beta, norb, schedule[-1], energy)
        return state["energy"], state

    def make_rdm1(self, state, norb, nelec, link_index=None, **kwargs):
        return state["dm1"]

    def make_rdm12(self, state, norb, nelec, link_index=None, **kwargs):
        return state["dm1"], state["dm2"]
