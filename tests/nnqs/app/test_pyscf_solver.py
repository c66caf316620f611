"""nnqs as PySCF's CASCI / CASSCF solver: the energy, PySCF's RDM conventions, warm starts."""

import numpy as np
import pytest

pytest.importorskip("pyscf")

from hamiltonians.rdm import reference_rdms  # noqa: E402
from nnqs.app.pyscf_solver import NNQSSolver, NNQSState  # noqa: E402
from nnqs.pyscf import casci, casscf  # noqa: E402

SETTINGS = {"optim": {"steps": 60}, "run": {"threads": 1}}


@pytest.fixture(scope="module")
def n2_sto3g():
    from pyscf import gto, scf

    mol = gto.M(atom="N 0 0 0; N 0 0 1.1", basis="sto-3g", verbose=0)
    return scf.RHF(mol).run()


def test_casci_energy_and_rdms_in_pyscfs_conventions(n2_sto3g, tmp_path):
    from pyscf import ao2mo, mcscf

    exact = mcscf.CASCI(n2_sto3g, 4, 4).run()
    mc = casci(n2_sto3g, 4, 4, config=SETTINGS, workdir=tmp_path)
    mc.kernel()
    assert isinstance(mc.ci, NNQSState) and not isinstance(mc.ci, (list, tuple))
    assert abs(mc.e_tot - exact.e_tot) < 5e-4   # 60 steps on 36 determinants
    assert mc.e_tot >= exact.e_tot - 1e-10      # the network's exact energy is variational
    # the energy from the RDMs PySCF asks for, with PySCF's own effective integrals
    h1, ecore = mc.get_h1eff()
    eri = ao2mo.restore(1, mc.get_h2eff(), 4)
    dm1, dm2 = mc.fcisolver.make_rdm12(mc.ci, 4, (2, 2))
    energy = np.einsum("pq,qp", h1, dm1) + 0.5 * np.einsum("pqrs,pqrs", eri, dm2) + ecore
    assert abs(energy - mc.e_tot) < 1e-8
    (a, b), (aa, ab, bb) = mc.fcisolver.make_rdm12s(mc.ci, 4, (2, 2))
    assert np.allclose(a + b, dm1, atol=1e-12) and np.allclose(aa + ab + ab.transpose(2, 3, 0, 1) + bb, dm2)
    assert np.allclose(mc.fcisolver.make_rdm1(mc.ci, 4, (2, 2)), dm1)
    ss, multiplicity = mc.fcisolver.spin_square(mc.ci, 4, (2, 2))
    assert abs(ss) < 0.01 and abs(multiplicity - 1) < 0.02
    assert (tmp_path / "call_000" / "run" / "result.json").is_file()


def test_a_warm_start_continues_from_the_previous_network(n2_sto3g, tmp_path):
    from pyscf import mcscf

    mc = mcscf.CASCI(n2_sto3g, 4, 4)
    solver = NNQSSolver(SETTINGS, workdir=tmp_path, warm_steps=5)
    h1, ecore = mc.get_h1eff()
    eri = mc.get_h2eff()
    e0, state = solver.kernel(h1, eri, 4, (2, 2), ecore=ecore)
    e1, again = solver.kernel(h1, eri, 4, (2, 2), ci0=state, ecore=ecore)
    config = again.result["config"]
    assert config["start"]["mode"] == "none" and config["optim"]["steps"] == 5
    assert abs(e1 - e0) < 1e-3    # five small steps from the trained network, not a fresh start
    # PySCF's mc2step passes a bool (its restart flag) to an external solver: the last state is used
    _, third = solver.kernel(h1, eri, 4, (2, 2), ci0=True, ecore=ecore)
    assert third.result["config"]["optim"]["steps"] == 5 and third.result["config"]["start"]["mode"] == "none"
    fresh = NNQSSolver({"optim": {"steps": 5}, "start": {"mode": "none"}}, workdir=tmp_path / "fresh")
    e_fresh, _ = fresh.kernel(h1, eri, 4, (2, 2), ecore=ecore)
    assert e_fresh - e0 > 1e-2    # what five steps give without the warm start


def test_newton_is_refused_in_one_line(n2_sto3g, tmp_path):
    with pytest.raises(NotImplementedError, match="use mc.mc2step"):
        NNQSSolver().contract_2e(None, None, 4, (2, 2))
    mc = casscf(n2_sto3g, 4, 4, config={"optim": {"steps": 2}, "start": {"mode": "none"}}, workdir=tmp_path).newton()
    with pytest.raises(NotImplementedError, match="use mc.mc2step") as raised:
        mc.kernel()
    assert "\n" not in str(raised.value)
    with pytest.raises(TypeError, match="NNQSState"):
        NNQSSolver().make_rdm1(np.zeros(4), 2, (1, 1))


@pytest.mark.slow
def test_casci_and_casscf_on_n2_ccpvdz_match_the_fci_solver(tmp_path):
    from pyscf import gto, mcscf, scf

    mol = gto.M(atom="N 0 0 0; N 0 0 1.0977", basis="cc-pvdz", verbose=0)
    mf = scf.RHF(mol).run()
    exact = mcscf.CASCI(mf, 6, 6).run()
    mc = casci(mf, 6, 6, config={"optim": {"steps": 300}, "run": {"threads": 1}}, workdir=tmp_path / "casci")
    mc.kernel()
    assert abs(mc.e_tot - exact.e_tot) < 1e-4
    exact_scf = mcscf.CASSCF(mf, 6, 6).run()
    mc = casscf(mf, 6, 6, config={"optim": {"steps": 300}, "run": {"threads": 1}}, workdir=tmp_path / "casscf",
                warm_steps=40)
    mc.max_cycle_macro = 15
    mc.mc2step()
    assert abs(mc.e_tot - exact_scf.e_tot) < 1e-3


def test_the_rdms_of_the_state_are_the_networks_in_the_active_spaces_order(n2_sto3g, tmp_path):
    import torch

    from nnqs.app.trained import load_trained
    from nnqs.wavefunction.tokens import tokens_to_occupations
    from samplers.exact import enumerate_support

    settings = {**SETTINGS, "optim": {"steps": 3}, "molecule": {"orbital_order": "reversed"}, "model": {"dtype": "float64"}}
    mc = casci(n2_sto3g, 4, 4, config=settings, workdir=tmp_path)
    mc.canonicalization = False
    mc.kernel()
    trained = load_trained(mc.ci.run_dir)
    tokens, _ = enumerate_support(trained.model)
    with torch.no_grad():
        psi = trained.model.log_psi(tokens).exp().numpy()
    ref = reference_rdms(trained.system.hamiltonian, tokens_to_occupations(tokens), psi).reordered(trained.system.order)
    dm1, dm2 = mc.fcisolver.make_rdm12(mc.ci, 4, (2, 2))
    assert np.abs(dm1 - ref.dm1).max() < 1e-10 and np.abs(dm2 - ref.dm2).max() < 1e-10
