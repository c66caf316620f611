"""The whole method as one object in memory: ``nnqs.NNQS(config).kernel(H)``.

:class:`NNQS` runs, on a Hamiltonian it is given (no file is read or written):

    the start (a selected-CI target and the network's fit, :class:`nnqs.training.start.Start`)
    -> the subspace loop (:class:`nnqs.training.subspace.SubspaceDriver`, ``[subspace] cycles``)
    -> VMC (:func:`nnqs.training.driver.build_vmc`) -> the final evaluation
    (:func:`nnqs.training.evaluation.final_evaluation`) -> the final space and its PT2
    (:func:`nnqs.training.subspace.final_subspace`)

and returns an :class:`NNQSResult` (every energy labelled, the network, the pool, the final
space). Its phases are methods (:meth:`NNQS.prepare`, :meth:`NNQS.start`, :meth:`NNQS.train`,
:meth:`NNQS.finish`) that ``nnqs run`` (:mod:`nnqs.app.run`) calls one by one with its callbacks
in between: progress, metrics, checkpoints and signals are callbacks of the drivers; the run
folder, the references and ``result.json`` are the application's.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from hamiltonians.protocol import Hamiltonian
from hamiltonians.sci.diagonalise import diagonalise
from hamiltonians.sci.state import SCIState
from nnqs.app.presets import log_preset, resolve
from nnqs.app.provenance import provenance
from nnqs.app.references import reference_fields
from nnqs.app.runconfig import ConfigError, RunConfig, check_device, config_from_dict
from nnqs.app.system import System, arranged, build_model
from nnqs.errors import InputError
from nnqs.parallel.comm import LOCAL, Communicator
from nnqs.training.callbacks import StopOnPlateau
from nnqs.training.driver import build_vmc
from nnqs.training.evaluation import final_evaluation, p_hf
from nnqs.training.memory import MemoryPlan, Sizes, available_memory, check_memory, gib, plan_memory
from nnqs.training.memory_peaks import PeakMemory, phase, resident_bytes
from nnqs.training.settings import last_regime_start
from nnqs.training.origins import Origins
from nnqs.training.start import Start
from nnqs.training.subspace import SubspaceDriver, final_subspace, join

if TYPE_CHECKING:
    from hamiltonians.molecular import MolecularHamiltonian
    from nnqs.training.driver import VMC
    from nnqs.wavefunction.model import TransformerWavefunction

log = logging.getLogger(__name__)

#: The version of ``result.json``'s fields (docs/result.md); raised when a field changes meaning.
RESULT_SCHEMA_VERSION = 1


@dataclass
class NNQSResult:
    """What a run found. Every energy in Hartree, labelled by what it is (the README's table
    "Which energy to report"):

    Attributes:
        energy, energy_stderr: the network's VMC energy (a Monte Carlo estimate of its
            ``<H>``) and its statistical error.
        energy_subspace: ``E_var`` of the final determinant space (variational); ``None`` without one.
        energy_pt2, energy_pt2_stderr: ``E_var`` + EN-PT2 and its error bar (0 when deterministic).
        energy_extrapolated, energy_extrapolated_stderr: ``E_var`` extrapolated to ``PT2 -> 0``.
        fields: ``result.json``'s fields (these and everything else a run records).
        model: the trained network; ``pool``: the loop's best pool (or the start's space);
        space: the final space with its ground state (``hamiltonians.sci.state.SCIState``);
        ``pool`` and ``space`` hold determinants in the network's orbital order, ``order``
        (``order[i]`` the molecule's orbital at position ``i``; :meth:`dets_in_molecule_order`).
        stopped_at: the step an interrupted run stopped at (``None`` for a finished one).
    """

    fields: dict
    model: torch.nn.Module
    pool: SCIState | None = None
    space: SCIState | None = None
    order: list | None = None
    stopped_at: int | None = None
    energy: float | None = field(init=False)
    energy_stderr: float | None = field(init=False)
    energy_subspace: float | None = field(init=False)
    energy_pt2: float | None = field(init=False)
    energy_pt2_stderr: float | None = field(init=False)
    energy_extrapolated: float | None = field(init=False)
    energy_extrapolated_stderr: float | None = field(init=False)

    def __post_init__(self) -> None:
        for name in ("energy", "energy_stderr", "energy_subspace", "energy_pt2", "energy_pt2_stderr",
                     "energy_extrapolated", "energy_extrapolated_stderr"):
            setattr(self, name, self.fields.get(name))

    def dets_in_molecule_order(self) -> torch.Tensor | None:
        """The final space's determinants uint8 ``[D, 2N]`` in the molecule's orbital order."""
        from nnqs.app.trained import in_molecule_order

        if self.space is None:
            return None
        return in_molecule_order(self.space.dets, self.order or list(range(self.space.dets.shape[1] // 2)))

    @property
    def e_tot(self) -> float | None:
        """The best estimate: extrapolated, else ``E_var`` + PT2, else ``E_var``, else the VMC energy."""
        for value in (self.energy_extrapolated, self.energy_pt2, self.energy_subspace, self.energy):
            if value is not None:
                return float(value)
        return None


class Clock:
    """A run's seconds, each carried over from a checkpoint on resume: the start's wall time, the
    training's (from :meth:`training`), and this process's CPU time (all its threads)."""

    def __init__(self, state: dict | None = None) -> None:
        state = state or {}
        self.wall_before = float(state.get("wall_seconds", 0.0))
        self.start_seconds = float(state.get("start_seconds", 0.0))
        self.cpu_before = float(state.get("cpu_seconds", 0.0))
        self.began = self.training_began = time.perf_counter()
        self.cpu_began = time.process_time()

    def training(self) -> None:
        """The training starts now (after the start, if any)."""
        self.training_began = time.perf_counter()

    def wall(self) -> float:
        return self.wall_before + time.perf_counter() - self.training_began

    def times(self) -> dict:
        return {"wall_seconds": self.wall(), "start_seconds": self.start_seconds,
                "cpu_seconds": self.cpu_before + time.process_time() - self.cpu_began}


def system_of(H: MolecularHamiltonian, config: RunConfig) -> System:
    """A :class:`~nnqs.app.system.System` for integrals ``H`` given in memory (no references):
    its reference determinant found and the orbitals moved into ``[molecule] orbital_order``
    (:func:`~nnqs.app.system.arranged`)."""
    return arranged(config.molecule, H, {}, rotate=False)


class NNQS:
    """The method in memory (see the module). PySCF's shape: settings, ``dump_flags()``, ``kernel()``.

    Attributes (settings):
        config: the :class:`~nnqs.app.runconfig.RunConfig` (its presets resolved by :meth:`prepare`).
        comm: the processes of the run.
    Attributes (state, after :meth:`prepare`):
        system, H, model, driver (VMC), preset, clock; after :meth:`start`: ``start_summary``,
        ``start_p_hf``, ``pool`` (the loop's best, or the start's space); after :meth:`finish`: ``result``.
    """

    def __init__(self, config: RunConfig | dict | None = None, *, comm: Communicator = LOCAL) -> None:
        if config is None:
            config = {}
        if not isinstance(config, RunConfig):
            config = config_from_dict({"molecule": {"name": "in_memory", "fcidump": "in memory"}, **config}
                                      if "molecule" not in config else config)
        self.config, self.comm = config, comm
        self.system: System | None = None
        self.model: TransformerWavefunction | None = None
        self.driver: VMC | None = None
        self.pool: SCIState | None = None
        self.result: NNQSResult | None = None
        self.preset: dict | None = None
        self.memory = PeakMemory()                  # the phases' measured peaks (prepare starts it afresh)
        self.memory_plan: MemoryPlan | None = None  # what prepare planned
        self.start_summary: dict | None = None
        self.start_p_hf = float("nan")
        self.clock = Clock()
        self.origins = Origins()   # where each determinant of the pools came from
        self.resumed = False

    @property
    def H(self) -> MolecularHamiltonian | None:
        return self.driver.H if self.driver is not None else None

    def _prepared(self) -> tuple[System, TransformerWavefunction, VMC]:
        """``(system, model, driver)``, which :meth:`prepare` sets (the later phases need them)."""
        assert self.system is not None and self.model is not None and self.driver is not None, \
            "NNQS.prepare comes first"
        return self.system, self.model, self.driver

    def dump_flags(self) -> NNQS:
        if self.preset is not None:
            log_preset(self.preset)
        self.config.dump_flags()
        return self

    # --- the phases ---------------------------------------------------------------------------
    def prepare(self, system: System, *, checkpoint: dict | None = None, checkpoint_path=None,
                extend: bool = False) -> NNQS:
        """Resolve the presets for ``system``, build the network and the VMC driver, check the
        memory plan and the start's settings (one-line :class:`ConfigError`); with
        ``checkpoint`` (a run's saved state, read from ``checkpoint_path``) check its steps
        (``extend`` allows more) and restore the driver, the start's record and the pool."""
        check_device(self.config.run.device)
        if self.config.run.threads:
            torch.set_num_threads(self.config.run.threads)  # PySCF's OpenMP follows it
        torch.manual_seed(self.config.run.seed)
        self.system = system
        self.resumed, self.pool, self.origins, self.result = checkpoint is not None, None, Origins(), None
        self.loop: SubspaceDriver | None = None   # the subspace loop while it runs
        self._saved_loop = checkpoint.get("loop") if checkpoint is not None else None
        H = system.hamiltonian.to(device=self.config.run.device)
        self.config, self.preset = resolve(self.config, H.n_determinants, 2 * H.n_orbitals, checkpoint=checkpoint)
        if checkpoint is not None:
            _check_steps(self.config, checkpoint, checkpoint_path, extend)
        self.model = build_model(self.config.model, system).to(self.config.run.device)
        self.model.compile_passes(self.config.run.compile)
        fits = checkpoint is None and self.config.start.mode not in ("none", "hf")
        self.memory = PeakMemory()
        self.memory_plan = _check_memory(self.config, self.model, H, fits=fits)
        if checkpoint is None:
            _check_start(self.config, H)
        if self.comm.is_main:   # the input checked: what runs
            self.dump_flags()
        self.driver = build_vmc(self.model, H, self.config.optim, self.config.sampler, self.config.local_energy,
                                seed=self.config.run.seed, comm=self.comm)
        self.clock = Clock(checkpoint)
        if checkpoint is not None:
            try:
                self.driver.load_state_dict(checkpoint["trainer"])
            except (RuntimeError, KeyError, ValueError) as error:
                first = str(error).strip().splitlines()[0]
                raise ConfigError(f"--resume: {checkpoint_path} does not match this config ({first})") from None
            log.info("resumed from %s at step %d", checkpoint_path, self.driver.step)
            self.start_p_hf, self.start_summary = float(checkpoint["p_hf"]), checkpoint.get("start")
            self.pool = SCIState.from_dict(checkpoint["subspace"]) if checkpoint.get("subspace") else None
            self.origins = Origins.from_state_dict(checkpoint.get("origins"))
            self.resumed = True
        return self

    @property
    def resume_cycle(self) -> int | None:
        """The cycles of the subspace loop a resumed run's checkpoint holds (``None``: it holds no
        running loop)."""
        return int(self._saved_loop["step"]) if self._saved_loop is not None else None

    def start(self, *, initial_model: dict | None = None, initial_pool=None, cycle_callbacks: Sequence = (),
              started=None) -> NNQS:
        """The start (fit to a CI target) and, with ``[subspace] cycles``, the subspace loop
        (``cycle_callbacks`` see each cycle's record; while it runs, :attr:`loop` is its
        :class:`~nnqs.training.subspace.SubspaceDriver`, whose ``state_dict()`` a checkpoint
        saves as ``"loop"``); ``started()`` is called once the start is fitted (and the loop
        built). A resumed run skips both, except a loop checkpointed between its cycles, which
        goes on from there. ``initial_model``: weights to start from (the start then refits them);
        ``initial_pool``: determinants uint8 ``[D, 2N]`` (or a state) in the molecule's orbital
        order, joined to the first pool and re-diagonalised (a warm start from a nearby problem)."""
        with self.memory.recording():
            return self._start(initial_model, initial_pool, cycle_callbacks, started)

    def _start(self, initial_model, initial_pool, cycle_callbacks, started) -> NNQS:
        if self.resumed:
            saved = self._saved_loop
            if saved is not None and int(saved["step"]) < (self.config.subspace.cycles or 0):
                _, _, driver = self._prepared()
                self.loop = SubspaceDriver.from_state_dict(driver.H, driver.state, self.config.subspace, saved)
                self.pool = self._run_loop(cycle_callbacks)
            return self
        system, model, driver = self._prepared()
        weights, self.start_summary, pool = self.comm.run_on_main(lambda: self._fit_start(initial_model))
        driver.start_from(weights)
        self.clock.start_seconds = time.perf_counter() - self.clock.began
        self.start_p_hf = p_hf(model, system.hf_tokens)
        self.origins = Origins()
        if pool is not None:
            self.origins.add(pool.dets, "start")
        if initial_pool is not None:
            from hamiltonians.determinants import occupations_in_order

            dets = occupations_in_order(torch.as_tensor(getattr(initial_pool, "dets", initial_pool)).to(torch.uint8)
                                        .cpu(), system.order)
            pool = diagonalise(driver.H, dets) if pool is None else join(driver.H, pool, dets)[0]
            self.origins.add(dets, "start")   # what a warm start is given counts as the start
        self.pool = pool
        if self.config.subspace.cycles:
            self.loop = self._new_loop(pool)
        if started is not None:
            started()
        if self.loop is not None:
            self.pool = self._run_loop(cycle_callbacks)
        return self

    def train(self, *, callbacks: Sequence = (), stop_after: int | None = None, history: tuple = ((), ())) -> bool:
        """VMC to ``[optim] steps`` (or ``stop_after``), stopping early on a plateau
        (:class:`~nnqs.training.callbacks.StopOnPlateau`, which sees ``history``: the energies and
        errors of the steps before a resume); ``callbacks`` run after each step. Returns whether
        it stopped on the plateau."""
        _, _, driver = self._prepared()
        target = self.target(stop_after)
        stop = StopOnPlateau(self.config.stop, last_regime_start(self.config.optim, self.config.local_energy),
                             comm=self.comm, energies=history[0], stderrs=history[1])
        self.clock.training()
        with self.memory.recording(), phase("vmc"):
            return driver.run(target, [*callbacks, stop])

    def target(self, stop_after: int | None = None) -> int:
        steps = self.config.optim.steps
        assert steps is not None   # the presets resolved (prepare)
        return steps if stop_after is None else min(stop_after, steps)

    def finish(self, *, stopped_early: bool = False) -> NNQSResult:
        """The final evaluation, the final space and its PT2: the :class:`NNQSResult`."""
        system, model, driver = self._prepared()
        comm = self.comm
        wall = self.clock.wall()  # the training's; the evaluation has its own seconds
        with self.memory.recording():
            with phase("evaluation"):
                evaluation = final_evaluation(driver, system.hf_tokens)
            subspace, space = final_subspace(driver.H, driver.state, self.pool, self.config.subspace,
                                             seed=self.config.run.seed, origins=self.origins) \
                if comm.world_size == 1 else ({}, None)
        fields = {**evaluation.to_dict(), **subspace}
        fields = {
            "schema_version": RESULT_SCHEMA_VERSION,
            "molecule": self.config.molecule.name,
            **fields,
            **reference_fields(system.references, fields),
            "steps": driver.step,
            "n_orbitals": driver.H.n_orbitals,
            "n_alpha": driver.H.n_alpha,
            "n_beta": driver.H.n_beta,
            "n_determinants": driver.H.n_determinants,
            "orbital_order": system.order,
            "reference_determinant": system.reference.to_dict() if system.reference is not None else None,
            "orbitals": system.orbitals.to_dict() if system.orbitals is not None else {"kind": "given"},
            "start": self.start_summary,
            "p_hf_after_start": self.start_p_hf,
            "device": str(driver.model.device),
            "threads": torch.get_num_threads(),
            "processes": comm.world_size,
            "provenance": provenance(),
            "config": self.config.to_dict(),
            **self.clock.times(),
            "preset": self.preset,
            "stopped_early": stopped_early,
            "wall_seconds": wall,
            "memory": {"plan": self.memory_plan.to_dict() if self.memory_plan is not None else None,
                       "measured": self.memory.to_dict()},
        }
        self.result = NNQSResult(fields, model, self.pool, space, system.order)
        return self.result

    def kernel(self, H: MolecularHamiltonian | None = None, *, system: System | None = None, callbacks: Sequence = (),
               cycle_callbacks: Sequence = (), initial_model: dict | None = None, initial_pool=None) -> NNQSResult:
        """The whole method on ``H`` (a :class:`hamiltonians.MolecularHamiltonian`, orbitals in the
        molecule's order, moved into ``[molecule] orbital_order``) or on a built ``system``.
        Returns the :class:`NNQSResult` (also :attr:`result`)."""
        if (H is None) == (system is None):
            raise InputError("NNQS.kernel needs exactly one of H and system")
        if system is None:
            assert H is not None   # exactly one of them
            system = system_of(H, self.config)
        self.prepare(system)
        self.start(initial_model=initial_model, initial_pool=initial_pool, cycle_callbacks=cycle_callbacks)
        stopped_early = self.train(callbacks=callbacks)
        return self.finish(stopped_early=stopped_early)

    # --- the pieces ---------------------------------------------------------------------------
    def _fit_start(self, initial_model: dict | None):
        """The start on the network; returns its weights (CPU), what ``result.json`` records of
        it, and its CI target (the loop's first pool)."""
        config = self.config
        system, model, driver = self._prepared()
        if initial_model is not None:
            model.load_state_dict(initial_model)

        def fresh_model():
            torch.manual_seed(config.run.seed + 1)
            fresh = build_model(config.model, system).to(model.device)
            fresh.compile_passes(config.run.compile)
            return fresh

        start = Start(config.start)
        start.dump_flags()
        start.kernel(model, driver.H, hf_occupation=system.hf_occupation, order=system.order, fresh_model=fresh_model)
        return {k: v.cpu() for k, v in model.state_dict().items()}, start.summary(), start.target

    def _new_loop(self, pool) -> SubspaceDriver:
        """The loop after the start, on its first pool (the start's space, else the HF
        determinant). One process only (its diagonalisations are not split)."""
        if self.comm.world_size > 1:
            raise ConfigError("[subspace] cycles runs on one process (its diagonalisation is not split over ranks)")
        system, _, driver = self._prepared()
        if pool is None:
            pool = diagonalise(driver.H, system.hf_occupation.to(torch.uint8).cpu()[None])
        return SubspaceDriver(driver.H, driver.state, self.config.subspace, pool, origins=self.origins)

    def _run_loop(self, callbacks: Sequence):
        """:attr:`loop`'s remaining cycles; the network it fitted becomes VMC's start. Returns the
        best pool."""
        _, _, driver = self._prepared()
        loop = self.loop
        assert loop is not None and self.config.subspace.cycles is not None   # built, the presets resolved
        loop.run(self.config.subspace.cycles, list(callbacks))
        driver.guard.mark_good()   # the fitted network is VMC's start
        self.origins, self.loop = loop.origins, None
        return loop.best


def _check_steps(config: RunConfig, state: dict, path, extend: bool) -> None:
    """The checkpoint at ``path`` has this (resolved) config's steps, or ``extend`` allows more."""
    old, new = state.get("config", {}).get("optim", {}).get("steps"), config.optim.steps
    if old != new and not extend:
        raise ConfigError(f"--resume: the checkpoint's run has steps = {old}, this config {new}; pass --extend "
                          "to change it (the learning-rate schedule is recomputed over the new total)")
    if new < state["trainer"]["step"]:
        raise ConfigError(f"--resume: the checkpoint is already at step {state['trainer']['step']} > steps = {new}")


def _check_start(config: RunConfig, H: Hamiltonian) -> None:
    """A ``[start] cas`` window that does not fit the molecule: the error's one line, before any
    log line and any work."""
    try:
        Start(config.start).check(H)
    except InputError as error:
        raise ConfigError(f"[start] {error}") from None


def _check_memory(config: RunConfig, model, H: Hamiltonian, *, fits: bool) -> MemoryPlan:
    """Stop before the start (:class:`ConfigError`, one line) when the run's estimated peak
    memory (:func:`nnqs.training.memory.plan_memory` at :func:`plan_sizes`) exceeds ``[run]
    max_memory_gib`` or what the process holds plus what the machine has available (shared by this
    node's processes)."""
    in_use = resident_bytes()
    optim = config.optim
    method = "adamw" if optim.adamw_phase >= (optim.steps or 0) else optim.method or "adamw"   # the rule that runs
    plan = plan_memory(model, H, sizes=plan_sizes(config, H, fits=fits), method=method,
                       sr_top=config.optim.sr_top, cache_bytes=config.sampler.max_cache_bytes,
                       grad_chunk=config.optim.grad_chunk, process_bytes=in_use,
                       extend_bytes=int(config.subspace.extend_mib * 2**20))
    available = available_memory()
    if available is not None:
        available = in_use + available // max(int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1), 1)
    limits = [v for v in (gib(config.run.max_memory_gib), available) if v is not None]
    log.info("memory plan: %s; the process may hold %s", plan.describe(),
             f"{min(limits) / 2**30:.2f} GiB" if limits else "an unknown amount")
    problem = check_memory(plan, min(limits) if limits else None)
    if problem:
        raise ConfigError(problem)
    return plan


def plan_sizes(config: RunConfig, H: Hamiltonian, *, fits: bool) -> Sizes:
    """The :class:`~nnqs.training.memory.Sizes` a run of ``config`` on ``H`` may reach: the unique
    window's upper end, the start's CI space (``"sci"``: ``sci_determinants`` or twice CISD; a CAS
    union counted as CISD and 400; ``seeds`` added, twice for ``"sci"``), the loop's pool grown by ``extend`` and a tenth as many new
    samples a cycle up to ``pool``, the final space (that pool and a tenth of ``extend`` from the
    final draws), PT2 as ``[subspace] pt2`` says."""
    sampler, start, sub = config.sampler, config.start, config.subspace
    assert sampler.n_samples is not None   # the presets resolved
    n_det = H.n_determinants
    n_unique = sampler.unique_window[1] if sampler.unique_window else min(sampler.n_samples, n_det)
    n_unique = min(max(n_unique, sampler.max_unique), n_det)
    space = 0
    if fits and start.mode not in ("none", "hf"):
        cisd = cisd_size(H)
        seeded = start.seeds * (2 if start.mode == "sci" else 1)   # "sci" grows its seeded space twice over
        space = cisd if start.mode == "cisd" else cisd + 400 if start.mode in ("auto", "cisd_cas", "casci") \
            else max(start.sci_determinants, 2 * cisd)
        space = min(space + seeded, n_det)
    cycles = sub.cycles or 0
    growth = sub.extend + max(1, sub.extend // 10)
    pool = min(sub.pool, space + max(cycles - 1, 0) * growth, n_det) if cycles else 0
    loop_space = min(pool + growth, n_det) if cycles else 0
    final = min((min(sub.pool, space + cycles * growth) if cycles else space) + (sub.extend // 10 if sub.final_samples
                                                                                   else 0), n_det)
    deterministic = sub.pt2 == "deterministic" or (sub.pt2 == "auto" and final <= sub.pt2_exact_max)
    n_eval = sampler.eval_samples or 10 * sampler.n_samples
    return Sizes(n_unique=n_unique, eval_unique=min(n_eval, n_det), loop_unique=min(sub.n_samples, n_det) if cycles else 0,
                 start_rows=(start.max_determinants + start.tail) if space else 0,
                 loop_rows=(sub.fit_determinants + sub.fit_tail) if cycles and sub.fit_steps else 0,
                 phase_rows=max(start.phase_determinants, 8192 if cycles else 0), start_space=space,
                 loop_pool=pool, loop_space=loop_space, final_space=final,
                 pt2_parents=0 if sub.pt2 == "none" else final if deterministic else min(sub.pt2_deterministic, final),
                 pt2_draws=0 if deterministic or sub.pt2 == "none" else sub.pt2_draws)


def cisd_size(H: Hamiltonian) -> int:
    """Determinants of CISD on ``H``'s lowest-index determinant (HF, the singles and the doubles)."""
    n, a, b = H.n_orbitals, H.n_alpha, H.n_beta
    single_a, single_b = a * (n - a), b * (n - b)
    return int(1 + single_a + single_b + math.comb(a, 2) * math.comb(n - a, 2) + math.comb(b, 2) * math.comb(n - b, 2)
               + single_a * single_b)
