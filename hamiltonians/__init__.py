"""Molecular Hamiltonians, their I/O, the batched local-energy kernel and exact diagonalisation.

Public API::

    from hamiltonians import (MolecularHamiltonian, from_pyscf, read_fcidump, write_fcidump,
                              FCIDUMPError, from_openfermion, to_openfermion, local_energy,
                              LocalEnergyResult, reference_energies)
    from hamiltonians.exact import ground_state_energy, enumerate_determinants, hamiltonian_matrix

PySCF and OpenFermion are imported inside the functions that need them, so ``import
hamiltonians`` needs neither.
"""

from hamiltonians.determinants import aufbau_occupation, enumerate_determinants
from hamiltonians.io.fcidump import FCIDUMPError, read_fcidump, write_fcidump
from hamiltonians.io.openfermion_io import from_openfermion, to_openfermion
from hamiltonians.io.pyscf_io import from_pyscf
from hamiltonians.local_energy import LocalEnergyResult, local_energy
from hamiltonians.molecular import MolecularHamiltonian
from hamiltonians.references.energies import reference_energies

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
    "aufbau_occupation",
]
