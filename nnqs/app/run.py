"""``nnqs run``: a run end to end, with outputs per docs/design.md §7.

The method itself is :class:`nnqs.app.solver.NNQS` (in memory); this module gives it a run
folder: the system built from the config (:mod:`nnqs.app.system`), its phases called one by one
with the callbacks that write files (:mod:`nnqs.app.callbacks`, :mod:`nnqs.app.signals`), and the
result written. Into the output folder: ``hamiltonian.fcidump`` (the integrals trained on) and
``orbitals.json`` (which orbitals they are in),
``provenance.json`` (the code and config of each session of the run), ``metrics.csv`` (one row per
step), ``subspace.csv`` (the loop's cycles), ``checkpoint.pt`` (atomic; ``--resume`` continues
from it exactly; the generation before it is kept as ``checkpoint.prev.pt``, which a resume
falls back to when the last one is unreadable), ``subspace.npz``, ``convergence.png`` and
``result.json``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import time
from pathlib import Path

from tqdm.auto import tqdm

from nnqs.app.callbacks import Checkpoints, CycleLog, Progress
from nnqs.app.folder import claim_run_folder
from nnqs.app.io import has_checkpoint, load_checkpoint, write_json
from nnqs.app.provenance import provenance
from nnqs.app.references import reference_fields
from nnqs.app.report import MetricsLog, write_result
from nnqs.app.runconfig import ConfigError, RunConfig, check_device, config_from_dict
from nnqs.app.signals import SignalStop, StopNow
from nnqs.app.solver import NNQS, RESULT_SCHEMA_VERSION
from nnqs.app.system import System, complete_references, run_system
from nnqs.app.trained import SUBSPACE_FILE, save_subspace
from nnqs.parallel.comm import LOCAL, Communicator
from nnqs.training.convergence import variance_extrapolation

log = logging.getLogger(__name__)

__all__ = ["run", "RESULT_SCHEMA_VERSION"]


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


def _molecule_only(molecule: dict) -> dict:
    """A ``[molecule]`` table without the keys that say which references to compute."""
    return {k: v for k, v in molecule.items() if k not in ("dmrg", "slow_references")}


def _read_checkpoint(config: RunConfig, ckpt_path: Path) -> dict:
    if not has_checkpoint(ckpt_path):
        raise ConfigError(f"--resume: no checkpoint at {ckpt_path}")
    state = load_checkpoint(ckpt_path, map_location="cpu")
    _check_resumable(config, state, ckpt_path)
    return state


def _on_main(comm: Communicator, fn):
    """``fn()`` on rank 0 alone, its value kept there (``None`` on the others); an error
    raises on every rank."""
    kept = []
    comm.run_on_main(lambda: kept.append(fn()))
    return kept[0] if kept else None


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
    import torch

    if config.run.threads:
        torch.set_num_threads(config.run.threads)  # PySCF's OpenMP follows it
    ckpt_path = out / "checkpoint.pt"
    # Read before anything is written; rank 0 reads, every rank gets it.
    state = comm.run_on_main(lambda: _read_checkpoint(config, ckpt_path)) if resume else None
    system = comm.run_on_main(lambda: run_system(config.molecule, out, resume=resume))
    solver = NNQS(config, comm=comm).prepare(system, checkpoint=state, checkpoint_path=ckpt_path, extend=extend)
    config, driver = solver.config, solver.driver   # the presets resolved
    assert driver is not None and config.optim.steps is not None   # prepare built it and resolved the presets

    def open_outputs() -> MetricsLog:
        _write_provenance(out / "provenance.json", config, driver.step, resume)
        return MetricsLog(out / "metrics.csv", system.references.get("fci"), resume_step=driver.step if resume else None)

    metrics = _on_main(comm, open_outputs)   # an error opening them stops every rank
    target = solver.target(stop_after)
    checkpoints = Checkpoints(ckpt_path, every=config.run.checkpoint_every, seconds=config.run.checkpoint_seconds,
                              target=target, comm=comm, metrics=metrics, payload=lambda: {
                                  "config": config.to_dict(), "p_hf": solver.start_p_hf, "start": solver.start_summary,
                                  "preset": solver.preset,
                                  "subspace": solver.pool.to_dict() if solver.pool is not None else None,
                                  "loop": solver.loop.state_dict() if solver.loop is not None else None,
                                  "origins": solver.origins.state_dict(),
                                  **solver.clock.times()})
    # a checkpoint once the start is fitted and after every cycle of the loop: a resume repeats neither
    cycles = CycleLog(out / "subspace.csv", resume_cycle=solver.resume_cycle)
    solver.start(initial_model=initial_model, started=lambda: checkpoints.save(driver),
                 cycle_callbacks=[cycles, lambda loop, record: checkpoints.save(driver)])
    bar = tqdm(total=config.optim.steps, initial=driver.step, disable=not progress, desc=config.molecule.name,
               dynamic_ncols=True)
    log_every = 0 if progress else config.run.checkpoint_every
    callbacks = ([Progress(metrics, bar, target, log_every)] if comm.is_main else []) + [checkpoints, signals]
    history = (metrics.column("energy"), metrics.column("stderr")) if metrics else ((), ())
    with signals.loop():
        converged = solver.train(callbacks=callbacks, stop_after=stop_after, history=history)
    bar.close()
    if signals.received is not None:
        checkpoints.save(driver)
        return {"stopped_at": driver.step, "signal": signals.name}
    if driver.step < config.optim.steps and not converged:
        return {"stopped_at": driver.step}
    checkpoints.save(driver)

    found = solver.finish(stopped_early=converged)
    if found.space is not None:
        save_subspace(out / SUBSPACE_FILE, found.space, system.order)
    result = found.fields
    if comm.is_main:
        result["variance_extrapolation"] = variance_extrapolation(metrics.column("energy"), metrics.column("variance"))
        write_result(out, config, result, metrics, driver.step)
        result = _finish_references(out, config, system, result, metrics, driver.step)
    return result


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
