"""Selected configuration interaction on determinant sets, usable without any network.

Layout (one concept per module; docs/design.md §5):

* :mod:`~hamiltonians.sci.state`: :class:`SCIState`, the one state type (roots on a set), and the
  set's rules (unique, first occurrence kept).
* :mod:`~hamiltonians.sci.spaces`: CI spaces: CISD, CASCI, their union.
* :mod:`~hamiltonians.sci.diagonalise`: the one diagonaliser (ground state or several roots,
  spin penalty, warm start), Rayleigh quotients, truncation.
* :mod:`~hamiltonians.sci.spin`: ``S^2`` on a set.
* :mod:`~hamiltonians.sci.natural`: a CI vector's exact ``dm1`` (for its natural orbitals).
* :mod:`~hamiltonians.sci.connections`: sums over the determinants outside a set, and their rankings.
* :mod:`~hamiltonians.sci.key_sums`: the compiled hash map those sums use.
* :mod:`~hamiltonians.sci.grow`: the one growth loop (CIPSI or by connection).
* :mod:`~hamiltonians.sci.pt2`: Epstein–Nesbet PT2 (deterministic, semistochastic), extrapolation.
* :mod:`~hamiltonians.sci.solver`: :class:`SelectedCI`, the whole method as one solver object.

The names below are imported on first use (the sums are compiled with Numba, which takes a
moment), so ``import hamiltonians.sci`` stays light::

    from hamiltonians.sci import SelectedCI
    e_var, state = SelectedCI(max_size=5000).kernel(H)
"""

from __future__ import annotations

import importlib

_WHERE = {
    "SCIState": "state", "unique_determinants": "state", "merge": "state",
    "cisd": "spaces", "casci": "spaces", "cisd_cas": "spaces", "ci_state": "spaces", "singles_doubles": "spaces",
    "diagonalise": "diagonalise", "truncate": "diagonalise", "projected_energy": "diagonalise",
    "apply_in_space": "diagonalise",
    "spin_square_matrix": "spin", "spin_square_of": "spin",
    "one_rdm": "natural",
    "outside_sums": "connections", "extend_by_connection": "connections", "pt2_selection": "connections", "largest_pt2": "connections",
    "grow": "grow",
    "en_pt2": "pt2", "semistochastic_pt2": "pt2", "extrapolate_pt2": "pt2",
    "SelectedCI": "solver",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'hamiltonians.sci' has no attribute {name!r}")
    return getattr(importlib.import_module(f"hamiltonians.sci.{_WHERE[name]}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
