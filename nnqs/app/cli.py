"""Command-line interface: ``nnqs run``, ``nnqs reference``, ``nnqs analyse`` and ``nnqs check-consistency``.

Exit codes: 0 success, 1 a check failed (or, under torchrun, another rank was lost), 2 bad input
(:data:`USER_ERRORS`: :class:`nnqs.errors.InputError` and :class:`hamiltonians.FCIDUMPError`, or
a missing file, folder or optional package; one line), 1 with a traceback for anything else (a bug),
``128 + N`` stopped by signal ``N`` (SIGTERM 143, SIGINT 130: after a checkpoint, or at once on
a second signal; :mod:`nnqs.app.signals`).

``torchrun --nproc_per_node=K -m nnqs run CONFIG.toml`` runs one VMC job on ``K`` processes
(:mod:`nnqs.parallel`); rank 0 alone prints and writes.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import shutil
import signal
import sys
from typing import NoReturn

from hamiltonians.io.fcidump import FCIDUMPError
from nnqs.errors import InputError
from nnqs.wavefunction.config import DTYPES

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
#: The user's errors: one line and exit 2 (``hamiltonians`` imports nothing of nnqs, so its
#: input error is not an :class:`~nnqs.errors.InputError`).
USER_ERRORS = (InputError, FCIDUMPError)


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad arguments in one line with exit code 2."""

    def error(self, message: str) -> NoReturn:  # pragma: no cover - argparse plumbing
        self.exit(EXIT_BAD_INPUT, f"nnqs: error: {message}\n")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="nnqs", description="Autoregressive Transformer NNQS for quantum chemistry")
    sub = parser.add_subparsers(dest="command", required=True)

    check = sub.add_parser(
        "check-consistency",
        help="compare cached decoding with the uncached full pass on a random model",
    )
    check.add_argument("--orbitals", type=int, default=16, help="spatial orbitals N (default 16)")
    check.add_argument("--layers", type=int, default=4)
    check.add_argument("--heads", type=int, default=4)
    check.add_argument("--kv-heads", type=int, default=None, help="key/value heads (default: --heads)")
    check.add_argument("--d-model", type=int, default=32)
    check.add_argument("--batch", type=int, default=64)
    check.add_argument(
        "--dtype", choices=sorted(DTYPES), action="append",
        help="repeatable; default: float64 and float32",
    )
    check.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ... (default cpu)")
    check.add_argument("--seed", type=int, default=0)
    check.add_argument("--compile", action="store_true", help="both passes through torch.compile ([run] compile)")

    run = sub.add_parser("run", help="variational Monte Carlo on a molecule (TOML config or FCIDUMP)")
    run.add_argument("config", nargs="?", help="TOML run configuration (see experiments/configs/)")
    run.add_argument("--fcidump", help="run on an FCIDUMP file (electrons from its header) with default settings")
    run.add_argument("--example", default=None, metavar="NAME",
                     help="run an example config shipped with the package (lih, h2o_631g_defaults, ...)")
    run.add_argument("--out", default=None, help="output folder (default runs/<name>)")
    run.add_argument("--device", default=None, help="cpu, cuda, ... (overrides the config)")
    run.add_argument("--steps", type=int, default=None, help="VMC steps (overrides the config)")
    run.add_argument("--adamw-steps", type=int, default=None,
                     help="of those, AdamW steps before minSR (overrides the config; a run of at most "
                          "adamw_steps steps is AdamW throughout)")
    run.add_argument("--seed", type=int, default=None, help="random seed (overrides the config)")
    run.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    run.add_argument("--overwrite", action="store_true", help="replace a previous run in OUT")
    run.add_argument("--extend", action="store_true",
                     help="with --resume: allow a different --steps (the lr schedule is recomputed over the new total)")
    run.add_argument("--stop-after", type=int, default=None, help="stop with a checkpoint after this many steps")
    run.add_argument("--no-progress", action="store_true",
                     help="no progress bar: a log line per checkpoint interval instead (also off a terminal)")

    reference = sub.add_parser(
        "reference",
        help="reference energies (HF, CCSD(T), FCI or DMRG) of a run folder, a CONFIG.toml or an FCIDUMP file, "
             "slow ones included; cached, and merged into a finished run's result.json")
    reference.add_argument("target", help="a run folder (of nnqs run), a CONFIG.toml or an FCIDUMP file")
    reference.add_argument("--threads", type=int, default=0, help="CPU threads (default: PyTorch's)")

    analyse = sub.add_parser("analyse", help="a trained run's RDMs, <S^2> and natural occupations; on small systems "
                                             "its error split into amplitude and sign parts")
    analyse.add_argument("run_dir", help="an output folder of nnqs run (reads checkpoint.pt; writes analysis.json, "
                                         "rdms.npz, natural_occupations.png, and adds the observables to result.json)")
    analyse.add_argument("--samples", type=int, default=None,
                         help="estimate the RDMs from this many draws (default: the whole space up to 2e5 "
                              "determinants, else 1e5 draws)")
    analyse.add_argument("--mode", choices=("exact", "truncated", "sampled"), default=None,
                         help="which connected configurations enter the RDMs (default: exact over the whole "
                              "space, sampled past it: the exact mode's amplitudes would take hours)")
    return parser


def _analyse(args: argparse.Namespace) -> int:
    from pathlib import Path

    from nnqs.app.io import write_json
    from nnqs.app.properties import format_properties, run_properties
    from nnqs.app.trained import load_trained
    from nnqs.training.analysis import MAX_DETERMINANTS, analyse_state, format_analysis

    from nnqs.app.folder import reading

    try:
        with reading(args.run_dir) as running:
            trained = load_trained(args.run_dir)
        system, model = trained.system, trained.model
        analysis = None
        if system.hamiltonian.n_determinants <= MAX_DETERMINANTS:
            analysis = analyse_state(model, system.hamiltonian, system.hf_occupation)
        observables = run_properties(trained, args.run_dir, n_samples=args.samples, mode=args.mode)
    except USER_ERRORS as error:
        return _bad_input(error)
    except ModuleNotFoundError as error:
        if error.name in ("pyscf", "openfermion"):
            return _bad_input(f"this needs {error.name}: pip install 'nnqs[chem]'")
        raise
    except OSError as error:
        return _bad_input(_os_message(error))
    summary = {**(analysis.to_dict() if analysis else {}), "observables": observables.to_dict()}
    write_json(Path(args.run_dir) / "analysis.json", summary)
    print(f"{trained.config.molecule.name} after step {trained.step}:")
    result_path = Path(args.run_dir) / "result.json"
    if running:   # its checkpoint is one whole generation; a result.json there is an earlier session's
        print(f"  (the run is still training, {running}: this is its checkpoint at step {trained.step}; "
              "result.json is left to the run)")
    elif result_path.is_file():   # the run's own energies: VMC, subspace, + PT2, extrapolated
        import json

        try:
            result = json.loads(result_path.read_text())
        except (ValueError, UnicodeDecodeError):
            print(f"  ({result_path}: unreadable, its energies not shown; `nnqs run CONFIG --out {args.run_dir} "
                  "--resume` writes it again)")
            result = {}
        if result.get("energy") is not None:
            print(f"  VMC energy {result['energy']:.8f} +- {result['energy_stderr']:.1e} Ha")
        for line in _subspace_lines(result):
            print(line)
    if analysis:
        print(format_analysis(analysis))
    print(format_properties(observables))
    return EXIT_OK


def _reference(args: argparse.Namespace) -> int:
    from pathlib import Path

    import torch

    from nnqs.app.reference_run import reference_run
    from nnqs.app.references import KEYS
    from nnqs.app.runconfig import ConfigError, config_from_dict, load_config
    from nnqs.app.system import build_system, complete_references

    target = Path(args.target)
    if args.threads:
        torch.set_num_threads(args.threads)  # PySCF's OpenMP follows it
    try:
        if target.is_dir():
            refs, merged = reference_run(target)
        elif not target.is_file():
            raise ConfigError(f"{target}: no such run folder, config or FCIDUMP file")
        else:
            if target.suffix == ".toml":
                molecule = load_config(target).molecule
            else:
                molecule = config_from_dict({"molecule": {"name": target.stem, "fcidump": str(target)}}).molecule
            refs, merged = complete_references(molecule, build_system(molecule)).references, False
    except USER_ERRORS as error:
        return _bad_input(error)
    except ModuleNotFoundError as error:
        if error.name in ("pyscf", "openfermion"):
            return _bad_input(f"this needs {error.name}: pip install 'nnqs[chem]'")
        raise
    except OSError as error:
        return _bad_input(_os_message(error))
    print(f"{target}: reference energies (Ha)")
    for key in KEYS:
        if refs.get(key) is not None:
            print(f"  {key:8s} {refs[key]:.10f}")
        elif key in refs.get("notes", {}):
            print(f"  {key:8s} none: {refs['notes'][key]}")
    if merged:
        print(f"  merged into {target / 'result.json'}")
    return EXIT_OK


def _check_consistency(args: argparse.Namespace) -> int:
    from nnqs.app.runconfig import ConfigError, check_device
    from nnqs.wavefunction.consistency import check_consistency

    try:
        check_device(args.device)
    except ConfigError as error:
        return _bad_input(error)
    for name in ("orbitals", "layers", "heads", "d_model", "batch"):
        if getattr(args, name) < 1:
            return _bad_input(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.kv_heads is not None and args.kv_heads < 1:
        return _bad_input(f"--kv-heads must be >= 1, got {args.kv_heads}")
    try:
        results = check_consistency(
            n_orbitals=args.orbitals, n_layers=args.layers, n_heads=args.heads,
            n_kv_heads=args.kv_heads, d_model=args.d_model, batch=args.batch,
            dtypes=tuple(args.dtype or ("float64", "float32")), device=args.device, seed=args.seed,
            compile=args.compile,
        )
    except InputError as error:   # the model's shape (d_model, heads) from the arguments
        return _bad_input(error)
    print(f"cached vs uncached conditionals: N={args.orbitals} L={args.layers} H={args.heads} "
          f"H_kv={args.kv_heads or args.heads} batch={args.batch} device={args.device}"
          + (" compiled" if args.compile else ""))
    for r in results:
        status = "ok" if r.ok else "FAIL"
        print(f"  {r.dtype:9s} max |dp| = {r.max_abs_diff:.3e}  (tolerance {r.tolerance:.0e})  {status}")
    return EXIT_OK if all(r.ok for r in results) else EXIT_FAILED


def _run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from nnqs.app.run import run
    from nnqs.app.runconfig import ConfigError, check_device, config_from_dict, load_config
    from nnqs.app.signals import StopNow
    from nnqs.parallel import LOCAL, RankLostError, init_from_env, shutdown

    comm = LOCAL
    try:
        if sum(map(bool, (args.config, args.fcidump, args.example))) != 1:
            raise ConfigError("give one of a CONFIG.toml, --fcidump FILE or --example NAME")
        if args.example:
            from nnqs.examples import example_path

            try:
                config = load_config(example_path(args.example))
            except ValueError as error:
                raise ConfigError(str(error)) from None
        elif args.fcidump:
            if not Path(args.fcidump).is_file():
                raise ConfigError(f"{args.fcidump}: no such FCIDUMP file")
            name = Path(args.fcidump).stem
            config = config_from_dict({"molecule": {"name": name, "fcidump": args.fcidump}})
        else:
            config = load_config(args.config)
        for section, key, value in (("run", "device", args.device), ("run", "seed", args.seed),
                                    ("optim", "steps", args.steps), ("optim", "adamw_steps", args.adamw_steps)):
            if value is not None:
                config = config.replace(section, **{key: value})
        if args.stop_after is not None and args.stop_after < 1:
            raise ConfigError(f"--stop-after must be >= 1, got {args.stop_after}")
        out = args.out or str(Path("runs") / config.molecule.name)
        if args.extend and not args.resume:
            raise ConfigError("--extend goes with --resume")
        check_device(config.run.device)
        try:
            comm, device = init_from_env(config.run.device, timeout_seconds=config.run.collective_timeout)
        except ValueError as error:  # torchrun's variables, malformed
            raise ConfigError(str(error)) from None
        if comm.world_size > 1:
            config = config.replace("run", device=device)
            if not comm.is_main:  # one copy of each warning
                logging.getLogger().setLevel(logging.ERROR)
        progress = not args.no_progress and sys.stderr.isatty()
        # The start (which CI state, its size and energy, the fit's progress) can take minutes
        # before the first step: say what it is doing. Without a progress bar (a log file, a
        # batch job, --no-progress) the run also logs a line per checkpoint interval.
        names = ("nnqs.app.presets", "nnqs.app.runconfig", "nnqs.training.start", "nnqs.training.fit",
                 "nnqs.training.subspace") + (() if progress else ("nnqs.app.run.progress",))
        with _info_from(names if comm.is_main else ()):
            result = run(config, out, resume=args.resume, overwrite=args.overwrite, extend=args.extend,
                         stop_after=args.stop_after, progress=progress, comm=comm)
    except RankLostError as error:
        print(f"nnqs: error: {error}", file=sys.stderr)
        return EXIT_FAILED
    except StopNow as stopped:
        if comm.is_main:
            print(f"nnqs: stopped by {stopped.name} at once; continue from the last checkpoint with --resume",
                  file=sys.stderr)
        return 128 + stopped.signum
    except USER_ERRORS as error:
        return _bad_input(error, comm)
    except ModuleNotFoundError as error:
        if error.name in ("pyscf", "openfermion"):
            return _bad_input(f"this run needs {error.name}: pip install 'nnqs[chem]'", comm)
        raise
    except OSError as error:  # the output folder: an existing file, a path under a file, no permission
        return _bad_input(_os_message(error), comm)
    finally:
        shutdown()
    if "signal" in result:   # every rank stopped at the same step; rank 0 wrote the checkpoint and says so
        if comm.is_main:
            print(f"stopped by {result['signal']} at step {result['stopped_at']}; continue with --resume "
                  f"(outputs in {out})")
        return 128 + int(getattr(signal.Signals, result["signal"]))
    if not comm.is_main:
        return EXIT_OK
    if "stopped_at" in result:
        print(f"stopped after step {result['stopped_at']}; continue with --resume (outputs in {out})")
        return EXIT_OK
    print(_summary(result, out))
    print(f"  code: {describe()}")
    return EXIT_OK


def _bad_input(message, comm=None) -> int:
    # Under torchrun every rank meets the same bad input (or raises rank 0's): it is said once.
    if (comm is None or comm.is_main) and os.environ.get("RANK", "0") in ("", "0"):
        print(f"nnqs: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _os_message(error: OSError) -> str:
    """``PATH: reason`` of an OS error, in one line; for a full disk or quota, the space left
    there and what to do."""
    where = error.filename if error.filename is not None else ""
    message = f"{where}: {error.strerror or error}" if where else str(error)
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        folder = os.path.dirname(os.path.abspath(where)) if where else os.getcwd()
        while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
            folder = os.path.dirname(folder)
        free = shutil.disk_usage(folder).free
        message += (f" ({free / 2**20:.1f} MiB free in {folder}); the last checkpoint is intact: "
                    "free some space and continue with --resume")
    return message


def describe() -> str:
    from nnqs.app.provenance import describe as code

    return code()


def _subspace_lines(result: dict) -> list[str]:
    """``result.json``'s subspace, subspace + PT2 and extrapolated energies, each with its error
    against FCI (or DMRG) where known; none for a run without them."""
    if result.get("energy_subspace") is None:
        return []
    ref = next((k for k in ("fci", "dmrg") if result.get(f"subspace_error_vs_{k}_mha") is not None), None)

    def against(name):
        value = result.get(f"{name}_error_vs_{ref}_mha")
        return f" ({value:+.3f} mHa vs {ref.upper()})" if ref and value is not None else ""

    lines = [f"  subspace energy (H diagonalised on {result['subspace_size']} determinants, variational): "
             f"{result['energy_subspace']:.8f} Ha{against('subspace')}"]
    if result.get("energy_pt2") is not None:
        lines.append(f"  subspace + PT2 ({result['pt2_form']}): {result['energy_pt2']:.8f} "
                     f"+- {result['energy_pt2_stderr']:.1e} Ha{against('pt2')}")
    if result.get("energy_extrapolated") is not None:
        sizes = ", ".join(str(p["size"]) for p in result["extrapolation_points"])
        lines.append(f"  E_var extrapolated to PT2 -> 0 (supports of {sizes}): {result['energy_extrapolated']:.8f} "
                     f"+- {result['energy_extrapolated_stderr']:.1e} Ha{against('extrapolated')}")
    return lines


def _summary(result: dict, out: str) -> str:
    from hamiltonians.references.dmrg import dmrg_label

    refs = result["references"]
    lines = [f"{result['molecule']}: E = {result['energy']:.8f} +- {result['energy_stderr']:.1e} Ha "
             f"(variance {result['variance']:.2e}, {result['n_unique']} unique of {result['n_samples']:.3g} samples)"]
    if result.get("energy_exact_variational") is not None:
        lines.append(f"  exact <H> of the network over the full space: {result['energy_exact_variational']:.8f} Ha")
    for key, label in (("hf", "HF"), ("ccsd_t", "CCSD(T)"), ("fci", "FCI"), ("dmrg", "DMRG")):
        if refs.get(key) is not None:
            lines.append(f"  {label:8s} {refs[key]:.8f} Ha")
    if result.get("error_vs_fci_mha") is not None:
        ok = "within" if abs(result["error_vs_fci_mha"]) < 1.6 else "outside"
        lines.append(f"  error vs FCI: {result['error_vs_fci_mha']:.3f} mHa ({ok} chemical accuracy)")
    elif result.get("error_vs_dmrg_mha") is not None:
        lines.append(f"  error vs {dmrg_label(result.get('dmrg'))}: {result['error_vs_dmrg_mha']:.3f} mHa")
    lines += _subspace_lines(result)
    start = f"start (CI solve and fit) {result['start_seconds']:.1f} s, " if "start_seconds" in result else ""
    evaluation = f" + {result['evaluation_seconds']:.1f} s final evaluation" if "evaluation_seconds" in result else ""
    lines.append(f"  {start}{result['steps']} steps in {result['wall_seconds']:.1f} s{evaluation} on "
                 f"{result['device']}; outputs in {out}")
    return "\n".join(lines)


@contextlib.contextmanager
def _info_from(names: tuple[str, ...]):
    """These loggers at INFO inside the block, as they were after it."""
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%Y-%m-%d %H:%M:%S")
    args = _build_parser().parse_args(argv)
    commands = {"check-consistency": _check_consistency, "run": _run, "analyse": _analyse, "reference": _reference}
    try:
        code = commands[args.command](args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except BrokenPipeError:  # `nnqs ... | head -1`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
