"""The variational state: a network, its sampler and its random streams (docs/design.md §6).

:class:`VariationalState` owns what the wavefunction is and how it is sampled: the model, the
sampler's settings, the unique-sample window that adapts ``n_samples``, the sampler's random
stream and the semistochastic local energies' own stream, and, with several processes, how the
samples are dealt out over the ranks. It knows no update rule: a driver
(:class:`nnqs.training.driver.VMC`, or the subspace loop) asks it for samples
(:meth:`~VariationalState.sample`), for the energy of a Hamiltonian on them
(:meth:`~VariationalState.expect`) and for the energy gradient
(:meth:`~VariationalState.energy_gradient`, :meth:`~VariationalState.expect_and_grad`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from hamiltonians import LocalEnergyResult, MolecularHamiltonian
from nnqs.errors import InputError
from nnqs.parallel.comm import LOCAL, Communicator
from nnqs.training.augment import augment
from nnqs.training.estimators import EnergyEstimate, estimate_energy, evaluate_local_energies, sample_weights, vmc_loss
from nnqs.training.settings import LocalEnergyConfig, SamplerConfig
from nnqs.wavefunction.model import TransformerWavefunction
from samplers import SampleBatch, bas, split
from samplers.tree import Frontier
from samplers.without_replacement import sample_without_replacement


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


class VariationalState:
    """A network with its sampler (NetKet's ``MCState``).

    Attributes:
        model: the :class:`~nnqs.wavefunction.model.TransformerWavefunction`.
        sampler_cfg: the :class:`~nnqs.training.settings.SamplerConfig`.
        local_energy_cfg: how :meth:`expect` estimates local energies by default.
        comm: the processes sharing each sample (default: this one).
        generator: the sampler's random stream (seeded ``seed``).
        draw_generator: the semistochastic local energies' draws (seeded ``seed + 2**31``), a
            stream of its own so the samples do not move when the local energies draw.
        window: the :class:`UniqueWindow` (below) (``None``: fixed ``n_samples``).
        n_samples: the draws of the next :meth:`sample` (adapted by :meth:`adapt`).

    ``state_dict()``/``load_state_dict()`` hold the streams and ``n_samples``; the model's
    weights are saved beside them by the driver.
    """

    def __init__(self, model: TransformerWavefunction, sampler: SamplerConfig,
                 local_energy: LocalEnergyConfig | None = None, *, seed: int = 0, comm: Communicator = LOCAL) -> None:
        sampler = sampler.filled()
        assert sampler.n_samples is not None and sampler.weights is not None   # filled
        self.model, self.sampler_cfg, self.comm = model, sampler, comm
        self.local_energy_cfg = (local_energy or LocalEnergyConfig()).filled()
        self.generator = torch.Generator(device=model.device).manual_seed(seed)
        self.draw_generator = torch.Generator(device=model.device).manual_seed(seed + 2**31)
        self.window = (UniqueWindow(sampler.unique_window[0], sampler.unique_window[1], factor=sampler.factor)
                       if sampler.unique_window else None)
        self.n_samples: int = sampler.n_samples
        self.weights: str = sampler.weights   # the steps' weights (the final evaluation weighs by counts)

    # -- sampling ------------------------------------------------------------------------
    def sample(self, n_samples: int | None = None, *, draw: str = "multinomial") -> SampleBatch:
        """BAS of ``n_samples`` draws (default :attr:`n_samples`); with several ranks, this
        rank's share of one sample (:mod:`samplers.split`): the top of the tree from the shared
        stream, the rank's subtrees from a stream seeded by a draw from it and the rank; then
        the unique samples are dealt out evenly (:meth:`_even_out`). ``draw =
        "without_replacement"``: ``n_samples`` distinct configurations instead
        (:mod:`samplers.without_replacement`, one process); :meth:`step_sample` draws as
        ``[sampler] draw`` says."""
        n_samples = self.n_samples if n_samples is None else n_samples
        max_unique, max_cache_bytes = self.sampler_cfg.max_unique or None, self.sampler_cfg.max_cache_bytes
        if draw == "without_replacement":
            if self.comm.world_size > 1:
                raise InputError("[sampler] draw = 'without_replacement' runs on one process")
            return sample_without_replacement(self.model, n_samples, generator=self.generator,
                                              max_cache_bytes=max_cache_bytes)
        if self.comm.world_size == 1:
            return bas.sample(self.model, n_samples, generator=self.generator, max_unique=max_unique,
                              max_cache_bytes=max_cache_bytes)
        drawn = split.sample_share(self.model, n_samples, rank=self.comm.rank, world_size=self.comm.world_size,
                                   generator=self.generator, rank_generator=self._rank_generator(),
                                   share=self._share_top, max_unique=max_unique, max_cache_bytes=max_cache_bytes)
        return self._even_out(drawn)

    def step_sample(self) -> SampleBatch:
        """A VMC step's sample: :attr:`n_samples` as ``[sampler] draw`` says."""
        return self.sample(draw=self.sampler_cfg.draw)

    def augmented(self, H: MolecularHamiltonian, batch: SampleBatch, energy: float | None = None) -> SampleBatch:
        """``batch`` (drawn from the model as it is now) with ``[sampler] augment``
        configurations added (:func:`nnqs.training.augment.augment`; ``energy``: the last
        step's, for the second-order energies' gaps); ``batch`` itself when that is 0."""
        if not self.sampler_cfg.augment:
            return batch
        if self.comm.world_size > 1:
            raise InputError("[sampler] augment runs on one process")
        with torch.no_grad():
            log_psi = self.model.log_psi_given(batch.tokens, batch.log_prob)
        return augment(self.model, H, batch, log_psi, self.sampler_cfg.augment, energy=energy)

    def adapt(self, n_unique: int) -> None:
        """The next ``n_samples`` from the unique count (all ranks') the last sample gave."""
        if self.window is not None:
            self.n_samples = self.window.update(self.n_samples, n_unique)

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

    # -- expectation values --------------------------------------------------------------
    def expect(self, H: MolecularHamiltonian, batch: SampleBatch, mode: str | None = None, threshold: float | None = None,
               *, graph: bool = True, weights: str | None = None, fresh: bool = False) -> Evaluation:
        """The energy of ``H`` on ``batch``: ``log psi`` (with its graph unless ``graph`` is
        false), ``E_loc`` in ``mode`` at ``threshold`` (default: the fine ones of
        :attr:`local_energy_cfg`), the weights (``weights``, default ``[sampler] weights``) and
        the estimate (with several ranks: this rank's samples, the estimate over all of them).

        ``fresh``: ``batch`` was drawn from the model as it is now, so without a graph its
        ``log p`` is the sampler's (:meth:`TransformerWavefunction.log_psi_given`) and no
        full pass is spent on it."""
        cfg = self.local_energy_cfg
        if mode is None:
            mode, threshold = cfg.fine
        graph = graph and torch.is_grad_enabled()
        with torch.set_grad_enabled(graph):
            if fresh and not graph:
                log_psi = self.model.log_psi_given(batch.tokens, batch.log_prob)
            else:
                log_psi = self.model.log_psi(batch.tokens)
        start = time.perf_counter()
        result = evaluate_local_energies(self.model, H, batch.tokens, log_psi, mode, threshold=threshold or 0.0,
                                         amplitudes=cfg.amplitudes, draws=cfg.draws, generator=self.draw_generator,
                                         comm=self.comm)
        seconds = time.perf_counter() - start
        w = sample_weights(batch, weights or self.weights, self.comm).to(result.e_loc.device)
        n = batch.n_samples
        if "inclusion" in batch.stats:   # k distinct, unequally weighted rows: Kish's effective sample size
            n = max(1, int(1.0 / float(self.comm.all_reduce((w * w).sum()))))
        estimate = estimate_energy(result.e_loc, w, n, self.comm, result.draw_variance)
        return Evaluation(log_psi, w, estimate, result, seconds)

    def energy_gradient(self, batch: SampleBatch, evaluation: Evaluation, *, grad_chunk: int = 0) -> torch.Tensor:
        """The energy gradient into ``p.grad`` of every parameter the loss reaches, through
        :func:`nnqs.training.estimators.vmc_loss`, summed over the ranks; returns the loss.

        Through ``evaluation.log_psi``'s graph when it has one; else ``log psi`` is recomputed
        with a graph ``grad_chunk`` samples at a time (0: all at once) and each chunk's loss
        back-propagated (the loss is a sum over samples, so the gradients add up to the same)."""
        comm, e_loc, weights = self.comm, evaluation.e_loc, evaluation.weights
        energy = complex(comm.all_reduce((weights * e_loc).sum()))
        if evaluation.log_psi.requires_grad:
            loss = vmc_loss(evaluation.log_psi, e_loc, weights, energy)
            loss.backward()
        else:
            n = batch.tokens.shape[0]
            chunk = grad_chunk or max(n, 1)
            loss = torch.zeros((), dtype=weights.dtype, device=weights.device)
            for lo in range(0, n, chunk):
                part = vmc_loss(self.model.log_psi(batch.tokens[lo : lo + chunk]), e_loc[lo : lo + chunk],
                                weights[lo : lo + chunk], energy)
                part.backward()
                loss = loss + part.detach().to(loss.dtype)
        sum_gradients(self.model, comm)
        return comm.all_reduce(loss.detach())

    def expect_and_grad(self, H: MolecularHamiltonian, batch: SampleBatch | None = None, mode: str | None = None,
                        threshold: float | None = None, *, grad_chunk: int = 0) -> tuple[Evaluation, list]:
        """:meth:`expect` and the energy gradient, one tensor (or ``None``) per parameter in
        ``model.parameters()`` order; a fresh sample of :attr:`n_samples` when ``batch`` is
        not given. The gradients are left in ``p.grad`` too (cleared first)."""
        fresh = batch is None
        batch = self.step_sample() if batch is None else batch
        self.model.zero_grad(set_to_none=True)
        evaluation = self.expect(H, batch, mode, threshold, graph=not grad_chunk or batch.n_unique <= grad_chunk,
                                 fresh=fresh)
        self.energy_gradient(batch, evaluation, grad_chunk=grad_chunk)
        return evaluation, [p.grad for p in self.model.parameters()]

    # -- checkpoints ---------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state(), "draw_generator": self.draw_generator.get_state(),
                "n_samples": self.n_samples}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"].cpu())  # RNG states are CPU byte tensors
        if "draw_generator" in state:  # absent in checkpoints older than the semistochastic mode
            self.draw_generator.set_state(state["draw_generator"].cpu())
        self.n_samples = int(state["n_samples"])


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


# --- the unique-sample window (adaptive n_samples) ---------------------------------------------
@dataclass(frozen=True)
class UniqueWindow:
    """Grow or shrink ``n_samples`` so that ``n_unique`` lands in ``[low, high]``.

    Attributes:
        low, high: the target window for the number of unique samples.
        factor: multiplicative step (published Transformer NNQS runs used 1.2-1.3).
        min_samples, max_samples: hard limits on ``n_samples``.
    """

    low: int
    high: int
    factor: float = 1.25
    min_samples: int = 100
    max_samples: int = 10**12

    def __post_init__(self) -> None:
        if not 1 <= self.low <= self.high:
            raise ValueError(f"unique window needs 1 <= low <= high, got [{self.low}, {self.high}]")
        if self.factor <= 1:
            raise ValueError(f"factor must be > 1, got {self.factor}")
        if not 1 <= self.min_samples <= self.max_samples:
            raise ValueError("need 1 <= min_samples <= max_samples")

    def update(self, n_samples: int, n_unique: int) -> int:
        """The next ``n_samples`` given the current one and the unique count it produced."""
        target: float = n_samples
        if n_unique < self.low:
            target = n_samples * self.factor
        elif n_unique > self.high:
            target = n_samples / self.factor
        return int(min(max(round(target), self.min_samples), self.max_samples))
