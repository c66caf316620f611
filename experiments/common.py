"""Shared helpers of the scripts under ``experiments/``: the one module they import besides the packages.

* paths: ``EXPERIMENTS``, ``CONFIGS``, ``RESULTS``;
* benchmarks: ``--device`` (:func:`add_device_argument`), peak memory, timing, the CPU's name,
  :func:`save_results` (JSON with provenance);
* random-weight sampling models (``bench_sampling``, ``bench_sampling_revisions``, ``decode_floor``):
  :func:`electrons_for`, :func:`build_model`, :func:`generator`, :func:`calibrate`;
* :func:`calibrate_n_samples` (``bench_vmc_step``, ``bench_distributed``);
* the molecule set and the defaults on a molecule (the drivers and the studies):
  :func:`molecule_set`, :func:`default_config`, :func:`parse_changes`;
* :func:`config_of_result`: the :class:`RunConfig` of a result or checkpoint, also of one
  written before the config tables were split (keys moved as :data:`nnqs.app.runconfig.MOVED`).
"""

from __future__ import annotations

import argparse
import ast
import copy
import dataclasses
import math
import os
import platform
import sys
import time
from pathlib import Path

import torch

from nnqs import TransformerWavefunction, WavefunctionConfig
from nnqs.app.io import write_json
from nnqs.app.provenance import provenance
from nnqs.app.runconfig import MOVED, REMOVED, MoleculeConfig, RunConfig, RunSettings, config_from_dict, load_config
from samplers import bas

#: ``experiments/``, its configs and its results (strings, for ``os.path.join``; ``CONFIGS`` a Path).
EXPERIMENTS = os.path.dirname(os.path.abspath(__file__))
CONFIGS = Path(EXPERIMENTS) / "configs"
RESULTS = os.path.join(EXPERIMENTS, "results")

provenance()   # read (and cached) on import: results record the code a script started with

#: A timed run longer than this (seconds) is not repeated.
LONG_RUN_S = 10.0


def add_device_argument(parser, *, cpu_only: str | None = None, default: str = "cpu") -> None:
    """Add ``--device`` (parsed into a ``torch.device``) to a benchmark's ``parser``.

    ``cpu_only``: why the benchmark measures CPU code only; any other device is then refused
    at parse time with that reason (argparse's one-line error, exit code 2).
    """
    def parse(text: str) -> torch.device:
        try:
            device = torch.device(text)
        except RuntimeError as error:
            raise argparse.ArgumentTypeError(f"not a device: {text!r} ({error})") from None
        if cpu_only and device.type != "cpu":
            raise argparse.ArgumentTypeError(f"{text!r}: this benchmark measures CPU code only ({cpu_only})")
        return device

    parser.add_argument("--device", type=parse, default=default,
                        help="cpu (default), cuda, cuda:1, ..." if not cpu_only else f"cpu only: {cpu_only}")


class PeakMemory:
    """Peak extra memory of a block: CUDA allocator peak, or CPU peak-RSS rise (bytes)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.peak = None

    @staticmethod
    def _status(field):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        return None

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
        else:
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")  # reset VmHWM to the current RSS
                self.base = self._status("VmRSS")
            except OSError:
                self.base = None
        return self

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak = torch.cuda.max_memory_allocated(self.device) - self.base
        elif self.base is not None:
            self.peak = self._status("VmHWM") - self.base
        return False


def cpu_model_name() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (``platform`` as a fallback)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def timed(device: torch.device, fn):
    """``(result, seconds)``: CUDA events on CUDA, ``time.perf_counter`` otherwise."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        out = fn()
        end.record()
        torch.cuda.synchronize(device)
        return out, start.elapsed_time(end) / 1e3
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def best_of(device, repeats, fn):
    """Run ``fn`` up to ``repeats`` times (stopping early once a run is long); return the last
    result, the best time and the peak memory of the best run."""
    best, peak, result = math.inf, None, None
    for _ in range(repeats):
        with PeakMemory(device) as mem:
            result, dt = timed(device, fn)
        if dt < best:
            best, peak = dt, mem.peak
        if dt > LONG_RUN_S:
            break
    return result, best, peak


def effective_config(args) -> dict:
    """The script's parsed arguments (an ``argparse.Namespace`` or a mapping) as a JSON-safe dict."""
    items = vars(args) if hasattr(args, "__dict__") else dict(args)

    def safe(v):
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, (list, tuple)):
            return [safe(x) for x in v]
        if isinstance(v, dict):
            return {str(k): safe(x) for k, x in v.items()}
        return str(v)

    return {k: safe(v) for k, v in items.items()}


def save_results(path, results, *, args=None, extra: dict | None = None, **meta) -> dict:
    """Write ``{"meta": ..., "results": results, **extra}`` to ``path`` atomically and return it.

    ``meta`` gets the machine (CPU model, torch version, threads), the time, the command line, the
    code's ``provenance`` (:func:`nnqs.app.provenance.provenance`: package version, git commit,
    dirty flag, read when this module is imported: the code the script started with) and ``effective_config``, the script's parsed arguments (``args``) in full; then
    the caller's ``meta``, which wins on a shared key."""
    meta = {"cpu": cpu_model_name(), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "command": " ".join(["python", *sys.argv]),
            "provenance": provenance(), "effective_config": None if args is None else effective_config(args),
            **meta}
    payload = {"meta": meta, "results": results, **(extra or {})}
    write_json(path, payload)
    return payload


# ----------------------------------------------------------------------------- sampling models
MODELS = {
    "d32": dict(d_model=32, n_layers=4, n_heads=4),
    "d64": dict(d_model=64, n_layers=4, n_heads=4),
    "d256": dict(d_model=256, n_layers=4, n_heads=4),
}


def electrons_for(n: int, frontier: int) -> int:
    """Electrons per spin: about quarter filling (N//4), more if the valid space is too small
    to hold 4x the target frontier."""
    n_e = max(1, n // 4)
    while math.comb(n, n_e) ** 2 < 4 * frontier and n_e < n // 2:
        n_e += 1
    return n_e


def build_model(name: str, n: int, n_e: int, dtype: str, device: torch.device, seed: int):
    torch.manual_seed(seed)
    config = WavefunctionConfig(n_orbitals=n, n_alpha=n_e, n_beta=n_e, phase_hidden=(), dtype="float64",
                                **MODELS[name])
    reference = TransformerWavefunction(config).eval()  # float64 master copy of the random weights
    model = copy.deepcopy(reference).to(device=device, dtype=getattr(torch, dtype)).eval()
    return model, reference


def generator(device: torch.device, seed: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def calibrate(model, frontier: int, device, seed: int, max_iter: int = 4):
    """``n_samples`` whose unique count lands near ``frontier`` (cached runs; they are also the warm-up)."""
    n_samples = frontier
    for _ in range(max_iter):
        batch = bas.sample(model, n_samples, generator=generator(device, seed))
        u = batch.n_unique
        if abs(u - frontier) <= 0.1 * frontier:
            break
        n_samples = max(1, round(n_samples * frontier / max(u, 1) * (1.1 if u < frontier else 1.0)))
    return n_samples, batch


# ----------------------------------------------------------------------------- VMC step
def calibrate_n_samples(model, target: int, seed: int, start: int = 10_000, tries: int = 10) -> tuple[int, int]:
    """``(n_samples, n_unique)`` with ``n_unique`` within 20% of ``target`` (or the closest seen)."""
    n, best = start, None
    for _ in range(tries):
        u = bas.sample(model, n, generator=torch.Generator(device=model.device).manual_seed(seed)).n_unique
        if best is None or abs(u - target) < abs(best[1] - target):
            best = (n, u)
        if abs(u - target) <= 0.2 * target:
            break
        n = int(n * min(max(target / max(u, 1), 0.5), 10.0) ** 1.5)
    return best


# ----------------------------------------------------------------------------- molecule set, defaults
STO3G_SET = ("h2", "lih", "beh2", "h2o", "nh3", "ch4", "n2")
CHAIN = "; ".join(f"H 0 0 {1.0 * i:.1f}" for i in range(10))
HARD = {
    "o2_triplet": ("open shell (ROHF)", dict(geometry="O 0 0 0; O 0 0 1.2075", spin=2)),
    "c2": ("multireference singlet", dict(geometry="C 0 0 0; C 0 0 1.2425")),
    "h2o_2re": ("stretched bonds (2 R_e)", dict(geometry="O 0 0 0; H 0 1.5266 -1.1826; H 0 -1.5266 -1.1826")),
    "h10": ("hydrogen chain (1.0 A)", dict(geometry=CHAIN)),
}


def molecule_set() -> dict[str, tuple[str, MoleculeConfig]]:
    """``name -> (kind, molecule)``: the STO-3G set's molecules from their configs, then the hard ones."""
    out = {}
    for name in STO3G_SET:
        out[name] = ("STO-3G set", dataclasses.replace(load_config(CONFIGS / f"{name}.toml").molecule, name=name))
    for name, (kind, fields) in HARD.items():
        out[name] = (kind, MoleculeConfig(name=name, basis="sto-3g", **fields))
    return out


def default_config(molecule: MoleculeConfig, *, steps: int | None = None, threads: int = 1,
                   changes: dict[str, dict[str, object]] | None = None) -> RunConfig:
    """The defaults with this molecule (and, for a quick look, fewer ``steps``; to try a
    candidate recipe, ``changes`` ``{section: {field: value}}`` from :func:`parse_changes`)."""
    config = RunConfig(molecule=molecule, run=RunSettings(threads=threads))
    for section, fields in (changes or {}).items():
        config = config.replace(section, **fields)
    return config.replace("optim", steps=steps) if steps else config


def parse_changes(items: list[str]) -> dict[str, dict[str, object]]:
    """``["start.mode=sci", "sampler.unique_window=1500,3000"]`` -> ``{section: {field: value}}``;
    a value is a Python literal or a comma-separated tuple of them; a bare word is a string. A
    key that moved to another table (``optim.pretrain``) or was removed is a ``ValueError``
    naming its new place."""
    changes: dict[str, dict[str, object]] = {}
    for item in items:
        key, sep, text = item.partition("=")
        section, dot, field = key.partition(".")
        if not (sep and dot and section and field):
            raise ValueError(f"{item!r}: expected section.field=value")
        if key in MOVED:
            raise ValueError(f"{item!r}: {key} is now {MOVED[key]}")
        if key in REMOVED:
            raise ValueError(f"{item!r}: {key}: {REMOVED[key]}")
        values = tuple(_literal(v) for v in text.split(","))
        changes.setdefault(section, {})[field] = values if "," in text else values[0]
    return changes


def _literal(text: str) -> object:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def upgraded_config_dict(data: dict) -> dict:
    """A config dict (``result.json``'s or a checkpoint's ``config``) in the current tables: a
    key of an older layout moved to its table (:data:`nnqs.app.runconfig.MOVED`; e.g.
    ``optim.pretrain`` -> ``start.mode``), a removed one (``optim.anchors``) dropped. A current
    config comes back unchanged (a copy)."""
    out = {table: dict(values) if isinstance(values, dict) else values for table, values in data.items()}
    for old, new in MOVED.items():
        table, key = old.split(".")
        if isinstance(out.get(table), dict) and key in out[table]:
            new_table, new_key = new.split(".")
            value = out[table].pop(key)
            out.setdefault(new_table, {}).setdefault(new_key, value)
    for old in REMOVED:
        table, key = old.split(".")
        if isinstance(out.get(table), dict):
            out[table].pop(key, None)
    return out


def config_of_result(data: dict) -> RunConfig:
    """The :class:`RunConfig` of a result or checkpoint dict (its ``config``), old layouts included
    (:func:`upgraded_config_dict`)."""
    return config_from_dict(upgraded_config_dict(data["config"]))


# -- a network fitted to CISD and its samples (local-energy benchmarks) ------------------------
#: Molecules of the local-energy benchmarks: geometry, basis, frozen core.
LOCAL_ENERGY_SYSTEMS = {
    "lih_sto3g": ("Li 0 0 0; H 0 0 1.5949", "sto-3g", 0),
    "n2_sto3g": ("N 0 0 0; N 0 0 1.0977", "sto-3g", 0),
    "h2o_631g": ("O 0 0 0; H 0 0.757 0.587; H 0 -0.757 0.587", "6-31g", 0),
    "n2_631g_fc": ("N 0 0 0; N 0 0 1.0977", "6-31g", 2),
    "h2o_ccpvdz": ("O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692", "cc-pvdz", 0),
}


def fitted_samples(name: str, order: str, *, n_samples: int, start_steps: int, seed: int,
                   device: torch.device = torch.device("cpu")):
    """A d32/L4 network (the run default) fitted to the CISD state of ``name`` in ``order`` (on
    the CPU), then moved to ``device`` with the system's Hamiltonian, and BAS samples of it
    drawn there: ``(system, model, batch, log_psi, fit_seconds, sample_seconds)``."""
    from nnqs.app.system import build_model as build_run_model, build_system
    from nnqs.training.start import Start, StartSettings
    from nnqs.wavefunction.config import ModelConfig

    geometry, basis, frozen = LOCAL_ENERGY_SYSTEMS[name]
    system = build_system(MoleculeConfig(name=name, geometry=geometry, basis=basis, frozen_core=frozen,
                                         orbital_order=order), references=False)
    cpu = torch.device("cpu")
    torch.manual_seed(seed)
    model = build_run_model(ModelConfig(), system)
    start = Start(StartSettings(mode="cisd", steps=start_steps))
    _, fit_s = timed(cpu, lambda: start.kernel(model, system.hamiltonian, hf_occupation=system.hf_occupation,
                                               order=system.order))
    model.eval().to(device)
    system = dataclasses.replace(system, hamiltonian=system.hamiltonian.to(device=device))
    batch, sample_s = timed(device, lambda: bas.sample(model, n_samples, generator=generator(device, seed)))
    with torch.no_grad():
        log_psi = model.log_psi(batch.tokens)
    return system, model, batch, log_psi, fit_s, sample_s
