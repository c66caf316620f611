"""Drivers: the run loop, and VMC's step (docs/design.md §6).

:class:`Driver` is the loop every driver shares: :meth:`Driver.run` takes steps
(:meth:`Driver.train_step`, each returning a record) until a target step or until a callback
(:mod:`nnqs.training.callbacks`) asks to stop. :class:`VMC` is variational Monte Carlo on a
:class:`~nnqs.training.state.VariationalState`: one step is

    sample -> local energies -> preconditioner (a direction) -> optimiser

the update rule of each step (AdamW's identity, minSR, sr_top;
:mod:`nnqs.training.preconditioners`) and its learning rate from the schedule
(:func:`learning_rate`, :func:`method_at`, below), guarded by :class:`~nnqs.training.callbacks.RollBack`.
``state_dict()``/``load_state_dict()`` capture everything a step changes, so a resumed run
continues exactly as an uninterrupted one would.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Sequence

import torch

from hamiltonians import MolecularHamiltonian
from nnqs.parallel.comm import LOCAL, Communicator
from nnqs.training.callbacks import Callback, RollBack, load_optimizer_states, optimizer_states
from nnqs.training.estimators import sample_space_energy
from nnqs.training.memory_peaks import phase
from nnqs.training.preconditioners import preconditioners
from nnqs.training.settings import LocalEnergyConfig, OptimConfig, SamplerConfig
from nnqs.training.state import VariationalState

log = logging.getLogger(__name__)


@dataclass
class StepRecord:
    """One VMC step, as written to ``metrics.csv``.

    ``seconds`` is the whole step; ``sample_seconds`` (BAS and ``[sampler] augment``), ``local_energy_seconds`` (the
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


class Driver:
    """The run loop. A subclass holds ``step`` (the steps taken) and ``train_step()`` (take one,
    return its record)."""

    step: int = 0

    def train_step(self):  # pragma: no cover - the subclasses' step
        raise NotImplementedError

    def run(self, until: int, callbacks: Sequence[Callback] = ()) -> bool:
        """Step until ``self.step == until`` or a callback asks to stop; returns whether one did."""
        while self.step < until:
            record = self.train_step()
            stop = False
            for callback in callbacks:
                stop = bool(callback(self, record)) or stop
            if stop:
                return True
        return False


class VMC(Driver):
    """Variational Monte Carlo of ``H`` on ``state`` with the update rules of ``optim``.

    Attributes:
        H, state, optim_cfg: the Hamiltonian, the :class:`VariationalState`, the
            :class:`~nnqs.training.settings.OptimConfig`.
        preconditioners: one per update rule (:func:`nnqs.training.preconditioners.preconditioners`).
        optimizers: by name: ``"adamw"`` (AdamW; AdamW's and sr_top's directions, one instance
            so the moments carry over) and ``"minsr"`` (SGD: ``theta -= lr * d``), each only
            where the schedule uses it.
        guard: the :class:`~nnqs.training.callbacks.RollBack` NaN guard.
        step: the steps taken.
    """

    def __init__(self, H: MolecularHamiltonian, state: VariationalState, optim: OptimConfig) -> None:
        optim = optim.filled()
        assert optim.lr is not None and optim.steps is not None   # filled
        self.H, self.state, self.optim_cfg = H, state, optim
        model = state.model
        self.preconditioners = preconditioners(optim)
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        if optim.method != "adamw" and optim.adamw_phase == optim.steps:
            log.warning("all %d steps are AdamW: %s starts after adamw_steps = %d", optim.steps, optim.method,
                        optim.adamw_steps)
        if optim.adamw_phase or optim.method == "sr_top":
            self.optimizers["adamw"] = torch.optim.AdamW(model.parameters(), lr=optim.lr, betas=(optim.betas[0], optim.betas[1]),
                                                         eps=optim.eps, weight_decay=optim.weight_decay)
        if optim.method == "minsr":
            self.optimizers["minsr"] = torch.optim.SGD(model.parameters(), lr=optim.lr)
        self.step = 0
        self.last_energy: float | None = None   # the last finite step's (the augmentation's gaps)
        self.guard = RollBack(model, self.optimizers)

    @property
    def model(self):
        return self.state.model

    @property
    def comm(self) -> Communicator:
        return self.state.comm

    def train_step(self) -> StepRecord:
        """Sample, local energies, the step's preconditioner, the update; a non-finite energy or
        update rolls back instead (:class:`~nnqs.training.callbacks.RollBack`)."""
        start = time.perf_counter()
        model, state = self.model, self.state
        method = method_at(self.step, self.optim_cfg)
        preconditioner = self.preconditioners[method]
        optimizer = self.optimizers[preconditioner.optimizer]
        lr = self.guard.lr_scale * learning_rate(self.step, self.optim_cfg)
        for group in optimizer.param_groups:
            group["lr"] = lr
        model.train()
        if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
            # The last update broke the network: sampling from it is meaningless.
            self.guard.roll_back(self.step)
            self.step += 1
            return StepRecord(self.step - 1, math.nan, math.nan, math.nan, state.n_samples, 0, lr, math.nan,
                              time.perf_counter() - start, rolled_back=True, method=method)
        with phase("vmc.sample"):
            batch = state.augmented(self.H, state.step_sample(), self.last_energy)
        sampled = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with phase("vmc.local_energy"):
            evaluation = state.expect(self.H, batch, *state.local_energy_cfg.at(self.step),
                                      graph=preconditioner.needs_graph(batch.n_unique), fresh=True)
        with phase("vmc.update"):
            direction = preconditioner(state, batch, evaluation)
            direction.apply(model)
        est = evaluation.estimate
        grad_norm = limit_norm(model.parameters(), self.optim_cfg.clip,
                               normalize=self.optim_cfg.normalize and preconditioner.optimizer == "adamw")
        finite = math.isfinite(est.energy) and math.isfinite(grad_norm) and math.isfinite(float(direction.check))
        if finite:
            self.guard.mark_good()  # these weights gave a finite energy and gradient
            optimizer.step()
            self.last_energy = est.energy
        else:
            self.guard.roll_back(self.step)
        end = time.perf_counter()
        le = evaluation.local_energy
        n_unique, n_kept, n_connected, n_amplitudes = self.comm.all_reduce(torch.tensor(
            [batch.n_unique, le.n_kept, le.n_connected, le.n_evaluated], dtype=torch.int64)).tolist()
        record = StepRecord(self.step, est.energy, est.stderr, est.variance, state.n_samples, n_unique,
                            lr, grad_norm, end - start, rolled_back=not finite, method=method,
                            kept_fraction=n_kept / n_connected if n_connected else 1.0, sample_seconds=sampled - start,
                            local_energy_seconds=evaluation.local_energy_seconds,
                            n_amplitudes=n_amplitudes, amplitude_seconds=le.amplitude_seconds,
                            update_seconds=end - sampled - evaluation.local_energy_seconds,
                            sample_space_energy=sample_space_energy(le.e_loc_sampled, batch, self.comm)
                            if le.e_loc_sampled is not None else math.nan)
        state.adapt(n_unique - batch.stats.get("augmented", 0))  # the global unique count drawn
        self.step += 1
        return record

    def start_from(self, weights: dict) -> None:
        """Load the start's weights (a ``state_dict``) before the first step; they become the
        state a non-finite step rolls back to."""
        self.model.load_state_dict(weights)
        self.guard.mark_good()

    # -- checkpoints ---------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"model": self.model.state_dict(), "optimizers": optimizer_states(self.optimizers),
                **self.state.state_dict(), "step": self.step, "lr_scale": self.guard.lr_scale,
                "last_energy": self.last_energy}

    def load_state_dict(self, state: dict) -> None:
        self.model.load_state_dict(state["model"])
        load_optimizer_states(self.optimizers, state["optimizers"])
        self.state.load_state_dict(state)
        self.step = int(state["step"])
        self.guard.lr_scale = float(state["lr_scale"])
        self.last_energy = state.get("last_energy")   # absent before [sampler] augment
        self.guard.mark_good()


def limit_norm(parameters, clip: float, *, normalize: bool = False) -> float:
    """Clip the gradients in ``p.grad`` to total norm ``clip`` (0: no clipping) or, with
    ``normalize``, scale them to norm ``clip`` (1 when 0) whatever their norm; returns the norm
    before (non-finite gradients are left alone: the caller rolls the step back)."""
    parameters = [p for p in parameters if p.grad is not None]
    if not normalize:
        return float(torch.nn.utils.clip_grad_norm_(parameters, clip or float("inf")))
    norm = float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad.double()) for p in parameters])))
    if math.isfinite(norm) and norm > 0:
        for p in parameters:
            p.grad.mul_((clip or 1.0) / norm)
    return norm


def build_vmc(model, H: MolecularHamiltonian, optim: OptimConfig, sampler: SamplerConfig,
              local_energy: LocalEnergyConfig | None = None, *, seed: int = 0, comm: Communicator = LOCAL) -> VMC:
    """``VMC(H, VariationalState(model, sampler, local_energy, seed=seed, comm=comm), optim)``."""
    return VMC(H, VariationalState(model, sampler, local_energy, seed=seed, comm=comm), optim)


# --- the learning-rate schedule and each step's update rule ------------------------------------
def cosine_schedule(step: int, warmup: int, span: int, final_ratio: float) -> float:
    """Linear warm-up over ``warmup`` steps, then a cosine decay to ``final_ratio`` at ``span``."""
    if warmup and step < warmup:
        return (step + 1) / warmup
    progress = min((step - warmup) / max(span - warmup, 1), 1.0)
    return final_ratio + (1 - final_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def method_at(step: int, cfg: OptimConfig) -> str:
    """The update rule of ``step``: ``"adamw"``, else ``cfg.method`` (after ``cfg.adamw_phase``)."""
    if cfg.method == "adamw" or step < cfg.adamw_phase:
        return "adamw"
    assert cfg.method is not None   # a filled OptimConfig (VMC's)
    return cfg.method


def learning_rate(step: int, cfg: OptimConfig) -> float:
    """The scheduled learning rate of ``step`` (before the NaN guard's scale).

    One phase: ``cfg.lr`` with warm-up and cosine decay over ``cfg.steps``. With
    ``method = "minsr"`` or ``"sr_top"`` and an AdamW phase (``cfg.adamw_phase > 0``), that phase
    runs the schedule at ``cfg.adamw_lr`` over its own steps, and the next phase decays ``cfg.lr``
    over the rest.
    """
    phase = cfg.adamw_phase
    if cfg.method != "adamw" and phase:   # AdamW at adamw_lr first (the whole run if steps <= adamw_steps)
        if step < phase:
            return cfg.adamw_lr * cosine_schedule(step, cfg.warmup, phase, cfg.final_lr_ratio)
        assert cfg.lr is not None and cfg.steps is not None   # a filled OptimConfig (VMC's)
        return cfg.lr * cosine_schedule(step - phase, 0, cfg.steps - phase, cfg.final_lr_ratio)
    assert cfg.lr is not None and cfg.steps is not None   # a filled OptimConfig (VMC's)
    return cfg.lr * cosine_schedule(step, cfg.warmup, cfg.steps, cfg.final_lr_ratio)
