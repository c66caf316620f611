"""The compiled (Numba) kernel gives exactly the PyTorch kernel's screened connections."""

import numpy as np
import pytest
import torch

from hamiltonians import local_energy
from hamiltonians.determinants import pack_occupations
from tests.systems import random_determinants, random_hamiltonian

pytest.importorskip("numba")
from hamiltonians.compiled_kernel import CompiledKernel, heat_bath_lists  # noqa: E402


def sorted_elements(H, occ, kernel, **kw):
    """The kernel's elements as numpy arrays sorted by (row, key words), with a check that
    every ``batch_pos`` names a batch row holding that very key (or is -1)."""
    parts = list(H.screened_connections(occ, kernel=kernel, **kw))
    keys, vals, rows, pos = (torch.cat([p[i] for p in parts]).numpy() for i in range(4))
    inside = pos >= 0
    assert np.array_equal(H.pack(occ).numpy()[pos[inside]], keys[inside])
    order = np.lexsort((*keys.T[::-1], rows))
    return keys[order], vals[order], rows[order], inside[order], sum(p[4] for p in parts)


@pytest.mark.parametrize("n,n_alpha,n_beta", [(7, 3, 2), (34, 2, 2)])  # one key word, two key words
@pytest.mark.parametrize("threshold", [0.0, 0.05, float("inf")])
def test_same_elements_as_the_torch_kernel(n, n_alpha, n_beta, threshold):
    H = random_hamiltonian(n, n_alpha, n_beta, seed=n)
    occ = torch.unique(random_determinants(n, n_alpha, n_beta, 60 if n < 10 else 12, seed=1), dim=0)
    # a batch whose members are connected to each other: rows and some of their excitations
    xp, _, _ = H.connected(occ[:3])
    batch = torch.unique(torch.cat([occ, xp[:: 5 if n < 10 else 300]]), dim=0)
    ref = sorted_elements(H, batch, "torch", threshold=threshold, eps=1e-12, chunk=5000)
    got = sorted_elements(H, batch, "compiled", threshold=threshold, eps=1e-12, chunk=5000)
    for r, g in zip(ref[:4:2] + ref[3:4], got[:4:2] + got[3:4]):  # keys, rows, in-batch flags
        assert np.array_equal(r, g)
    np.testing.assert_allclose(got[1], ref[1], rtol=0, atol=1e-13)
    assert got[4] == ref[4] and ref[3].sum() > 0  # nonzero counts; some x' are in the batch
    if threshold == float("inf"):
        assert ref[3].all()


def test_local_energy_on_a_molecule_agrees_across_kernels(molecules):
    H = molecules("H2O")
    occ = torch.unique(random_determinants(7, 5, 5, 80, seed=2), dim=0)
    g = torch.Generator().manual_seed(3)
    weights = torch.randn(2 ** 14 + 1, generator=g, dtype=torch.float64)

    def fn(o):  # a deterministic made-up complex log psi of the occupations
        h = (pack_occupations(o)[:, 0] * 2654435761) % weights.numel()
        return torch.complex(weights[h], 0.3 * weights.flip(0)[h])

    for mode, threshold in (("exact", 0.0), ("truncated", 1e-2), ("sampled", 0.0)):
        a = local_energy(H, occ, fn, mode=mode, threshold=threshold, kernel="torch")
        b = local_energy(H, occ, fn, mode=mode, threshold=threshold, kernel="compiled")
        torch.testing.assert_close(b.e_loc, a.e_loc, rtol=0, atol=1e-10)
        assert (b.n_connected, b.n_kept, b.n_evaluated) == (a.n_connected, a.n_kept, a.n_evaluated)


def test_heat_bath_lists_hold_every_nonzero_element_largest_first():
    n = 5
    rng = np.random.default_rng(0)
    i, j, a, b = (rng.integers(0, n, 200) for _ in range(4))
    values = rng.normal(size=200) * (rng.random(200) < 0.7)
    ptr, la, lb, lv = heat_bath_lists(n, i, j, a, b, values)
    assert ptr[-1] == np.count_nonzero(values) == la.size
    for pair in range(n * n):
        seg = np.abs(lv[ptr[pair]:ptr[pair + 1]])
        assert np.all(seg[:-1] >= seg[1:])
        want = sorted(abs(v) for v, p in zip(values, i * n + j) if p == pair and v != 0)
        assert sorted(seg.tolist()) == want


def test_errors():
    H = random_hamiltonian(4, 1, 1)
    occ = random_determinants(4, 1, 1, 3)
    with pytest.raises(ValueError, match="kernel must be"):
        next(H.screened_connections(occ, kernel="fortran"))
    with pytest.raises(ValueError, match="alpha"):
        next(H.screened_connections(random_determinants(4, 2, 1, 3)))
    with pytest.raises(ValueError, match="126 spin orbitals"):
        CompiledKernel(torch.zeros(64, 64, dtype=torch.float64), torch.zeros(1, dtype=torch.float64))


def test_eps_zero_and_repeated_rows_on_a_molecule_with_symmetry_zeros(molecules):
    """eps = 0 keeps the same elements in both kernels (round-off zeros of symmetry are cut at
    1e-14 in both), also when the batch repeats a row."""
    H = molecules("H2O")
    occ = random_determinants(7, 5, 5, 30, seed=5)
    occ = torch.cat([occ, occ[:4]])
    ref = sorted_elements(H, occ, "torch", threshold=0.0, eps=0.0)
    got = sorted_elements(H, occ, "compiled", threshold=0.0, eps=0.0)
    assert got[4] == ref[4] and np.array_equal(got[0], ref[0]) and np.array_equal(got[2], ref[2])
    np.testing.assert_allclose(got[1], ref[1], rtol=0, atol=1e-13)


def test_auto_falls_back_to_torch_off_the_cpu(monkeypatch):
    H = random_hamiltonian(5, 2, 1)
    occ = random_determinants(5, 2, 1, 6)
    monkeypatch.setattr(type(H), "compiled_kernel_available", lambda self: False)
    monkeypatch.setattr(type(H), "_compiled", lambda self: pytest.fail("compiled kernel used"))
    assert sum(p[0].shape[0] for p in H.screened_connections(occ)) > 0
