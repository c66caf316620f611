"""Observables of trained networks (slow): sampled RDMs against the exact ones, <S^2> of a
triplet and a singlet, the dipole against PySCF's FCI dipole."""

import numpy as np
import pytest

pytest.importorskip("pyscf")

from nnqs.app.properties import run_properties  # noqa: E402
from nnqs.app.run import run  # noqa: E402
from nnqs.app.runconfig import config_from_dict  # noqa: E402
from nnqs.app.trained import load_trained  # noqa: E402
from nnqs.training.observables import estimate_observables  # noqa: E402

pytestmark = pytest.mark.slow


def _trained(tmp_path, monkeypatch, name, geometry, basis, steps, **molecule):
    monkeypatch.setenv("NNQS_REFERENCE_CACHE", str(tmp_path / "refs.json"))
    config = {"molecule": {"name": name, "geometry": geometry, "basis": basis, "slow_references": False, **molecule},
              "optim": {"steps": steps}, "local_energy": {"mode": "exact"}, "run": {"threads": 1}}
    result = run(config_from_dict(config), tmp_path / name, progress=False)
    return load_trained(tmp_path / name), result


def test_sampled_rdms_of_trained_lih_631g_are_within_their_errors(tmp_path, monkeypatch):
    """Every element within 4 standard errors plus the bound on what the unreached configurations
    can move it (2e5 draws reach ~70 configurations of 3025); the elements whose statistical error
    dominates that bound have standard z-scores."""
    trained, _ = _trained(tmp_path, monkeypatch, "lih", "Li 0 0 0; H 0 0 1.5949", "6-31g", 200)
    H = trained.system.hamiltonian
    exact = estimate_observables(trained.model, H, n_samples=None)
    sampled = estimate_observables(trained.model, H, n_samples=200_000, seed=7)   # balanced estimator
    assert 0 < sampled.rdms.unseen_mass < 1e-3
    reached = []
    for name in ("dm1", "dm1a", "dm2aa", "dm2ab", "dm2"):
        diff, err = getattr(sampled.rdms, name) - getattr(exact.rdms, name), sampled.rdms.stderr[name]
        bound = sampled.rdms.unseen_bound(name)
        assert np.all(np.abs(diff) <= 4 * err + bound), name
        live = err > bound
        reached.append((diff[live] / err[live]).ravel())
    z = np.concatenate(reached)
    assert len(z) > 30 and np.abs(z).max() < 4 and 0.5 < float(np.mean(z ** 2)) < 1.5
    assert abs(sampled.energy - exact.energy) < 4 * sampled.energy_stderr


def test_spin_square_of_the_o2_triplet_and_of_n2(tmp_path, monkeypatch):
    o2, _ = _trained(tmp_path, monkeypatch, "o2", "O 0 0 0; O 0 0 1.2075", "sto-3g", 300, spin=2)
    n2, _ = _trained(tmp_path, monkeypatch, "n2", "N 0 0 0; N 0 0 1.0977", "sto-3g", 300)
    s2_o2 = estimate_observables(o2.model, o2.system.hamiltonian, n_samples=None).spin_square
    s2_n2 = estimate_observables(n2.model, n2.system.hamiltonian, n_samples=None).spin_square
    assert abs(s2_o2 - 2.0) < 0.01, s2_o2
    assert abs(s2_n2) < 0.01, s2_n2


def test_dipole_of_trained_h2o_matches_pyscfs_fci_dipole(tmp_path, monkeypatch):
    from pyscf import fci, gto, scf

    geometry = "O 0 0 0; H 0 0.757 0.587; H 0 -0.757 0.587"
    trained, _ = _trained(tmp_path, monkeypatch, "h2o", geometry, "sto-3g", 1500)   # 400 steps: 1.6e-3 off
    observables = run_properties(trained, tmp_path / "h2o")
    mu = np.array([observables.functionals[f"dipole_{a}"][0] for a in "xyz"])
    mol = gto.M(atom=geometry, basis="sto-3g", verbose=0)
    mf = scf.RHF(mol).run(conv_tol=1e-11)
    solver = fci.FCI(mf)
    _, ci = solver.kernel()
    dm_mo = solver.make_rdm1(ci, mol.nao_nr(), mol.nelectron)
    expected = scf.hf.dip_moment(mol, mf.mo_coeff @ dm_mo @ mf.mo_coeff.T, unit="AU", verbose=0)
    assert np.abs(mu - expected).max() < 1e-3, (mu, expected)
