"""The network's samples as a determinant space: diagonalise there, add PT2, and fit the network
to that space's eigenvector (docs/design.md §6, "The subspace loop").

A **pool** is a set of determinants with the ground state of ``H`` projected on it (a
:class:`hamiltonians.sci.state.SCIState` from :func:`hamiltonians.sci.diagonalise.diagonalise`),
so its energy ``E_var`` is variational.
:class:`SubspaceDriver` is a driver (:class:`nnqs.training.driver.Driver`) on the same
:class:`~nnqs.training.state.VariationalState` as VMC; one cycle (``train_step``) is

    sample the network -> merge its unique samples into the pool -> extend the pool by the
    outside determinants with the largest ``|<a|H|psi_pool>|`` -> keep the ``pool`` largest
    ``|c|`` -> diagonalise (warm start) -> fit the network to the eigenvector

The first pool is the start's selected-CI space (``start_space``), and :attr:`best` keeps the
lowest-energy pool seen, so the reported subspace energy is never above the start's. PT2 on the
best pool (:func:`pool_pt2`, :meth:`hamiltonians.sci.solver.SelectedCI.pt2`'s rules) corrects for
what the pool misses. :func:`subspace_energy` does the
same diagonalisation for any trained network (no fit), e.g. after VMC.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from hamiltonians.protocol import Hamiltonian
from hamiltonians.release import release_freed_memory
from hamiltonians.sci.diagonalise import diagonalise, truncate
from hamiltonians.sci.state import SCIState, merge
from hamiltonians.sci.spin import spin_square_of
from nnqs.training.driver import Driver
from nnqs.training.fit import fit_to_state
from nnqs.training.memory_peaks import phase
from nnqs.training.origins import Origins, origin_shares
from nnqs.training.settings import SubspaceConfig
from nnqs.training.state import VariationalState
from nnqs.wavefunction.tokens import occupations_to_tokens, tokens_to_occupations

if TYPE_CHECKING:
    from hamiltonians.sci.solver import SelectedCI

log = logging.getLogger(__name__)


@dataclass
class CycleRecord:
    """One cycle of the loop, a row of ``subspace.csv``: ``energy`` (the pool's variational
    energy), ``best_energy`` (the lowest so far), ``n_pool``, ``n_sampled`` (the network's unique
    samples), ``n_new_sampled`` (of them, not in the pool before), ``n_extended`` (added by
    connection), ``fidelity`` (of the network with the eigenvector after the fit), the seconds of
    the cycle and its parts, and per origin of the pool's determinants (start, connection, network:
    :mod:`nnqs.training.origins`) its share of the eigenvector's weight and what it lowers the
    energy by (mHa; 0 for an origin absent from the pool, ``nan`` for one that holds it all)."""

    step: int
    energy: float
    best_energy: float
    n_pool: int
    n_sampled: int
    n_new_sampled: int
    n_extended: int
    fidelity: float
    seconds: float
    sample_seconds: float
    diagonalise_seconds: float
    fit_seconds: float
    weight_start: float = math.nan
    weight_connection: float = math.nan
    weight_network: float = math.nan
    lowering_start_mha: float = math.nan
    lowering_connection_mha: float = math.nan
    lowering_network_mha: float = math.nan


def _start_vector(coefficients: torch.Tensor, n_new: int) -> torch.Tensor:
    """A pool's vector extended by ``n_new`` rows: a small weight on each (Lanczos needs a start
    with some weight everywhere it may go)."""
    v0 = torch.cat((coefficients.double(), torch.zeros(n_new, dtype=torch.float64)))
    return v0 + 1e-8 * (v0 == 0)


class SubspaceDriver(Driver):
    """The subspace loop on ``state`` (see the module docstring).

    Attributes:
        H, state, config: the Hamiltonian, the :class:`VariationalState`, the :class:`SubspaceConfig`.
        pool: the current pool's :class:`~hamiltonians.sci.state.SCIState`.
        best: the lowest-energy pool so far (the start's space first).
        origins: where each determinant came from (:class:`~nnqs.training.origins.Origins`; the
            start's space recorded as ``"start"`` where it is not already).
        step: cycles done.
    """

    def __init__(self, H: Hamiltonian, state: VariationalState, config: SubspaceConfig, start_space: SCIState,
                 origins: Origins | None = None) -> None:
        self.H, self.state, self.config = H, state, config.filled()
        self.origins = origins if origins is not None else Origins()
        self.origins.add(start_space.dets, "start")
        self.pool = diagonalise(H, start_space.dets, v0=start_space.coefficients)
        self.best = self.pool
        self.step = 0
        log.info("subspace loop: the first pool (the start's space) has %d determinants, E = %.10f",
                 self.pool.dets.shape[0], self.pool.energy)

    @property
    def model(self):
        return self.state.model

    def train_step(self) -> CycleRecord:
        began = time.perf_counter()
        cfg, H = self.config, self.H
        with torch.no_grad(), phase("loop.sample"):
            batch = self.state.sample(cfg.n_samples)
        sampled = tokens_to_occupations(batch.tokens).to(torch.uint8).cpu()
        sample_seconds = time.perf_counter() - began
        t0 = time.perf_counter()
        old = self.pool
        merged, n_new = merge(H, old.dets, sampled)
        n_ext = 0
        if cfg.extend:
            from hamiltonians.sci.connections import extend_by_connection

            with phase("loop.extend"):
                extension = extend_by_connection(H, old.dets, old.coefficients, cfg.extend,
                                                 max_bytes=int(cfg.extend_mib * 2**20))
            merged, n_ext = merge(H, merged, extension)
            self.origins.add(extension, "connection")   # first: the network is credited with what growth missed
        self.origins.add(sampled, "network")
        if cfg.spin_complete:
            from hamiltonians.sci.spin import spin_complete

            completed = spin_complete(H, merged)   # the merged rows first, then their partners
            self.origins.add(completed[merged.shape[0]:], "connection")
            n_ext += completed.shape[0] - merged.shape[0]
            merged = completed
        with phase("loop.diagonalise"):
            pool = diagonalise(H, merged, v0=_start_vector(old.coefficients, n_new + n_ext))
            self.pool = truncate(H, pool, cfg.pool)
        if self.pool.energy < self.best.energy:
            self.best = self.pool
        diagonalise_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        fidelity = math.nan
        if cfg.fit_steps:
            with phase("loop.fit"):
                tokens = occupations_to_tokens(self.pool.dets.long())
                fidelity = fit_to_state(self.model, tokens, self.pool.coefficients, steps=cfg.fit_steps,
                                        lr=cfg.fit_lr, max_determinants=cfg.fit_determinants, tail=cfg.fit_tail,
                                        phases={"steps": cfg.phase_steps})
        fit_seconds = time.perf_counter() - t0
        release_freed_memory()   # the cycle's builds freed: the next cycle starts from what is held
        shares = origin_shares(H, self.pool, self.origins)
        by_origin = {}
        for name in ("start", "connection", "network"):   # an origin absent from the pool: weight 0, lowers nothing
            share = shares.get(name, {})
            by_origin[f"weight_{name}"] = share.get("weight", 0.0)
            lowering = share.get("lowering_mha", 0.0)
            by_origin[f"lowering_{name}_mha"] = math.nan if lowering is None else lowering
        record = CycleRecord(self.step, self.pool.energy, self.best.energy, self.pool.dets.shape[0], batch.n_unique,
                             n_new, n_ext, fidelity, time.perf_counter() - began, sample_seconds, diagonalise_seconds,
                             fit_seconds, **by_origin)
        log.info("subspace cycle %d: E_var = %.10f (best %.10f), pool %d (+%d sampled, +%d by connection), "
                 "fidelity %.4f, the network's determinants %.2e of the weight, %.3f mHa, %.1f s", self.step,
                 record.energy, record.best_energy, record.n_pool, n_new, n_ext, fidelity, record.weight_network,
                 record.lowering_network_mha, record.seconds)
        self.step += 1
        return record

    def state_dict(self) -> dict:
        return {"step": self.step, "pool": self.pool.to_dict(), "best": self.best.to_dict(),
                "origins": self.origins.state_dict()}

    def load_state_dict(self, saved: dict) -> None:
        self.step = int(saved["step"])
        self.pool, self.best = SCIState.from_dict(saved["pool"]), SCIState.from_dict(saved["best"])
        self.origins = Origins.from_state_dict(saved.get("origins"))

    @classmethod
    def from_state_dict(cls, H: Hamiltonian, state: VariationalState, config: SubspaceConfig,
                        saved: dict) -> SubspaceDriver:
        """The loop as :meth:`state_dict` saved it (a resume between cycles): nothing is
        recomputed; the network and its sampler's random state are the caller's ``state``'s."""
        loop = cls.__new__(cls)
        loop.H, loop.state, loop.config = H, state, config.filled()
        loop.load_state_dict(saved)
        log.info("subspace loop: resumed after cycle %d of its pool of %d determinants", loop.step,
                 loop.pool.dets.shape[0])
        return loop


def subspace_energy(H: Hamiltonian, state: VariationalState, pool: SCIState | None = None, *,
                    n_samples: int = 100_000) -> tuple[SCIState, int]:
    """The ground state of ``H`` on the unique configurations of ``n_samples`` draws from the
    network of ``state``, merged with ``pool`` if given; returns it and the number of sampled
    determinants that were not in ``pool``. Variational; never above ``pool``'s energy."""
    with torch.no_grad():
        batch = state.sample(n_samples)
    sampled = tokens_to_occupations(batch.tokens).to(torch.uint8).cpu()
    if pool is None:   # the network's amplitudes start the Lanczos
        log_psi = state.model.log_psi_no_grad(batch.tokens)
        amplitude = torch.exp(log_psi.real.double().cpu()) * torch.cos(log_psi.imag.double().cpu())
        return diagonalise(H, sampled, v0=amplitude), int(sampled.shape[0])
    return join(H, pool, sampled)


def join(H: Hamiltonian, pool: SCIState, dets: torch.Tensor) -> tuple[SCIState, int]:
    """``(state, n_new)``: the ground state on ``pool``'s determinants (kept first) with the rows of
    ``dets`` it lacks appended, Lanczos warm-started from ``pool``'s vector; ``n_new`` rows were new."""
    merged, n_new = merge(H, pool.dets, dets)
    return diagonalise(H, merged, v0=_start_vector(pool.coefficients, n_new)), n_new


def pt2_solver(config: SubspaceConfig, *, seed: int = 0) -> SelectedCI:
    """The :class:`~hamiltonians.sci.solver.SelectedCI` whose PT2 and extrapolation settings are
    ``config``'s (its :meth:`~hamiltonians.sci.solver.SelectedCI.pt2` and
    :meth:`~hamiltonians.sci.solver.SelectedCI.extrapolate` give ``result.json``'s fields)."""
    from hamiltonians.sci.solver import SelectedCI

    return SelectedCI(pt2=config.pt2, pt2_exact_max=config.pt2_exact_max, pt2_deterministic=config.pt2_deterministic,
                      pt2_draws=config.pt2_draws, pt2_batches=config.pt2_batches, seed=seed,
                      extrapolation=tuple(config.extrapolation))


def pool_pt2(H: Hamiltonian, pool: SCIState, config: SubspaceConfig, *, seed: int = 0) -> dict | None:
    """EN-PT2 on ``pool``'s eigenvector, as ``config.pt2`` says (:func:`pt2_solver`); ``None``
    with ``pt2 = "none"``."""
    return pt2_solver(config, seed=seed).pt2(H, pool)


def final_subspace(H: Hamiltonian, state: VariationalState, pool: SCIState | None, config: SubspaceConfig, *,
                   seed: int = 0, origins: Origins | None = None) -> tuple[dict, SCIState | None]:
    """``(fields, space)``: the run's subspace and PT2 energies (``result.json``'s fields) and
    the final space with its ground state (``None`` when there is none): the ground state on
    ``pool`` (the loop's best, or the start's space) merged with ``config.final_samples`` draws
    of the trained network (:func:`subspace_energy`), and :func:`pool_pt2` on it.

    Fields: ``energy_subspace`` (variational), ``subspace_size``, ``subspace_from_network`` (the
    sampled determinants the pool lacked), ``subspace_pool_energy`` (the pool's own energy,
    before the network's samples joined; ``None`` without a pool), ``subspace_spin_square``
    (``<S^2>`` of its ground state, :func:`~hamiltonians.sci.spin.spin_square_of`), ``subspace_seconds``, and
    :func:`pool_pt2`'s fields (``energy_pt2`` = ``energy_subspace`` + E2, with its error bar);
    with ``config.extrapolation``, :func:`extrapolation`'s fields; ``origins``: per origin of the
    final space's determinants (``origins`` given, the final samples recorded as
    ``"final_samples"`` where new) :func:`~nnqs.training.origins.origin_shares`."""
    began = time.perf_counter()
    if pool is None and not config.final_samples:
        return {}, None
    with phase("final.space"):
        if config.final_samples:
            space, n_new = subspace_energy(H, state, pool, n_samples=config.final_samples)
        else:
            assert pool is not None
            space, n_new = diagonalise(H, pool.dets, v0=pool.coefficients), 0
    fields: dict[str, Any] = {"energy_subspace": space.energy, "subspace_size": int(space.dets.shape[0]),
              "subspace_from_network": n_new, "subspace_pool_energy": None if pool is None else float(pool.energy),
              "subspace_spin_square": spin_square_of(space.dets, space.coefficients),
              "subspace_seconds": time.perf_counter() - began}
    if origins is not None:   # the pool's rows come first (merge); only the draws it lacked are the final samples'
        origins.add(space.dets[0 if pool is None else pool.size:], "final_samples")
        fields["origins"] = origin_shares(H, space, origins)
    log.info("subspace energy: E_var = %.10f on %d determinants (%d from the network's samples), <S^2> %.4f",
             space.energy, fields["subspace_size"], n_new, fields["subspace_spin_square"])
    with phase("final.pt2"):
        pt2 = pool_pt2(H, space, config, seed=seed)
    if pt2 is not None:
        fields.update(pt2)
        log.info("PT2: E_var + E2 = %.10f +- %.1e (%s)", pt2["energy_pt2"], pt2["energy_pt2_stderr"], pt2["pt2_form"])
        if config.extrapolation:
            with phase("final.extrapolation"):
                fields.update(extrapolation(H, space, pt2, config, seed=seed))
    return fields, space


def extrapolation(H: Hamiltonian, space: SCIState, pt2: dict, config: SubspaceConfig, *, seed: int = 0) -> dict:
    """``E_var`` extrapolated to ``PT2 -> 0`` over ``space`` and its truncations to the
    ``config.extrapolation`` fractions (:meth:`hamiltonians.sci.solver.SelectedCI.extrapolate`)."""
    return pt2_solver(config, seed=seed).extrapolate(H, space, pt2)
