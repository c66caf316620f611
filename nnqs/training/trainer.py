"""The VMC trainer: one step is sample -> local energies -> gradient -> preconditioner -> update
(docs/design.md §6).

BAS samples ``x_u`` with counts ``c_u`` -> weights ``w_u`` -> local energies ``E_loc(x_u)`` ->
``E = sum_u w_u E_loc`` and the gradient ``2 Re sum_u w_u (E_loc(x_u) - E)^* grad log psi(x_u)``
through the uncached full pass (:mod:`nnqs.training.estimators`). The preconditioner of AdamW
steps is the identity (:func:`energy_gradient`); that of minSR steps solves for the natural
gradient in sample space (:func:`minsr_gradient`, :mod:`nnqs.training.sr`), applied by SGD.
A non-finite energy or update rolls the network back (:class:`RollBack`). The run loop and its
callbacks are :mod:`nnqs.training.driver`.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from hamiltonians import LocalEnergyResult, MolecularHamiltonian
from nnqs.parallel.comm import LOCAL, Communicator
from nnqs.training.estimators import (EnergyEstimate, estimate_energy, evaluate_local_energies, sample_space_energy,
                                     sample_weights, vmc_loss)
from nnqs.training.schedule import learning_rate, method_at
from nnqs.training.settings import LocalEnergyConfig, OptimConfig, SamplerConfig
from nnqs.training.sr import log_psi_jacobian, minsr_direction, top_sr_direction
from nnqs.training.window import UniqueWindow
from nnqs.wavefunction.model import TransformerWavefunction
from samplers import SampleBatch, bas, split
from samplers.tree import Frontier

log = logging.getLogger(__name__)


@dataclass
class StepRecord:
    """One VMC step, as written to ``metrics.csv``.

    ``seconds`` is the whole step; ``sample_seconds`` (BAS), ``local_energy_seconds`` (the
    connections and their amplitudes) and ``update_seconds`` (``log psi`` with gradients, the
    gradient or minSR solve, the optimiser) split it. ``kept_fraction``: the share of connected
    elements that entered the local energies (1 in exact mode); ``n_amplitudes``: connected
    configurations outside the samples whose amplitudes were computed, which took
    ``amplitude_seconds`` of ``local_energy_seconds``. ``sample_space_energy``: the energy of
    the state projected on the step's unique samples, a variational bound
    (:func:`nnqs.training.estimators.sample_space_energy`).
    """

    step: int
    energy: float
    stderr: float
    variance: float
    n_samples: int
    n_unique: int
    lr: float
    grad_norm: float
    seconds: float
    rolled_back: bool = False
    method: str = "adamw"
    kept_fraction: float = math.nan
    n_amplitudes: int = 0
    sample_seconds: float = math.nan
    local_energy_seconds: float = math.nan
    amplitude_seconds: float = math.nan
    update_seconds: float = math.nan
    sample_space_energy: float = math.nan


@dataclass
class Evaluation:
    """A sample batch evaluated: ``log_psi`` (with gradients) and ``weights`` ``[U]``, the energy
    estimate, the kernel's :class:`hamiltonians.LocalEnergyResult` (``e_loc``, counts, amplitude
    time) and the local energies' wall time."""

    log_psi: torch.Tensor
    weights: torch.Tensor
    estimate: EnergyEstimate
    local_energy: LocalEnergyResult
    local_energy_seconds: float

    @property
    def e_loc(self) -> torch.Tensor:
        return self.local_energy.e_loc


class Trainer:
    """Holds everything a VMC run changes (model, optimisers, random stream, n_samples, the
    NaN guard's learning-rate scale) and takes one step at a time (:meth:`train_step`).

    ``state_dict()``/``load_state_dict()`` capture all of it, so a resumed run continues exactly
    as an uninterrupted one would.
    """

    def __init__(self, model: TransformerWavefunction, H: MolecularHamiltonian, optim: OptimConfig,
                 sampler: SamplerConfig, local_energy: LocalEnergyConfig | None = None, *, seed: int = 0,
                 comm: Communicator = LOCAL) -> None:
        self.model, self.H, self.optim_cfg, self.sampler_cfg = model, H, optim, sampler
        self.local_energy_cfg = local_energy or LocalEnergyConfig()
        self.comm = comm
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        if optim.method != "adamw" and optim.adamw_phase == optim.steps:
            log.warning("all %d steps are AdamW: %s starts after adamw_steps = %d", optim.steps, optim.method,
                        optim.adamw_steps)
        def adam():
            return torch.optim.AdamW(model.parameters(), lr=optim.lr, betas=tuple(optim.betas), eps=optim.eps,
                                     weight_decay=optim.weight_decay)

        if optim.adamw_phase or optim.method == "sr_top":  # sr_top's direction keeps the gradient's scale:
            self.optimizers["adamw"] = adam()             # it continues AdamW's moments
        if optim.method == "minsr":
            self.optimizers["minsr"] = torch.optim.SGD(model.parameters(), lr=optim.lr)  # theta -= lr * d
        self.generator = torch.Generator(device=model.device).manual_seed(seed)
        # the semistochastic local energies' draws: a stream of their own, so the samples do not move
        self.draw_generator = torch.Generator(device=H.device).manual_seed(seed + 2**31)
        self.window = UniqueWindow(*sampler.unique_window, factor=sampler.factor) if sampler.unique_window else None
        self.n_samples = sampler.n_samples
        self.step = 0
        self.guard = RollBack(model, self.optimizers)

    # -- sampling ------------------------------------------------------------------------
    def sample(self, n_samples: int) -> SampleBatch:
        """BAS; with several ranks, this rank's share of one sample (:mod:`samplers.split`): the
        top of the tree from the shared stream, the rank's subtrees from a stream seeded by a
        draw from it and the rank; then the unique samples are dealt out evenly
        (:meth:`_even_out`)."""
        options = dict(max_unique=self.sampler_cfg.max_unique or None,
                       max_cache_bytes=self.sampler_cfg.max_cache_bytes)
        if self.comm.world_size == 1:
            return bas.sample(self.model, n_samples, generator=self.generator, **options)
        drawn = split.sample_share(self.model, n_samples, rank=self.comm.rank, world_size=self.comm.world_size,
                                   generator=self.generator, rank_generator=self._rank_generator(),
                                   share=self._share_top, **options)
        return self._even_out(drawn)

    def _even_out(self, batch: SampleBatch) -> SampleBatch:
        """Every rank's unique samples gathered (rank order) and dealt out in ``K`` contiguous,
        equal slices: the split balances the draws, but the work after it (local energies,
        gradients) goes with the number of unique samples, and one heavy prefix (the HF
        determinant's) can hold most draws and few unique samples. The union is unchanged."""
        comm = self.comm
        tokens, counts, log_prob = (torch.cat(comm.all_gather(t)) for t in (batch.tokens, batch.counts, batch.log_prob))
        mine = comm.my_slice(tokens.shape[0])
        stats = dict(batch.stats, drawn_unique=batch.n_unique)
        return SampleBatch(tokens[mine], counts[mine], log_prob[mine], batch.n_samples, stats)

    def _rank_generator(self) -> torch.Generator:
        base = int(torch.randint(2**62, (1,), generator=self.generator, device=self.generator.device))
        seed = int(np.random.SeedSequence([base, self.comm.rank]).generate_state(1, np.uint64)[0] >> 1)
        return torch.Generator(device=self.model.device).manual_seed(seed)

    def _share_top(self, top: Frontier) -> Frontier:
        """Rank 0's top of the tree on every rank (ranks on different hardware could round
        the conditionals differently and split the draws differently)."""
        shared = self.comm.broadcast_object(tuple(t.cpu() for t in top))
        return Frontier(*(t.to(self.model.device) for t in shared))

    # -- evaluation ----------------------------------------------------------------------
    def evaluate(self, batch: SampleBatch, mode: str, threshold: float = 0.0, *, graph: bool = True,
                 weights: str | None = None) -> Evaluation:
        """log psi (with its graph unless ``graph`` is false), E_loc in ``mode`` at
        ``threshold``, weights (``weights``, default ``[sampler] weights``) and the energy
        estimate of a sample batch (with several ranks: this rank's samples, the estimate over
        all of them)."""
        with torch.set_grad_enabled(graph and torch.is_grad_enabled()):
            log_psi = self.model.log_psi(batch.tokens)
        start = time.perf_counter()
        cfg = self.local_energy_cfg
        result = evaluate_local_energies(self.model, self.H, batch.tokens, log_psi, mode, threshold=threshold,
                                         amplitudes=cfg.amplitudes, draws=cfg.draws, generator=self.draw_generator,
                                         comm=self.comm)
        seconds = time.perf_counter() - start
        w = sample_weights(batch, weights or self.sampler_cfg.weights, self.comm).to(result.e_loc.device)
        estimate = estimate_energy(result.e_loc, w, batch.n_samples, self.comm, result.draw_variance)
        return Evaluation(log_psi, w, estimate, result, seconds)

    # -- one step --------------------------------------------------------------------------
    def train_step(self) -> StepRecord:
        """Sample, local energies, gradient, preconditioner, update; a non-finite energy or
        update rolls back instead (:class:`RollBack`)."""
        start = time.perf_counter()
        method = method_at(self.step, self.optim_cfg)
        optimizer = self.optimizers[OPTIMIZERS[method]]
        lr = self.guard.lr_scale * learning_rate(self.step, self.optim_cfg)
        for group in optimizer.param_groups:
            group["lr"] = lr
        self.model.train()
        if not all(bool(torch.isfinite(p).all()) for p in self.model.parameters()):
            # The last update broke the network: sampling from it is meaningless.
            self.guard.roll_back(self.step)
            self.step += 1
            return StepRecord(self.step - 1, math.nan, math.nan, math.nan, self.n_samples, 0, lr, math.nan,
                              time.perf_counter() - start, rolled_back=True, method=method)
        batch = self.sample(self.n_samples)
        sampled = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        evaluation = self.evaluate(batch, *self.local_energy_cfg.at(self.step),
                                   graph=self.optim_cfg.keeps_graph(method, batch.n_unique))
        finite_check = PRECONDITIONERS[method](self, batch, evaluation)   # writes p.grad
        est = evaluation.estimate
        clip = self.optim_cfg.clip or float("inf")
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip))
        finite = math.isfinite(est.energy) and math.isfinite(grad_norm) and math.isfinite(float(finite_check))
        if finite:
            self.guard.mark_good()  # these weights gave a finite energy and gradient
            optimizer.step()
        else:
            self.guard.roll_back(self.step)
        end = time.perf_counter()
        le = evaluation.local_energy
        n_unique, n_kept, n_connected, n_amplitudes = self.comm.all_reduce(torch.tensor(
            [batch.n_unique, le.n_kept, le.n_connected, le.n_evaluated], dtype=torch.int64)).tolist()
        record = StepRecord(self.step, est.energy, est.stderr, est.variance, self.n_samples, n_unique,
                            lr, grad_norm, end - start, rolled_back=not finite, method=method,
                            kept_fraction=n_kept / n_connected if n_connected else 1.0, sample_seconds=sampled - start,
                            local_energy_seconds=evaluation.local_energy_seconds,
                            n_amplitudes=n_amplitudes, amplitude_seconds=le.amplitude_seconds,
                            update_seconds=end - sampled - evaluation.local_energy_seconds,
                            sample_space_energy=sample_space_energy(le.e_loc_sampled, batch, self.comm))
        if self.window is not None:
            self.n_samples = self.window.update(self.n_samples, n_unique)  # the global unique count
        self.step += 1
        return record

    def start_from(self, weights: dict) -> None:
        """Load the start's weights (a ``state_dict``) before the first step; they become the
        state a non-finite step rolls back to."""
        self.model.load_state_dict(weights)
        self.guard.mark_good()

    # -- checkpoints ---------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "optimizers": optimizer_states(self.optimizers),
            "generator": self.generator.get_state(),
            "draw_generator": self.draw_generator.get_state(),
            "n_samples": self.n_samples,
            "step": self.step,
            "lr_scale": self.guard.lr_scale,
        }

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        load_optimizer_states(self.optimizers, state["optimizers"])
        self.generator.set_state(state["generator"].cpu())  # RNG states are CPU byte tensors
        if "draw_generator" in state:  # absent in checkpoints older than the semistochastic mode
            self.draw_generator.set_state(state["draw_generator"].cpu())
        self.n_samples = int(state["n_samples"])
        self.step = int(state["step"])
        self.guard.lr_scale = float(state["lr_scale"])
        self.guard.mark_good()


# -- preconditioners: write the update direction into p.grad, return a scalar that is finite
#    when the update is ---------------------------------------------------------------------
def energy_gradient(trainer: Trainer, batch: SampleBatch, evaluation: Evaluation) -> torch.Tensor:
    """The identity preconditioner (AdamW's): the energy gradient itself, through the loss
    :func:`nnqs.training.estimators.vmc_loss`, summed over the ranks; returns the loss.

    Through ``evaluation.log_psi``'s graph when it has one; else ``log psi`` is recomputed with
    a graph ``[optim] grad_chunk`` samples at a time and each chunk's loss back-propagated (the
    loss is a sum over samples, so the gradients add up to the same)."""
    comm, e_loc, weights = trainer.comm, evaluation.e_loc, evaluation.weights
    energy = complex(comm.all_reduce((weights * e_loc).sum()))
    if evaluation.log_psi.requires_grad:
        loss = vmc_loss(evaluation.log_psi, e_loc, weights, energy)
        loss.backward()
    else:
        n = batch.tokens.shape[0]
        chunk = trainer.optim_cfg.grad_chunk or max(n, 1)
        loss = torch.zeros((), dtype=weights.dtype, device=weights.device)
        for lo in range(0, n, chunk):
            part = vmc_loss(trainer.model.log_psi(batch.tokens[lo : lo + chunk]), e_loc[lo : lo + chunk],
                            weights[lo : lo + chunk], energy)
            part.backward()
            loss = loss + part.detach().to(loss.dtype)
    sum_gradients(trainer.model, comm)
    return comm.all_reduce(loss.detach())


def minsr_gradient(trainer: Trainer, batch: SampleBatch, evaluation: Evaluation) -> torch.Tensor:
    """minSR: the natural gradient in sample space (:func:`nnqs.training.sr.minsr_direction`)
    from the per-sample Jacobian of ``log psi``; the SGD step then applies ``-lr * d``.
    Returns the plain gradient's norm."""
    model = trainer.model
    jac = log_psi_jacobian(model, batch.tokens)
    direction, gradient = minsr_direction(jac, evaluation.e_loc, evaluation.weights,
                                          shift=trainer.optim_cfg.sr_shift, comm=trainer.comm)
    offset = 0
    for p in model.amplitude_parameters() + model.phase_parameters():  # log_psi_jacobian's order
        n = p.numel()
        p.grad = direction[offset : offset + n].view_as(p).to(p.dtype)
        offset += n
    return gradient.norm()


def top_sr_gradient(trainer: Trainer, batch: SampleBatch, evaluation: Evaluation) -> torch.Tensor:
    """The energy gradient (:func:`energy_gradient`) preconditioned by SR's metric over the
    ``sr_top`` most probable samples of all ranks (:func:`nnqs.training.sr.top_sr_direction`):
    one backward pass over all samples and a Jacobian of ``sr_top`` rows, linear in the number
    of samples. Returns the loss."""
    model, comm, cfg = trainer.model, trainer.comm, trainer.optim_cfg
    loss = energy_gradient(trainer, batch, evaluation)
    params = model.amplitude_parameters() + model.phase_parameters()  # log_psi_jacobian's order
    gradient = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten() for p in params])
    tokens, weights = top_samples(batch.tokens, evaluation.weights.detach(), cfg.sr_top, comm)
    direction = top_sr_direction(log_psi_jacobian(model, tokens), weights, gradient, shift=cfg.sr_shift)
    offset = 0
    for p in params:
        p.grad = direction[offset : offset + p.numel()].view_as(p).to(p.dtype)
        offset += p.numel()
    return loss


def top_samples(tokens: torch.Tensor, weights: torch.Tensor, k: int,
                comm: Communicator = LOCAL) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` samples of largest weight over all ranks (ties: the earlier in rank order),
    the same on every rank: ``(tokens [k', N], weights [k'])``, ``k' = min(k, U)``."""
    tokens, weights = torch.cat(comm.all_gather(tokens)), torch.cat(comm.all_gather(weights))
    order = torch.sort(weights, descending=True, stable=True).indices[:k]
    return tokens[order], weights[order]


#: The preconditioner of each update rule.
PRECONDITIONERS = {"adamw": energy_gradient, "minsr": minsr_gradient, "sr_top": top_sr_gradient}
#: The optimiser that applies each rule's direction: Adam(W) for the gradient and sr_top's damped
#: gradient (one instance: the moments carry over), SGD for minSR's natural gradient.
OPTIMIZERS = {"adamw": "adamw", "minsr": "minsr", "sr_top": "adamw"}


def sum_gradients(model, comm: Communicator) -> None:
    """Sum ``p.grad`` over the ranks (one collective over the flattened gradients)."""
    if comm.world_size == 1:
        return
    params = [p for p in model.parameters() if p.requires_grad]
    reached = comm.all_reduce(torch.tensor([p.grad is not None for p in params]), "max")
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    total = comm.all_reduce(torch.cat([p.grad.flatten() for p in params]))
    offset = 0
    for p, used in zip(params, reached.tolist()):
        p.grad.copy_(total[offset : offset + p.numel()].view_as(p))
        offset += p.numel()
        if not used:  # as with one process: no gradient, so AdamW leaves it alone
            p.grad = None


# -- the NaN guard ---------------------------------------------------------------------------
class RollBack:
    """The last good model and optimiser states; a non-finite step goes back to them and
    halves the learning rate (:attr:`lr_scale`, which carries over between update rules)."""

    def __init__(self, model, optimizers: dict[str, torch.optim.Optimizer]) -> None:
        self.model, self.optimizers = model, optimizers
        self.lr_scale = 1.0
        self.mark_good()

    def mark_good(self) -> None:
        self._good = {"model": copy.deepcopy(self.model.state_dict()),
                      "optimizers": copy.deepcopy(optimizer_states(self.optimizers))}

    def roll_back(self, step: int) -> None:
        self.model.load_state_dict(self._good["model"])
        load_optimizer_states(self.optimizers, self._good["optimizers"])
        self.lr_scale *= 0.5
        log.warning("step %d: non-finite energy or gradient; rolled back to the last good state and "
                    "halved the learning rate (scale now %.3g)", step, self.lr_scale)


def optimizer_states(optimizers: dict[str, torch.optim.Optimizer]) -> dict:
    return {name: opt.state_dict() for name, opt in optimizers.items()}


def load_optimizer_states(optimizers: dict[str, torch.optim.Optimizer], states: dict) -> None:
    """Each configured optimiser's state from ``states``; one the checkpoint lacks (an update
    rule new to the run, e.g. a resume that changed ``[optim] method`` after the AdamW phase)
    starts fresh. A checkpoint whose optimisers are all unknown here is a ``KeyError``."""
    if states and not set(states) & set(optimizers):
        raise KeyError(f"optimizers {sorted(states)} in the checkpoint, {sorted(optimizers)} configured")
    for name, opt in optimizers.items():
        if name in states:
            opt.load_state_dict(states[name])
        else:
            log.info("the %s update rule is new to this run: its optimiser starts fresh", name)
