"""Local energies: FCI eigenvector gives E_loc = E_FCI; sampled mode; argument handling."""

import numpy as np
import pytest
import torch

from hamiltonians import local_energy
from hamiltonians.amplitudes import AmplitudeTable, from_parents, full_pass
from hamiltonians.determinants import enumerate_determinants, pack_occupations
from hamiltonians.exact import ground_state
from hamiltonians.io.pyscf_io import from_pyscf_ci


def _pyscf_fci_vector(H, name):
    """PySCF FCI (exact: dense diagonalisation of the determinant space) mapped onto ``dets``."""
    from pyscf import fci

    n, na, nb = H.n_orbitals, H.n_alpha, H.n_beta
    solver = fci.direct_spin1.FCI()
    solver.pspace_size = H.n_determinants + 1  # direct diagonalisation, no Davidson residual
    e, ci = solver.kernel(H.h1.numpy(), H.eri.numpy(), n, (na, nb), ecore=H.constant)
    dets = enumerate_determinants(n, na, nb)
    return e, from_pyscf_ci(ci, dets, n, na, nb), dets


def _lookup_fn(dets, amp, dtype=torch.complex128):
    keys = pack_occupations(dets)[:, 0]
    table = dict(zip(keys.tolist(), amp.tolist()))

    def fn(occ):
        a = torch.tensor([table[k] for k in pack_occupations(occ)[:, 0].tolist()], dtype=torch.float64)
        return torch.complex(a.abs().log(), (a < 0).double() * torch.pi).to(dtype)

    return fn


@pytest.mark.parametrize("name", ["H2", "LiH", "H2O"])
def test_fci_vector_local_energy_is_constant(molecules, name):
    H = molecules(name)
    e_fci, amp, dets = _pyscf_fci_vector(H, name)
    sel = np.abs(amp) > 1e-6
    fn = _lookup_fn(dets, amp)
    res = local_energy(H, dets[torch.from_numpy(sel)], fn, mode="exact", chunk=5000)
    assert res.mode == "exact"
    assert res.e_loc.dtype == torch.complex128
    err = (res.e_loc - e_fci).abs().max().item()
    assert err < 1e-8, err
    assert (res.e_loc.imag.abs().max().item()) < 1e-12


def test_sampled_mode_and_log_psi_x(molecules):
    H = molecules("LiH")
    e, vec, dets = ground_state(H)
    fn = _lookup_fn(dets, vec)
    calls = []

    def counting(occ):
        calls.append(occ.shape[0])
        return fn(occ)

    # whole space as the "sampled" set: sampled == exact == E
    lp = fn(dets)
    sel = torch.from_numpy(np.abs(vec) > 1e-12)
    samp = local_energy(H, dets[sel], None, mode="sampled", log_psi_x=lp[sel])
    assert samp.mode == "sampled"
    assert (samp.e_loc - e).abs().max().item() < 1e-9
    # subset: compare with an explicit sum restricted to the subset
    sub = dets[sel][::3]
    lp_sub = fn(sub)
    samp = local_energy(H, sub, counting, mode="sampled", log_psi_x=lp_sub, eps=0.0)
    assert calls == []
    xp, vals, rows = H.connected(sub)
    keys = pack_occupations(sub)[:, 0].tolist()
    pos = {k: i for i, k in enumerate(keys)}
    expect = H.diagonal(sub).to(torch.complex128)
    for x, v, r in zip(pack_occupations(xp)[:, 0].tolist(), vals.tolist(), rows.tolist()):
        if x in pos:
            expect[r] += v * torch.exp(lp_sub[pos[x]] - lp_sub[r])
    assert torch.allclose(samp.e_loc, expect, atol=1e-12, rtol=0)
    # exact mode with log_psi_x: the batch itself is not re-evaluated
    exact = local_energy(H, sub, log_psi_x=lp_sub, amplitudes=full_pass(counting, psi_chunk=50), chunk=97)
    assert max(calls) <= 50 and exact.n_evaluated == sum(calls)
    calls.clear()
    again = local_energy(H, sub, counting, chunk=97)
    assert again.n_evaluated == exact.n_evaluated + sub.shape[0]
    assert torch.allclose(again.e_loc, exact.e_loc, atol=1e-12, rtol=0)
    assert (exact.e_loc - e).abs().max().item() < 1e-9
    assert exact.mode == "exact"


def test_method_dtypes_and_errors(molecules):
    H = molecules("H2")
    e, vec, dets = ground_state(H)
    fn64 = _lookup_fn(dets, vec, torch.complex64)
    res = local_energy(H, dets.long(), fn64, mode="exact")
    assert res.e_loc.dtype == torch.complex128 and res.e_loc.shape == (dets.shape[0],)
    big = dets[torch.from_numpy(np.abs(vec) > 1e-6)]  # H2: the singles vanish by symmetry
    res32 = local_energy(H.to(torch.float32), big, fn64)
    assert res32.e_loc.dtype == torch.complex64
    assert (res32.e_loc.real.double() - e).abs().max().item() < 1e-4
    with pytest.raises(ValueError, match="mode"):
        local_energy(H, dets, fn64, mode="bogus")
    with pytest.raises(ValueError, match="log_psi"):
        local_energy(H, dets, None)


EPS = 1e-12  # the default; the compiled kernel treats eps below 1e-14 as 1e-14


def test_truncated_mode_against_an_explicit_sum(molecules):
    """In the batch: always in; outside: in iff |H_xx'| >= threshold. threshold 0 is exact mode,
    an infinite one sampled mode; the amplitudes of x' may come from their parent rows."""
    H = molecules("H2O")
    e, vec, dets = ground_state(H)
    fn = _lookup_fn(dets, vec)
    sub = dets[torch.from_numpy(np.abs(vec) > 1e-5)][::2]
    lp_sub = fn(sub)
    threshold = 2e-2
    got = local_energy(H, sub, fn, mode="truncated", threshold=threshold, log_psi_x=lp_sub, eps=EPS)
    xp, vals, rows = H.connected(sub, eps=EPS)
    in_batch = set(pack_occupations(sub)[:, 0].tolist())
    expect = H.diagonal(sub).to(torch.complex128)
    kept = 0
    lp_xp = fn(xp)
    for key, v, r, lp in zip(pack_occupations(xp)[:, 0].tolist(), vals.tolist(), rows.tolist(), lp_xp):
        if key in in_batch or abs(v) >= threshold:
            expect[r] += v * torch.exp(lp - lp_sub[r])
            kept += 1
    assert torch.allclose(got.e_loc, expect, atol=1e-12, rtol=0)
    assert got.n_kept == kept and 0.1 < got.kept_fraction < 0.95 and got.n_connected == vals.numel()
    exact = local_energy(H, sub, fn, log_psi_x=lp_sub, eps=EPS)
    sampled = local_energy(H, sub, None, mode="sampled", log_psi_x=lp_sub, eps=EPS)
    zero = local_energy(H, sub, fn, mode="truncated", threshold=0.0, log_psi_x=lp_sub, eps=EPS)
    inf = local_energy(H, sub, fn, mode="truncated", threshold=float("inf"), log_psi_x=lp_sub, eps=EPS)
    assert torch.allclose(zero.e_loc, exact.e_loc, atol=1e-12, rtol=0) and zero.kept_fraction == 1.0
    assert torch.allclose(inf.e_loc, sampled.e_loc, atol=1e-12, rtol=0) and inf.n_evaluated == 0
    # The connected-amplitude callback gets, for every x', a batch row it is connected to.
    parents_ok = []

    def from_parent(occ, parent):
        moved = (occ != sub[parent]).sum(dim=1)
        parents_ok.append(bool(((moved == 2) | (moved == 4)).all()))
        return fn(occ)

    via_parent = local_energy(H, sub, None, mode="truncated", threshold=threshold, log_psi_x=lp_sub, eps=EPS,
                              amplitudes=from_parents(from_parent, psi_chunk=64))
    assert parents_ok and all(parents_ok)
    assert torch.allclose(via_parent.e_loc, got.e_loc, atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="threshold"):
        local_energy(H, sub, fn, mode="truncated", threshold=-1.0, log_psi_x=lp_sub)


@pytest.mark.parametrize("kernel", ["compiled", "torch"])
@pytest.mark.parametrize("mode", ["exact", "truncated", "sampled"])
def test_lookup_rows_count_as_batch(molecules, mode, kernel):
    """Another process's samples passed as ``lookup``: the first rows' local energies are the
    ones of the whole batch, and x' among the lookup rows are never evaluated."""
    H = molecules("H2O")
    e, vec, dets = ground_state(H)
    fn = _lookup_fn(dets, vec)
    sub = dets[torch.from_numpy(np.abs(vec) > 1e-5)]
    lp = fn(sub)
    cut = sub.shape[0] // 3
    options = dict(mode=mode, threshold=2e-2, eps=EPS, kernel=kernel)
    whole = local_energy(H, sub, fn, log_psi_x=lp, **options)
    evaluated = []

    def counting(occ):
        evaluated.append(occ)
        return fn(occ)

    part = local_energy(H, sub[:cut], counting, log_psi_x=lp[:cut], lookup=AmplitudeTable(sub[cut:], lp[cut:]),
                        **options)
    torch.testing.assert_close(part.e_loc, whole.e_loc[:cut], atol=1e-12, rtol=0)
    if evaluated:
        seen = set(pack_occupations(torch.cat(evaluated))[:, 0].tolist())
        assert not seen & set(pack_occupations(sub)[:, 0].tolist())
    empty = local_energy(H, sub[:0], fn, log_psi_x=lp[:0], lookup=AmplitudeTable(sub, lp), **options)
    assert empty.e_loc.shape == (0,)
