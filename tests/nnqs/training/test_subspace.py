"""The subspace loop (:mod:`nnqs.training.subspace`): merging keeps the pool, the loop never
ends above its first pool, a pool that reaches the whole space is FCI (float64, 1e-10), and the
run's subspace and PT2 fields are the hamiltonians layer's numbers on the same space."""

import math

import pytest
import numpy as np
import torch

from hamiltonians.sci.spaces import cisd
from hamiltonians.exact import ground_state_energy
from hamiltonians.sci.pt2 import en_pt2
from hamiltonians.sci.diagonalise import diagonalise
from hamiltonians.sci.state import SCIState
from nnqs.training.settings import SamplerConfig
from nnqs.training.state import VariationalState
from nnqs.training.subspace import (SubspaceConfig, SubspaceDriver, final_subspace, merge,
                                    subspace_energy)
from tests.models import make_model
from tests.systems import random_hamiltonian

H = random_hamiltonian(6, 2, 2, seed=4)   # 225 determinants


def state(seed=0):
    return VariationalState(make_model(6, 2, 2, seed=1), SamplerConfig(n_samples=2000, unique_window=()), seed=seed)


def test_merge_keeps_the_pool_first_and_appends_only_new_rows():
    from hamiltonians.determinants import enumerate_determinants, pack_occupations

    pool = cisd(H).dets
    every = enumerate_determinants(H.n_orbitals, H.n_alpha, H.n_beta)
    known = {tuple(k) for k in pack_occupations(pool).tolist()}
    outside = every[[tuple(k) not in known for k in pack_occupations(every).tolist()]][:2]
    assert outside.shape[0] == 2
    new = torch.cat((pool[3:5], outside, outside[:1]))   # two already in, two new, one repeated
    merged, n_new = merge(H, pool, new)
    assert n_new == 2 and torch.equal(merged[: pool.shape[0]], pool) and torch.equal(merged[pool.shape[0]:], outside)


def test_the_loop_never_ends_above_its_first_pool_and_reaches_fci_on_the_whole_space():
    start = cisd(H)
    fci = ground_state_energy(H)
    config = SubspaceConfig(cycles=3, n_samples=500, pool=1000, extend=60, fit_steps=20, phase_steps=10)
    loop = SubspaceDriver(H, state(), config, start)
    assert abs(loop.pool.energy - start.energy) < 1e-10   # the first pool is the start's space
    records = []
    loop.run(3, [lambda d, r: records.append(r)])
    assert [r.step for r in records] == [0, 1, 2]
    assert all(b.best_energy <= a.best_energy + 1e-12 for a, b in zip(records, records[1:]))
    assert loop.best.energy <= start.energy + 1e-12 and loop.best.energy >= fci - 1e-10
    assert records[0].n_extended > 0 and records[-1].n_pool > start.dets.shape[0]
    # the pool's energy is the ground state of H on its determinants
    again = diagonalise(H, loop.best.dets)
    assert abs(again.energy - loop.best.energy) < 1e-10
    # a pool that holds the whole space is FCI
    whole = SubspaceDriver(H, state(), SubspaceConfig(extend=1000, n_samples=10, fit_steps=0, pool=10**6), start)
    whole.run(3)
    assert whole.best.dets.shape[0] == H.n_determinants and abs(whole.best.energy - fci) < 1e-10
    saved = SCIState.from_dict(loop.best.to_dict())
    assert saved.energy == loop.best.energy and torch.equal(saved.dets, loop.best.dets)


def test_the_subspace_energy_of_a_network_is_the_ground_state_on_its_samples():
    s = state()
    space, n_new = subspace_energy(H, s, n_samples=200_000)
    s.load_state_dict(state().state_dict())   # the same stream again: the same samples
    from nnqs.wavefunction.tokens import tokens_to_occupations
    dets = tokens_to_occupations(s.sample(200_000).tokens)
    assert n_new == dets.shape[0] and abs(space.energy - diagonalise(H, dets).energy) < 1e-10
    pooled, added = subspace_energy(H, state(), cisd(H), n_samples=200_000)
    assert pooled.energy <= cisd(H).energy + 1e-12 and added <= n_new


@pytest.mark.parametrize("pt2", ["deterministic", "semistochastic"])
def test_the_runs_fields_are_the_pool_energy_and_its_pt2(pt2):
    start = cisd(H)
    config = SubspaceConfig(final_samples=0, pt2=pt2, pt2_deterministic=10, pt2_draws=50, pt2_batches=20)
    fields, space = final_subspace(H, state(), start, config)
    assert abs(fields["energy_subspace"] - start.energy) < 1e-10 and fields["subspace_size"] == start.dets.shape[0]
    assert space.dets.shape[0] == fields["subspace_size"] and space.energy == fields["energy_subspace"]
    exact = en_pt2(H, start.dets, start.coefficients, start.energy)
    if pt2 == "deterministic":
        assert abs(fields["energy_pt2"] - exact.e_total) < 1e-10 and fields["energy_pt2_stderr"] == 0
    else:   # unbiased: within 4 standard errors of the deterministic sum
        assert fields["energy_pt2_stderr"] > 0
        assert abs(fields["energy_pt2"] - exact.e_total) < 4 * fields["energy_pt2_stderr"]
    fci = ground_state_energy(H)
    assert abs(exact.e_total - fci) < abs(start.energy - fci)   # PT2 moves CISD towards FCI here
    assert final_subspace(H, state(), None, SubspaceConfig(final_samples=0)) == ({}, None)
    assert abs(fields["subspace_spin_square"]) < 1e-8   # CISD around a closed shell: a singlet

    # the extrapolation over the truncations (largest |c|) and the whole space
    points = fields["extrapolation_points"]
    assert [p["size"] for p in points] == sorted({p["size"] for p in points}) and len(points) == 3
    assert points[-1]["size"] == fields["subspace_size"] and points[-1]["e2"] == fields["e2"]
    assert all(a["energy_var"] >= b["energy_var"] - 1e-12 for a, b in zip(points, points[1:]))   # nested supports
    from hamiltonians.sci.pt2 import extrapolate_pt2
    fit = extrapolate_pt2([p["energy_var"] for p in points], [p["e2"] for p in points], [p["e2_stderr"] for p in points])
    assert fields["energy_extrapolated"] == fit["energy"] and fields["energy_extrapolated_stderr"] == fit["stderr"]
    assert "energy_extrapolated" not in final_subspace(H, state(), start, SubspaceConfig(final_samples=0, extrapolation=()))[0]
    assert math.isfinite(fields["subspace_seconds"])


def test_the_final_space_s_spin_is_recorded():
    """A space missing the spin partner of its open-shell determinants is no spin eigenspace:
    its ground state's <S^2> is above 0, and spin_complete's closure brings it back to 0."""
    from hamiltonians.sci.spin import spin_complete

    full = cisd(H)
    open_shell = (full.dets[:, 0::2] != full.dets[:, 1::2]).any(dim=1)
    alpha_first = torch.tensor([next(int(a) for a, b in zip(d[0::2], d[1::2]) if a != b) if o else 0
                                for d, o in zip(full.dets, open_shell)], dtype=torch.bool)
    kept = full.dets[~open_shell | alpha_first]   # of each open-shell pair, those with the alpha electron first
    config = SubspaceConfig(final_samples=0, pt2="none")
    broken, _ = final_subspace(H, state(), diagonalise(H, kept), config)
    assert broken["subspace_spin_square"] > 1e-4
    closed, _ = final_subspace(H, state(), diagonalise(H, spin_complete(H, kept)), config)
    assert abs(closed["subspace_spin_square"]) < 1e-8


def test_the_final_samples_are_only_the_draws_the_pool_lacked():
    """With origins that never saw the pool (a checkpoint from before they were kept), the pool's
    determinants stay unknown and only the network's new draws count as its final samples."""
    from nnqs.training.origins import Origins

    pool = cisd(H)
    origins = Origins()
    fields, space = final_subspace(H, state(), pool, SubspaceConfig(final_samples=2000, pt2="none"), origins=origins)
    shares = fields["origins"]
    assert shares["unknown"]["determinants"] == pool.size
    assert shares.get("final_samples", {"determinants": 0})["determinants"] == fields["subspace_from_network"]


def test_a_spin_complete_loop_keeps_its_pools_spin_eigenstates():
    """With ``spin_complete`` every cycle's space holds all arrangements of its open shells (the
    pool is never trimmed here), so each pool's ground state is a spin eigenstate: <S^2> = s(s+1)."""
    from hamiltonians.sci.spin import spin_complete, spin_square_of

    config = SubspaceConfig(cycles=2, n_samples=300, pool=10**6, extend=40, fit_steps=5, phase_steps=5,
                            spin_complete=True)
    loop = SubspaceDriver(H, state(), config, cisd(H))
    loop.run(2)
    dets = loop.pool.dets
    assert spin_complete(H, dets).shape[0] == dets.shape[0]   # nothing missing
    s2 = spin_square_of(dets, loop.pool.coefficients)
    s = (np.sqrt(1 + 4 * s2) - 1) / 2
    assert abs(2 * s - round(2 * s)) < 1e-6
