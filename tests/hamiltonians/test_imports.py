"""``import hamiltonians`` needs neither PySCF nor OpenFermion, and never imports nnqs/samplers."""

import subprocess
import sys


def test_import_is_light():
    code = (
        "import sys, hamiltonians, hamiltonians.exact, hamiltonians.reference\n"
        "from hamiltonians import (MolecularHamiltonian, from_pyscf, read_fcidump, write_fcidump,"
        " FCIDUMPError, from_openfermion, local_energy)\n"
        "from hamiltonians.exact import ground_state_energy, enumerate_determinants, hamiltonian_matrix\n"
        "bad = [m for m in ('pyscf', 'openfermion', 'nnqs', 'samplers') if m in sys.modules]\n"
        "assert not bad, bad\n"
        "assert issubclass(FCIDUMPError, ValueError)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
