"""experiments/drivers/active_space_fcidump.py: a localised active space is the same CASCI problem
in orbitals whose lowest-index determinant is far from Hartree-Fock's."""

import json

import pytest

pytest.importorskip("pyscf")

from experiments.drivers import active_space_fcidump  # noqa: E402
from hamiltonians.exact import ground_state_energy  # noqa: E402
from hamiltonians.io.fcidump import read_fcidump  # noqa: E402


def test_the_localised_active_space_has_pyscfs_casci_energy(tmp_path):
    from pyscf import mcscf

    from hamiltonians.io.pyscf_io import build_molecule, run_scf

    geometry = "N 0 0 0; N 0 0 1.6"
    out = tmp_path / "n2.fcidump"
    info = active_space_fcidump.main(["--geometry", geometry, "--basis", "sto-3g", "--cas", "6", "6", "--out", str(out)])
    H = read_fcidump(out)
    assert (H.n_orbitals, H.n_alpha, H.n_beta) == (6, 3, 3)
    casci = mcscf.CASCI(run_scf(build_molecule(geometry, "sto-3g")), 6, 6)   # PySCF's, canonical orbitals
    casci.verbose = 0
    assert abs(ground_state_energy(H) - casci.kernel()[0]) < 1e-8
    assert H.hf_energy() > info["hf_energy_pyscf"] + 0.05                  # no Hartree-Fock determinant among them
    assert json.loads((tmp_path / "n2.fcidump.json").read_text())["active_space"] == [6, 6]
