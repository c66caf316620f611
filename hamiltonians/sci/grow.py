"""The one growth loop of selected CI: add the outside determinants a state reaches most strongly
and re-diagonalise, until the space is full or the roots stop moving.

Rules (docs/design.md §5):

* A round ranks the determinants outside ``S`` by one of two scores, each summed over ``S`` by
  :func:`hamiltonians.sci.connections.outside_sums`: ``select="pt2"`` (CIPSI) by the
  Epstein–Nesbet energy ``N_a^2 / (D_a - E)`` of the ground state, with ``N_a`` summed over the
  ``parents`` largest ``|c|``; ``select="connection"`` by ``|<a|H|psi_k>|``, for every root ``k``.
* How many a round adds: ``growth`` (``(growth - 1) D + 1``: the space grows geometrically) or
  ``n_new`` per root; never past ``max_size``.
* Each round re-diagonalises (:func:`hamiltonians.sci.diagonalise.diagonalise`, the same
  ``nroots`` and spin penalty), warm-started from the previous roots unless ``warm_start`` is
  off. With a ``reference`` determinant the space keeps the CI spaces' order
  (:func:`hamiltonians.sci.spaces.reference_first`) and that determinant's sign; else the
  determinants keep their order and the new ones follow.
* It stops at ``max_size`` determinants, after ``max_cycle`` rounds, when no root's energy
  moved by more than ``conv_tol`` (Hartree; ``converged``), or when nothing outside ``S`` is
  connected to the roots (``S`` then holds their whole connected space, so they are exact
  eigenstates; ``converged``). A space that cannot hold ``nroots`` roots yet is solved for as
  many as it holds and grown to ``nroots``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from hamiltonians.protocol import Hamiltonian
from hamiltonians.sci.connections import extend_by_connection, pt2_selection
from hamiltonians.sci.diagonalise import diagonalise
from hamiltonians.sci.spaces import reference_first, singles_doubles
from hamiltonians.sci.state import SCIState, merge, unique_determinants

__all__ = ["grow", "SELECTIONS", "with_symmetry_partners"]

log = logging.getLogger(__name__)

SELECTIONS = ("pt2", "connection")


def with_symmetry_partners(H: Hamiltonian, dets) -> torch.Tensor:
    """``dets`` joined by the singles and doubles of its lowest-diagonal determinant (unique, the
    input's rows first): ``H`` conserves symmetry, so roots of another irrep are reached by no
    connection from a ground-state space."""
    dets = torch.as_tensor(dets).to(torch.uint8)
    leading = dets[int(torch.argmin(H.diagonal(dets)))]
    return unique_determinants(H, torch.cat([dets, singles_doubles(H, leading)]))[0]


def grow(H: Hamiltonian, state: SCIState, *, select: str = "connection", nroots: int | None = None, max_size: int | None = None,
         growth: float | None = None, n_new: int | None = None, max_cycle: int | None = None,
         conv_tol: float | None = None, parents: int = 1024, reference=None, warm_start: bool = True,
         tol: float = 1e-10, spin_shift: float = 0.0, spin_target: float | None = None, with_spin: bool = False,
         on_round: Callable[[SCIState], None] | None = None) -> tuple[SCIState, bool, list[dict]]:
    """``(state, converged, history)``: ``state`` grown by rounds (see the module's rules).

    Args:
        state: the start, e.g. :func:`hamiltonians.sci.spaces.cisd` or :func:`diagonalise` on a set.
        select: ``"pt2"`` (CIPSI, ground state only) or ``"connection"``.
        nroots: the roots wanted (default ``state.nroots``).
        max_size: the largest space (default unbounded).
        growth, n_new: how many a round adds (exactly one of them).
        max_cycle: the most rounds (default unbounded: ``max_size`` or convergence stops it).
        conv_tol: converged when no root moves by more than this (default: only on an exhausted space).
        parents: the largest-``|c|`` determinants ``N_a`` is summed over (``select="pt2"``).
        reference: keep this determinant first and positive (the CI spaces' convention).
        warm_start, tol, spin_shift, spin_target, with_spin: the diagonalisation's (:func:`diagonalise`).
        on_round: called with the state after every round.
    Returns:
        ``history``: per state (the start first) ``{"size", "energies", "change"}``.
    """
    if select not in SELECTIONS:
        raise ValueError(f"select must be one of {SELECTIONS}, got {select!r}")
    if (growth is None) == (n_new is None):
        raise ValueError("give exactly one of growth and n_new")
    if (growth is not None and growth <= 1) or (n_new is not None and n_new < 1) \
            or (max_size is not None and max_size < 1):
        raise ValueError(f"growth must be > 1, n_new and max_size >= 1, got {growth}, {n_new}, {max_size}")
    nroots = state.nroots if nroots is None else int(nroots)
    if select == "pt2" and nroots > 1:
        raise ValueError("select='pt2' grows the ground state only (nroots = 1)")
    options: dict[str, Any] = {"tol": tol, "spin_shift": spin_shift, "spin_target": spin_target, "with_spin": with_spin}
    history = [{"size": state.size, "energies": state.energies.tolist(), "change": None}]
    rounds = 0
    while max_cycle is None or rounds < max_cycle:
        if max_size is not None and state.size >= max_size:
            break
        room = math.inf if max_size is None else max_size - state.size
        if growth is not None:
            count = int(min(int((growth - 1) * state.size) + 1, room))
        else:
            assert n_new is not None   # exactly one of growth and n_new (checked above)
            count = int(n_new if max_size is None else max(1, min(n_new, room // state.nroots)))
        if select == "pt2":
            new = [pt2_selection(H, state, count, parents=parents)]
        else:
            new = [extend_by_connection(H, state.dets, state.vectors[:, k], count) for k in range(state.nroots)]
        merged, n_added = merge(H, state.dets, torch.cat(new))
        if n_added == 0:   # nothing outside S is connected: the roots are exact
            return state, state.nroots == nroots, history
        if reference is not None:
            merged = reference_first(merged, torch.as_tensor(reference))
        v0 = _start_vector(state, merged) if warm_start else None
        grown = diagonalise(H, merged, min(nroots, merged.shape[0]), v0=v0, reference=reference, **options)
        change = float(np.max(np.abs(grown.energies[:state.nroots] - state.energies)))
        history.append({"size": grown.size, "energies": grown.energies.tolist(), "change": change})
        complete = grown.nroots == state.nroots == nroots
        state = grown
        rounds += 1
        if on_round is not None:
            on_round(state)
        if complete and conv_tol is not None and change <= conv_tol:
            return state, True, history
    if state.nroots < nroots:
        raise ValueError(f"the space reached holds {state.size} determinants, fewer than nroots = {nroots}")
    return state, False, history


def _start_vector(state: SCIState, merged: torch.Tensor) -> np.ndarray:
    """The sum of ``state``'s roots on ``merged`` (zero on the new determinants)."""
    from hamiltonians.determinants import lookup_keys, pack_occupations, unique_keys

    keys, inverse = unique_keys(pack_occupations(state.dets))
    rows = lookup_keys(keys, pack_occupations(merged))
    summed = state.vectors.sum(dim=1).numpy()
    order = np.empty(state.size, dtype=np.int64)
    order[inverse.numpy()] = np.arange(state.size)
    v0 = np.zeros(merged.shape[0])
    inside = rows.numpy() >= 0
    v0[inside] = summed[order[rows.numpy()[inside]]]
    return v0
