"""Functions that run on each rank of :func:`nnqs.parallel.local.run_local` (module level, so a
spawned process can import them by name)."""

import torch

from nnqs.training.settings import LocalEnergyConfig, OptimConfig, SamplerConfig
from nnqs.training.driver import VMC, build_vmc
from samplers import SampleBatch
from tests.models import make_model
from tests.systems import random_hamiltonian

SYSTEM = dict(n=5, n_alpha=2, n_beta=2)


def make_trainer(comm, optim: OptimConfig, sampler: SamplerConfig | None = None,
                 local_energy: LocalEnergyConfig | None = None, *, seed: int = 0) -> VMC:
    """A float64 random network on a random 5-orbital Hamiltonian (the same on every rank)."""
    torch.set_num_threads(1)
    model = make_model(SYSTEM["n"], SYSTEM["n_alpha"], SYSTEM["n_beta"], seed=seed)
    H = random_hamiltonian(SYSTEM["n"], SYSTEM["n_alpha"], SYSTEM["n_beta"], seed=seed)
    return build_vmc(model, H, optim, sampler or SamplerConfig(n_samples=4000), local_energy, seed=seed, comm=comm)


def share_of(batch: SampleBatch, rank: int, cut: int) -> SampleBatch:
    """Rows ``[:cut]`` for rank 0 and ``[cut:]`` for rank 1 (``n_samples`` stays the whole's)."""
    rows = slice(0, cut) if rank == 0 else slice(cut, None)
    return SampleBatch(batch.tokens[rows], batch.counts[rows], batch.log_prob[rows], batch.n_samples)


def step_quantities(comm, batch: SampleBatch, cut: int, local_energy: LocalEnergyConfig,
                    weights: str = "counts") -> dict:
    """The energy, the AdamW gradient and the minSR and sr_top directions of ``batch``, of which this rank
    holds its share (``comm`` may be the single process, holding all of it)."""
    trainer = make_trainer(comm, OptimConfig(steps=1, sr_shift=1e-3, sr_top=6), SamplerConfig(n_samples=4000, weights=weights),
                           local_energy)
    mine = batch if comm.world_size == 1 else share_of(batch, comm.rank, cut)
    out = {}
    for method in ("adamw", "minsr", "sr_top"):
        trainer.model.zero_grad(set_to_none=True)
        evaluation = trainer.state.expect(trainer.H, mine, *local_energy.fine)
        trainer.preconditioners[method](trainer.state, mine, evaluation).apply(trainer.model)
        out[method] = torch.cat([p.grad.flatten() for p in trainer.model.parameters()]).clone()
        out["energy"], out["variance"] = evaluation.estimate.energy, evaluation.estimate.variance
        out["e_loc"] = evaluation.e_loc.detach().clone()
        out["n_evaluated"] = evaluation.local_energy.n_evaluated
    return out


def train_and_compare(comm, optim: OptimConfig, steps: int, local_energy: LocalEnergyConfig | None = None) -> dict:
    """Train ``steps`` steps; after each, whether every rank holds bitwise the same parameters."""
    trainer = make_trainer(comm, optim, SamplerConfig(n_samples=3000, unique_window=(30, 60)), local_energy)
    equal, records = [], []
    for _ in range(steps):
        records.append(trainer.train_step())
        params = torch.cat([p.detach().flatten() for p in trainer.model.parameters()])
        equal.append(comm.all_equal(params))
    state = trainer.state_dict()
    return {"equal": equal, "records": records, "params": params, "n_samples": state["n_samples"],
            "optimizer": state["optimizers"]}


def sample_ranks(comm, n_samples: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict]:
    """This rank's share of one sample drawn through the trainer (the shared top broadcast)."""
    trainer = make_trainer(comm, OptimConfig(steps=1), seed=seed)
    batch = trainer.state.sample(n_samples)
    return batch.tokens, batch.counts, batch.log_prob, batch.stats


def collectives(comm) -> dict:
    """Each collective once, with rank-dependent inputs."""
    r = comm.rank
    out = {
        "sum": comm.all_reduce(torch.tensor([1.5 + r, 2.0], dtype=torch.float64)),
        "complex": comm.all_reduce(torch.tensor([1 + 2j * (r + 1)], dtype=torch.complex128)),
        "max": comm.all_reduce(torch.tensor([r == 1, False]), "max"),
        "gather": comm.all_gather(torch.arange(3 * r, dtype=torch.int64).view(r, 3) if r else torch.zeros(0, 3,
                                                                                          dtype=torch.int64)),
        "sizes": comm.sizes(10 + r),
        "broadcast": comm.broadcast(torch.full((2,), float(r)), src=1),
        "object": comm.broadcast_object({"rank": r}, src=0),
        "equal_same": comm.all_equal(torch.ones(4)),
        "equal_differs": comm.all_equal(torch.full((4,), float(r))),
    }
    out["main"] = comm.run_on_main(lambda: f"computed on {comm.rank}")
    try:
        comm.run_on_main(lambda: int("rank 0 fails"))
    except ValueError as error:
        out["error"] = str(error)
    comm.barrier()
    return out


def slow_main(comm, seconds: float) -> str:
    """Rank 0 works longer than the collective timeout inside ``run_on_main``."""
    import time

    def work():
        time.sleep(seconds)
        return "done"

    return comm.run_on_main(work)
