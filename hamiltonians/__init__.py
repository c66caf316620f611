"""Molecular Hamiltonians, their I/O, the batched local-energy kernel and exact diagonalisation.

Public API::

    from hamiltonians import (MolecularHamiltonian, from_pyscf, read_fcidump, write_fcidump,
                              FCIDUMPError, from_openfermion, to_openfermion, local_energy,
                              LocalEnergyResult, reference_energies)
    from hamiltonians.exact import ground_state_energy, enumerate_determinants, hamiltonian_matrix

PySCF and OpenFermion are imported lazily, only when a function that needs them is called.
"""

from hamiltonians.determinants import enumerate_determinants, hf_occupation
from hamiltonians.fcidump import FCIDUMPError, read_fcidump, write_fcidump
from hamiltonians.local_energy import LocalEnergyResult, local_energy
from hamiltonians.molecular import MolecularHamiltonian

__all__ = [
    "MolecularHamiltonian",
    "from_pyscf",
    "read_fcidump",
    "write_fcidump",
    "FCIDUMPError",
    "from_openfermion",
    "to_openfermion",
    "local_energy",
    "LocalEnergyResult",
    "reference_energies",
    "enumerate_determinants",
    "hf_occupation",
]


def from_pyscf(*args, **kwargs):
    """See :func:`hamiltonians.pyscf_io.from_pyscf` (imports PySCF on first use)."""
    from hamiltonians.pyscf_io import from_pyscf as _f

    return _f(*args, **kwargs)


def from_openfermion(*args, **kwargs):
    """See :func:`hamiltonians.openfermion_io.from_openfermion` (imports OpenFermion)."""
    from hamiltonians.openfermion_io import from_openfermion as _f

    return _f(*args, **kwargs)


def to_openfermion(H):
    """See :func:`hamiltonians.openfermion_io.to_openfermion` (imports OpenFermion)."""
    from hamiltonians.openfermion_io import to_openfermion as _f

    return _f(H)


def reference_energies(*args, **kwargs):
    """See :func:`hamiltonians.references.reference_energies` (imports PySCF on first use)."""
    from hamiltonians.references import reference_energies as _f

    return _f(*args, **kwargs)
