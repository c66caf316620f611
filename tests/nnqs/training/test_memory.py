"""The memory plan (:mod:`nnqs.training.memory`): its parts grow as their arrays do, the check
names the setting that lowers the dominant part, and the machine's free memory is read."""

import pytest

from nnqs.training.memory import MemoryPlan, available_memory, check_memory, graph_bytes, plan_memory
from tests.models import make_model
from tests.systems import random_hamiltonian


@pytest.fixture(scope="module")
def system():
    return make_model(6, 2, 2, seed=0, dtype="float32"), random_hamiltonian(6, 2, 2, seed=0)


def test_the_parts_grow_as_their_arrays(system):
    model, H = system
    p = sum(t.numel() for t in model.parameters())
    small, large = (plan_memory(model, H, n_unique=u, method="minsr") for u in (1000, 2000))
    gram = lambda u: 4 * u ** 2 * (4 + 8 + 8)   # noqa: E731 - the 2U x 2U matrices
    linear = lambda u: u * 2 * p * 4 + u * p * 12   # noqa: E731 - the Jacobian and its centred copies
    assert large.parts["update"] - small.parts["update"] == gram(2000) - gram(1000) + linear(2000) - linear(1000)
    assert large.parts["graph"] == 2 * small.parts["graph"] == 2 * int(graph_bytes(model, 1000))
    top = [plan_memory(model, H, n_unique=u, method="sr_top", sr_top=16).parts["update"] for u in (1000, 100000)]
    assert top[0] == top[1] < small.parts["update"] / 10     # sr_top does not grow with U
    assert plan_memory(model, H, n_unique=1000, method="adamw").parts["update"] == p * 24
    assert large.peak == large.parts["fixed"] + large.parts["graph"] + large.parts["update"]
    chunked = plan_memory(model, H, n_unique=100_000, method="adamw", grad_chunk=1000).parts["graph"]
    assert chunked == small.parts["graph"]                   # the graph of one chunk of the gradient


def test_the_check_names_what_to_change(system):
    model, H = system
    plan = plan_memory(model, H, n_unique=50_000, method="minsr")
    assert plan.largest() == "update"
    message = check_memory(plan, 2**20)
    assert "unique_window" in message and "max_memory_gib" in message and "\n" not in message
    assert check_memory(plan, plan.peak) is None and check_memory(plan, None) is None
    sampling = MemoryPlan(10, {"graph": 1, "local_energy": 1, "update": 1, "sampling": 10**9, "start": 0, "fixed": 0})
    assert "cache_mib" in check_memory(sampling, 10**6)


def test_the_machine_says_how_much_is_free():
    free = available_memory()
    assert free is None or 0 < free < 2**50
