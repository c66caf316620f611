"""``nnqs run``: a VMC run end to end, with outputs per docs/design.md §7.

Composes the layers below: the system (:mod:`nnqs.app.system`), the network, the start
(:class:`nnqs.training.start.Start`), the variational state and the VMC driver
(:mod:`nnqs.training.state`, :mod:`nnqs.training.driver`), the callbacks (:mod:`nnqs.app.callbacks`)
and the final evaluation (:mod:`nnqs.training.evaluation`); this module holds no training logic, only what a run reads and writes. Into the output folder: ``hamiltonian.fcidump`` (the
integrals trained on), ``provenance.json`` (the code and config of each session of the run),
``metrics.csv`` (one row per step), ``checkpoint.pt`` (atomic; ``--resume`` continues from it
exactly), ``convergence.png`` and ``result.json``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from nnqs.app.callbacks import Checkpoints, CycleLog, Progress
from nnqs.app.folder import claim_run_folder
from nnqs.app.io import load_checkpoint, write_json
from nnqs.app.provenance import provenance
from nnqs.app.report import MetricsLog, write_result
from nnqs.app.presets import log_preset, resolve
from nnqs.app.references import reference_fields
from nnqs.app.runconfig import ConfigError, RunConfig, check_device, config_from_dict
from nnqs.app.signals import SignalStop, StopNow
from nnqs.app.system import System, build_model, complete_references, run_system
from nnqs.app.trained import SUBSPACE_FILE, save_subspace
from nnqs.errors import InputError
from nnqs.parallel.comm import LOCAL, Communicator
from nnqs.training.convergence import variance_extrapolation
from nnqs.training.callbacks import StopOnPlateau
from nnqs.training.driver import build_vmc
from nnqs.training.evaluation import final_evaluation, p_hf
from nnqs.training.memory import available_memory, check_memory, gib, plan_memory
from nnqs.training.settings import last_regime_start
from nnqs.training.start import Start
from nnqs.training.subspace import SubspaceDriver, final_subspace, pool_dict, pool_from_dict, subspace_ground_state

log = logging.getLogger(__name__)


#: The version of ``result.json``'s fields (docs/result.md); raised when a field changes meaning.
RESULT_SCHEMA_VERSION = 1

def run(
    config: RunConfig,
    out_dir: str | Path,
    *,
    resume: bool = False,
    overwrite: bool = False,
    extend: bool = False,
    stop_after: int | None = None,
    progress: bool = True,
    initial_model: dict | None = None,
    comm: Communicator = LOCAL,
) -> dict:
    """Run VMC as configured; return the result dictionary (also written to ``result.json``).

    The folder is held by this run alone (:func:`nnqs.app.folder.claim_run_folder`). With
    several processes (``comm``, from :func:`nnqs.parallel.init_from_env` under torchrun), every
    rank calls this: rank 0 alone claims the folder, builds the system (PySCF, references),
    fits the start, reads and writes checkpoints, metrics, plots and ``result.json``, and hands
    what the others need over collectives; each step's sampling, local energies and update are
    split over the ranks (:class:`nnqs.training.state.VariationalState`). An error on rank 0 before the
    first step is raised on every rank; one later (a checkpoint that cannot be written) ends rank
    0, and the others stop with :class:`nnqs.parallel.RankLostError`.

    Args:
        config: the run configuration.
        out_dir: output folder (created); one that holds a run needs ``resume`` or ``overwrite``.
        resume: continue from ``out_dir/checkpoint.pt``; the checkpoint's ``[molecule]`` and
            step count must be this config's (``extend`` allows more steps: the learning-rate
            schedule is then recomputed over the new total).
        overwrite: delete a previous run's outputs in ``out_dir`` and start afresh.
        stop_after: stop (with a checkpoint) once this many steps are done, as if interrupted;
            ``None`` runs to ``config.optim.steps`` and writes the result.
        progress: show a progress bar.
        initial_model: a model ``state_dict`` to start from (a warm start, e.g. from a nearby
            geometry); the configured start then refits it to this system (the orbitals'
            signs can change between geometries).
        comm: the processes of this run (default: this one alone).
    """
    check_device(config.run.device)
    provenance()   # read (and cached) now: the code as launched, not as the checkout stands when a file is written
    if config.molecule.geometry and not _importable("pyscf"):
        raise ConfigError("a [molecule] geometry needs PySCF for its integrals: pip install 'nnqs[chem]' "
                          "(or run from an FCIDUMP file)")
    with contextlib.ExitStack() as held:
        signals = held.enter_context(SignalStop(comm))
        out = comm.run_on_main(lambda: held.enter_context(claim_run_folder(out_dir, resume=resume,
                                                                           overwrite=overwrite)))
        return _run_in(config, out, resume=resume, extend=extend, stop_after=stop_after,
                       progress=progress and comm.is_main, initial_model=initial_model, comm=comm, signals=signals)


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False


def _check_resumable(config: RunConfig, state: dict, path: Path) -> None:
    """The checkpoint at ``path`` is a run of this config's molecule."""
    saved = state.get("config", {})
    try:
        saved_molecule = config_from_dict({"molecule": saved["molecule"]}).to_dict()["molecule"]
    except (KeyError, TypeError, ConfigError):
        raise ConfigError(f"--resume: {path} holds no usable [molecule]; nothing changed") from None
    if _molecule_only(saved_molecule) != _molecule_only(config.to_dict()["molecule"]):
        raise ConfigError(f"--resume: {path} is a run of another [molecule] than this config's; nothing changed")
    if saved.get("optim", {}).get("anchors") or state["trainer"].get("anchors") is not None:
        raise ConfigError(f"--resume: {path} is a run with anchors, which were removed; it cannot continue "
                          "without changing its numbers (start it afresh)")


def _check_steps(config: RunConfig, state: dict, path: Path, extend: bool) -> None:
    """The checkpoint at ``path`` has this (resolved) config's steps, or ``extend`` allows more."""
    old, new = state.get("config", {}).get("optim", {}).get("steps"), config.optim.steps
    if old != new and not extend:
        raise ConfigError(f"--resume: the checkpoint's run has steps = {old}, this config {new}; pass --extend "
                          "to change it (the learning-rate schedule is recomputed over the new total)")
    if new < state["trainer"]["step"]:
        raise ConfigError(f"--resume: the checkpoint is already at step {state['trainer']['step']} > steps = {new}")


def _molecule_only(molecule: dict) -> dict:
    """A ``[molecule]`` table without the keys that say which references to compute."""
    return {k: v for k, v in molecule.items() if k not in ("dmrg", "slow_references")}


def _read_checkpoint(config: RunConfig, ckpt_path: Path) -> dict:
    if not ckpt_path.exists():
        raise ConfigError(f"--resume: no checkpoint at {ckpt_path}")
    state = load_checkpoint(ckpt_path, map_location="cpu")
    _check_resumable(config, state, ckpt_path)
    return state


def _fit_start(model, config: RunConfig, system: System, H, initial_model: dict | None) -> tuple[dict, dict]:
    """The start (:class:`nnqs.training.start.Start`) on ``model``; returns its weights (CPU)
    and what ``result.json`` records of it."""
    if initial_model is not None:
        model.load_state_dict(initial_model)

    def fresh_model():
        torch.manual_seed(config.run.seed + 1)
        return build_model(config.model, system).to(model.device)

    start = Start(config.start)
    start.dump_flags()
    start.kernel(model, H, hf_occupation=system.hf_occupation, order=system.order, fresh_model=fresh_model)
    return {k: v.cpu() for k, v in model.state_dict().items()}, start.summary(), start.target


def _check_start(config: RunConfig, H) -> None:
    """A ``[start] cas`` window that does not fit the molecule: the error's one line, before any
    log line and any work."""
    try:
        Start(config.start).check(H)
    except InputError as error:
        raise ConfigError(f"[start] {error}") from None


def _check_memory(config: RunConfig, model, H, *, fits: bool) -> None:
    """Stop before the start (:class:`ConfigError`, one line) when a step's estimated peak
    memory (:func:`nnqs.training.memory.plan_memory`, at the unique window's upper end) exceeds
    ``[run] max_memory_gib`` or what the machine has available (shared by this node's processes)."""
    sampler, start = config.sampler, config.start
    n_unique = sampler.unique_window[1] if sampler.unique_window else min(sampler.n_samples, H.n_determinants)
    if sampler.max_unique:
        n_unique = max(n_unique, sampler.max_unique)
    plan = plan_memory(model, H, n_unique=min(n_unique, H.n_determinants), method=config.optim.method,
                       sr_top=config.optim.sr_top, cache_bytes=sampler.max_cache_bytes,
                       grad_chunk=config.optim.grad_chunk,
                       fit_batch=(start.max_determinants + start.tail) if fits else 0)
    available = available_memory()
    if available is not None:
        available //= max(int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1), 1)
    limits = [v for v in (gib(config.run.max_memory_gib), available) if v is not None]
    log.info("memory plan: %s; available %s", plan.describe(),
             f"{min(limits) / 2**30:.2f} GiB" if limits else "unknown")
    problem = check_memory(plan, min(limits) if limits else None)
    if problem:
        raise ConfigError(problem)


def _on_main(comm: Communicator, fn):
    """``fn()`` on rank 0 alone, its value kept there (``None`` on the others); an error
    raises on every rank."""
    kept = []
    comm.run_on_main(lambda: kept.append(fn()))
    return kept[0] if kept else None


class _Clock:
    """The run's seconds, each carried over from the checkpoint on resume: the start's wall
    time, the training's (from :meth:`training`), and this process's CPU time (all its
    threads, start and evaluation included: with one thread, the time the run takes on a core
    of its own, whatever else shares the machine)."""

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


def _write_provenance(path: Path, config: RunConfig, step: int, resume: bool) -> None:
    """``provenance.json``: one entry per session of the run (a fresh run starts the list, a
    resume adds to it): the code (version, commit, dirty), the time, the first step and the
    effective config of that session."""
    sessions = []
    if resume and path.exists():
        with contextlib.suppress(ValueError, OSError, KeyError, TypeError):
            sessions = list(json.loads(path.read_text())["sessions"])
    sessions.append({**provenance(), "from_step": step, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                     "config": config.to_dict()})
    write_json(path, {"sessions": sessions})


def _run_in(config: RunConfig, out: Path, *, resume: bool, extend: bool, stop_after: int | None, progress: bool,
            initial_model: dict | None, comm: Communicator, signals: SignalStop) -> dict:
    if config.run.threads:
        torch.set_num_threads(config.run.threads)  # PySCF's OpenMP follows it
    torch.manual_seed(config.run.seed)
    ckpt_path = out / "checkpoint.pt"
    # Read before anything is written; rank 0 reads, every rank gets it.
    state = comm.run_on_main(lambda: _read_checkpoint(config, ckpt_path)) if resume else None
    system = comm.run_on_main(lambda: run_system(config.molecule, out, resume=resume))
    H = system.hamiltonian.to(device=config.run.device)
    config, preset = resolve(config, H.n_determinants, 2 * H.n_orbitals, checkpoint=state)
    if state is not None:
        _check_steps(config, state, ckpt_path, extend)
    model = build_model(config.model, system).to(config.run.device)
    _check_memory(config, model, H, fits=not resume and config.start.mode not in ("none", "hf"))
    if not resume:
        _check_start(config, H)
    if comm.is_main:   # the input checked: what runs
        log_preset(preset)
        config.dump_flags()
    driver = build_vmc(model, H, config.optim, config.sampler, config.local_energy, seed=config.run.seed, comm=comm)
    clock = _Clock(state)

    if resume:
        try:
            driver.load_state_dict(state["trainer"])
        except (RuntimeError, KeyError, ValueError) as error:
            first = str(error).strip().splitlines()[0]
            raise ConfigError(f"--resume: {ckpt_path} does not match this config ({first})") from None
        start_p_hf, start_summary = float(state["p_hf"]), state.get("start")
        pool = pool_from_dict(state["subspace"]) if state.get("subspace") else None
        log.info("resumed from %s at step %d", ckpt_path, driver.step)
    else:
        weights, start_summary, pool = comm.run_on_main(lambda: _fit_start(model, config, system, H, initial_model))
        driver.start_from(weights)
        clock.start_seconds = time.perf_counter() - clock.began
        start_p_hf = p_hf(model, system.hf_tokens)
        if config.subspace.cycles:
            pool = _subspace_loop(config, H, driver, pool, system, out, comm)

    def open_outputs() -> MetricsLog:
        _write_provenance(out / "provenance.json", config, driver.step, resume)
        return MetricsLog(out / "metrics.csv", system.references.get("fci"), resume_step=driver.step if resume else None)

    metrics = _on_main(comm, open_outputs)   # an error opening them stops every rank
    target = config.optim.steps if stop_after is None else min(stop_after, config.optim.steps)
    checkpoints = Checkpoints(ckpt_path, every=config.run.checkpoint_every, seconds=config.run.checkpoint_seconds,
                              target=target, comm=comm, metrics=metrics, payload=lambda: {
                                  "config": config.to_dict(), "p_hf": start_p_hf, "start": start_summary,
                                  "preset": preset, "subspace": pool_dict(pool) if pool is not None else None,
                                  **clock.times()})
    stop = StopOnPlateau(config.stop, last_regime_start(config.optim, config.local_energy), comm=comm,
                         energies=metrics.column("energy") if metrics else (),
                         stderrs=metrics.column("stderr") if metrics else ())
    bar = tqdm(total=config.optim.steps, initial=driver.step, disable=not progress, desc=config.molecule.name,
               dynamic_ncols=True)
    log_every = 0 if progress else config.run.checkpoint_every
    callbacks = ([Progress(metrics, bar, target, log_every)] if comm.is_main else []) + [checkpoints, stop, signals]
    clock.training()
    with signals.loop():
        converged = driver.run(target, callbacks)
    bar.close()
    if signals.received is not None:
        checkpoints.save(driver)
        return {"stopped_at": driver.step, "signal": signals.name}
    if driver.step < config.optim.steps and not converged:
        return {"stopped_at": driver.step}
    checkpoints.save(driver)

    wall = clock.wall()  # the training's; the evaluation has its own seconds
    evaluation = final_evaluation(driver, system.hf_tokens)
    subspace, space = final_subspace(H, driver.state, pool, config.subspace, seed=config.run.seed) \
        if comm.world_size == 1 else ({}, None)
    if space is not None:
        save_subspace(out / SUBSPACE_FILE, space, system.order)
    result = _result(config, system, driver, {**evaluation.to_dict(), **subspace}, start_summary, start_p_hf, comm)
    result.update({**clock.times(), "preset": preset, "stopped_early": converged, "wall_seconds": wall})
    if comm.is_main:
        result["variance_extrapolation"] = variance_extrapolation(metrics.column("energy"), metrics.column("variance"))
        write_result(out, config, result, metrics, driver.step)
        result = _finish_references(out, config, system, result, metrics, driver.step)
    return result


def _subspace_loop(config: RunConfig, H, driver, pool, system: System, out: Path, comm: Communicator):
    """The subspace loop (:class:`nnqs.training.subspace.SubspaceDriver`) after the start, its
    cycles written to ``subspace.csv``; the network it fitted becomes VMC's start. Returns the
    best pool. One process only (its diagonalisations are not split)."""
    if comm.world_size > 1:
        raise ConfigError("[subspace] cycles runs on one process (its diagonalisation is not split over ranks)")
    if pool is None:
        hf = system.hf_occupation.to(torch.uint8).cpu()[None]
        pool = subspace_ground_state(H, hf)
    loop = SubspaceDriver(H, driver.state, config.subspace, pool)
    cycles = CycleLog(out / "subspace.csv")
    loop.run(config.subspace.cycles, [cycles])
    driver.guard.mark_good()   # the fitted network is VMC's start
    return loop.best


def _finish_references(out: Path, config: RunConfig, system: System, result: dict, metrics: MetricsLog,
                       step: int) -> dict:
    """After ``result.json`` is written: the slow references (computed now with ``[molecule]
    slow_references``, else those cached meanwhile, e.g. by ``nnqs reference``) merged into it.
    An interrupt here keeps the result without them."""
    compute = config.molecule.slow_references
    try:
        completed = complete_references(config.molecule, system, compute=compute)
    except (KeyboardInterrupt, StopNow):
        log.warning("interrupted: %s has no slow references; `nnqs reference %s` computes them", out / "result.json",
                    out)
        return result
    added = {k: completed.references.get(k) for k in ("fci", "dmrg")
             if completed.references.get(k) is not None and system.references.get(k) is None}
    if not added:
        return result
    result = {**result, **reference_fields(completed.references, result)}
    write_result(out, config, result, metrics, step)
    log.info("%s: the slow references merged (%s)", out / "result.json", added)
    return result


def _result(config: RunConfig, system: System, driver, evaluation: dict,
            start: dict | None, start_p_hf: float, comm: Communicator) -> dict:
    """``result.json``: the final evaluation, its errors against the references, the system,
    the start, where it ran, the provenance of the code and the effective config."""
    H = driver.H
    return {
        "schema_version": RESULT_SCHEMA_VERSION,
        "molecule": config.molecule.name,
        **evaluation,
        **reference_fields(system.references, evaluation),
        "steps": driver.step,
        "n_orbitals": H.n_orbitals,
        "n_alpha": H.n_alpha,
        "n_beta": H.n_beta,
        "n_determinants": H.n_determinants,
        "orbital_order": system.order,
        "start": start,
        "p_hf_after_start": start_p_hf,
        "device": str(driver.model.device),
        "threads": torch.get_num_threads(),
        "processes": comm.world_size,
        "provenance": provenance(),
        "config": config.to_dict(),
    }
