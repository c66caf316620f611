"""Two gloo processes against one: the same samples give the same step to 1e-10 (float64), and
training keeps the ranks' parameters bitwise equal."""

import math

import pytest
import torch

from nnqs.parallel import LOCAL
from nnqs.parallel.local import run_local
from nnqs.training.settings import LocalEnergyConfig, OptimConfig
from samplers import bas
from tests.models import make_model
from tests.nnqs.parallel import workers


@pytest.fixture(scope="module")
def batch():
    s = workers.SYSTEM
    model = make_model(s["n"], s["n_alpha"], s["n_beta"], seed=0)
    batch = bas.sample(model, 20_000, generator=torch.Generator().manual_seed(3))
    assert batch.n_unique > 20
    return batch


@pytest.mark.parametrize("mode,threshold,weights", [("truncated", 0.05, "counts"), ("sampled", 0.0, "psi2"),
                                                    ("exact", 0.0, "counts")])
def test_two_ranks_give_the_single_process_step(batch, mode, threshold, weights):
    local_energy = LocalEnergyConfig(mode=mode, threshold=threshold)
    cut = batch.n_unique // 3  # unequal shares
    single = workers.step_quantities(LOCAL, batch, cut, local_energy, weights)
    ranks = run_local(workers.step_quantities, 2, batch, cut, local_energy, weights)
    for r in ranks:
        assert r["energy"] == pytest.approx(single["energy"], abs=1e-10, rel=0)
        assert r["variance"] == pytest.approx(single["variance"], abs=1e-10, rel=0)
        for method in ("adamw", "minsr", "sr_top"):
            scale = float(single[method].abs().max())
            torch.testing.assert_close(r[method], single[method], rtol=0, atol=1e-10 * max(scale, 1.0))
    # The local energies: each rank's own rows, looked up in the other rank's samples too.
    e_loc = torch.cat([ranks[0]["e_loc"], ranks[1]["e_loc"]])
    torch.testing.assert_close(e_loc, single["e_loc"], rtol=0, atol=1e-10)
    # Each connected x' outside the samples is evaluated once, by one rank.
    assert ranks[0]["n_evaluated"] + ranks[1]["n_evaluated"] == single["n_evaluated"]
    assert mode == "sampled" or single["n_evaluated"] > 0
    # Every rank ends with the same bits (reduced, not recomputed per rank).
    for method in ("adamw", "minsr", "sr_top"):
        assert torch.equal(ranks[0][method], ranks[1][method])


def test_a_rank_without_samples_still_takes_part(batch):
    local_energy = LocalEnergyConfig(mode="truncated", threshold=0.05)
    single = workers.step_quantities(LOCAL, batch, batch.n_unique, local_energy)
    ranks = run_local(workers.step_quantities, 2, batch, batch.n_unique, local_energy)  # rank 1 holds nothing
    assert ranks[1]["e_loc"].numel() == 0
    assert ranks[1]["energy"] == pytest.approx(single["energy"], abs=1e-10, rel=0)
    torch.testing.assert_close(ranks[1]["minsr"], single["minsr"], rtol=0, atol=1e-10)


def test_parameters_stay_identical_through_adamw_and_minsr():
    optim = OptimConfig(steps=6, method="minsr", adamw_steps=3, adamw_lr=1e-2, lr=0.05, warmup=0)
    ranks = run_local(workers.train_and_compare, 2, optim, 6, LocalEnergyConfig(mode="exact"))
    assert all(ranks[0]["equal"]) and all(ranks[1]["equal"])
    assert [r.method for r in ranks[0]["records"]] == ["adamw"] * 3 + ["minsr"] * 3
    assert torch.equal(ranks[0]["params"], ranks[1]["params"])
    # The same records on both ranks (global estimates), and training moved the energy.
    for a, b in zip(ranks[0]["records"], ranks[1]["records"]):
        assert (a.energy, a.n_unique, a.n_samples, a.grad_norm) == (b.energy, b.n_unique, b.n_samples, b.grad_norm)
    energies = [r.energy for r in ranks[0]["records"]]
    assert all(math.isfinite(e) for e in energies) and energies[-1] < energies[0]
