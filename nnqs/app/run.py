"""``nnqs run``: a VMC run end to end, with outputs per docs/design.md §7.

Composes the layers below: the system (:mod:`nnqs.app.system`), the network, the supervised
start and the trainer (:mod:`nnqs.training`). Writes into the output folder:
``hamiltonian.fcidump`` (the integrals trained on), ``metrics.csv`` (one row per step),
``checkpoint.pt`` (atomic; ``--resume`` continues from it exactly), ``convergence.png`` and
``result.json``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from nnqs.app.folder import claim_run_folder
from nnqs.app.io import load_checkpoint, save_checkpoint, write_json
from nnqs.app.report import MetricsLog, plot_convergence
from nnqs.app.runconfig import ConfigError, RunConfig, check_device, config_from_dict
from nnqs.app.system import System, build_model, run_system
from nnqs.parallel.comm import LOCAL, Communicator
from nnqs.training.convergence import has_stopped_improving, variance_extrapolation
from nnqs.training.estimators import estimate_energy, evaluate_local_energies, exact_variational_energy
from nnqs.training.pretrain import largest_determinants, pretrain, start_state
from nnqs.training.trainer import Trainer

log = logging.getLogger(__name__)

#: Largest determinant space for which result.json also gets the exact variational energy.
EXACT_ENERGY_MAX_DETERMINANTS = 200_000
#: The final evaluation repeats its local energies in exact mode (to report the truncation's
#: bias on the same samples) when the samples have at most this many excitations in all: the
#: cost is the amplitudes of up to that many connected configurations (~160 us each on a CPU).
BIAS_CHECK_MAX_EXCITATIONS = 5_000_000


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
    split over the ranks (:class:`nnqs.training.trainer.Trainer`). An error on rank 0 before the
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
            geometry); the configured pretraining then refits it to this system (the orbitals'
            signs can change between geometries).
        comm: the processes of this run (default: this one alone).
    """
    check_device(config.run.device)
    if config.molecule.geometry and not _importable("pyscf"):
        raise ConfigError("a [molecule] geometry needs PySCF for its integrals: pip install 'nnqs[chem]' "
                          "(or run from an FCIDUMP file)")
    with contextlib.ExitStack() as held:
        out = comm.run_on_main(lambda: held.enter_context(claim_run_folder(out_dir, resume=resume,
                                                                           overwrite=overwrite)))
        return _run_in(config, out, resume=resume, extend=extend, stop_after=stop_after,
                       progress=progress and comm.is_main, initial_model=initial_model, comm=comm)


def _refit_from_fresh(model, config: RunConfig, system: System, H, fidelity: float, state=None) -> None:
    """The start fit ended below ``pretrain_min_fidelity``: fit a freshly initialised network
    too and keep whichever reached the higher fidelity (in ``model``)."""
    log.warning("start fit reached fidelity %.4f < %.2f; refitting a fresh network", fidelity,
                config.optim.pretrain_min_fidelity)
    torch.manual_seed(config.run.seed + 1)
    fresh = build_model(config.model, system).to(model.device)
    again = pretrain(fresh, H, config.optim, hf_occupation=system.hf_occupation, order=system.order, state=state)
    if again is not None and again > fidelity:
        model.load_state_dict(fresh.state_dict())
        log.warning("kept the fresh network (fidelity %.4f)", again)
    else:
        log.warning("kept the first fit (the fresh one reached %.4f)", again if again is not None else float("nan"))


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:
        return False


def _check_resumable(config: RunConfig, state: dict, path: Path, extend: bool) -> None:
    """The checkpoint at ``path`` is a run of this config's molecule with the same schedule."""
    saved = state.get("config", {})
    try:
        saved_molecule = config_from_dict({"molecule": saved["molecule"]}).to_dict()["molecule"]
    except (KeyError, TypeError, ConfigError):
        raise ConfigError(f"--resume: {path} holds no usable [molecule]; nothing changed") from None
    if saved_molecule != config.to_dict()["molecule"]:
        raise ConfigError(f"--resume: {path} is a run of another [molecule] than this config's; nothing changed")
    anchors = saved.get("optim", {}).get("anchors", 0)  # absent before the field: none
    if anchors != config.optim.anchors:
        raise ConfigError(f"--resume: the checkpoint's run has anchors = {anchors}, this config "
                          f"{config.optim.anchors}; anchors are chosen at the start and cannot change")
    old, new = saved.get("optim", {}).get("steps"), config.optim.steps
    if old != new and not extend:
        raise ConfigError(f"--resume: the checkpoint's run has steps = {old}, this config {new}; pass --extend "
                          "to change it (the learning-rate schedule is recomputed over the new total)")
    if new < state["trainer"]["step"]:
        raise ConfigError(f"--resume: the checkpoint is already at step {state['trainer']['step']} > steps = {new}")


def _read_checkpoint(config: RunConfig, ckpt_path: Path, extend: bool) -> dict:
    if not ckpt_path.exists():
        raise ConfigError(f"--resume: no checkpoint at {ckpt_path}")
    state = load_checkpoint(ckpt_path, map_location="cpu")
    _check_resumable(config, state, ckpt_path, extend)
    return state


def _start(model, config: RunConfig, system: System, H, initial_model: dict | None) -> tuple[dict, torch.Tensor | None]:
    """The fitted start (the configured CI fit, refitted from a fresh network if it stays below
    ``pretrain_min_fidelity``); returns the weights and the anchors (``[optim] anchors``
    largest determinants of the CI target, or ``None``)."""
    if initial_model is not None:
        model.load_state_dict(initial_model)
    settings, state = config.optim, None
    try:
        if settings.pretrain not in ("hf", "none"):
            state = start_state(H, settings, hf_occupation=system.hf_occupation, order=system.order)
        fidelity = pretrain(model, H, settings, hf_occupation=system.hf_occupation, order=system.order, state=state)
        if fidelity is not None and fidelity < settings.pretrain_min_fidelity:
            _refit_from_fresh(model, config, system, H, fidelity, state)
    except ValueError as error:  # a CAS window that does not fit the molecule
        raise ConfigError(f"[optim] {error}") from None
    anchors = largest_determinants(state, settings.anchors) if settings.anchors else None
    return {k: v.cpu() for k, v in model.state_dict().items()}, anchors


def _run_in(config: RunConfig, out: Path, *, resume: bool, extend: bool, stop_after: int | None, progress: bool,
            initial_model: dict | None, comm: Communicator) -> dict:
    if config.run.threads:
        torch.set_num_threads(config.run.threads)  # PySCF's OpenMP follows it
    torch.manual_seed(config.run.seed)

    ckpt_path = out / "checkpoint.pt"
    main = comm.is_main
    # Read before anything is written; rank 0 reads, every rank gets it.
    state = comm.run_on_main(lambda: _read_checkpoint(config, ckpt_path, extend)) if resume else None
    system = comm.run_on_main(lambda: run_system(config.molecule, out, resume=resume))
    H = system.hamiltonian.to(device=config.run.device)
    refs = {k: system.references.get(k) for k in ("hf", "ccsd", "ccsd_t", "fci", "dmrg")}
    model = build_model(config.model, system).to(config.run.device)
    trainer = Trainer(model, H, config.optim, config.sampler, seed=config.run.seed, comm=comm)

    wall_before = start_seconds = cpu_before = 0.0
    cpu_began = time.process_time()
    if resume:
        try:
            trainer.load_state_dict(state["trainer"])
        except (RuntimeError, KeyError, ValueError) as error:
            first = str(error).strip().splitlines()[0]
            raise ConfigError(f"--resume: {ckpt_path} does not match this config ({first})") from None
        wall_before = float(state["wall_seconds"])
        start_seconds = float(state.get("start_seconds", 0.0))  # absent in checkpoints older than the field
        cpu_before = float(state.get("cpu_seconds", 0.0))
        p_hf = float(state["p_hf"])
        log.info("resumed from %s at step %d", ckpt_path, trainer.step)
    else:
        began = time.perf_counter()
        weights, anchors = comm.run_on_main(lambda: _start(model, config, system, H, initial_model))
        model.load_state_dict(weights)
        trainer.set_anchors(anchors)
        start_seconds = time.perf_counter() - began
        with torch.no_grad():
            p_hf = float(model.log_prob(system.hf_tokens.to(model.device)).exp())
        trainer.mark_good()  # the pretrained weights are the state to roll back to
    opened: list[MetricsLog] = []  # rank 0's; an error opening it stops every rank
    comm.run_on_main(lambda: opened.append(MetricsLog(out / "metrics.csv", refs["fci"],
                                                      resume_step=trainer.step if resume else None)))
    metrics = opened[0] if main else None

    target = config.optim.steps if stop_after is None else min(stop_after, config.optim.steps)
    start = time.perf_counter()
    last_checkpoint = [start]
    converged = False
    first = config.optim.stop_from  # the stopping rule looks at the last regime's steps only

    def checkpoint() -> None:
        if not main:
            return
        save_checkpoint(ckpt_path, {
            "trainer": trainer.state_dict(), "config": config.to_dict(), "p_hf": p_hf,
            "wall_seconds": wall_before + time.perf_counter() - start, "start_seconds": start_seconds,
            "cpu_seconds": cpu_before + time.process_time() - cpu_began,
        })
        last_checkpoint[0] = time.perf_counter()

    bar = tqdm(total=config.optim.steps, initial=trainer.step, disable=not progress, desc=config.molecule.name,
               dynamic_ncols=True)
    while trainer.step < target:
        record = trainer.train_step()
        if main:
            _show(bar, metrics.append(record), record)
        due = time.perf_counter() - last_checkpoint[0] >= config.run.checkpoint_seconds
        if trainer.step % config.run.checkpoint_every == 0 or trainer.step == target or due:
            checkpoint()
        if config.optim.stop_window and comm.broadcast_object(main and has_stopped_improving(
                metrics.column("energy")[first:], metrics.column("stderr")[first:], config.optim.stop_window,
                config.optim.stop_tolerance)):
            converged = True
            log.info("step %d: the energy stopped improving (window %d); stopping", trainer.step,
                     config.optim.stop_window)
            break
    bar.close()
    if trainer.step < config.optim.steps and not converged:
        return {"stopped_at": trainer.step}
    checkpoint()
    result = _final_result(config, system, trainer, refs, p_hf, wall_before + time.perf_counter() - start)
    result["stopped_early"] = converged
    result["start_seconds"] = start_seconds
    # This process's CPU time (all its threads), start and evaluation included: with one thread,
    # the wall time the run takes on a core of its own, whatever else shares the machine.
    result["cpu_seconds"] = cpu_before + time.process_time() - cpu_began
    if main:
        result["variance_extrapolation"] = variance_extrapolation(metrics.column("energy"), metrics.column("variance"))
        write_json(out / "result.json", result)
        steps, energies = metrics.energies()
        plot_convergence(out / "convergence.png", steps, energies, refs, f"{config.molecule.name}: NNQS VMC",
                         coarse_steps=min(config.optim.coarse_steps, trainer.step),
                         final=(trainer.step, result["energy"], f"final ({config.optim.local_energy})"),
                         dmrg=result["dmrg"])
    return result


def _show(bar, row: dict, record) -> None:
    postfix = {"E": f"{record.energy:.6f}", "unique": record.n_unique,
               "samples/s": f"{record.n_samples / max(record.seconds, 1e-9):.3g}"}
    if row["error_vs_fci_mha"] != "":
        postfix["dE_fci(mHa)"] = f"{row['error_vs_fci_mha']:.3f}"
    bar.set_postfix(postfix)
    bar.update(1)


def _final_result(config: RunConfig, system: System, trainer: Trainer, refs: dict, p_hf: float, wall: float) -> dict:
    """Evaluate the trained state on a fresh, larger sample and assemble ``result.json``
    (``wall_seconds``: the training, ``evaluation_seconds``: this evaluation; the caller adds
    ``start_seconds``, the start state's solve and fit)."""
    started = time.perf_counter()
    H = trainer.H
    n_eval = config.sampler.eval_samples or 10 * trainer.n_samples
    trainer.model.eval()
    batch = trainer.sample(n_eval)
    with torch.no_grad():
        evaluation = trainer.evaluate(batch)
    est = evaluation.estimate
    bias = None
    comm = trainer.comm
    n_unique = sum(comm.sizes(batch.n_unique))
    if config.optim.local_energy == "truncated" and n_unique * H.n_excitations <= BIAS_CHECK_MAX_EXCITATIONS:
        with torch.no_grad():
            exact_mode = evaluate_local_energies(trainer.model, H, batch.tokens, evaluation.log_psi, "exact",
                                                 amplitudes=config.optim.amplitudes, comm=comm)
        bias = 1e3 * (est.energy - estimate_energy(exact_mode.e_loc, evaluation.weights, batch.n_samples, comm).energy)
    exact = None
    if H.n_determinants <= EXACT_ENERGY_MAX_DETERMINANTS:
        exact = comm.run_on_main(lambda: exact_variational_energy(trainer.model, H))
    with torch.no_grad():
        p_hf_final = float(trainer.model.log_prob(system.hf_tokens.to(trainer.model.device)).exp())
    fci = refs.get("fci")
    return {
        "molecule": config.molecule.name,
        "energy": est.energy,
        "energy_stderr": est.stderr,
        "variance": est.variance,
        "energy_exact_variational": exact,
        "local_energy": config.optim.local_energy,
        "anchors": 0 if trainer.anchors is None else int(trainer.anchors.shape[0]),
        "kept_fraction": evaluation.local_energy.kept_fraction,
        "truncation_bias_mha": bias,
        "references": refs,
        "error_vs_fci_mha": None if fci is None else 1e3 * (est.energy - fci),
        "exact_error_vs_fci_mha": None if fci is None or exact is None else 1e3 * (exact - fci),
        "error_vs_ccsd_t_mha": None if refs.get("ccsd_t") is None else 1e3 * (est.energy - refs["ccsd_t"]),
        "error_vs_dmrg_mha": None if refs.get("dmrg") is None else 1e3 * (est.energy - refs["dmrg"]),
        "dmrg": system.references.get("details", {}).get("dmrg"),
        "steps": trainer.step,
        "n_samples": batch.n_samples,
        "n_unique": n_unique,
        "n_orbitals": H.n_orbitals,
        "n_alpha": H.n_alpha,
        "n_beta": H.n_beta,
        "n_determinants": H.n_determinants,
        "orbital_order": system.order,
        "p_hf_after_pretraining": p_hf,
        "pretrain": config.optim.pretrain,
        "p_hf_final": p_hf_final,
        "wall_seconds": wall,
        "evaluation_seconds": time.perf_counter() - started,
        "device": str(trainer.model.device),
        "threads": torch.get_num_threads(),
        "processes": comm.world_size,
        "config": config.to_dict(),
    }
