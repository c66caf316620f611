"""hamiltonians.sci.pt2: Epstein–Nesbet PT2 against dense brute force, and its semistochastic estimate."""

import numpy as np
import pytest
import torch

from hamiltonians.sci.grow import grow
from hamiltonians.sci.spaces import cisd
from hamiltonians.determinants import lookup_keys, pack_occupations
from hamiltonians.exact import ground_state_energy, hamiltonian_matrix
from hamiltonians.sci.pt2 import en_pt2, extrapolate_pt2, semistochastic_pt2
from hamiltonians.sci.diagonalise import diagonalise, projected_energy


@pytest.fixture(scope="module")
def h2o(molecules):
    H = molecules("H2O")
    matrix, full = hamiltonian_matrix(H)
    return H, matrix.toarray(), full


def rows_of(full, dets):
    pos = lookup_keys(pack_occupations(full), pack_occupations(dets)).numpy()
    assert (pos >= 0).all()
    return pos


def brute_force(m, rows, c, energy, form):
    """(E2, sum t^2) of c on the rows, from the dense matrix: r = (H - E) c over the whole space."""
    psi = np.zeros(m.shape[0])
    psi[rows] = c / np.linalg.norm(c)
    r = m @ psi - energy * psi
    t = r / (energy - np.diag(m))
    keep = np.ones(m.shape[0], bool)
    if form == "eigenvector":
        keep[rows] = False
    return float(r[keep] @ t[keep]), float(t[keep] @ t[keep])


def random_state(full, size, seed):
    g = torch.Generator().manual_seed(seed)
    dets = full[torch.randperm(full.shape[0], generator=g)[:size]]
    return dets, torch.randn(size, generator=g, dtype=torch.float64)


@pytest.mark.parametrize("form", ["eigenvector", "residual"])
def test_deterministic_pt2_equals_the_dense_sum(h2o, form):
    H, m, full = h2o
    for dets, c in (random_state(full, 80, 0), random_state(full, 150, 1), (cisd(H).dets, cisd(H).coefficients)):
        rows = rows_of(full, dets)
        energy = projected_energy(H, dets, c)
        e2, norm = brute_force(m, rows, c.numpy(), energy, form)
        for n_buckets in (None, 3):
            got = en_pt2(H, dets, c, form=form, n_buckets=n_buckets)
            assert got.form == form and abs(got.e_var - energy) < 1e-12
            assert abs(got.e_pt2 - e2) < 1e-10 and abs(got.norm - norm) < 1e-10
            assert abs(got.rpt2 - e2 / (1 + norm)) < 1e-10 and got.e_total == got.e_var + got.e_pt2
        assert got.n_buckets == 3 and got.peak_bytes > 0
    # a given energy is used as E
    e2, _ = brute_force(m, rows, c.numpy(), -75.0, form)
    assert abs(en_pt2(H, dets, c, -75.0, form=form).e_pt2 - e2) < 1e-10
    with pytest.raises(ValueError, match="form"):
        en_pt2(H, dets, c, form="other")


def test_residual_form_of_an_eigenvector_is_the_eigenvector_form(h2o):
    H, m, full = h2o
    dets, _ = random_state(full, 120, 4)
    state = diagonalise(H, torch.cat((cisd(H).dets[:20], dets)))
    a = en_pt2(H, state.dets, state.coefficients, state.energy, form="eigenvector")
    b = en_pt2(H, state.dets, state.coefficients, state.energy, form="residual")
    assert a.e_pt2 < 0 and abs(a.e_pt2 - b.e_pt2) < 1e-10 and abs(a.rpt2 - b.rpt2) < 1e-10
    # a state that is not S's eigenvector has an in-S residual, which the residual form adds
    noise = torch.randn(state.dets.shape[0], generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    a, b = (en_pt2(H, state.dets, state.coefficients + 0.05 * noise, form=f) for f in ("eigenvector", "residual"))
    assert abs(b.e_pt2 - a.e_pt2) > 1e-4


def test_semistochastic_is_unbiased(h2o):
    """z-test of the mean over 25 seeds x 40 batches against the deterministic E2 (|z| < 4)."""
    H, m, full = h2o
    state = cisd(H)
    exact = en_pt2(H, state.dets, state.coefficients, state.energy).e_pt2
    means, errors = [], []
    for seed in range(25):
        est = semistochastic_pt2(H, state.dets, state.coefficients, state.energy, n_deterministic=10, n_draws=20,
                                 n_batches=40, seed=seed)
        assert len(est.batches) == 40 and est.stderr > 0
        means.append(est.e_pt2)
        errors.append(est.stderr)
    means, errors = np.array(means), np.array(errors)
    stderr = means.std(ddof=1) / np.sqrt(len(means))
    z = (means.mean() - exact) / stderr
    assert abs(z) < 4, (means.mean(), exact, stderr)
    # each run's standard error estimates the spread of the runs' means (within 30%)
    assert 0.7 < np.mean(errors) / means.std(ddof=1) < 1.3
    # the correction is not negligible here, so the test can see a biased estimator
    assert abs(est.e_deterministic - exact) > 20 * stderr
    # all of S deterministic: the exact value, no noise; the same seed, the same batches
    full_det = semistochastic_pt2(H, state.dets, state.coefficients, state.energy, n_deterministic=10**6,
                                  n_draws=5, n_batches=3, seed=0)
    assert abs(full_det.e_pt2 - exact) < 1e-12 and full_det.stderr < 1e-15
    again = semistochastic_pt2(H, state.dets, state.coefficients, state.energy, n_deterministic=10, n_draws=20,
                               n_batches=40, seed=24)
    assert again.batches == est.batches


def test_pure_stochastic_is_unbiased(h2o):
    """No deterministic part: the pair estimator alone, z-test over 400 batches."""
    H, m, full = h2o
    state = cisd(H)
    exact = en_pt2(H, state.dets, state.coefficients).e_pt2
    est = semistochastic_pt2(H, state.dets, state.coefficients, None, n_deterministic=0, n_draws=50,
                             n_batches=400, seed=1)
    assert est.e_deterministic == 0 and abs(est.e_pt2 - exact) < 4 * est.stderr
    with pytest.raises(ValueError, match="n_draws"):
        semistochastic_pt2(H, state.dets, state.coefficients, None, n_deterministic=0, n_draws=1, n_batches=2)


@pytest.mark.parametrize("size", [1, 2])
def test_one_deterministic_parent(h2o, size):
    """A deterministic part of one determinant (a one-determinant space: the HF determinant) is
    still a vector of one weight: on one determinant the semistochastic PT2 is exact."""
    H, m, full = h2o
    state = cisd(H)
    dets, c = state.dets[:size], np.asarray(state.coefficients[:size], dtype=np.float64)
    exact = en_pt2(H, dets, c)
    est = semistochastic_pt2(H, dets, c, None, n_deterministic=1, n_draws=4, n_batches=3, seed=0)
    assert est.e_deterministic != 0
    if size == 1:
        assert abs(est.e_pt2 - exact.e_pt2) < 1e-12 and est.stderr < 1e-15
        e2, _ = brute_force(m, rows_of(full, dets), c, exact.e_var, "eigenvector")
        assert abs(exact.e_pt2 - e2) < 1e-10


def test_var_plus_pt2_approaches_fci():
    from hamiltonians import from_pyscf

    H = from_pyscf("N 0 0 0; N 0 0 1.1", "sto-3g")
    fci = ground_state_energy(H)
    states = []
    start = cisd(H)
    grow(H, start, select="pt2", growth=2.0, max_size=3200, reference=start.dets[0], on_round=states.append)
    var_err, total_err = [], []
    for s in states:
        pt2 = en_pt2(H, s.dets, s.coefficients, s.energy)
        var_err.append(s.energy - fci)
        total_err.append(abs(pt2.e_total - fci))
    assert len(states) >= 3
    assert all(t < v for t, v in zip(total_err, var_err)), (var_err, total_err)
    assert all(b < a for a, b in zip(total_err, total_err[1:])), total_err
    assert total_err[-1] < 0.2 * var_err[-1]
    # E_var extrapolated to E2 -> 0 over a 1000-determinant CIPSI state and its truncations to the
    # 250 and 500 largest |c| (re-diagonalised): far closer to FCI than its E_var (0.29 mHa above)
    state = next(s for s in states if s.dets.shape[0] >= 1000)
    state = diagonalise(H, state.dets[torch.argsort(state.coefficients.abs(), descending=True)[:1000]])
    points = []
    for size in (250, 500, 1000):
        keep = torch.argsort(state.coefficients.abs(), descending=True)[:size]
        sub = diagonalise(H, state.dets[keep], v0=state.coefficients[keep])
        points.append((sub.energy, en_pt2(H, sub.dets, sub.coefficients, sub.energy).e_pt2))
    fit = extrapolate_pt2(*zip(*points))
    assert fit["points"] == 3 and fit["slope"] < 0            # E_var falls as E2 -> 0 (E2 < 0)
    assert abs(fit["energy"] - fci) < 0.2 * (points[-1][0] - fci), (fit, points, fci)


def test_extrapolation_recovers_a_line_and_carries_the_error_bars():
    e2 = np.array([-3e-3, -1.5e-3, -5e-4])
    e_var = -100.0 + 0.8 * -e2          # E_var = E_0 + b E2 with b = -0.8
    fit = extrapolate_pt2(e_var, e2)
    assert abs(fit["energy"] + 100.0) < 1e-12 and abs(fit["slope"] + 0.8) < 1e-9 and fit["stderr"] < 1e-12
    # two points: the line through them; an error bar on one E2 moves E_0 by slope * lever arm
    two = extrapolate_pt2(e_var[1:], e2[1:], [0.0, 1e-5])
    lever = e2[1] / (e2[1] - e2[2])      # dE_0 / dE2 of the second point
    assert abs(two["energy"] + 100.0) < 1e-10 and abs(two["stderr"] - abs(0.8 * lever) * 1e-5) < 1e-9
    # scatter about the line shows in the error bar
    noisy = extrapolate_pt2(e_var + np.array([1e-5, -2e-5, 1e-5]), e2)
    assert noisy["stderr"] > 1e-6
    with pytest.raises(ValueError, match="K >= 2"):
        extrapolate_pt2([1.0], [0.1])
    with pytest.raises(ValueError, match="different E2"):
        extrapolate_pt2([1.0, 2.0], [0.1, 0.1])
