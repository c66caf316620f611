"""Local RDM estimators against PySCF's ``make_rdm12s`` of the same vector, and the energy from them."""

import numpy as np
import pytest
import torch

from hamiltonians import local_energy
from hamiltonians.determinants import enumerate_determinants, pack_occupations
from hamiltonians.exact import ground_state
from hamiltonians.molecular import permute_orbitals
from hamiltonians.io.pyscf_io import from_pyscf_ci, to_pyscf_ci
from hamiltonians.rdm import (LOCAL_BOUND, RDM_NAMES, functional_from_moments, local_rdms, rdm_moments,
                              rdms_from_moments, spin_square_coefficients, unseen_mass)
from hamiltonians.references.rdms import reference_rdms
from tests.systems import random_hamiltonian


def _random_state(n, na, nb, seed=0):
    dets = enumerate_determinants(n, na, nb)
    g = torch.Generator().manual_seed(seed)
    amp = torch.complex(torch.randn(len(dets), generator=g, dtype=torch.float64),
                        torch.randn(len(dets), generator=g, dtype=torch.float64))
    return dets, amp / amp.norm()


def _log_psi_fn(dets, amp):
    table = dict(zip(pack_occupations(dets)[:, 0].tolist(), amp.tolist()))

    def fn(occ):
        return torch.tensor([table[k] for k in pack_occupations(occ)[:, 0].tolist()], dtype=torch.complex128).log()

    return fn


def _assert_equal(got, ref, tol=1e-12):
    for name in RDM_NAMES:
        err = np.abs(getattr(got, name) - getattr(ref, name)).max()
        assert err < tol, (name, err)


def _dense_energy(H, dets, amp):
    from hamiltonians.exact import hamiltonian_matrix

    mat, order = hamiltonian_matrix(H, dets)
    assert torch.equal(order, dets)
    v = amp.numpy()
    return float((v.conj() @ (mat @ v)).real)


def test_pyscf_ci_round_trip_and_sign_against_the_fci_vector(molecules):
    H = molecules("H2O")
    e, vec, dets = ground_state(H)
    ci = to_pyscf_ci(dets, vec, H.n_orbitals, H.n_alpha, H.n_beta)
    from pyscf import fci

    # the vector mapped into PySCF's layout is PySCF's eigenvector: its energy is E_FCI
    h2 = fci.direct_spin1.absorb_h1e(H.h1.numpy(), H.eri.numpy(), H.n_orbitals, (H.n_alpha, H.n_beta), 0.5)
    hc = fci.direct_spin1.contract_2e(h2, ci, H.n_orbitals, (H.n_alpha, H.n_beta))
    assert abs(float(np.vdot(ci, hc)) + H.constant - e) < 1e-10
    assert np.array_equal(from_pyscf_ci(ci, dets, H.n_orbitals, H.n_alpha, H.n_beta), vec)


@pytest.mark.parametrize("shape", [(5, 2, 2), (5, 3, 1), (6, 3, 2)])
def test_exact_mode_over_the_space_equals_pyscf(shape):
    n, na, nb = shape
    H = random_hamiltonian(n, na, nb, seed=n + na)
    dets, amp = _random_state(n, na, nb, seed=na)
    ref = reference_rdms(H, dets, amp.numpy())
    got = local_rdms(H, dets, amp.abs() ** 2, _log_psi_fn(dets, amp), mode="exact")
    _assert_equal(got, ref)
    assert abs(got.energy(H.h1, H.eri, H.constant) - _dense_energy(H, dets, amp)) < 1e-10
    assert np.allclose(got.dm1, got.dm1.T, atol=1e-14)
    assert np.allclose(got.dm2, got.dm2.transpose(1, 0, 3, 2), atol=1e-14)
    assert abs(np.trace(got.dm1) - (na + nb)) < 1e-12


def test_exact_mode_evaluates_what_the_samples_lack_and_truncated_zero_is_exact():
    """Half the space as samples (|psi|^2 weights): the other half enters through log_psi_fn."""
    H = random_hamiltonian(5, 2, 2, seed=3)
    dets, amp = _random_state(5, 2, 2, seed=4)
    half = torch.arange(0, len(dets), 2)
    w = amp.abs() ** 2
    ref = reference_rdms(H, dets, amp.numpy())
    # the estimator over half the space with the exact weights of the whole is not the RDM, but
    # plus the other half's share it is: the moments add over any partition of the samples
    fn = _log_psi_fn(dets, amp)
    rest = torch.arange(1, len(dets), 2)
    for mode, threshold in (("exact", 0.0), ("truncated", 0.0)):
        m1 = rdm_moments(H, dets[half], w[half], fn, mode=mode, threshold=threshold, errors=False)
        m2 = rdm_moments(H, dets[rest], w[rest], fn, mode=mode, threshold=threshold, errors=False)
        total = {k: (m1[k][0] + m2[k][0], m1[k][1]) for k in m1}
        _assert_equal(rdms_from_moments(total, 5), ref)


@pytest.mark.parametrize("threshold", [float("inf"), 1e9])
def test_sampled_mode_is_the_state_projected_on_the_samples(threshold):
    """With |psi|^2 renormalised on S, the sampled mode gives the RDMs of P_S psi exactly, and a
    truncated mode whose cut nothing passes equals it."""
    H = random_hamiltonian(6, 3, 2, seed=5)
    dets, amp = _random_state(6, 3, 2, seed=6)
    subset = torch.randperm(len(dets), generator=torch.Generator().manual_seed(0))[: len(dets) // 3]
    occ, a = dets[subset], amp[subset]
    w = a.abs() ** 2 / (a.abs() ** 2).sum()
    ref = reference_rdms(H, occ, a.numpy())
    _assert_equal(local_rdms(H, occ, w, log_psi_x=a.log(), mode="sampled"), ref)
    _assert_equal(local_rdms(H, occ, w, _log_psi_fn(dets, amp), log_psi_x=a.log(), mode="truncated",
                             threshold=threshold), ref)


def test_sample_by_sample_the_local_rdms_give_the_local_energy():
    H = random_hamiltonian(6, 3, 2, seed=7)
    dets, amp = _random_state(6, 3, 2, seed=8)
    fn = _log_psi_fn(dets, amp)
    rows = torch.tensor([0, 5, 17, 60, len(dets) - 1])
    e_loc = local_energy(H, dets[rows], fn, mode="exact", eps=0.0).e_loc
    for k, row in enumerate(rows.tolist()):
        one_hot = torch.zeros(len(rows), dtype=torch.float64)
        one_hot[k] = 1.0
        local = local_rdms(H, dets[rows], one_hot, fn, mode="exact", estimator="plain")
        assert abs(local.energy(H.h1, H.eri, H.constant) - float(e_loc[k].real)) < 1e-10, row


def test_a_functional_can_take_the_plain_estimator_beside_balanced_elements():
    """The energy summed per sample with ``"plain"`` is the mean of the local energies; the
    balanced elements give the same mean over the whole space but not sample by sample."""
    H = random_hamiltonian(5, 2, 2, seed=3)
    dets, amp = _random_state(5, 2, 2, seed=4)
    fn = _log_psi_fn(dets, amp)
    h1, eri = H.h1.double().numpy(), H.eri.double().numpy()
    energy = {"dm1a": h1.T, "dm1b": h1.T, "dm2aa": 0.5 * eri, "dm2bb": 0.5 * eri,
              "dm2ab": 0.5 * (eri + eri.transpose(2, 3, 0, 1))}
    rows = torch.arange(0, len(dets), 7)
    w = torch.full((len(rows),), 1.0 / len(rows), dtype=torch.float64)
    e_loc = local_energy(H, dets[rows], fn, mode="exact", eps=0.0).e_loc.real - H.constant
    moments = rdm_moments(H, dets[rows], w, fn, functionals={"plain": energy, "balanced": energy},
                          functional_estimators={"plain": "plain"})
    assert abs(functional_from_moments(moments, "plain")[0] - float((w * e_loc).sum())) < 1e-10
    assert abs(functional_from_moments(moments, "balanced")[0] - float((w * e_loc).sum())) > 1e-6
    everything = rdm_moments(H, dets, amp.abs() ** 2, fn, functionals={"plain": energy, "balanced": energy},
                             functional_estimators={"plain": "plain"})
    values = [functional_from_moments(everything, f)[0] for f in ("plain", "balanced")]
    assert abs(values[0] - values[1]) < 1e-10 and abs(values[0] + H.constant - _dense_energy(H, dets, amp)) < 1e-10


def test_rdms_come_back_in_the_molecules_orbital_order(molecules):
    H = molecules("LiH")
    order = [3, 0, 5, 1, 4, 2]
    Hp = permute_orbitals(H, order)
    _, vec, dets = ground_state(H)
    _, vec_p, dets_p = ground_state(Hp)
    ref = reference_rdms(H, dets, vec)
    live = np.abs(vec_p) > 0   # the samples of a state are where it is not zero
    amp = torch.from_numpy(vec_p[live])
    got = local_rdms(Hp, dets_p[torch.from_numpy(live)], amp ** 2, log_psi_x=amp.to(torch.complex128).log(),
                     mode="sampled").reordered(order)
    _assert_equal(got, ref, tol=1e-10)
    assert abs(got.energy(H.h1, H.eri, H.constant) - ground_state(H)[0]) < 1e-10


def test_standard_errors_cover_the_exact_rdms():
    """Multinomial draws from |psi|^2 with count weights: the elements' z-scores have mean square
    near 1 and none is extreme (a wrong variance fails one or the other)."""
    H = random_hamiltonian(5, 2, 2, seed=9)
    dets, amp = _random_state(5, 2, 2, seed=10)
    probs = amp.abs() ** 2
    n = 4000
    counts = torch.distributions.Multinomial(n, probs=probs).sample()  # seeded below
    ref = reference_rdms(H, dets, amp.numpy())
    zs = []
    for seed in range(3):
        torch.manual_seed(seed)
        counts = torch.distributions.Multinomial(n, probs=probs).sample()
        keep = counts > 0
        got = local_rdms(H, dets[keep], counts[keep] / n, _log_psi_fn(dets, amp), mode="exact", n_samples=n)
        for name in ("dm1a", "dm2ab", "dm2"):
            err = got.stderr[name]
            live = err > 1e-9
            zs.append(((getattr(got, name) - getattr(ref, name))[live] / err[live]).ravel())
    z = np.concatenate(zs)
    assert len(z) > 500
    assert np.abs(z).max() < 5.5
    assert 0.6 < float(np.mean(z ** 2)) < 1.5


def test_balanced_errors_cover_a_heavy_tailed_state_where_plain_errors_do_not():
    """Amplitudes over five decades: the plain ratio psi(x')/psi(x) is large on rare x a few
    thousand draws seldom hold, so its sample variance is far too small; the balanced
    estimator's local values are bounded and its z-scores are standard."""
    H = random_hamiltonian(6, 2, 2, seed=9)
    dets, amp = _random_state(6, 2, 2, seed=10)
    g = torch.Generator().manual_seed(3)
    amp = amp.real * torch.exp(-6 * torch.rand(len(amp), generator=g, dtype=torch.float64))
    amp = amp / amp.norm()
    ref = reference_rdms(H, dets, amp.numpy())
    fn = _log_psi_fn(dets, amp.to(torch.complex128))
    n, zs = 4000, {"plain": [], "balanced": []}
    for seed in range(3):
        torch.manual_seed(seed)
        counts = torch.distributions.Multinomial(n, probs=amp ** 2).sample()
        keep = counts > 0
        for estimator, z in zs.items():
            got = local_rdms(H, dets[keep], counts[keep] / n, fn, mode="exact", n_samples=n, estimator=estimator)
            for name in ("dm1a", "dm2ab", "dm2"):
                err = got.stderr[name]
                live = err > 1e-9
                z.append(((getattr(got, name) - getattr(ref, name))[live] / err[live]).ravel())
    z = np.concatenate(zs["balanced"])
    assert len(z) > 5000 and np.abs(z).max() < 5.5 and 0.6 < float(np.mean(z ** 2)) < 1.5
    assert np.abs(np.concatenate(zs["plain"])).max() > 10


@pytest.mark.parametrize("shape", [(5, 2, 2), (6, 3, 3), (5, 3, 1)])
def test_balanced_local_values_are_bounded_and_plain_ones_are_not(shape):
    """``LOCAL_BOUND``, on which the unreached configurations' bound rests: sample by sample
    ``|D_loc| <= LOCAL_BOUND[name]`` with the balanced estimator (complex amplitudes over five
    decades; each x alone as the sample, its x' from the exact mode)."""
    n, na, nb = shape
    H = random_hamiltonian(n, na, nb, seed=5)
    dets, amp = _random_state(n, na, nb, seed=6)
    amp = amp * torch.exp(-6 * torch.rand(len(amp), generator=torch.Generator().manual_seed(2), dtype=torch.float64))
    fn = _log_psi_fn(dets, amp / amp.norm())
    largest = {"balanced": dict.fromkeys(RDM_NAMES, 0.0), "plain": dict.fromkeys(RDM_NAMES, 0.0)}
    one = torch.ones(1, dtype=torch.float64)
    for row in range(0, len(dets), 2):
        for estimator, top in largest.items():
            local = local_rdms(H, dets[row:row + 1], one, fn, estimator=estimator)
            for name in RDM_NAMES:
                top[name] = max(top[name], float(np.abs(getattr(local, name)).max()))
    assert all(largest["balanced"][name] <= LOCAL_BOUND[name] + 1e-12 for name in RDM_NAMES), largest["balanced"]
    assert largest["plain"]["dm1a"] > 10 * LOCAL_BOUND["dm1a"]


def test_unseen_mass_is_good_turings_singletons_and_survives_reordering():
    counts = torch.tensor([5, 1, 3, 1, 1, 9])
    assert unseen_mass(counts, int(counts.sum())) == 3 / 20
    H = random_hamiltonian(4, 2, 1, seed=1)
    dets, amp = _random_state(4, 2, 1, seed=2)
    rdms = local_rdms(H, dets, amp.abs() ** 2, _log_psi_fn(dets, amp))
    rdms.unseen_mass = 0.25
    again = rdms.reordered([2, 0, 3, 1])
    assert again.unseen_mass == 0.25 and again.unseen_bound("dm2") == 4 * 0.25
    # dropping an unsampled x' from a pair has no such bound
    sampled = local_rdms(H, dets, amp.abs() ** 2, log_psi_x=amp.log(), mode="sampled")
    assert sampled.mode == "sampled" and np.isnan(sampled.unseen_bound("dm1"))
    assert np.isnan(local_rdms(H, dets, amp.abs() ** 2, _log_psi_fn(dets, amp), estimator="plain").unseen_bound("dm1"))


def test_bad_arguments_are_named():
    H = random_hamiltonian(4, 2, 1)
    dets, amp = _random_state(4, 2, 1)
    with pytest.raises(ValueError, match="mode"):
        local_rdms(H, dets, amp.abs() ** 2, log_psi_x=amp.log(), mode="semistochastic")
    with pytest.raises(ValueError, match="weights"):
        local_rdms(H, dets, torch.ones(3), log_psi_x=amp.log())
    with pytest.raises(ValueError, match="estimator"):
        local_rdms(H, dets, amp.abs() ** 2, log_psi_x=amp.log(), estimator="mixed")
    with pytest.raises(ValueError, match="outside"):
        local_rdms(H, dets[:3], torch.ones(3) / 3, log_psi_x=amp[:3].log(), mode="exact")


@pytest.mark.parametrize("shape", [(5, 2, 2), (5, 3, 1), (4, 3, 3)])
def test_spin_square_equals_pyscf(shape):
    from pyscf import fci

    n, na, nb = shape
    H = random_hamiltonian(n, na, nb, seed=11)
    dets, amp = _random_state(n, na, nb, seed=12)
    amp = amp.real / amp.real.norm()
    got = local_rdms(H, dets, amp ** 2, log_psi_x=amp.to(torch.complex128).log(), mode="sampled")
    ci = to_pyscf_ci(dets, amp.numpy(), n, na, nb)
    ss, _ = fci.spin_op.spin_square0(ci, n, (na, nb))
    assert abs(got.spin_square() - ss) < 1e-10
    occupations, orbitals = got.natural_orbitals()
    assert abs(occupations.sum() - (na + nb)) < 1e-10 and np.all(np.diff(occupations) <= 1e-12)
    assert np.allclose(orbitals @ np.diag(occupations) @ orbitals.T, got.dm1, atol=1e-12)


def test_a_functional_summed_per_sample_equals_it_from_the_rdms_and_has_its_error():
    H = random_hamiltonian(5, 2, 2, seed=13)
    dets, amp = _random_state(5, 2, 2, seed=14)
    torch.manual_seed(1)
    n = 3000
    counts = torch.distributions.Multinomial(n, probs=amp.abs() ** 2).sample()
    keep = counts > 0
    fn = _log_psi_fn(dets, amp)
    coef = spin_square_coefficients(5)
    moments = rdm_moments(H, dets[keep], counts[keep] / n, fn, functionals={"s2": coef})
    value, error = functional_from_moments(moments, "s2", n)
    rdms = rdms_from_moments(moments, 5, n)
    assert abs(value - rdms.spin_square()) < 1e-10
    # the per-sample S^2 from dense local RDMs: its spread is the functional's error
    rows = torch.nonzero(keep).flatten()
    local = []
    for k in range(len(rows)):
        one_hot = torch.zeros(len(rows), dtype=torch.float64)
        one_hot[k] = 1.0
        local.append(local_rdms(H, dets[rows], one_hot, fn).spin_square())
    local = np.array(local)
    w = (counts[keep] / n).numpy()
    assert abs(np.sqrt((w * (local - value) ** 2).sum() / n) - error) < 1e-10


def test_openfermion_interaction_rdm_gives_the_energy_and_openfermions_own_rdm():
    from openfermion import FermionOperator, get_sparse_operator, jordan_wigner

    from hamiltonians.io.openfermion_io import to_interaction_rdm, to_openfermion

    H = random_hamiltonian(4, 2, 1, seed=15)
    dets, amp = _random_state(4, 2, 1, seed=16)
    rdms = local_rdms(H, dets, amp.abs() ** 2, _log_psi_fn(dets, amp), mode="exact")
    rdm = to_interaction_rdm(rdms)
    assert abs(rdm.expectation(to_openfermion(H)) - rdms.energy(H.h1, H.eri, H.constant)) < 1e-10
    # two elements against the state vector in OpenFermion's own basis (spin orbital p is qubit p)
    vec = np.zeros(2 ** 8, dtype=complex)
    for d, a in zip(dets.tolist(), amp.tolist()):
        vec[int("".join(str(b) for b in d), 2)] = a
    for term, got in ((((0, 1), (2, 0)), rdm.one_body_tensor[0, 2]),
                      (((1, 1), (3, 1), (5, 0), (1, 0)), rdm.two_body_tensor[1, 3, 5, 1])):
        op = get_sparse_operator(jordan_wigner(FermionOperator(term) + FermionOperator(term).__class__(
            tuple((i, 1 - k) for i, k in reversed(term)))), n_qubits=8)
        assert abs(0.5 * (vec.conj() @ op @ vec).real - got) < 1e-10


def test_the_dipole_from_the_active_rdm_equals_pyscfs_from_the_ao_density():
    """H2O / STO-3G, one frozen core orbital: the FCI state's dipole through dipole_operator and
    the RDMs equals PySCF's scf.hf.dip_moment of the AO density (core + active)."""
    from pyscf import gto, mcscf, scf

    from hamiltonians import from_pyscf
    from hamiltonians.io.pyscf_io import dipole_operator

    geometry = "O 0 0 0; H 0 0.757 0.587; H 0 -0.757 0.587"
    H = from_pyscf(geometry, "sto-3g", frozen_core=1)
    _, vec, dets = ground_state(H)
    rdms = reference_rdms(H, dets, vec)
    constant, r, h1, c_act = dipole_operator(geometry, "sto-3g", frozen_core=1)
    assert np.allclose(h1, H.h1.numpy(), atol=1e-8)
    mu = constant - np.einsum("xpq,pq->x", r, rdms.dm1)
    mol = gto.M(atom=geometry, basis="sto-3g", verbose=0)
    mf = scf.RHF(mol).run(conv_tol=1e-11)
    mc = mcscf.CASCI(mf, 6, 8)
    mc.fcisolver.conv_tol = 1e-12
    mc.kernel()
    dm_ao = mc.make_rdm1()
    assert np.allclose(np.abs(c_act), np.abs(mf.mo_coeff[:, 1:]), atol=1e-6)   # the active orbitals, up to signs
    expected = scf.hf.dip_moment(mol, dm_ao, unit="AU", verbose=0)
    assert np.abs(mu - expected).max() < 1e-6
    assert np.linalg.norm(mu) > 0.5   # a real dipole, not a symmetric zero
