"""nnqs as PySCF's active-space solver, against PySCF's own FCI solver (``direct_spin1``) on small
active spaces: CASCI energies and RDMs, SA-CASSCF with two roots, NEVPT2, transition RDMs, spin
targeting, the sparse path past the dense size, the network wavefunction, warm starts."""

import numpy as np
import pytest

pytest.importorskip("pyscf")

from hamiltonians.references.rdms import reference_rdms  # noqa: E402
from nnqs.app.pyscf_solver import NNQSSolver, NNQSState, _sector  # noqa: E402
from nnqs.pyscf import casci, casscf  # noqa: E402

SETTINGS = {"optim": {"steps": 20}, "run": {"threads": 1}}


@pytest.fixture(scope="module")
def n2_sto3g():
    from pyscf import gto, scf

    mol = gto.M(atom="N 0 0 0; N 0 0 1.1", basis="sto-3g", verbose=0)
    return scf.RHF(mol).run()


def singlet_fci(mol):
    from pyscf import fci

    return fci.addons.fix_spin_(fci.direct_spin1.FCI(mol), shift=0.2, ss=0)


def test_casci_energy_rdms_nevpt2_and_the_run_folder(n2_sto3g, tmp_path):
    from pyscf import ao2mo, mcscf, mrpt

    exact = mcscf.CASCI(n2_sto3g, 4, 4).run()
    mc = casci(n2_sto3g, 4, 4, config=SETTINGS, workdir=tmp_path)
    mc.kernel()
    assert isinstance(mc.ci, np.ndarray) and mc.converged
    assert abs(mc.e_tot - exact.e_tot) < 1e-9     # the grown space holds the whole CAS(4, 4)
    h1, ecore = mc.get_h1eff()
    eri = ao2mo.restore(1, mc.get_h2eff(), 4)
    dm1, dm2 = mc.fcisolver.make_rdm12(mc.ci, 4, (2, 2))
    assert abs(np.einsum("pq,qp", h1, dm1) + 0.5 * np.einsum("pqrs,pqrs", eri, dm2) + ecore - mc.e_tot) < 1e-9
    ref1, ref2 = exact.fcisolver.make_rdm12(exact.ci, 4, (2, 2))
    assert np.abs(dm1 - ref1).max() < 1e-7 and np.abs(dm2 - ref2).max() < 1e-7
    assert abs(mc.fcisolver.energy(h1, mc.get_h2eff(), mc.ci, 4, (2, 2)) + ecore - mc.e_tot) < 1e-9
    ss, multiplicity = mc.fcisolver.spin_square(mc.ci, 4, (2, 2))
    assert abs(ss) < 1e-8 and abs(multiplicity - 1) < 1e-8
    dm3 = mc.fcisolver.make_rdm123(mc.ci, 4, (2, 2))[2]
    assert np.abs(dm3 - exact.fcisolver.make_rdm123(exact.ci, 4, (2, 2))[2]).max() < 1e-7
    e_nevpt2 = mrpt.NEVPT(mc).kernel()
    assert abs(e_nevpt2 - mrpt.NEVPT(exact).kernel()) < 5e-4 * 1e-3   # 0.5 microhartree
    assert (tmp_path / "subspace.npz").is_file() and (tmp_path / "result.json").is_file()   # the last call's
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".nnqs.")) == [
        "result.json", "subspace.npz"]   # no FCIDUMP, no folders (beside the lock and its holder)


def test_state_averaged_casscf_two_singlets(n2_sto3g, tmp_path):
    from pyscf import mcscf

    ref = mcscf.CASSCF(n2_sto3g, 4, 4)
    ref.fcisolver = singlet_fci(n2_sto3g.mol)
    ref = ref.state_average_([0.5, 0.5]).run()
    mc = casscf(n2_sto3g, 4, 4, config=SETTINGS, workdir=tmp_path)
    mc.fcisolver.fix_spin_(ss=0)
    mc = mc.state_average_([0.5, 0.5])
    mc.kernel()
    assert mc.converged and abs(mc.e_tot - ref.e_tot) < 1e-7
    assert np.abs(np.asarray(mc.e_states) - ref.e_states).max() < 1e-6
    assert np.abs(np.asarray(mc.fcisolver.spin_squares)).max() < 1e-8
    # PySCF's own fix_spin_ on the mcscf object reaches the same penalty
    again = casscf(n2_sto3g, 4, 4, config=SETTINGS, workdir=tmp_path / "again")
    again.fix_spin_(ss=0)
    again = again.state_average_([0.5, 0.5])
    again.kernel()
    assert abs(again.e_tot - ref.e_tot) < 1e-7


def test_two_roots_transition_rdms_and_large_ci(n2_sto3g, tmp_path):
    from pyscf import mcscf

    ref = mcscf.CASCI(n2_sto3g, 4, 4)
    ref.fcisolver = singlet_fci(n2_sto3g.mol)
    ref.fcisolver.nroots = 2
    ref.kernel()
    mc = casci(n2_sto3g, 4, 4, config=SETTINGS, workdir=tmp_path)
    mc.fcisolver.nroots = 2
    mc.fcisolver.fix_spin_(ss=0)
    mc.kernel()
    assert np.abs(np.asarray(mc.e_tot) - ref.e_tot).max() < 1e-9
    signs = [np.sign(np.vdot(a, b)) for a, b in zip(mc.ci, ref.ci)]
    for name in ("trans_rdm1", "trans_rdm12"):
        ours = getattr(mc.fcisolver, name)(mc.ci[0], mc.ci[1], 4, (2, 2))
        theirs = getattr(ref.fcisolver, name)(ref.ci[0], ref.ci[1], 4, (2, 2))
        ours, theirs = (ours,) if name == "trans_rdm1" else ours, (theirs,) if name == "trans_rdm1" else theirs
        for a, b in zip(ours, theirs):
            assert np.abs(a - signs[0] * signs[1] * b).max() < 1e-7
    assert np.abs(mc.fcisolver.trans_rdm1(mc.ci[0], mc.ci[0], 4, (2, 2))
                  - mc.fcisolver.make_rdm1(mc.ci[0], 4, (2, 2))).max() < 1e-12
    big = mc.fcisolver.large_ci(mc.ci[0], 4, (2, 2), tol=0.05)
    assert abs(abs(big[0][0]) - np.abs(mc.ci[0]).max()) < 1e-12


def test_past_the_dense_size_the_roots_stay_sparse_and_exact(n2_sto3g, tmp_path):
    from pyscf import mcscf

    from hamiltonians.io.pyscf_io import from_pyscf_ci

    exact = mcscf.CASCI(n2_sto3g, 4, 4).run()
    solver = NNQSSolver(SETTINGS, workdir=tmp_path, dense_max=0)
    mc = mcscf.CASCI(n2_sto3g, 4, 4)
    mc.fcisolver = solver
    mc.kernel()
    state = mc.ci
    assert isinstance(state, NNQSState) and not isinstance(state, (list, tuple)) and state.dets is not None
    assert abs(mc.e_tot - exact.e_tot) < 1e-9
    # the RDMs from the local estimators over the set are those of the vector (PySCF's, as reference)
    (a, b), (aa, ab, bb) = solver.make_rdm12s(state, 4, (2, 2))
    ref = reference_rdms(_sector(4, (2, 2)), state.dets, state.coefficients)
    for ours, theirs in ((a, ref.dm1a), (b, ref.dm1b), (aa, ref.dm2aa), (ab, ref.dm2ab), (bb, ref.dm2bb)):
        assert np.abs(ours - theirs).max() < 1e-10
    assert set(state.rdm_stderr) == {"dm1a", "dm1b", "dm2aa", "dm2ab", "dm2bb"}   # exact on the set: zero bars
    assert all(np.all(v == 0) for v in state.rdm_stderr.values())
    assert abs(solver.spin_square(state, 4, (2, 2))[0]) < 1e-8
    dense_c = from_pyscf_ci(exact.ci, state.dets, 4, 2, 2)
    assert abs(abs(dense_c @ state.coefficients) - 1) < 1e-8
    assert [abs(c) for c, _, _ in solver.large_ci(state, 4, (2, 2), tol=0.05)] == \
        sorted([abs(c) for c, _, _ in solver.large_ci(state, 4, (2, 2), tol=0.05)], reverse=True)
    for call in (lambda: solver.make_rdm123(state, 4, (2, 2)), lambda: solver.trans_rdm1(state, state, 4, (2, 2))):
        with pytest.raises(NotImplementedError, match="dense_max"):
            call()


def test_the_network_wavefunction_its_rdms_and_warm_starts(n2_sto3g, tmp_path):
    import torch
    from pyscf import mcscf

    from nnqs.wavefunction.tokens import tokens_to_occupations
    from samplers.exact import enumerate_support

    exact = mcscf.CASCI(n2_sto3g, 4, 4).run()
    settings = {**SETTINGS, "molecule": {"orbital_order": "reversed"}, "model": {"dtype": "float64"}}
    mc = casci(n2_sto3g, 4, 4, config=settings, workdir=tmp_path, wavefunction="network", warm_steps=3)
    mc.canonicalization = False
    mc.kernel()
    assert isinstance(mc.ci, NNQSState) and mc.ci.dets is None
    assert mc.e_tot >= exact.e_tot - 1e-10   # the network's exact energy is variational
    model, system = mc.ci.model, mc.ci.system   # the network and its system, in memory
    model.load_state_dict(mc.ci.weights)
    tokens, _ = enumerate_support(model)
    with torch.no_grad():
        psi = model.log_psi(tokens).exp().numpy()
    ref = reference_rdms(system.hamiltonian, tokens_to_occupations(tokens), psi).reordered(system.order)
    dm1, dm2 = mc.fcisolver.make_rdm12(mc.ci, 4, (2, 2))
    assert np.abs(dm1 - ref.dm1).max() < 1e-10 and np.abs(dm2 - ref.dm2).max() < 1e-10
    # a warm start: any ci0 continues from the last network, warm_steps steps, no start fit
    h1, ecore = mc.get_h1eff()
    _, again = mc.fcisolver.kernel(h1, mc.get_h2eff(), 4, (2, 2), ci0=True, ecore=ecore)
    assert again.result["config"]["start"]["mode"] == "none" and again.result["config"]["optim"]["steps"] == 3
    sampled = NNQSSolver(SETTINGS, workdir=tmp_path / "sampled", wavefunction="network", rdm_samples=2000)
    _, state = sampled.kernel(h1, mc.get_h2eff(), 4, (2, 2), ecore=ecore)
    sampled.make_rdm1(state, 4, (2, 2))
    assert state.rdm_stderr["dm1a"].max() > 0   # sampled RDMs come with their error bars
    with pytest.raises(Exception, match="nroots > 1 needs"):
        sampled.kernel(h1, mc.get_h2eff(), 4, (2, 2), nroots=2, ecore=ecore)


def test_newton_and_bad_states_are_refused_in_one_line(n2_sto3g, tmp_path):
    with pytest.raises(NotImplementedError, match="use mc.mc2step"):
        NNQSSolver().contract_2e(None, None, 4, (2, 2))
    mc = casscf(n2_sto3g, 4, 4, config={"optim": {"steps": 2}, "start": {"mode": "none"}}, workdir=tmp_path).newton()
    with pytest.raises(NotImplementedError, match="use mc.mc2step") as raised:
        mc.kernel()
    assert "\n" not in str(raised.value)
    with pytest.raises(TypeError, match="NNQSState"):
        NNQSSolver().make_rdm1("ci", 2, (1, 1))
    with pytest.raises(Exception, match="wavefunction must be"):
        NNQSSolver(wavefunction="mps")


@pytest.mark.slow
def test_casci_and_casscf_on_n2_ccpvdz_match_the_fci_solver(tmp_path):
    from pyscf import gto, mcscf, scf

    mol = gto.M(atom="N 0 0 0; N 0 0 1.0977", basis="cc-pvdz", verbose=0)
    mf = scf.RHF(mol).run()
    exact = mcscf.CASCI(mf, 8, 8).run()
    mc = casci(mf, 8, 8, config={"optim": {"steps": 100}, "run": {"threads": 1}}, workdir=tmp_path / "casci")
    mc.kernel()
    assert abs(mc.e_tot - exact.e_tot) < 1e-6
    exact_scf = mcscf.CASSCF(mf, 8, 8).run()
    mc = casscf(mf, 8, 8, config={"optim": {"steps": 100}, "run": {"threads": 1}}, workdir=tmp_path / "casscf",
                warm_steps=20)
    mc.kernel()
    assert abs(mc.e_tot - exact_scf.e_tot) < 1e-6
