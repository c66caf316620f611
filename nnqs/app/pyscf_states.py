"""The CI "vectors" :class:`nnqs.app.pyscf_solver.NNQSSolver` hands PySCF, and what PySCF asks
of them (RDMs, transition RDMs, ``<S^2>``, the largest coefficients).

A state is one of three kinds:

* a **PySCF FCI vector** ``ndarray [n_alpha_strings, n_beta_strings]``: a root on the run's
  determinant space ``S`` written into the whole active space (zeros outside ``S``), whenever the
  active space has at most ``dense_max`` determinants. PySCF's own kernels
  (``fci.direct_spin1``) answer everything, NEVPT2's 3- and 4-RDM contractions included;
* an :class:`NNQSState` with ``dets``/``coefficients``: a root on ``S`` past that size. 1- and
  2-RDMs and ``<S^2>`` are exact on it (the local estimators summed over the closed set ``S``
  with weights ``|c|^2``, :func:`hamiltonians.rdm.rdm_moments` in the sampled mode, and
  :func:`hamiltonians.sci.spin.spin_square_of`); 3-RDMs and transition RDMs need the FCI vector
  and are refused in one line;
* an :class:`NNQSState` without ``dets``: the trained network itself (``wavefunction =
  "network"``), its RDMs estimated from it (:func:`nnqs.training.observables.estimate_observables`)
  with error bars (:attr:`NNQSState.rdm_stderr`).

Conventions are PySCF's: ``dm1[p,q] = <q^+ p>``, ``dm2[p,q,r,s] = sum_{st} <p_s^+ r_t^+ s_t q_s>``
(:mod:`hamiltonians.rdm`), the active space's own orbital order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

from hamiltonians.protocol import Hamiltonian
from hamiltonians.rdm_matrices import RDMs

if TYPE_CHECKING:
    from nnqs.app.system import System

__all__ = ["NNQSState", "NEWTON_MESSAGE", "sparse_rdms", "large_ci_of", "spin_square_of_state"]

NEWTON_MESSAGE = ("mc.newton() needs CI-Hessian products with CI vectors (contract_2e), which a network "
                  "wavefunction does not have: use mc.mc2step() or mc.kernel()")


@dataclass
class NNQSState:
    """A root past the dense size (``dets`` uint8 ``[D, 2N]`` in the active space's order,
    ``coefficients`` float64 ``[D]``) or the trained network (``dets`` ``None``), with the call it
    came from: ``weights`` (the network's), ``e_tot`` (Hartree, ``ecore`` included), ``e_stderr``
    (0 for a root on ``S``), the call's ``result`` (``result.json``'s fields), its ``system``
    (integrals in the network's order) and ``model`` (the network, with ``weights``). Deliberately
    neither a list nor a tuple (PySCF would take it for several roots)."""

    weights: dict
    e_tot: float
    e_stderr: float
    result: dict
    dets: torch.Tensor | None = None
    coefficients: np.ndarray | None = None
    system: System | None = field(default=None, repr=False)
    model: torch.nn.Module | None = field(default=None, repr=False)
    observables: object = field(default=None, repr=False)
    rdms: RDMs | None = field(default=None, repr=False)

    @property
    def rdm_stderr(self) -> dict:
        """Standard errors of the RDM elements (``dm1a_stderr``-like names without the suffix:
        ``dm1a, dm1b, dm2aa, dm2ab, dm2bb``); zeros for a root on ``S`` (exact there); empty
        until the RDMs were asked for."""
        if self.rdms is None:
            return {}
        if self.dets is not None:
            return {name: np.zeros_like(getattr(self.rdms, name)) for name in ("dm1a", "dm1b", "dm2aa", "dm2ab", "dm2bb")}
        return dict(self.rdms.stderr)

    def ravel(self):
        """What ``mc.newton()`` asks of a CI vector first; a network has none (one line why)."""
        raise NotImplementedError(NEWTON_MESSAGE)


def sparse_rdms(H: Hamiltonian, dets: torch.Tensor, coefficients) -> RDMs:
    """The exact 1- and 2-RDMs of ``sum_x c_x |x>`` over the unique ``dets`` ``[D, 2N]`` (real
    ``c``), in ``H``'s orbital order: the local estimators over the closed set."""
    from hamiltonians.rdm import local_rdms

    c = torch.as_tensor(np.asarray(coefficients, dtype=np.float64))
    c = c / torch.linalg.norm(c)
    log_psi = torch.complex(torch.log(c.abs()), math.pi * (c < 0).double())
    keep = c != 0
    return local_rdms(H, dets[keep], (c * c)[keep], mode="sampled", log_psi_x=log_psi[keep], estimator="plain")


def refusal(what: str, dense_max: int) -> NotImplementedError:
    """The one-line error for what only an FCI vector can give."""
    return NotImplementedError(f"{what} needs the active space's FCI vector, which nnqs hands PySCF only for "
                               f"active spaces of at most dense_max = {dense_max} determinants")


def spin_square_of_state(state: NNQSState) -> float:
    """``<S^2>`` of a sparse root (exact) or a network state (its estimate)."""
    from hamiltonians.sci.spin import spin_square_of

    if state.dets is not None:
        return spin_square_of(state.dets, state.coefficients)
    return float(getattr(state.observables, "spin_square"))


def large_ci_of(state: NNQSState, norb: int, tol: float = 0.1, return_strs: bool = True):
    """PySCF's ``large_ci`` of a sparse root: ``[(coefficient, alpha, beta)]`` of the
    determinants with ``|c| >= tol``, largest first, each string as PySCF writes it (``'0b0011'``
    with ``return_strs``, else the occupied orbitals). Coefficients carry the interleaved
    Jordan–Wigner signs of docs/design.md §1, not PySCF's alpha-then-beta ones."""
    if state.dets is None:
        raise ValueError("large_ci needs a root on a determinant space, not a network state")
    c = np.asarray(state.coefficients)
    order = np.argsort(-np.abs(c), kind="stable")
    out = []
    for i in order:
        if abs(c[i]) < tol:
            break
        occ = state.dets[i].numpy()
        alpha, beta = np.flatnonzero(occ[0::2]), np.flatnonzero(occ[1::2])
        if return_strs:
            def bits(orbitals):
                return bin(sum(1 << int(p) for p in orbitals)) if len(orbitals) else "0b0"
            out.append((float(c[i]), bits(alpha), bits(beta)))
        else:
            out.append((float(c[i]), alpha, beta))
    return out
