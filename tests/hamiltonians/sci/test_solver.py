"""hamiltonians.sci.solver.SelectedCI: the whole method without a network, against FCI and PySCF."""

import logging

import numpy as np
import pytest
import torch

from hamiltonians.exact import ground_state_energy
from hamiltonians.sci.pt2 import en_pt2, semistochastic_pt2
from hamiltonians.sci.solver import SelectedCI
from hamiltonians.sci.spaces import cisd


def test_cipsi_with_pt2_and_extrapolation_approaches_fci():
    pytest.importorskip("pyscf")
    from hamiltonians import from_pyscf

    H = from_pyscf("N 0 0 0; N 0 0 1.1", "sto-3g")
    fci = ground_state_energy(H)
    solver = SelectedCI(max_size=1000, extrapolation=(0.25, 0.5))
    e_var, state = solver.kernel(H)
    assert e_var == solver.e_var == state.energy and state.size == 1000
    assert fci - 1e-10 <= e_var < cisd(H).energy
    # the PT2 is en_pt2's on the final state (deterministic below pt2_exact_max)
    exact = en_pt2(H, state.dets, state.coefficients, state.energy)
    assert abs(solver.e_pt2 - exact.e_total) < 1e-12 and solver.e_pt2_stderr == 0.0
    assert abs(solver.e_pt2 - fci) < 0.3 * (e_var - fci)
    assert abs(solver.e_extrapolated - fci) < 0.3 * (e_var - fci)
    assert solver.e_tot == solver.e_extrapolated
    assert [p["size"] for p in solver.extrapolation_fields["extrapolation_points"]] == [250, 500, 1000]
    sizes = [h["size"] for h in solver.history]
    assert sizes[0] == cisd(H).size and sizes[-1] == 1000 and all(a < b for a, b in zip(sizes, sizes[1:]))


def test_semistochastic_pt2_past_the_exact_limit_and_none():
    pytest.importorskip("pyscf")
    from hamiltonians import from_pyscf

    H = from_pyscf("O 0 0 0; H 0 0.757 0.587; H 0 -0.757 0.587", "sto-3g")
    solver = SelectedCI(max_size=60, pt2_exact_max=10, pt2_deterministic=5, pt2_draws=50, pt2_batches=4, seed=3)
    solver.kernel(H)
    state = solver.state
    drawn = semistochastic_pt2(H, state.dets, state.coefficients, state.energy, n_deterministic=5, n_draws=50,
                               n_batches=4, seed=3)
    assert solver.e_pt2 == state.energy + drawn.e_pt2 and solver.e_pt2_stderr == drawn.stderr > 0
    assert solver.pt2_fields["pt2_form"].startswith("semistochastic")
    none = SelectedCI(max_size=60, pt2="none")
    none.kernel(H)
    assert none.e_pt2 is None and none.e_extrapolated is None and none.e_tot == none.e_var


def test_several_roots_with_the_spin_penalty_are_pyscfs():
    pytest.importorskip("pyscf")
    from pyscf import fci

    from tests.systems import random_hamiltonian

    H = random_hamiltonian(6, 3, 3, seed=2)
    solver = fci.addons.fix_spin_(fci.direct_spin1.FCI(), shift=0.5)
    solver.conv_tol = 1e-12
    e, _ = solver.kernel(H.h1.numpy(), H.eri.numpy(), 6, (3, 3), ecore=H.constant, nroots=3)
    sci = SelectedCI(select="connection", nroots=3, growth=None, n_new=20, max_cycle=50, conv_tol=1e-10, pt2="none")
    sci.fix_spin_(0.5)
    energies, state = sci.kernel(H)
    assert sci.converged and state.nroots == 3
    np.testing.assert_allclose(sci.e_states, e, atol=1e-9)   # singlets: the penalty is 0 on them
    assert np.abs(state.spin_squares).max() < 1e-8
    assert np.allclose((state.vectors.T @ state.vectors).numpy(), np.eye(3), atol=1e-12)


def test_given_determinants_and_settings_are_checked(caplog):
    from tests.systems import random_hamiltonian

    H = random_hamiltonian(5, 2, 2, seed=1)
    hf = H.aufbau_occupation().to(torch.uint8)
    solver = SelectedCI(select="connection", growth=None, n_new=5, max_size=12, pt2="none")
    _, state = solver.kernel(H, hf[None])
    assert state.size == 12 and solver.history[0]["size"] == 1 and torch.equal(state.dets[0], hf)
    with caplog.at_level(logging.INFO, logger="hamiltonians.sci.solver"):
        solver.dump_flags()
    assert "max_size = 12" in caplog.text
    for bad, match in (({"start": "mp2"}, "start"), ({"start": "casci"}, "cas"), ({"select": "x"}, "select"),
                       ({"pt2": "exact"}, "pt2"), ({"extrapolation": (1.5,)}, "extrapolation")):
        with pytest.raises(ValueError, match=match):
            SelectedCI(**bad).kernel(H)
    with pytest.raises(TypeError, match="no setting"):
        SelectedCI(max_determinants=5)


def test_cipsi_on_shuffled_orbitals_starts_from_the_found_reference():
    """N2 / STO-3G with its orbitals shuffled: the CISD start expands the shuffled HF determinant
    (``reference = "auto"``), so its energy is the canonical one's, and CIPSI to 1000 determinants
    lands within 1e-6 Ha of the canonical run; ``"aufbau"`` expands the lowest-index determinant."""
    pytest.importorskip("pyscf")
    from hamiltonians import from_pyscf
    from hamiltonians.molecular import permute_orbitals

    H = from_pyscf("N 0 0 0; N 0 0 1.1", "sto-3g")
    perm = torch.randperm(H.n_orbitals, generator=torch.Generator().manual_seed(3)).tolist()
    shuffled = permute_orbitals(H, perm)
    canonical = SelectedCI(max_size=1000, pt2="none")
    canonical.kernel(H)
    found = SelectedCI(max_size=1000, pt2="none")
    found.kernel(shuffled)
    assert found.found_reference.found_by.startswith("Hartree-Fock")
    assert abs(found.history[0]["energies"][0] - canonical.history[0]["energies"][0]) < 1e-9   # the CISD start
    assert abs(found.e_var - canonical.e_var) < 1e-6
    aufbau = SelectedCI(max_size=1000, pt2="none", reference="aufbau", max_cycle=0)
    aufbau.kernel(shuffled)
    assert aufbau.history[0]["energies"][0] - canonical.history[0]["energies"][0] > 0.1
