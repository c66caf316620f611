"""Importing the packages (and starting the CLI) loads neither PySCF, OpenFermion nor Numba."""

import subprocess
import sys


def test_import_is_light():
    code = (
        "import sys, hamiltonians, hamiltonians.exact, hamiltonians.slater_condon_reference\n"
        "import samplers.bas, samplers.naive, samplers.exact\n"
        "import nnqs, nnqs.training, nnqs.app.cli, nnqs.app.run\n"
        "from hamiltonians import from_pyscf, from_openfermion, to_openfermion, reference_energies\n"
        "bad = [m for m in ('pyscf', 'openfermion', 'numba') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
