"""The VMC trainer: one step is sample -> evaluate -> update (docs/design.md §6).

BAS samples ``x_u`` with counts ``c_u`` -> weights ``w_u`` -> local energies ``E_loc(x_u)`` ->
``E = sum_u w_u E_loc`` -> the loss whose gradient is ``2 Re sum_u w_u (E_loc(x_u) - E)^* grad
log psi(x_u)``, through the uncached full pass (:mod:`nnqs.training.estimators`); the update is
AdamW or minSR (:mod:`nnqs.training.sr`).
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
from nnqs.training.estimators import EnergyEstimate, estimate_energy, evaluate_local_energies, sample_weights, vmc_loss
from nnqs.training.settings import OptimConfig, SamplerConfig
from nnqs.training.sr import log_psi_jacobian, minsr_direction
from nnqs.training.window import UniqueWindow
from nnqs.wavefunction.model import TransformerWavefunction
from samplers import SampleBatch, bas, split
from samplers.tree import Frontier

log = logging.getLogger(__name__)


def cosine_schedule(step: int, warmup: int, span: int, final_ratio: float) -> float:
    """Linear warm-up over ``warmup`` steps, then a cosine decay to ``final_ratio`` at ``span``."""
    if warmup and step < warmup:
        return (step + 1) / warmup
    progress = min((step - warmup) / max(span - warmup, 1), 1.0)
    return final_ratio + (1 - final_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def method_at(step: int, cfg: OptimConfig) -> str:
    """The update rule of ``step``: ``"adamw"`` or ``"minsr"`` (after ``cfg.adamw_phase``)."""
    return "adamw" if cfg.method == "adamw" or step < cfg.adamw_phase else "minsr"


def learning_rate(step: int, cfg: OptimConfig) -> float:
    """The scheduled learning rate of ``step`` (before the NaN guard's scale).

    One phase: ``cfg.lr`` with warm-up and cosine decay over ``cfg.steps``. With
    ``method = "minsr"`` and an AdamW phase (``cfg.adamw_phase > 0``), that phase runs the
    schedule at ``cfg.adamw_lr`` over its own steps, and the minSR phase decays ``cfg.lr`` over the rest.
    """
    phase = cfg.adamw_phase
    if cfg.method == "minsr" and phase:   # AdamW at adamw_lr first (the whole run if steps <= adamw_steps)
        if step < phase:
            return cfg.adamw_lr * cosine_schedule(step, cfg.warmup, phase, cfg.final_lr_ratio)
        return cfg.lr * cosine_schedule(step - phase, 0, cfg.steps - phase, cfg.final_lr_ratio)
    return cfg.lr * cosine_schedule(step, cfg.warmup, cfg.steps, cfg.final_lr_ratio)


@dataclass
class StepRecord:
    """One VMC step, as written to ``metrics.csv``.

    ``seconds`` is the whole step; ``sample_seconds`` (BAS), ``local_energy_seconds`` (the
    connections and their amplitudes) and ``update_seconds`` (``log psi`` with gradients, the
    gradient or minSR solve, the optimiser) split it. ``kept_fraction``: the share of connected
    elements that entered the local energies (1 in exact mode); ``n_amplitudes``: connected
    configurations outside the samples whose amplitudes were computed, which took
    ``amplitude_seconds`` of ``local_energy_seconds``.
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
    """Holds everything a VMC run changes (model, optimiser, random stream, n_samples, lr scale).

    ``state_dict()``/``load_state_dict()`` capture all of it, so a resumed run continues exactly
    as an uninterrupted one would.
    """

    def __init__(self, model: TransformerWavefunction, H: MolecularHamiltonian, optim: OptimConfig,
                 sampler: SamplerConfig, *, seed: int = 0, comm: Communicator = LOCAL) -> None:
        self.model, self.H, self.optim_cfg, self.sampler_cfg = model, H, optim, sampler
        self.comm = comm
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        if optim.method == "minsr" and optim.adamw_phase == optim.steps:
            log.warning("all %d steps are AdamW: minSR starts after adamw_steps = %d", optim.steps, optim.adamw_steps)
        if optim.adamw_phase:
            self.optimizers["adamw"] = torch.optim.AdamW(
                model.parameters(), lr=optim.lr, betas=tuple(optim.betas), eps=optim.eps,
                weight_decay=optim.weight_decay,
            )
        if optim.method == "minsr":
            self.optimizers["minsr"] = torch.optim.SGD(model.parameters(), lr=optim.lr)  # theta -= lr * d
        self.generator = torch.Generator(device=model.device).manual_seed(seed)
        self.window = UniqueWindow(*sampler.unique_window, factor=sampler.factor) if sampler.unique_window else None
        self.n_samples = sampler.n_samples
        self.step = 0
        self.lr_scale = 1.0
        self.anchors: torch.Tensor | None = None
        self.mark_good()

    def set_anchors(self, occupations: torch.Tensor | None) -> None:
        """Occupations ``[K, 2N]`` that count as sampled in every step's local energies
        (:func:`nnqs.training.estimators.evaluate_local_energies`'s ``anchors``; ``None``: none)."""
        self.anchors = None if occupations is None else occupations.to(device=self.model.device, dtype=torch.uint8)

    # -- one step ------------------------------------------------------------------------
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
        total = tokens.shape[0]
        mine = slice(total * comm.rank // comm.world_size, total * (comm.rank + 1) // comm.world_size)
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

    def evaluate(self, batch: SampleBatch, step: int | None = None) -> Evaluation:
        """log psi (with grad), E_loc, weights and the energy estimate of a sample batch (with
        several ranks: this rank's samples, the estimate over all of them). Local energies in
        the mode of training step ``step`` (``None``: the fine mode of the final evaluation;
        see :meth:`OptimConfig.local_energy_at`), with the anchors (:meth:`set_anchors`) counted
        as sampled in either."""
        log_psi = self.model.log_psi(batch.tokens)
        start = time.perf_counter()
        cfg = self.optim_cfg
        mode, threshold = cfg.local_energy_at(step)
        result = evaluate_local_energies(self.model, self.H, batch.tokens, log_psi, mode, threshold=threshold,
                                         amplitudes=cfg.amplitudes, anchors=self.anchors, comm=self.comm)
        seconds = time.perf_counter() - start
        weights = sample_weights(batch, cfg.weights, self.comm).to(result.e_loc.device)
        estimate = estimate_energy(result.e_loc, weights, batch.n_samples, self.comm)
        return Evaluation(log_psi, weights, estimate, result, seconds)

    def train_step(self) -> StepRecord:
        start = time.perf_counter()
        method = method_at(self.step, self.optim_cfg)
        optimizer = self.optimizers[method]
        lr = self.lr_scale * learning_rate(self.step, self.optim_cfg)
        for group in optimizer.param_groups:
            group["lr"] = lr
        self.model.train()
        if not all(bool(torch.isfinite(p).all()) for p in self.model.parameters()):
            # The last update broke the network: sampling from it is meaningless.
            self._roll_back()
            self.step += 1
            return StepRecord(self.step - 1, math.nan, math.nan, math.nan, self.n_samples, 0, lr, math.nan,
                              time.perf_counter() - start, rolled_back=True, method=method)
        batch = self.sample(self.n_samples)
        sampled = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        evaluation, loss = self.gradient(batch, method)
        est = evaluation.estimate
        clip = self.optim_cfg.clip or float("inf")
        grad_norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), clip))
        finite = math.isfinite(est.energy) and math.isfinite(grad_norm) and math.isfinite(float(loss))
        if finite:
            self.mark_good()  # these weights gave a finite energy and gradient
            optimizer.step()
        else:
            self._roll_back()
        end = time.perf_counter()
        le = evaluation.local_energy
        n_unique, n_kept, n_connected, n_amplitudes = self.comm.all_reduce(torch.tensor(
            [batch.n_unique, le.n_kept, le.n_connected, le.n_evaluated], dtype=torch.int64)).tolist()
        record = StepRecord(self.step, est.energy, est.stderr, est.variance, self.n_samples, n_unique,
                            lr, grad_norm, end - start, rolled_back=not finite, method=method,
                            kept_fraction=n_kept / n_connected if n_connected else 1.0, sample_seconds=sampled - start,
                            local_energy_seconds=evaluation.local_energy_seconds,
                            n_amplitudes=n_amplitudes, amplitude_seconds=le.amplitude_seconds,
                            update_seconds=end - sampled - evaluation.local_energy_seconds)
        if self.window is not None:
            self.n_samples = self.window.update(self.n_samples, n_unique)  # the global unique count
        self.step += 1
        return record

    def gradient(self, batch: SampleBatch, method: str) -> tuple[Evaluation, torch.Tensor]:
        """Evaluate ``batch`` and write the update into ``p.grad`` (zeroed before by the caller):
        the energy gradient (``"adamw"``) or the minSR direction (``"minsr"``), summed over the
        ranks' samples, so the same on every rank. Returns the evaluation and a scalar that is
        finite when the update is (the loss, or the gradient's norm for minSR)."""
        evaluation = self.evaluate(batch, self.step)
        log_psi, e_loc, weights = evaluation.log_psi, evaluation.e_loc, evaluation.weights
        if method == "minsr":
            return evaluation, self._minsr_gradient(batch.tokens, e_loc, weights)
        loss = vmc_loss(log_psi, e_loc, weights, complex(self.comm.all_reduce((weights * e_loc).sum())))
        loss.backward()
        self._sum_gradients()
        return evaluation, self.comm.all_reduce(loss.detach())

    def _sum_gradients(self) -> None:
        """Sum ``p.grad`` over the ranks (one collective over the flattened gradients)."""
        if self.comm.world_size == 1:
            return
        params = [p for p in self.model.parameters() if p.requires_grad]
        reached = self.comm.all_reduce(torch.tensor([p.grad is not None for p in params]), "max")
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        total = self.comm.all_reduce(torch.cat([p.grad.flatten() for p in params]))
        offset = 0
        for p, used in zip(params, reached.tolist()):
            p.grad.copy_(total[offset : offset + p.numel()].view_as(p))
            offset += p.numel()
            if not used:  # as with one process: no gradient, so AdamW leaves it alone
                p.grad = None

    def _minsr_gradient(self, tokens: torch.Tensor, e_loc: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """Write the minSR direction into ``p.grad`` (the SGD step then applies ``-lr * d``)."""
        jac = log_psi_jacobian(self.model, tokens)
        direction, gradient = minsr_direction(jac, e_loc, weights, shift=self.optim_cfg.sr_shift, comm=self.comm)
        offset = 0
        for p in (p for p in self.model.parameters() if p.requires_grad):  # log_psi_jacobian's order
            n = p.numel()
            p.grad = direction[offset : offset + n].view_as(p).to(p.dtype)
            offset += n
        return gradient.norm()

    # -- NaN guard -----------------------------------------------------------------------
    def _snapshot(self) -> dict:
        return {"model": copy.deepcopy(self.model.state_dict()),
                "optimizers": copy.deepcopy(self._optimizer_states())}

    def mark_good(self) -> None:
        """Record the current model and optimiser as the state a non-finite step rolls back to."""
        self._good = self._snapshot()

    def _roll_back(self) -> None:
        self.model.load_state_dict(self._good["model"])
        self._load_optimizer_states(self._good["optimizers"])
        self.lr_scale *= 0.5
        log.warning("step %d: non-finite energy or gradient; rolled back to the last good state and "
                    "halved the learning rate (scale now %.3g)", self.step, self.lr_scale)

    # -- checkpoints ---------------------------------------------------------------------
    def _optimizer_states(self) -> dict:
        return {name: opt.state_dict() for name, opt in self.optimizers.items()}

    def _load_optimizer_states(self, states: dict) -> None:
        if set(states) != set(self.optimizers):
            raise KeyError(f"optimizers {sorted(states)} in the checkpoint, {sorted(self.optimizers)} configured")
        for name, opt in self.optimizers.items():
            opt.load_state_dict(states[name])

    def state_dict(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "optimizers": self._optimizer_states(),
            "generator": self.generator.get_state(),
            "n_samples": self.n_samples,
            "step": self.step,
            "lr_scale": self.lr_scale,
            "anchors": None if self.anchors is None else self.anchors.cpu(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        self._load_optimizer_states(state["optimizers"])
        self.generator.set_state(state["generator"].cpu())  # RNG states are CPU byte tensors
        self.n_samples = int(state["n_samples"])
        self.step = int(state["step"])
        self.lr_scale = float(state["lr_scale"])
        self.set_anchors(state.get("anchors"))  # absent in checkpoints older than the field
        self.mark_good()
