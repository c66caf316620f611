"""The semistochastic local energy: the deterministic part exact, the drawn part unbiased with
the stated variance (z-tests over repeated draws, fixed seed), its amplitude count bounded."""

import math

import pytest
import scipy.stats
import torch

from hamiltonians import local_energy
from hamiltonians.determinants import enumerate_determinants, pack_occupations
from hamiltonians.local_energy import draw_by_magnitude, semistochastic_variance
from tests.hamiltonians.test_local_energy import _lookup_fn

EPS, DRAWS, REPEATS = 0.05, 4, 400


@pytest.fixture(scope="module")
def setup(molecules):
    """H2O / STO-3G, a random real wavefunction over its 441 determinants, 12 of them as the batch."""
    H = molecules("H2O")
    dets = enumerate_determinants(H.n_orbitals, H.n_alpha, H.n_beta)
    g = torch.Generator().manual_seed(0)
    amp = torch.randn(dets.shape[0], generator=g, dtype=torch.float64)
    amp = amp.sign() * (amp.abs() + 0.1)            # no amplitude near zero
    amp = amp / amp.norm()
    batch = dets[torch.randperm(dets.shape[0], generator=g)[:12]]
    fn = _lookup_fn(dets, amp)
    table = dict(zip(pack_occupations(dets)[:, 0].tolist(), amp.tolist()))
    return H, batch, fn, fn(batch), table


def reference_moments(H, batch, table):
    """Per row: the exact mean and the variance of the drawn part, from every connection by hand."""
    occ_p, vals, rows = H.connected(batch)
    in_batch = set(pack_occupations(batch)[:, 0].tolist())
    keys = pack_occupations(occ_p)[:, 0].tolist()
    psi_x = [table[k] for k in pack_occupations(batch)[:, 0].tolist()]
    variance = torch.zeros(batch.shape[0], dtype=torch.float64)
    for row in range(batch.shape[0]):
        pool = [(float(v), table[k] / psi_x[row]) for k, v, r in zip(keys, vals.tolist(), rows.tolist())
                if r == row and k not in in_batch and 1e-12 < abs(v) < EPS]
        if pool:
            s = sum(abs(v) for v, _ in pool)
            second = s * sum(abs(v) * r * r for v, r in pool)
            mean = sum(v * r for v, r in pool)
            variance[row] = (second - mean * mean) / DRAWS
            # the package's formula agrees with this one
            v_t = torch.tensor([v for v, _ in pool], dtype=torch.float64)
            r_t = torch.tensor([r for _, r in pool], dtype=torch.float64)
            assert semistochastic_variance(v_t, r_t, DRAWS) == pytest.approx(float(variance[row]), rel=1e-12)
    return variance


def test_without_a_pool_it_is_the_exact_local_energy(setup):
    H, batch, fn, lp, _ = setup
    exact = local_energy(H, batch, fn, mode="exact", log_psi_x=lp)
    for kernel in ("torch", "compiled"):
        got = local_energy(H, batch, fn, mode="semistochastic", threshold=0.0, draws=3, log_psi_x=lp, kernel=kernel)
        torch.testing.assert_close(got.e_loc, exact.e_loc, rtol=0, atol=1e-12)
        assert got.n_drawn == 0 and got.n_evaluated == exact.n_evaluated


@pytest.mark.parametrize("kernel", ["compiled", "torch"])   # the heat-bath walk and the reference
def test_the_mean_is_exact_and_the_variance_is_the_formula(setup, kernel):
    H, batch, fn, lp, table = setup
    exact = local_energy(H, batch, fn, mode="exact", log_psi_x=lp).e_loc.real
    variance = reference_moments(H, batch, table)
    assert int((variance > 0).sum()) >= 10      # most rows have a drawn part
    gen = torch.Generator().manual_seed(1)
    draws = torch.stack([local_energy(H, batch, fn, mode="semistochastic", threshold=EPS, draws=DRAWS, log_psi_x=lp,
                                      generator=gen, kernel=kernel).e_loc.real for _ in range(REPEATS)])
    live = variance > 0
    # the mean: z-scores against the exact local energy with the formula's variance
    z = (draws.mean(0) - exact)[live] / (variance[live] / REPEATS).sqrt()
    assert float((z ** 2).sum()) < scipy.stats.chi2.ppf(0.999, df=int(live.sum()))
    # the variance: z-scores of the mean squared deviation against the formula
    sq = (draws - exact) ** 2
    z_var = (sq.mean(0) - variance)[live] / (sq.std(0)[live] / math.sqrt(REPEATS))
    assert float((z_var ** 2).sum()) < scipy.stats.chi2.ppf(0.999, df=int(live.sum()))
    # rows without a pool are exact in every draw
    assert torch.equal(draws[:, ~live], exact[~live].expand(REPEATS, -1)) or not bool((~live).any())
    # ... and the test can fail: a biased estimate (an eps of the pool dropped) is caught
    biased = local_energy(H, batch, fn, mode="truncated", threshold=EPS, log_psi_x=lp).e_loc.real
    z_bad = (biased - exact)[live] / (variance[live] / REPEATS).sqrt()
    assert float((z_bad ** 2).sum()) > scipy.stats.chi2.ppf(0.999, df=int(live.sum()))


def test_amplitudes_per_row_are_bounded_by_the_draws(setup):
    H, batch, fn, lp, _ = setup
    deterministic = local_energy(H, batch, fn, mode="truncated", threshold=EPS, log_psi_x=lp)
    got = local_energy(H, batch, fn, mode="semistochastic", threshold=EPS, draws=DRAWS, log_psi_x=lp,
                       generator=torch.Generator().manual_seed(2))
    assert got.n_drawn <= DRAWS * batch.shape[0] and got.n_drawn > 0
    assert deterministic.n_evaluated < got.n_evaluated <= deterministic.n_evaluated + DRAWS * batch.shape[0]
    exact = local_energy(H, batch, fn, mode="exact", log_psi_x=lp)
    assert got.n_evaluated < exact.n_evaluated        # fewer amplitudes than the exact mode
    with pytest.raises(ValueError, match="draws >= 1"):
        local_energy(H, batch, fn, mode="semistochastic", threshold=EPS, log_psi_x=lp)


def test_draws_follow_the_magnitudes_row_by_row():
    g = torch.Generator().manual_seed(3)
    values = torch.randn(30, generator=g, dtype=torch.float64)
    rows = torch.tensor([0] * 12 + [5] * 18)[torch.randperm(30, generator=g)]
    picked, weight = draw_by_magnitude(values, rows, 6000, torch.Generator().manual_seed(4))
    assert picked.shape == weight.shape == (12000,)
    for row in (0, 5):
        mine = rows == row
        counts = torch.bincount(picked, minlength=30).double()[mine]
        assert counts.sum() == 6000 and torch.all(rows[picked[(rows[picked] == row)]] == row)
        p = values[mine].abs() / values[mine].abs().sum()
        chi2 = float(((counts - 6000 * p) ** 2 / (6000 * p)).sum())
        assert chi2 < scipy.stats.chi2.ppf(0.999, df=int(mine.sum()) - 1)
        assert torch.allclose(weight[rows[picked] == row], values[mine].abs().sum() / 6000)
    empty = draw_by_magnitude(values[:0], rows[:0], 3)
    assert empty[0].numel() == 0 and empty[1].numel() == 0


def test_each_rows_draw_variance_is_estimated_without_bias(setup):
    """The per-row estimate from a row's own draws averages to the formula's variance (z-test),
    and an energy's draw noise ``sum_u w_u^2 sigma_u^2`` matches the spread of repeated energies
    on the same samples (chi-squared test of the variance)."""
    H, batch, fn, lp, table = setup
    variance = reference_moments(H, batch, table)
    live = variance > 0
    gen = torch.Generator().manual_seed(5)
    results = [local_energy(H, batch, fn, mode="semistochastic", threshold=EPS, draws=DRAWS, log_psi_x=lp,
                            generator=gen) for _ in range(REPEATS)]
    estimates = torch.stack([r.draw_variance for r in results])
    assert torch.equal(estimates[:, ~live], torch.zeros_like(estimates[:, ~live]))
    z = (estimates.mean(0) - variance)[live] / (estimates.std(0)[live] / math.sqrt(REPEATS))
    assert float((z ** 2).sum()) < scipy.stats.chi2.ppf(0.999, df=int(live.sum()))
    weights = torch.softmax(torch.linspace(0, 3, batch.shape[0], dtype=torch.float64), 0)
    energies = torch.stack([(weights * r.e_loc.real).sum() for r in results])
    predicted = float((weights ** 2 * variance).sum())
    statistic = (REPEATS - 1) * float(energies.var()) / predicted
    assert scipy.stats.chi2.ppf(0.0005, REPEATS - 1) < statistic < scipy.stats.chi2.ppf(0.9995, REPEATS - 1)
    one = local_energy(H, batch, fn, mode="semistochastic", threshold=EPS, draws=1, log_psi_x=lp, generator=gen)
    assert one.draw_variance is None
    assert local_energy(H, batch, fn, mode="truncated", threshold=EPS, log_psi_x=lp).draw_variance is None


@pytest.mark.parametrize("chunk", [None, 300])
def test_the_compiled_heat_bath_draws_are_the_references(setup, chunk):
    """The compiled heat-bath walk (the pool summed, then walked to the draws, never written out)
    picks the same elements as the reference (the pool written out, then drawn from) from the
    same uniforms, chunk by chunk; the random streams end in the same state."""
    H, batch, fn, lp, _ = setup
    pytest.importorskip("numba")
    streams = {walk: torch.Generator().manual_seed(7) for walk in (True, False)}
    parts = {walk: list(H.semistochastic_connections(batch, threshold=EPS, draws=DRAWS, generator=streams[walk],
                                                     eps=1e-12, chunk=chunk, kernel="compiled", heat_bath=walk))
             for walk in streams}
    parts["compiled"], parts["torch"] = parts[True], parts[False]
    assert len(parts["torch"]) == len(parts["compiled"]) > (1 if chunk else 0)
    n_drawn = 0
    for mine, ref in zip(parts["compiled"], parts["torch"]):
        key = lambda keys, rows: sorted(zip(rows.tolist(), keys[:, 0].tolist()))  # noqa: E731
        assert key(mine[0], mine[2]) == key(ref[0], ref[2]) and mine[4] == ref[4]   # the deterministic part
        (dk, dv, dr), (rk, rv, rr) = mine[5], ref[5]
        got, want = (sorted(zip(r.tolist(), k[:, 0].tolist(), v.tolist())) for r, k, v in ((dr, dk, dv), (rr, rk, rv)))
        assert [g[:2] for g in got] == [w[:2] for w in want]                 # the same elements drawn
        assert [g[2] for g in got] == pytest.approx([w[2] for w in want], rel=1e-12, abs=0)
        n_drawn += dk.shape[0]
    assert n_drawn == DRAWS * batch.shape[0]    # every row of this batch has a pool
    assert torch.equal(streams[True].get_state(), streams[False].get_state())


@pytest.mark.parametrize("threshold", [0.002, 0.05, 1.0])
def test_the_heat_bath_walk_with_rows_and_chunks_without_a_pool(setup, threshold):
    """400 of the 441 determinants as the batch: most rows' connections are in it, so many rows
    have no pool; the walk still picks the reference's elements, draws only for rows with a pool,
    and leaves the stream where the reference does."""
    H, *_ = setup
    pytest.importorskip("numba")
    dets = enumerate_determinants(H.n_orbitals, H.n_alpha, H.n_beta)
    batch = dets[torch.randperm(dets.shape[0], generator=torch.Generator().manual_seed(9))[:400]]
    streams = {walk: torch.Generator().manual_seed(10) for walk in (True, False)}
    drawn = {}
    for walk, gen in streams.items():
        parts = list(H.semistochastic_connections(batch, threshold=threshold, draws=DRAWS, generator=gen, eps=1e-12,
                                                  chunk=500, kernel="compiled", heat_bath=walk))
        drawn[walk] = sorted(zip(torch.cat([p[5][2] for p in parts]).tolist(),
                                 torch.cat([p[5][0] for p in parts])[:, 0].tolist(),
                                 torch.cat([p[5][1] for p in parts]).tolist()))
    assert [d[:2] for d in drawn[True]] == [d[:2] for d in drawn[False]]
    assert [d[2] for d in drawn[True]] == pytest.approx([d[2] for d in drawn[False]], rel=1e-12, abs=0)
    rows_with_draws = {d[0] for d in drawn[True]}
    assert 0 < len(rows_with_draws) < 400 and len(drawn[True]) == DRAWS * len(rows_with_draws)
    assert torch.equal(streams[True].get_state(), streams[False].get_state())
