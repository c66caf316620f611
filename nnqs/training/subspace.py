"""The network's samples as a determinant space: diagonalise there, add PT2, and fit the network
to that space's eigenvector (docs/design.md §6, "The subspace loop").

A **pool** is a set of determinants with the ground state of ``H`` projected on it
(:func:`hamiltonians.subspace.subspace_ground_state`), so its energy ``E_var`` is variational.
:class:`SubspaceDriver` is a driver (:class:`nnqs.training.driver.Driver`) on the same
:class:`~nnqs.training.state.VariationalState` as VMC; one cycle (``train_step``) is

    sample the network -> merge its unique samples into the pool -> extend the pool by the
    outside determinants with the largest ``|<a|H|psi_pool>|`` -> keep the ``pool`` largest
    ``|c|`` -> diagonalise (warm start) -> fit the network to the eigenvector

The first pool is the start's selected-CI space (``start_space``), and :attr:`best` keeps the
lowest-energy pool seen, so the reported subspace energy is never above the start's. PT2 on the
best pool (:func:`pool_pt2`) corrects for what the pool misses. :func:`subspace_energy` does the
same diagonalisation for any trained network (no fit), e.g. after VMC.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from hamiltonians.ci import CIState
from nnqs.training.driver import Driver
from nnqs.training.fit import fit_to_state
from nnqs.training.settings import SubspaceConfig
from nnqs.training.state import VariationalState
from nnqs.wavefunction.tokens import occupations_to_tokens, tokens_to_occupations

if TYPE_CHECKING:
    from hamiltonians.subspace import SubspaceState

log = logging.getLogger(__name__)


# The subspace and PT2 kernels are compiled (Numba): imported where used, so that importing the
# run's settings stays light.
def subspace_ground_state(H, dets, *, v0=None):
    from hamiltonians.subspace import subspace_ground_state as ground_state

    return ground_state(H, dets, v0=v0)


@dataclass
class CycleRecord:
    """One cycle of the loop, a row of ``subspace.csv``: ``energy`` (the pool's variational
    energy), ``best_energy`` (the lowest so far), ``n_pool``, ``n_sampled`` (the network's unique
    samples), ``n_new_sampled`` (of them, not in the pool before), ``n_extended`` (added by
    connection), ``fidelity`` (of the network with the eigenvector after the fit), and the
    seconds of the cycle and its parts."""

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


def merge(H, pool: torch.Tensor, new: torch.Tensor) -> tuple[torch.Tensor, int]:
    """``pool`` (unique uint8 ``[D, 2N]``, kept first and in order) with the rows of ``new`` it
    lacks appended (:func:`hamiltonians.subspace.unique_determinants`); returns ``(merged, how
    many were new)``."""
    from hamiltonians.subspace import unique_determinants

    merged, _ = unique_determinants(H, torch.cat((pool.to(torch.uint8), new.to(torch.uint8))))
    return merged, int(merged.shape[0] - pool.shape[0])


def _start_vector(coefficients: torch.Tensor, n_new: int) -> torch.Tensor:
    """A pool's vector extended by ``n_new`` rows: a small weight on each (Lanczos needs a start
    with some weight everywhere it may go)."""
    v0 = torch.cat((coefficients.double(), torch.zeros(n_new, dtype=torch.float64)))
    return v0 + 1e-8 * (v0 == 0)


def _truncate(H, state: SubspaceState, size: int) -> SubspaceState:
    """The ground state on the ``size`` largest-``|c|`` determinants of ``state`` (warm start)."""
    if state.dets.shape[0] <= size:
        return state
    keep = torch.sort(torch.argsort(state.coefficients.abs(), descending=True)[:size]).values
    return subspace_ground_state(H, state.dets[keep], v0=state.coefficients[keep])


class SubspaceDriver(Driver):
    """The subspace loop on ``state`` (see the module docstring).

    Attributes:
        H, state, config: the Hamiltonian, the :class:`VariationalState`, the :class:`SubspaceConfig`.
        pool: the current pool's :class:`~hamiltonians.subspace.SubspaceState`.
        best: the lowest-energy pool so far (the start's space first).
        step: cycles done.
    """

    def __init__(self, H, state: VariationalState, config: SubspaceConfig, start_space: CIState | SubspaceState) -> None:
        self.H, self.state, self.config = H, state, config.filled()
        self.pool = subspace_ground_state(H, start_space.dets, v0=start_space.coefficients)
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
        with torch.no_grad():
            batch = self.state.sample(cfg.n_samples)
        sampled = tokens_to_occupations(batch.tokens).to(torch.uint8).cpu()
        sample_seconds = time.perf_counter() - began
        t0 = time.perf_counter()
        old = self.pool
        merged, n_new = merge(H, old.dets, sampled)
        n_ext = 0
        if cfg.extend:
            from hamiltonians.subspace import extend_by_connection

            extension = extend_by_connection(H, old.dets, old.coefficients, cfg.extend)
            merged, n_ext = merge(H, merged, extension)
        pool = subspace_ground_state(H, merged, v0=_start_vector(old.coefficients, n_new + n_ext))
        self.pool = _truncate(H, pool, cfg.pool)
        if self.pool.energy < self.best.energy:
            self.best = self.pool
        diagonalise_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        fidelity = math.nan
        if cfg.fit_steps:
            tokens = occupations_to_tokens(self.pool.dets.long())
            fidelity = fit_to_state(self.model, tokens, self.pool.coefficients, steps=cfg.fit_steps, lr=cfg.fit_lr,
                                    max_determinants=cfg.fit_determinants, tail=cfg.fit_tail,
                                    phases={"steps": cfg.phase_steps})
        fit_seconds = time.perf_counter() - t0
        record = CycleRecord(self.step, self.pool.energy, self.best.energy, self.pool.dets.shape[0], batch.n_unique,
                             n_new, n_ext, fidelity, time.perf_counter() - began, sample_seconds, diagonalise_seconds,
                             fit_seconds)
        log.info("subspace cycle %d: E_var = %.10f (best %.10f), pool %d (+%d sampled, +%d by connection), "
                 "fidelity %.4f, %.1f s", self.step, record.energy, record.best_energy, record.n_pool, n_new, n_ext,
                 fidelity, record.seconds)
        self.step += 1
        return record

    def state_dict(self) -> dict:
        return {"step": self.step, "pool": pool_dict(self.pool), "best": pool_dict(self.best)}

    def load_state_dict(self, saved: dict) -> None:
        self.step = int(saved["step"])
        self.pool, self.best = pool_from_dict(saved["pool"]), pool_from_dict(saved["best"])


def pool_dict(pool: SubspaceState | CIState) -> dict:
    """A pool as plain tensors and numbers (a checkpoint's ``weights_only`` load reads it back)."""
    return {"energy": pool.energy, "dets": pool.dets, "coefficients": pool.coefficients}


def pool_from_dict(saved: dict) -> SubspaceState:
    """The pool :func:`pool_dict` saved."""
    from hamiltonians.subspace import SubspaceState

    return SubspaceState(float(saved["energy"]), saved["dets"], saved["coefficients"], 0)


def subspace_energy(H, state: VariationalState, pool: SubspaceState | CIState | None = None, *,
                    n_samples: int = 100_000) -> tuple[SubspaceState, int]:
    """The ground state of ``H`` on the unique configurations of ``n_samples`` draws from the
    network of ``state``, merged with ``pool`` if given; returns it and the number of sampled
    determinants that were not in ``pool``. Variational; never above ``pool``'s energy."""
    with torch.no_grad():
        batch = state.sample(n_samples)
    sampled = tokens_to_occupations(batch.tokens).to(torch.uint8).cpu()
    if pool is None:   # the network's amplitudes start the Lanczos
        with torch.no_grad():
            log_psi = state.model.log_psi(batch.tokens)
        amplitude = torch.exp(log_psi.real.double().cpu()) * torch.cos(log_psi.imag.double().cpu())
        return subspace_ground_state(H, sampled, v0=amplitude), int(sampled.shape[0])
    merged, n_new = merge(H, pool.dets, sampled)
    return subspace_ground_state(H, merged, v0=_start_vector(pool.coefficients, n_new)), n_new


def pool_pt2(H, pool: SubspaceState, config: SubspaceConfig, *, seed: int = 0) -> dict | None:
    """EN-PT2 on ``pool``'s eigenvector, as ``config.pt2`` says; ``result.json``'s fields:
    ``energy_pt2`` (``E_var + E2``), ``energy_pt2_stderr`` (0 when deterministic), ``e2``,
    ``rpt2_energy`` (``E_var`` + renormalised ``E2``), ``pt2_form``, ``pt2_seconds``; ``None`` with
    ``pt2 = "none"``."""
    from hamiltonians.pt2 import en_pt2, semistochastic_pt2

    mode = config.pt2
    if mode == "none":
        return None
    if mode == "auto":
        mode = "deterministic" if pool.dets.shape[0] <= config.pt2_exact_max else "semistochastic"
    began = time.perf_counter()
    if mode == "deterministic":
        exact = en_pt2(H, pool.dets, pool.coefficients, pool.energy)
        e2, stderr, rpt2, peak = exact.e_pt2, 0.0, exact.rpt2, exact.peak_bytes
    else:
        drawn = semistochastic_pt2(H, pool.dets, pool.coefficients, pool.energy,
                                   n_deterministic=config.pt2_deterministic, n_draws=config.pt2_draws,
                                   n_batches=config.pt2_batches, seed=seed)
        e2, stderr, rpt2, peak = drawn.e_pt2, drawn.stderr, drawn.rpt2, drawn.peak_bytes
    return {"energy_pt2": pool.energy + e2, "energy_pt2_stderr": stderr, "e2": e2, "rpt2_energy": pool.energy + rpt2,
            "pt2_form": f"{mode} Epstein-Nesbet, eigenvector of the pool", "pt2_peak_bytes": int(peak),
            "pt2_seconds": time.perf_counter() - began}


def final_subspace(H, state: VariationalState, pool: SubspaceState | CIState | None, config: SubspaceConfig, *,
                   seed: int = 0) -> tuple[dict, SubspaceState | None]:
    """``(fields, space)``: the run's subspace and PT2 energies (``result.json``'s fields) and
    the final space with its ground state (``None`` when there is none): the ground state on
    ``pool`` (the loop's best, or the start's space) merged with ``config.final_samples`` draws
    of the trained network (:func:`subspace_energy`), and :func:`pool_pt2` on it.

    Fields: ``energy_subspace`` (variational), ``subspace_size``, ``subspace_from_network`` (the
    sampled determinants the pool lacked), ``subspace_pool_energy`` (the pool's own energy,
    before the network's samples joined; ``None`` without a pool), ``subspace_seconds``, and
    :func:`pool_pt2`'s fields (``energy_pt2`` = ``energy_subspace`` + E2, with its error bar);
    with ``config.extrapolation``, :func:`extrapolation`'s fields."""
    began = time.perf_counter()
    if config.final_samples:
        space, n_new = subspace_energy(H, state, pool, n_samples=config.final_samples)
    elif pool is not None:
        space, n_new = subspace_ground_state(H, pool.dets, v0=pool.coefficients), 0
    else:
        return {}, None
    fields = {"energy_subspace": space.energy, "subspace_size": int(space.dets.shape[0]),
              "subspace_from_network": n_new, "subspace_pool_energy": None if pool is None else float(pool.energy),
              "subspace_seconds": time.perf_counter() - began}
    log.info("subspace energy: E_var = %.10f on %d determinants (%d from the network's samples)", space.energy,
             fields["subspace_size"], n_new)
    pt2 = pool_pt2(H, space, config, seed=seed)
    if pt2 is not None:
        fields.update(pt2)
        log.info("PT2: E_var + E2 = %.10f +- %.1e (%s)", pt2["energy_pt2"], pt2["energy_pt2_stderr"], pt2["pt2_form"])
        if config.extrapolation:
            fields.update(extrapolation(H, space, pt2, config, seed=seed))
    return fields, space


def extrapolation(H, space: SubspaceState, pt2: dict, config: SubspaceConfig, *, seed: int = 0) -> dict:
    """``E_var`` extrapolated to ``PT2 -> 0`` over ``space`` (whose PT2 is ``pt2``) and its
    truncations to the ``config.extrapolation`` fractions of its largest ``|c|`` (each
    re-diagonalised, with its own PT2): ``result.json``'s ``energy_extrapolated``,
    ``energy_extrapolated_stderr`` and ``extrapolation_points`` (``[{"size", "energy_var",
    "e2", "e2_stderr"}]``, smallest first)."""
    from hamiltonians.pt2 import extrapolate_pt2

    began = time.perf_counter()
    points = []
    for fraction in sorted(config.extrapolation):
        size = max(int(fraction * space.dets.shape[0]), 1)
        sub = _truncate(H, space, size)
        sub_pt2 = pool_pt2(H, sub, config, seed=seed)
        if sub_pt2 is not None and sub.dets.shape[0] < space.dets.shape[0]:
            points.append({"size": int(sub.dets.shape[0]), "energy_var": float(sub.energy), "e2": sub_pt2["e2"],
                           "e2_stderr": sub_pt2["energy_pt2_stderr"]})
    points.append({"size": int(space.dets.shape[0]), "energy_var": float(space.energy), "e2": pt2["e2"],
                   "e2_stderr": pt2["energy_pt2_stderr"]})
    try:
        fit = extrapolate_pt2([p["energy_var"] for p in points], [p["e2"] for p in points],
                              [p["e2_stderr"] for p in points])
    except ValueError as error:   # one support (a tiny space), or truncations that drop only zeros
        log.info("no PT2 extrapolation: %s", error)
        return {}
    log.info("E_var extrapolated to PT2 -> 0 over %d supports: %.10f +- %.1e", fit["points"], fit["energy"],
             fit["stderr"])
    return {"energy_extrapolated": fit["energy"], "energy_extrapolated_stderr": fit["stderr"],
            "extrapolation_points": points, "extrapolation_seconds": time.perf_counter() - began}
