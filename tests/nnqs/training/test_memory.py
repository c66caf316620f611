"""The memory plan (:mod:`nnqs.training.memory`): its phases grow as their arrays do, the sizes a
config allows are what its settings bound, the check names the phase and the setting that
shrinks it, and the machine's free memory is read."""

import math

import pytest

from nnqs.training.memory import (MATRIX_BUILD_BYTES, Density, MemoryPlan, Sizes, available_memory, check_memory,
                                  graph_bytes, plan_memory)
from tests.models import make_model
from tests.systems import random_hamiltonian

SMALL_CACHE = 2**10


@pytest.fixture(scope="module")
def system():
    return make_model(6, 2, 2, seed=0, dtype="float32"), random_hamiltonian(6, 2, 2, seed=0)


def test_the_step_grows_as_its_arrays(system):
    model, H = system
    p = sum(t.numel() for t in model.parameters())
    small, large = (plan_memory(model, H, n_unique=u, method="minsr", cache_bytes=SMALL_CACHE) for u in (1000, 2000))
    gram = lambda u: 4 * u ** 2 * (4 + 8 + 8)   # noqa: E731 - the 2U x 2U matrices
    linear = lambda u: u * 2 * p * 4 + u * p * 12   # noqa: E731 - the Jacobian and its centred copies
    graph = lambda u: int(graph_bytes(model, u))   # noqa: E731
    drawn = lambda u: u * 2 * H.n_orbitals * 8   # noqa: E731 - the draws beside the (full) cache, resident
    assert large.parts["vmc"] - small.parts["vmc"] == pytest.approx(
        gram(2000) - gram(1000) + linear(2000) - linear(1000) + graph(2000) - graph(1000) + drawn(2000) - drawn(1000),
        abs=2)
    top = [plan_memory(model, H, n_unique=u, method="sr_top", sr_top=16, cache_bytes=SMALL_CACHE).parts["vmc"]
           - graph(u) - drawn(u) for u in (1000, 100000)]
    assert top[0] == pytest.approx(top[1], abs=2) and top[0] < large.parts["vmc"] - graph(2000)   # nor in U
    assert large.peak == large.base + large.parts["vmc"] and large.largest() == "vmc"
    chunked = plan_memory(model, H, n_unique=100_000, method="adamw", grad_chunk=1000, cache_bytes=SMALL_CACHE)
    whole = plan_memory(model, H, n_unique=100_000, method="adamw", cache_bytes=SMALL_CACHE)
    assert whole.parts["vmc"] - chunked.parts["vmc"] == pytest.approx(graph(100_000) - graph(1000), abs=2)


def test_the_loop_and_pt2_grow_with_their_spaces(system):
    model, H = system
    density = Density(n_connections=2000)
    plan = lambda **k: plan_memory(model, H, sizes=Sizes(n_unique=100, **k), method="adamw",   # noqa: E731
                                   density=density, process_bytes=10**8)
    a, b = plan(loop_pool=10_000, loop_space=20_000), plan(loop_pool=20_000, loop_space=40_000)
    growth = b.parts["loop.diagonalise"] - a.parts["loop.diagonalise"]
    assert growth == pytest.approx(MATRIX_BUILD_BYTES * (density.nnz(40_000) - density.nnz(20_000)) + 80 * 20_000,
                                   abs=2)
    assert density.nnz(40_000) > 2 * density.nnz(20_000)          # more elements per row in a larger space
    assert b.parts["loop.extend"] > a.parts["loop.extend"] > 0 and "loop.fit" not in a.parts
    assert a.base == 10**8 + plan().base - 10**8 and plan().parts.keys() == {"vmc"}
    deterministic, stochastic = plan(final_space=50_000, pt2_parents=50_000), \
        plan(final_space=50_000, pt2_parents=2_000, pt2_draws=2_000)
    assert deterministic.parts["final.pt2"] > 0 and stochastic.parts["final.pt2"] > 0
    huge = plan(final_space=10**7, pt2_parents=10**7)
    assert huge.parts["final.pt2"] < 3 * 2**30                       # bucketed: one pass's sums fit 2 GiB
    big_pool = dict(loop_pool=10**6, loop_space=10**6)
    capped = plan_memory(model, H, sizes=Sizes(n_unique=100, **big_pool), method="adamw", density=density,
                         extend_bytes=2**20)
    assert plan(**big_pool).parts["loop.extend"] > 100 * 2**20 > capped.parts["loop.extend"] > 2**20   # the budget


def test_the_density_counts_the_reference_connections(system):
    _, H = system
    density = Density.of(H)
    n, a, b = H.n_orbitals, H.n_alpha, H.n_beta
    combinatorial = a * (n - a) + b * (n - b) + math.comb(a, 2) * math.comb(n - a, 2) \
        + math.comb(b, 2) * math.comb(n - b, 2) + a * (n - a) * b * (n - b)
    assert 0 < density.n_connections <= combinatorial                 # a random H: nearly all are nonzero
    assert density.n_connections > 0.9 * combinatorial
    assert density.nnz(10) <= 100 and density.n_outside(10) <= 10 * density.n_connections


def test_the_check_names_the_phase_and_what_to_change(system):
    model, H = system
    plan = plan_memory(model, H, n_unique=50_000, method="minsr")
    assert plan.largest() == "vmc"
    message = check_memory(plan, 2**20)
    assert "vmc does not fit" in message and "unique_window" in message and "max_memory_gib" in message
    assert "\n" not in message
    assert check_memory(plan, plan.peak) is None and check_memory(plan, None) is None
    loop = MemoryPlan(10, {"vmc": 1, "loop.diagonalise": 10**9}, 0)
    assert "[subspace] pool" in check_memory(loop, 10**6)
    sampling = MemoryPlan(10, {"vmc": 1, "loop.sample": 10**9}, 0)
    assert "cache_mib" in check_memory(sampling, 10**6)


def test_the_machine_says_how_much_is_free():
    free = available_memory()
    assert free is None or 0 < free < 2**50


def test_the_plans_budgets_are_the_libraries():
    """The plan's copies of the budgets (kept so that planning imports no compiled kernel) are the
    libraries' and the settings' defaults."""
    from hamiltonians.sci import connections, pt2
    from nnqs.training.memory import EXTEND_MAX_BYTES, PT2_MAX_BYTES
    from nnqs.training.settings import SubspaceConfig

    assert EXTEND_MAX_BYTES == connections.EXTEND_MAX_BYTES == int(SubspaceConfig().extend_mib * 2**20)
    assert PT2_MAX_BYTES == pt2.DEFAULT_MAX_BYTES
