"""The sizes a run's memory is planned at (:func:`nnqs.app.solver.plan_sizes`): the settings'
bounds (the loop's pool, the start's space, CISD counted as its determinants), and a loop that
cannot fit is refused naming its phase and the ``[subspace]`` settings."""

from nnqs.app.presets import resolve
from nnqs.app.runconfig import config_from_dict
from nnqs.app.solver import cisd_size, plan_sizes
from nnqs.training.memory import check_memory, plan_memory
from tests.models import make_model
from tests.systems import random_hamiltonian


def test_the_sizes_follow_the_settings_and_a_huge_pool_is_refused():
    from hamiltonians.sci.spaces import cisd

    H = random_hamiltonian(8, 3, 3, seed=1)
    assert cisd_size(H) == cisd(H).dets.shape[0]
    big = random_hamiltonian(24, 5, 5, seed=2)
    settings = {"molecule": {"name": "x", "fcidump": "in memory"},
                "subspace": {"cycles": 6, "pool": 3_000_000, "extend": 1_000_000}}
    config, _ = resolve(config_from_dict(settings), big.n_determinants, 2 * big.n_orbitals)
    sizes = plan_sizes(config, big, fits=True)
    cisd_big = cisd_size(big)
    assert sizes.start_space == max(8192, 2 * cisd_big)
    seeded, _ = resolve(config_from_dict({**settings, "start": {"seeds": 1000}}), big.n_determinants, 48)
    assert plan_sizes(seeded, big, fits=True).start_space == sizes.start_space + 2000   # "sci" grows them twice over
    assert sizes.loop_pool == min(3_000_000, sizes.start_space + 5 * 1_100_000)
    assert sizes.loop_space == sizes.loop_pool + 1_100_000 and sizes.pt2_draws == 2000
    model = make_model(24, 5, 5, seed=0, dtype="float32")
    plan = plan_memory(model, big, sizes=sizes, method="adamw")
    assert plan.largest() in ("loop.diagonalise", "final.space")
    message = check_memory(plan, 4 * 2**30)
    assert "[subspace] pool" in message and "does not fit" in message
    small, _ = resolve(config_from_dict({**settings, "subspace": {"cycles": 2}}), big.n_determinants, 48)
    assert plan_memory(model, big, sizes=plan_sizes(small, big, fits=True), method="adamw").peak < plan.peak
