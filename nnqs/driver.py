"""``nnqs run``: a VMC run end to end, with outputs per DESIGN.md §7.

Writes into the output folder: ``metrics.csv`` (one row per step), ``checkpoint.pt`` (atomic;
``--resume`` continues from it exactly), ``convergence.png`` and ``result.json``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch
from tqdm.auto import tqdm

from hamiltonians import enumerate_determinants, read_fcidump, write_fcidump
from hamiltonians.ci import CIState, casci, cisd, cisd_cas
from nnqs.config import WavefunctionConfig
from nnqs.io import load_checkpoint, save_checkpoint, write_json
from nnqs.model import TransformerWavefunction
from nnqs.pretrain import pretrain_hf, pretrain_to_state
from nnqs.report import MetricsLog, plot_convergence
from nnqs.runconfig import ConfigError, RunConfig
from nnqs.system import System, build_system, system_in_order
from nnqs.tokens import occupations_to_tokens
from nnqs.vmc import Trainer, estimate_energy, local_energies

log = logging.getLogger(__name__)

#: Largest determinant space for which result.json also gets the exact variational energy.
EXACT_ENERGY_MAX_DETERMINANTS = 200_000

#: The integrals a run trains on (orbitals in autoregressive order), saved in its folder. A
#: resumed run and ``nnqs analyse`` read them back instead of rerunning PySCF, which may return
#: another, equally valid basis of degenerate orbitals in a different process: N2's pi orbitals
#: rotate with the number of OpenMP threads, and a network trained on one basis is wrong in
#: the other.
HAMILTONIAN_FILE = "hamiltonian.fcidump"


def build_model(config: RunConfig, n_orbitals: int, n_alpha: int, n_beta: int) -> TransformerWavefunction:
    """The network of ``config.model`` (every ``[model]`` key is a ``WavefunctionConfig`` field)."""
    wf = WavefunctionConfig(n_orbitals=n_orbitals, n_alpha=n_alpha, n_beta=n_beta, **asdict(config.model))
    return TransformerWavefunction(wf)


@torch.no_grad()
def exact_variational_energy(model: TransformerWavefunction, H) -> float:
    """``<psi|H|psi>`` summed over the whole valid space (``p`` is normalised exactly)."""
    occ = enumerate_determinants(H.n_orbitals, H.n_alpha, H.n_beta)
    tokens = occupations_to_tokens(occ.long()).to(model.device)
    log_psi = model.log_psi(tokens)
    e_loc = local_energies(model, H, tokens, log_psi, "exact")
    weights = torch.softmax(2 * log_psi.real.to(torch.float64), dim=0)  # |psi|^2, normalised
    return estimate_energy(e_loc, weights, 1).energy


def start_state(system: System, optim) -> CIState:
    """The CI wavefunction that ``optim.pretrain`` (``"cisd"``, ``"casci"`` or ``"cisd_cas"``) fits."""
    H = system.hamiltonian
    if optim.pretrain == "cisd":
        return cisd(H, reference=system.hf_occupation)
    build = casci if optim.pretrain == "casci" else cisd_cas
    try:
        return build(H, *optim.pretrain_cas, order=system.order)
    except ValueError as error:
        raise ConfigError(f"[optim] pretrain_cas: {error}") from None


def pretrain(model: TransformerWavefunction, system, optim) -> None:
    """The supervised start chosen by ``optim.pretrain`` (see :mod:`nnqs.pretrain`)."""
    if optim.pretrain == "hf":
        pretrain_hf(model, system.hf_tokens, optim.pretrain_hf)
    elif optim.pretrain != "none":
        state = start_state(system, optim)
        tokens = occupations_to_tokens(state.dets.long())
        value = pretrain_to_state(model, tokens, state.coefficients, steps=optim.pretrain_steps)
        log.info("%s start: E = %.8f over %d determinants, fidelity %.5f", optim.pretrain, state.energy,
                 state.dets.shape[0], value)


def run_system(config: RunConfig, out: Path, *, reuse: bool, save: bool = True, references: bool = True) -> System:
    """The run's system; its Hamiltonian from ``out/HAMILTONIAN_FILE`` when ``reuse`` and the
    file exists, otherwise built from the config (and, with ``save``, saved there atomically)."""
    if config.run.threads:
        torch.set_num_threads(config.run.threads)  # PySCF's OpenMP follows it
    path = out / HAMILTONIAN_FILE
    source = config.molecule.fcidump
    if reuse and path.exists() and source and not Path(source).exists():
        log.warning("%s is gone: resuming from the integrals saved in %s", source, path)
        return system_in_order(config.molecule, read_fcidump(path), references=references)
    system = build_system(config.molecule, references=references)
    if reuse and path.exists():
        saved = read_fcidump(path)
        _check_same_system(saved, system, path)
        system.hamiltonian = saved
    else:
        if reuse:
            log.warning("%s is missing (a run from an older nnqs?): rebuilt the integrals from the config; "
                        "degenerate orbitals may not be those the network was trained in", path)
        if save:
            write_fcidump(system.hamiltonian, path)
    return system


def _check_same_system(saved, system: System, path: Path) -> None:
    """Raise ``ConfigError`` unless ``saved`` describes the config's molecule: same sizes and the
    same electronic HF energy (invariant under rotations of degenerate orbitals)."""
    built = system.hamiltonian
    if (saved.n_orbitals, saved.n_alpha, saved.n_beta) != (built.n_orbitals, built.n_alpha, built.n_beta):
        raise ConfigError(f"{path} does not match the config's molecule "
                          f"({saved.n_orbitals} orbitals, ({saved.n_alpha}, {saved.n_beta}) electrons)")
    hf = system.hf_occupation[None]
    e_saved = float(saved.diagonal(hf.to(saved.device))[0]) - float(saved.constant)
    e_built = float(built.diagonal(hf.to(built.device))[0]) - float(built.constant)
    if abs(e_saved - e_built) > 1e-8:
        raise ConfigError(f"{path} does not match the config's molecule (electronic HF energy "
                          f"{e_saved:.10f} against {e_built:.10f} Ha)")


def _check_device(device: str) -> None:
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} requested but CUDA is not available")


def run(
    config: RunConfig,
    out_dir: str | Path,
    *,
    resume: bool = False,
    stop_after: int | None = None,
    progress: bool = True,
    initial_model: dict | None = None,
) -> dict:
    """Run VMC as configured; return the result dictionary (also written to ``result.json``).

    Args:
        config: the run configuration.
        out_dir: output folder (created).
        resume: continue from ``out_dir/checkpoint.pt``.
        stop_after: stop (with a checkpoint) once this many steps are done, as if interrupted;
            ``None`` runs to ``config.optim.steps`` and writes the result.
        progress: show a progress bar.
        initial_model: a model ``state_dict`` to start from (a warm start, e.g. from a nearby
            geometry); the configured pretraining then refits it to this system (the orbitals'
            signs can change between geometries).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _check_device(config.run.device)
    torch.manual_seed(config.run.seed)

    ckpt_path = out / "checkpoint.pt"
    if resume and not ckpt_path.exists():
        raise ConfigError(f"--resume: no checkpoint at {ckpt_path}")
    system = run_system(config, out, reuse=resume)
    H = system.hamiltonian.to(device=config.run.device)
    refs = {k: system.references.get(k) for k in ("hf", "ccsd", "ccsd_t", "fci")}
    try:
        model = build_model(config, H.n_orbitals, H.n_alpha, H.n_beta).to(config.run.device)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    trainer = Trainer(model, H, config.optim, config.sampler, seed=config.run.seed)

    wall_before = 0.0
    if resume:
        state = load_checkpoint(ckpt_path, map_location=config.run.device)
        try:
            trainer.load_state_dict(state["trainer"])
        except (RuntimeError, KeyError, ValueError) as error:
            first = str(error).strip().splitlines()[0]
            raise ConfigError(f"--resume: {ckpt_path} does not match this config ({first})") from None
        wall_before = float(state["wall_seconds"])
        p_hf = float(state["p_hf"])
        log.info("resumed from %s at step %d", ckpt_path, trainer.step)
    else:
        if initial_model is not None:
            model.load_state_dict(initial_model)
        pretrain(model, system, config.optim)
        with torch.no_grad():
            p_hf = float(model.log_prob(system.hf_tokens.to(model.device)).exp())
        trainer.mark_good()  # the pretrained weights are the state to roll back to
    metrics = MetricsLog(out / "metrics.csv", refs["fci"], resume_step=trainer.step if resume else None)

    target = config.optim.steps if stop_after is None else min(stop_after, config.optim.steps)
    start = time.perf_counter()

    def checkpoint() -> None:
        save_checkpoint(ckpt_path, {
            "trainer": trainer.state_dict(), "config": config.to_dict(), "p_hf": p_hf,
            "wall_seconds": wall_before + time.perf_counter() - start,
        })

    bar = tqdm(total=config.optim.steps, initial=trainer.step, disable=not progress, desc=config.molecule.name,
               dynamic_ncols=True)
    while trainer.step < target:
        record = trainer.train_step()
        row = metrics.append(record)
        postfix = {"E": f"{record.energy:.6f}", "unique": record.n_unique,
                   "samples/s": f"{record.n_samples / max(record.seconds, 1e-9):.3g}"}
        if row["error_vs_fci_mha"] != "":
            postfix["dE_fci(mHa)"] = f"{row['error_vs_fci_mha']:.3f}"
        bar.set_postfix(postfix)
        bar.update(1)
        if trainer.step % config.run.checkpoint_every == 0 or trainer.step == target:
            checkpoint()
    bar.close()
    if trainer.step < config.optim.steps:
        return {"stopped_at": trainer.step}
    checkpoint()
    result = _final_result(config, system, trainer, refs, p_hf, wall_before + time.perf_counter() - start)
    write_json(out / "result.json", result)
    steps, energies = metrics.energies()
    plot_convergence(out / "convergence.png", steps, energies, refs, f"{config.molecule.name}: NNQS VMC")
    return result


def _final_result(config: RunConfig, system, trainer: Trainer, refs: dict, p_hf: float, wall: float) -> dict:
    """Evaluate the trained state on a fresh, larger sample and assemble ``result.json``."""
    H = trainer.H
    n_eval = config.sampler.eval_samples or 10 * trainer.n_samples
    trainer.model.eval()
    batch = trainer.sample(n_eval)
    with torch.no_grad():
        _, _, _, est = trainer.evaluate(batch)
    exact = None
    if H.n_determinants <= EXACT_ENERGY_MAX_DETERMINANTS:
        exact = exact_variational_energy(trainer.model, H)
    with torch.no_grad():
        p_hf_final = float(trainer.model.log_prob(system.hf_tokens.to(trainer.model.device)).exp())
    fci = refs.get("fci")
    return {
        "molecule": config.molecule.name,
        "energy": est.energy,
        "energy_stderr": est.stderr,
        "variance": est.variance,
        "energy_exact_variational": exact,
        "references": refs,
        "error_vs_fci_mha": None if fci is None else 1e3 * (est.energy - fci),
        "exact_error_vs_fci_mha": None if fci is None or exact is None else 1e3 * (exact - fci),
        "error_vs_ccsd_t_mha": None if refs.get("ccsd_t") is None else 1e3 * (est.energy - refs["ccsd_t"]),
        "steps": trainer.step,
        "n_samples": batch.n_samples,
        "n_unique": batch.n_unique,
        "n_orbitals": H.n_orbitals,
        "n_alpha": H.n_alpha,
        "n_beta": H.n_beta,
        "n_determinants": H.n_determinants,
        "orbital_order": system.order,
        "p_hf_after_pretraining": p_hf,
        "pretrain": config.optim.pretrain,
        "p_hf_final": p_hf_final,
        "wall_seconds": wall,
        "device": str(trainer.model.device),
        "threads": torch.get_num_threads(),
        "config": config.to_dict(),
    }


def config_with_overrides(config: RunConfig, *, device=None, steps=None, seed=None) -> RunConfig:
    """Apply command-line overrides."""
    if device is not None:
        config = replace(config, run=replace(config.run, device=device))
    if seed is not None:
        config = replace(config, run=replace(config.run, seed=seed))
    if steps is not None:
        config = replace(config, optim=replace(config.optim, steps=steps))
    return config
