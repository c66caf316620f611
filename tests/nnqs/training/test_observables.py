"""A network's RDMs, energy and S^2 against PySCF's of the network's own vector; sampled ones
within their error bars."""

import numpy as np
import pytest
import torch

from hamiltonians import from_pyscf
from hamiltonians.rdm import RDM_NAMES
from hamiltonians.references.rdms import reference_rdms
from nnqs.training.estimators import exact_variational_energy
from nnqs.training.observables import estimate_observables
from nnqs.wavefunction.tokens import tokens_to_occupations
from samplers.exact import enumerate_support
from tests.models import make_model
from tests.systems import random_hamiltonian

GEOMETRY = {"H2O": "O 0 0 0; H 0 0.757 0.587; H 0 -0.757 0.587", "N2": "N 0 0 0; N 0 0 1.1",
            "LiH": "Li 0 0 0; H 0 0 1.5949"}


def _network_vector(model):
    tokens, _ = enumerate_support(model)
    with torch.no_grad():
        psi = model.log_psi(tokens).to(torch.complex128).exp()
    return tokens_to_occupations(tokens), psi.numpy()


@pytest.mark.parametrize("name", ["H2O", pytest.param("N2", marks=pytest.mark.slow)])
def test_exact_rdms_of_the_network_equal_pyscfs_and_give_its_energy(name):
    H = from_pyscf(GEOMETRY[name], "sto-3g")
    model = make_model(H.n_orbitals, H.n_alpha, H.n_beta, seed=3, phase_hidden=(8,))
    got = estimate_observables(model, H, n_samples=None)
    ref = reference_rdms(H, *_network_vector(model))
    for key in RDM_NAMES:
        assert np.abs(getattr(got.rdms, key) - getattr(ref, key)).max() < 1e-10, key
    exact = exact_variational_energy(model, H)
    assert abs(got.energy - exact) < 1e-10
    assert abs(got.rdms.energy(H.h1, H.eri, H.constant) - exact) < 1e-10
    assert abs(got.spin_square - ref.spin_square()) < 1e-10
    assert got.energy_stderr == 0.0 and got.rdms.stderr == {}


def test_sampled_rdms_fall_within_their_error_bars_of_the_exact_ones():
    """Fixed seeds; z-scores of every element with a nonzero error: none extreme, mean square ~1."""
    H = random_hamiltonian(5, 2, 2, seed=2)
    model = make_model(5, 2, 2, seed=4)
    exact = estimate_observables(model, H, n_samples=None)
    zs = []
    for seed in range(3):
        got = estimate_observables(model, H, n_samples=5000, seed=seed)
        for key in ("dm1", "dm2aa", "dm2ab"):
            err = got.rdms.stderr[key]
            live = err > 1e-9
            zs.append(((getattr(got.rdms, key) - getattr(exact.rdms, key))[live] / err[live]).ravel())
        zs.append(np.array([(got.energy - exact.energy) / got.energy_stderr,
                            (got.spin_square - exact.spin_square) / got.spin_square_stderr]))
        assert got.rdms.unseen_mass == got.to_dict()["unseen_mass"] > 0   # 5000 draws over 100 configurations
    assert exact.rdms.unseen_mass == 0.0
    z = np.concatenate(zs)
    assert len(z) > 300
    assert np.abs(z).max() < 5.5
    assert 0.6 < float(np.mean(z ** 2)) < 1.5


def test_an_exact_enumeration_past_its_limit_is_refused(monkeypatch):
    import nnqs.training.observables as observables

    monkeypatch.setattr(observables, "EXACT_MAX_CONFIGURATIONS", 10)
    H = random_hamiltonian(5, 2, 2)
    with pytest.raises(ValueError, match="give n_samples"):
        estimate_observables(make_model(5, 2, 2), H, n_samples=None)


def test_a_float32_networks_exact_weights_are_normalised():
    """float32 conditionals multiply to a total off 1 by ~1e-7, i.e. ~1e-5 Ha of a molecule's energy."""
    H = from_pyscf(GEOMETRY["H2O"], "sto-3g")
    model = make_model(H.n_orbitals, H.n_alpha, H.n_beta, seed=5, dtype="float32")
    got = estimate_observables(model, H, n_samples=None)
    assert abs(np.trace(got.rdms.dm1) - H.n_electrons) < 1e-10
    assert abs(got.energy - exact_variational_energy(model, H)) < 1e-6
