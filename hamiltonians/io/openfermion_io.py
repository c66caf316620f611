"""Conversion to and from OpenFermion (``InteractionOperator``, ``MolecularData``).

OpenFermion writes ``H = c + sum T1[p,q] a+_p a_q + sum T2[p,q,r,s] a+_p a+_q a_r a_s`` on ``2N``
spin orbitals (interleaved, ``p = 2i + s``, the same order as ours). Ours is
``1/2 sum g[p,q,r,s] a+_p a+_r a_s a_q`` with ``g`` from ``(PQ|RS)``, so ``to_openfermion`` sets
``T2[p,q,r,s] = 1/2 g[p,s,q,r]``. ``MolecularData.two_body_integrals[p,q,r,s] = (ps|qr)``.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from hamiltonians.molecular import MolecularHamiltonian
from hamiltonians.protocol import Hamiltonian

__all__ = ["to_interaction_rdm", "from_openfermion", "to_openfermion"]

logger = logging.getLogger(__name__)


def _spin_delta(n: int) -> np.ndarray:
    """``d[p, i, s] = 1`` iff spin orbital ``p == 2i + s``: ``[2N, N, 2]``."""
    d = np.zeros((2 * n, n, 2))
    for i in range(n):
        d[2 * i, i, 0] = d[2 * i + 1, i, 1] = 1.0
    return d


def _spin_orbital_tensors(h1: np.ndarray, eri: np.ndarray):
    n = h1.shape[0]
    d = _spin_delta(n)
    t1 = np.einsum("pis,qjs,ij->pq", d, d, h1)
    # T2[p,q,r,s] = 1/2 (P S|Q R) delta(sp, ss) delta(sq, sr)
    ps = np.einsum("pia,sla,ilqr->psqr", d, d, eri)  # [p, s, Q, R] = (PS|QR) delta(sp, ss)
    t2 = 0.5 * np.einsum("psjk,qjb,rkb->pqrs", ps, d, d)
    return t1, t2


def to_openfermion(H: Hamiltonian):
    """``openfermion.InteractionOperator`` on ``2N`` qubits equal to ``H``."""
    from openfermion import InteractionOperator

    h1 = H.h1.detach().cpu().double().numpy()
    eri = H.eri.detach().cpu().double().numpy()
    t1, t2 = _spin_orbital_tensors(h1, eri)
    return InteractionOperator(float(H.constant), t1, t2)


def _antisym(t2: np.ndarray) -> np.ndarray:
    return t2 - t2.transpose(1, 0, 2, 3) - t2.transpose(0, 1, 3, 2) + t2.transpose(1, 0, 3, 2)


def _from_interaction(op, n_alpha, n_beta, tol):
    t1 = np.asarray(op.one_body_tensor)
    t2 = np.asarray(op.two_body_tensor)
    c = complex(op.constant)
    if max(np.abs(t1.imag).max(initial=0), np.abs(t2.imag).max(initial=0), abs(c.imag)) > tol:
        raise ValueError("complex InteractionOperator is not supported (real orbitals only)")
    t1, t2, c = t1.real, t2.real, c.real
    n_so = t1.shape[0]
    if n_so % 2:
        raise ValueError(f"odd number of spin orbitals ({n_so})")
    n = n_so // 2
    a, b = np.arange(n) * 2, np.arange(n) * 2 + 1
    h1 = t1[np.ix_(a, a)]
    eri = (
        t2[np.ix_(a, b, b, a)].transpose(0, 3, 1, 2)
        + t2[np.ix_(b, a, a, b)].transpose(1, 2, 0, 3)
        - t2[np.ix_(a, b, a, b)].transpose(0, 2, 1, 3)
        - t2[np.ix_(b, a, b, a)].transpose(1, 3, 0, 2)
    )
    # eri[i, j, k, l] = T[2i, 2k+1, 2l+1, 2j] + T[2k+1, 2i, 2j, 2l+1]
    #                   - T[2i, 2k+1, 2j, 2l+1] - T[2k+1, 2i, 2l+1, 2j]
    r1, r2 = _spin_orbital_tensors(h1, eri)
    err = max(np.abs(r1 - t1).max(initial=0), np.abs(_antisym(r2) - _antisym(t2)).max(initial=0))
    if err > tol:
        raise ValueError(
            f"InteractionOperator is not a spin-restricted molecular Hamiltonian "
            f"(reconstruction error {err:.2e})"
        )
    if n_alpha is None or n_beta is None:
        raise ValueError("an InteractionOperator does not carry electron counts: pass n_alpha and n_beta")
    return MolecularHamiltonian(n, n_alpha, n_beta, c, torch.from_numpy(h1.copy()),
                                torch.from_numpy(np.ascontiguousarray(eri)),
                                source={"kind": "openfermion.InteractionOperator"})


def from_openfermion(obj, *, n_alpha: int | None = None, n_beta: int | None = None,
                     tol: float = 1e-10) -> MolecularHamiltonian:
    """From an ``InteractionOperator`` (pass ``n_alpha``, ``n_beta``) or ``MolecularData``.

    For ``MolecularData`` the counts come from ``n_electrons`` and ``multiplicity`` unless
    given. Raises ``ValueError`` if the operator is complex or not spin-restricted.
    """
    from openfermion import InteractionOperator, MolecularData

    if isinstance(obj, MolecularData):
        ne, two_s = int(obj.n_electrons), int(obj.multiplicity) - 1
        na = n_alpha if n_alpha is not None else (ne + two_s) // 2
        nb = n_beta if n_beta is not None else (ne - two_s) // 2
        h1 = np.asarray(obj.one_body_integrals, dtype=float)
        eri = np.asarray(obj.two_body_integrals, dtype=float).transpose(0, 3, 1, 2)
        src = {"kind": "openfermion.MolecularData", "geometry": [[a, list(x)] for a, x in obj.geometry],
               "basis": obj.basis, "charge": int(obj.charge), "spin": two_s}
        return MolecularHamiltonian(h1.shape[0], na, nb, float(obj.nuclear_repulsion),
                                    torch.from_numpy(np.ascontiguousarray(h1)),
                                    torch.from_numpy(np.ascontiguousarray(eri)), source=src)
    if isinstance(obj, InteractionOperator):
        return _from_interaction(obj, n_alpha, n_beta, tol)
    raise TypeError(f"expected InteractionOperator or MolecularData, got {type(obj).__name__}")


def to_interaction_rdm(rdms):
    """``openfermion.InteractionRDM`` on ``2N`` spin orbitals (even alpha, odd beta) from
    :class:`hamiltonians.rdm.RDMs`: ``one_body[P, Q] = <a+_P a_Q>``, ``two_body[P, Q, R, S] =
    <a+_P a+_Q a_R a_S>``, so that ``expectation(to_openfermion(H))`` is the energy."""
    from openfermion import InteractionRDM

    n = rdms.n_orbitals
    one = np.zeros((n, 2, n, 2))
    one[:, 0, :, 0], one[:, 1, :, 1] = rdms.dm1a.T, rdms.dm1b.T
    two = np.zeros((n, 2, n, 2, n, 2, n, 2))
    blocks = {(0, 0): rdms.dm2aa, (0, 1): rdms.dm2ab, (1, 0): rdms.dm2ab.transpose(2, 3, 0, 1), (1, 1): rdms.dm2bb}
    for (s, t), d in blocks.items():   # d[p, q, r, u] = <a+_ps a+_rt a_ut a_qs>
        two[:, s, :, t, :, t, :, s] = np.einsum("psqr->pqrs", d)
        two[:, s, :, t, :, s, :, t] = -np.einsum("prqs->pqrs", d)
    return InteractionRDM(one.reshape(2 * n, 2 * n), two.reshape((2 * n,) * 4))
