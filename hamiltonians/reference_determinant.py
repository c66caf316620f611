"""The reference determinant and the orbital order, found from the integrals.

Where the orbitals are canonical Hartree–Fock orbitals the lowest-index determinant (the aufbau
one) is the Hartree–Fock determinant. Where they are localised, unsorted or from another
calculation it can lie hartrees above the ground state, and every method that expands around
"the HF determinant" (CISD, CIPSI from it, a network's first token) starts in the wrong place.
This module finds the determinant of lowest diagonal energy ``<D|H|D>`` and an orbital order from
the integrals alone.

Rules:

* :func:`lowest_determinant` descends ``<D|H|D>`` from several starts: the aufbau determinant, a
  greedy filling (each electron placed where the partial determinant's diagonal is lowest;
  alternating spins, the restricted pattern, and all alpha then all beta, the broken-symmetry
  one) and ``restarts`` random occupations (seeded). A descent takes the best of the moves that
  keep the electron counts (one electron to an empty spin orbital of its spin, a doubly occupied
  orbital's pair to an empty orbital; where neither lowers it, one alpha and one beta electron at
  once) until none lowers it; a restricted descent moves pairs only. Each move's energy is the
  kernel's diagonal of the moved determinant (no incremental formula to trust). Every end, and
  the aufbau determinant, is also carried to its Fock aufbau fixed point (:func:`fock_aufbau`).
* The choice: a Hartree-Fock determinant of the given orbitals where the candidates (the aufbau
  determinant, then every descent's end) hold one, i.e. Brillouin's condition holds
  (:func:`brillouin_gradient` below :data:`BRILLOUIN`): canonical RHF/ROHF orbitals in any order
  give back their HF determinant, the aufbau one first, even where a broken-symmetry determinant
  lies lower (stretched bonds; the HF one keeps the spin). Elsewhere (localised or unsorted
  orbitals) the lowest diagonal reached; ties go to the aufbau determinant, then the earlier
  descent.
* :func:`brute_force_lowest` is the obviously-correct reference: the minimum over every
  determinant (small spaces only).
* :func:`fiedler_order` orders the orbitals along the Fiedler vector (the Laplacian's second
  eigenvector) of the exchange graph ``K_pq = (pq|qp)``: strongly exchanging orbitals end up
  next to each other (block2's default for DMRG). The vector's sign is fixed so that its largest
  entry is positive; ties keep the given order.

Index conventions: occupations ``[2N]`` interleave spins (``2p`` alpha, ``2p + 1`` beta of spatial
orbital ``p``), as everywhere in :mod:`hamiltonians`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import torch

from hamiltonians.determinants import aufbau_occupation, enumerate_determinants
from hamiltonians.protocol import Hamiltonian

__all__ = ["FoundReference", "lowest_determinant", "brute_force_lowest", "descend", "fock_aufbau",
           "brillouin_gradient", "fiedler_order"]

log = logging.getLogger(__name__)

#: An energy lower than the incumbent's by more than this replaces it (Hartree).
TIE = 1e-10
#: The largest ROHF orbital gradient (Hartree) of a determinant taken as Hartree-Fock's
#: (:func:`brillouin_gradient`; converged SCF orbitals leave ~1e-7).
BRILLOUIN = 1e-4


@dataclass(frozen=True)
class FoundReference:
    """The determinant :func:`lowest_determinant` chose.

    Attributes:
        occupation: uint8 ``[2N]`` in the Hamiltonian's orbital order.
        energy: its diagonal ``<D|H|D>`` (Hartree, constant included).
        found_by: how it was chosen: ``"aufbau (Hartree-Fock)"`` (the lowest-index determinant
            satisfies Brillouin's condition), ``"Hartree-Fock, D"`` (another candidate does;
            ``D`` names the descent that reached it), ``"aufbau (lowest)"`` or ``"lowest, D"``
            (no candidate is a Hartree-Fock determinant: the lowest diagonal).
        aufbau_energy: the lowest-index determinant's diagonal, for comparison.
        starts: ``{descent: energy reached}`` for every descent tried.
    """

    occupation: torch.Tensor
    energy: float
    found_by: str
    aufbau_energy: float
    starts: dict = field(default_factory=dict)

    @property
    def is_aufbau(self) -> bool:
        return self.found_by.startswith("aufbau")

    def describe(self) -> str:
        """``"alpha 0-4, beta 0-4"``-style occupied orbitals, then the energies."""
        occ = self.occupation.tolist()
        alpha = [p for p in range(len(occ) // 2) if occ[2 * p]]
        beta = [p for p in range(len(occ) // 2) if occ[2 * p + 1]]
        return (f"alpha {alpha}, beta {beta}: <D|H|D> {self.energy:.8f} Ha ({self.found_by}; the aufbau determinant "
                f"{self.aufbau_energy:.8f}, {1e3 * (self.aufbau_energy - self.energy):.3f} mHa above)")

    def to_dict(self) -> dict:
        return {"occupation": "".join(str(int(v)) for v in self.occupation.tolist()), "energy": self.energy,
                "found_by": self.found_by, "aufbau_energy": self.aufbau_energy, "starts": dict(self.starts)}


def _energies(H: Hamiltonian, occ: torch.Tensor) -> np.ndarray:
    return H.diagonal(occ.to(H.device)).detach().cpu().double().numpy()


def _singles(occ: torch.Tensor, spin: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(i, a)`` ``[M]``: every move of one electron of ``spin`` from orbital ``i`` to empty ``a``."""
    filled, empty = torch.nonzero(occ[spin::2]).flatten(), torch.nonzero(occ[spin::2] == 0).flatten()
    i, a = torch.meshgrid(filled, empty, indexing="ij")
    return i.flatten(), a.flatten()


def _moved(occ: torch.Tensor, changes: list[tuple[torch.Tensor, int]]) -> torch.Tensor:
    """``occ`` repeated once per move, each row with ``changes``' spin orbitals ``[M]`` set to its value."""
    moved = occ.repeat(changes[0][0].numel(), 1)
    rows = torch.arange(moved.shape[0])
    for where, value in changes:
        moved[rows, where] = value
    return moved


def _moves(occ: torch.Tensor, kind: str) -> torch.Tensor:
    """The determinants one move away from ``occ`` ``[2N]``, uint8 ``[M, 2N]``. ``kind``:
    ``"pairs"`` (a doubly occupied orbital's pair to an empty orbital), ``"cheap"`` (those and one
    electron to an empty spin orbital of its spin) or ``"both spins"`` (one alpha and one beta
    electron at once)."""
    n = occ.shape[0] // 2
    out = []
    if kind == "both spins":
        (ia, aa), (ib, ab) = _singles(occ, 0), _singles(occ, 1)
        ka, kb = (k.flatten() for k in torch.meshgrid(torch.arange(ia.numel()), torch.arange(ib.numel()),
                                                      indexing="ij"))
        if ka.numel():
            out.append(_moved(occ, [(2 * ia[ka], 0), (2 * aa[ka], 1), (2 * ib[kb] + 1, 0), (2 * ab[kb] + 1, 1)]))
        return torch.cat(out) if out else occ[None][:0]
    if kind == "cheap":
        for s in (0, 1):
            i, a = _singles(occ, s)
            if i.numel():
                out.append(_moved(occ, [(2 * i + s, 0), (2 * a + s, 1)]))
    pairs = occ.view(n, 2).sum(1)
    i, a = (k.flatten() for k in torch.meshgrid(torch.nonzero(pairs == 2).flatten(), torch.nonzero(pairs == 0).flatten(),
                                                indexing="ij"))
    if i.numel():
        out.append(_moved(occ, [(2 * i, 0), (2 * i + 1, 0), (2 * a, 1), (2 * a + 1, 1)]))
    return torch.cat(out) if out else occ[None][:0]


def descend(H: Hamiltonian, occ: torch.Tensor, *, restricted: bool = False,
            max_moves: int = 10_000) -> tuple[torch.Tensor, float, int]:
    """Steepest descent of ``<D|H|D>`` from ``occ`` ``[2N]`` over :func:`_moves` until no move
    lowers it (``restricted``: pairs of a doubly occupied orbital only, so a closed-shell start
    stays closed-shell); returns ``(occupation, energy, moves made)``."""
    occ = torch.as_tensor(occ).to(torch.uint8).cpu().clone()
    energy = float(_energies(H, occ[None])[0])
    made = 0
    while made < max_moves:
        for kind in (("pairs",) if restricted else ("cheap", "both spins")):   # both spins at once where stuck
            moved = _moves(occ, kind)
            energies = _energies(H, moved) if moved.shape[0] else np.zeros(0)
            best = int(np.argmin(energies)) if energies.size else -1
            if best >= 0 and energies[best] < energy - TIE:
                occ, energy, made = moved[best].clone(), float(energies[best]), made + 1
                break
        else:
            return occ, energy, made
    return occ, energy, made


def _greedy(H: Hamiltonian, spins: list[int]) -> torch.Tensor:
    """Electrons placed one at a time, of the spins ``spins`` in turn, each in the empty spin
    orbital where the partial determinant's diagonal is lowest (lowest index on ties)."""
    n = H.n_orbitals
    occ = torch.zeros(2 * n, dtype=torch.uint8)
    for s in spins:
        empty = torch.nonzero(occ[s::2] == 0).flatten()
        trial = occ.repeat(empty.numel(), 1)
        trial[torch.arange(empty.numel()), 2 * empty + s] = 1
        occ = trial[int(np.argmin(_energies(H, trial)))]
    return occ


def _random_occupation(n: int, n_alpha: int, n_beta: int, generator: torch.Generator) -> torch.Tensor:
    occ = torch.zeros(2 * n, dtype=torch.uint8)
    occ[2 * torch.randperm(n, generator=generator)[:n_alpha]] = 1
    occ[2 * torch.randperm(n, generator=generator)[:n_beta] + 1] = 1
    return occ


def _fock(H: Hamiltonian, alpha: np.ndarray, beta: np.ndarray) -> list[np.ndarray]:
    """``[f^a, f^b]``, each ``[N, N]``, of the determinant with occupied orbitals ``alpha``, ``beta``
    (bool ``[N]``): ``f^s_pq = h_pq + sum_{j occ} (pq|jj) - sum_{j occ in s} (pj|jq)``."""
    h1 = H.h1.detach().cpu().double().numpy()
    eri = H.eri.detach().cpu().double().numpy()
    diagonal = np.einsum("pqjj->pqj", eri)
    coulomb = diagonal[:, :, alpha].sum(2) + diagonal[:, :, beta].sum(2)
    exchange = np.einsum("pjjq->pjq", eri)
    return [h1 + coulomb - exchange[:, spin].sum(1) for spin in (alpha, beta)]


def fock_aufbau(H: Hamiltonian, occ: torch.Tensor, *, max_iterations: int = 50) -> torch.Tensor:
    """From ``occ`` ``[2N]``, each spin's electrons moved to the orbitals of lowest ``f^s_pp``
    (its Fock matrix's diagonal, :func:`_fock`) until the occupation repeats: in canonical SCF
    orbitals, in any order, the Hartree-Fock determinant is such a fixed point."""
    occ = torch.as_tensor(occ).to(torch.uint8).cpu().clone()
    seen = set()
    for _ in range(max_iterations):
        key = bytes(occ.tolist())
        if key in seen:
            break
        seen.add(key)
        fock = _fock(H, occ[0::2].bool().numpy(), occ[1::2].bool().numpy())
        new = torch.zeros_like(occ)
        for spin, count in ((0, H.n_alpha), (1, H.n_beta)):
            lowest = np.argsort(np.diag(fock[spin]), kind="stable")[:count]
            new[2 * torch.from_numpy(lowest) + spin] = 1
        occ = new
    return occ


def brillouin_gradient(H: Hamiltonian, occ: torch.Tensor) -> float:
    """The largest ROHF orbital gradient of determinant ``occ`` ``[2N]`` in these orbitals: with
    ``f^s_pq = h_pq + sum_{j occ} (pq|jj) - sum_{j occ in s} (pj|jq)``, doubly occupied ``d``,
    singly occupied (alpha) ``o`` and empty ``v`` orbitals, the largest of ``|f^a_dv + f^b_dv|``,
    ``|f^b_do|``, ``|f^a_ov|``. Zero where ``occ`` is the Hartree–Fock determinant of canonical
    (RHF or ROHF) orbitals, in any order; ``inf`` where a beta electron sits in an orbital without
    an alpha one (no ROHF determinant)."""
    occ = torch.as_tensor(occ).to(torch.uint8).cpu()
    alpha, beta = occ[0::2].bool().numpy(), occ[1::2].bool().numpy()
    if (beta & ~alpha).any():
        return float("inf")
    fock = _fock(H, alpha, beta)
    d, o, v = alpha & beta, alpha & ~beta, ~alpha
    blocks = [(fock[0] + fock[1])[np.ix_(d, v)], fock[1][np.ix_(d, o)], fock[0][np.ix_(o, v)]]
    return max([float(np.abs(b).max()) for b in blocks if b.size] or [0.0])


def lowest_determinant(H: Hamiltonian, *, restarts: int = 4, seed: int = 0, brillouin: float = BRILLOUIN) -> FoundReference:
    """The reference determinant of ``H`` from several starts' descents (see the module)."""
    na, nb = H.n_alpha, H.n_beta
    aufbau = aufbau_occupation(H.n_orbitals, na, nb).to(torch.uint8).cpu()
    aufbau_energy = float(_energies(H, aufbau[None])[0])
    alternating = [s for k in range(max(na, nb)) for s in (0, 1) if k < (na if s == 0 else nb)]
    restricted = _greedy(H, alternating)
    starts = {"aufbau": aufbau, "greedy restricted": restricted,
              "greedy broken-symmetry": _greedy(H, [0] * na + [1] * nb)}
    generator = torch.Generator().manual_seed(seed)
    for k in range(restarts):
        starts[f"random {k}"] = _random_occupation(H.n_orbitals, na, nb, generator)
    ends: dict[str, tuple[torch.Tensor, float]] = {}
    for name, start in (("aufbau", aufbau), ("greedy restricted", restricted)):
        occ, energy, _ = descend(H, start, restricted=True)
        ends[f"restricted descent from {name}"] = (occ, energy)
    for name, start in starts.items():
        occ, energy, _ = descend(H, start)
        ends[f"descent from {name}"] = (occ, energy)
    for name, (occ, _) in list(ends.items()) + [("aufbau", (aufbau, aufbau_energy))]:
        fixed = fock_aufbau(H, occ)
        ends[f"Fock aufbau from {name}"] = (fixed, float(_energies(H, fixed[None])[0]))
    reached = {name: energy for name, (_, energy) in ends.items()}
    # a Hartree-Fock determinant of these orbitals, where one is among the candidates: the aufbau one first
    candidates = [("aufbau", aufbau, aufbau_energy)] + [(name, occ, e) for name, (occ, e) in ends.items()]
    scf = [(e, k, name, occ) for k, (name, occ, e) in enumerate(candidates) if brillouin_gradient(H, occ) < brillouin]
    if scf:
        energy, _, name, occ = min(scf, key=lambda t: (round(t[0] / TIE), t[1]))
        label = "aufbau (Hartree-Fock)" if name == "aufbau" else f"Hartree-Fock, {name}"
        return FoundReference(occ, energy, label, aufbau_energy, reached)
    name, (occ, energy) = min(ends.items(), key=lambda kv: kv[1][1])
    if not energy < aufbau_energy - TIE:
        return FoundReference(aufbau, aufbau_energy, "aufbau (lowest)", aufbau_energy, reached)
    return FoundReference(occ, energy, f"lowest, {name}", aufbau_energy, reached)


def brute_force_lowest(H: Hamiltonian) -> tuple[torch.Tensor, float]:
    """The determinant of lowest ``<D|H|D>`` over the whole space (every determinant enumerated;
    the reference :func:`lowest_determinant` is tested against)."""
    dets = enumerate_determinants(H.n_orbitals, H.n_alpha, H.n_beta).to(torch.uint8)
    energies = _energies(H, dets)
    best = int(np.argmin(energies))
    return dets[best], float(energies[best])


def fiedler_order(H: Hamiltonian) -> list[int]:
    """The orbitals along the Fiedler vector of the exchange graph (see the module):
    ``order[i]`` is the original orbital at position ``i``."""
    n = H.n_orbitals
    eri = H.eri.detach().cpu().double().numpy()
    p = np.arange(n)
    exchange = np.abs(eri[p[:, None], p[None, :], p[None, :], p[:, None]])
    np.fill_diagonal(exchange, 0.0)
    laplacian = np.diag(exchange.sum(1)) - exchange
    _, vectors = np.linalg.eigh(laplacian)
    vector = vectors[:, 1] if n > 1 else np.zeros(1)
    if vector[int(np.argmax(np.abs(vector)))] < 0:
        vector = -vector
    return sorted(range(n), key=lambda q: (round(float(vector[q]), 10), q))
