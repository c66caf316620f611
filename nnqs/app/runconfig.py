"""Run configuration: documented frozen dataclasses, read from TOML.

A config file has one table per concept: ``[molecule]`` (:class:`MoleculeConfig`), ``[model]``
(:class:`nnqs.wavefunction.config.ModelConfig`), ``[sampler]``, ``[local_energy]``, ``[optim]``
and ``[stop]`` (:class:`nnqs.training.settings.SamplerConfig`, ``LocalEnergyConfig``,
``OptimConfig``, ``StopConfig``), ``[start]`` (:class:`nnqs.training.start.StartSettings`),
``[subspace]`` (:class:`nnqs.training.subspace.SubspaceConfig`) and ``[run]`` (:class:`RunSettings`); every key is optional except the molecule's source. Unknown
tables or keys raise :class:`ConfigError` naming them, so a typo never passes silently, and a
key that moved (:data:`MOVED`) names its new place::

    [molecule]
    geometry = "Li 0 0 0; H 0 0 1.5949"   # PySCF atom string, Angstrom
    basis = "sto-3g"

    [optim]
    steps = 1000
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


from nnqs.app.presets import PRESET_NAMES
from nnqs.errors import InputError
from nnqs.training.settings import (
    LocalEnergyConfig,
    OptimConfig,
    SamplerConfig,
    StartSettings,
    StopConfig,
    SubspaceConfig,
)
from nnqs.wavefunction.config import ModelConfig

log = logging.getLogger(__name__)


class ConfigError(InputError):
    """A bad configuration: unknown key, wrong type or impossible value."""


@dataclass(frozen=True)
class MoleculeConfig:
    """Where the Hamiltonian comes from: a PySCF molecule or an FCIDUMP file.

    Attributes:
        name: label used in reports.
        geometry: PySCF atom string (``"N 0 0 0; N 0 0 1.0977"``), Angstrom.
        basis: basis set name.
        charge, spin: total charge and ``2S`` (PySCF convention).
        frozen_core: lowest spatial orbitals kept doubly occupied.
        active_space: ``[n_electrons, n_orbitals]`` window above the core, or empty.
        fcidump: path of an FCIDUMP file (instead of ``geometry``); electrons from its header.
        orbital_order: ``"given"``, ``"reversed"``, ``"frontier_last"`` (orbitals far from the
            Fermi level first, HOMO/LUMO last; see :func:`nnqs.app.system.resolve_order`),
            ``"fiedler"`` (along the exchange graph's Fiedler vector, from the integrals:
            :func:`hamiltonians.reference_determinant.fiedler_order`) or a permutation (list of
            spatial orbital indices): the autoregressive order of the orbitals.
        orbitals: the orbitals the run solves in (:func:`nnqs.app.orbitals.choose_orbitals`):
            ``"auto"`` (the given ones, unless none of their determinants is a Hartree-Fock one,
            an SCF converges in them and a small CIPSI reaches lower in that SCF's canonical
            orbitals: then those, so that a localised FCIDUMP costs what the canonical one does
            near equilibrium; then, past 8,192 determinants, those orbitals' natural ones where a
            CIPSI of 8,192 determinants reaches lower in them), ``"given"``, ``"scf"``, or
            ``"natural"`` (always the natural orbitals of that CIPSI state in ``"auto"``'s set,
            canonical orbitals included: for multireference states).
        reference: the determinant every expansion starts from (the start's CI spaces, the
            loop's first pool, the network's ``p_HF``): ``"auto"`` (the lowest ``<D|H|D>`` a
            search over occupations finds, :func:`hamiltonians.reference_determinant.lowest_determinant`;
            the lowest-index determinant wherever that is lowest, as for canonical orbitals; in
            natural orbitals the most occupied ones, :func:`nnqs.app.orbitals.natural_reference`)
            or ``"aufbau"`` (the lowest-index orbitals occupied, whatever their energy).
        dmrg: beyond FCI (more than 1e7 determinants), the reference is DMRG (block2, minutes
            to hours; cached); ``false`` computes none but still reports one already in the
            cache (from ``nnqs reference`` or ``experiments/tools/dmrg_reference.py``).
        slow_references: compute the slow references (FCI over 2e6 determinants, DMRG) after
            training, once ``result.json`` is written, and merge them into it; ``false`` leaves
            them to ``nnqs reference RUN``. They never run before the first step
            (:mod:`nnqs.app.references`); one already cached is reported either way.
    """

    name: str = "molecule"
    geometry: str = ""
    basis: str = "sto-3g"
    charge: int = 0
    spin: int = 0
    frozen_core: int = 0
    active_space: tuple[int, ...] = ()
    fcidump: str = ""
    orbital_order: str | tuple[int, ...] = "given"
    orbitals: str = "auto"
    reference: str = "auto"
    dmrg: bool = True
    slow_references: bool = True

    def __post_init__(self) -> None:
        if bool(self.geometry) == bool(self.fcidump):
            raise ConfigError("[molecule] needs exactly one of 'geometry' or 'fcidump'")
        if self.active_space and len(self.active_space) != 2:
            raise ConfigError("[molecule] active_space must be [n_electrons, n_orbitals]")
        order = self.orbital_order
        if isinstance(order, str) and order not in ORBITAL_ORDERS:
            raise ConfigError(f"[molecule] orbital_order must be one of {', '.join(map(repr, ORBITAL_ORDERS))} or a "
                              f"list, got {order!r}")
        if self.orbitals not in ORBITALS:
            raise ConfigError(f"[molecule] orbitals must be one of {', '.join(map(repr, ORBITALS))}, "
                              f"got {self.orbitals!r}")
        if self.reference not in REFERENCES:
            raise ConfigError(f"[molecule] reference must be one of {', '.join(map(repr, REFERENCES))}, "
                              f"got {self.reference!r}")


#: The named orbital orders and reference determinants of ``[molecule]``.
ORBITAL_ORDERS = ("given", "reversed", "frontier_last", "fiedler")
REFERENCES = ("auto", "aufbau")
ORBITALS = ("auto", "given", "scf", "natural")   # hamiltonians.orbitals.ORBITALS


@dataclass(frozen=True)
class RunSettings:
    """Where and how to run: seed, device, checkpoint cadence.

    Attributes:
        checkpoint_every, checkpoint_seconds: a checkpoint is written after every
            ``checkpoint_every`` steps or once ``checkpoint_seconds`` of wall time have passed
            since the last one, whichever comes first (so a crash loses at most about a minute).
        threads: torch CPU threads (per process under torchrun); 0 = PyTorch's default.
        max_memory_gib: the memory a process may take (GiB; 0 = what the machine or its cgroup
            has available): a run whose estimated peak (:mod:`nnqs.training.memory`) is larger
            stops before the start with one line naming the setting to change.
        collective_timeout: seconds a process of a multi-process run (torchrun) waits in a
            collective for another before the job stops with an error (a rank that died ends
            the others sooner: its closed connection is noticed at once).
        compile: run the network's uncached full pass (the gradient's, the amplitudes', the
            fits') and its decode steps' attention (the sampler's) through ``torch.compile``
            (:meth:`nnqs.wavefunction.model.TransformerWavefunction.compile_passes`): needs a
            C++ compiler on a CPU, costs ~20-45 s of compilation at the first passes, saves ~30 %
            of a float32 VMC step's update on a CPU (``bench_unique_cost``).
        preset: ``"auto"`` or a preset's name (:data:`nnqs.app.presets.PRESETS`): the values of
            the presettable settings the config leaves unset (:mod:`nnqs.app.presets`; ``"auto"``
            picks one from the size of the space).
    """

    seed: int = 0
    device: str = "cpu"
    checkpoint_every: int = 100
    checkpoint_seconds: float = 60.0
    threads: int = 0
    collective_timeout: float = 600.0
    max_memory_gib: float = 0.0
    compile: bool = False
    preset: str = "auto"

    def __post_init__(self) -> None:
        if self.preset not in PRESET_NAMES:
            raise ConfigError(f"[run] preset must be one of {', '.join(map(repr, PRESET_NAMES))}, got {self.preset!r}")
        if self.checkpoint_every < 1 or self.threads < 0:
            raise ConfigError(f"[run] checkpoint_every ({self.checkpoint_every}) must be >= 1 and threads "
                              f"({self.threads}) >= 0")
        if not self.checkpoint_seconds > 0:
            raise ConfigError(f"[run] checkpoint_seconds must be > 0, got {self.checkpoint_seconds}")
        if not self.max_memory_gib >= 0:
            raise ConfigError(f"[run] max_memory_gib must be >= 0, got {self.max_memory_gib}")
        if not self.collective_timeout > 0:
            raise ConfigError(f"[run] collective_timeout must be > 0, got {self.collective_timeout}")
        parse_device(self.device)


def parse_device(device: str) -> torch.device:
    """``torch.device(device)``, or :class:`ConfigError` if torch does not know the name."""
    try:
        return torch.device(device)
    except RuntimeError:
        raise ConfigError(f"unknown device {device!r} (use cpu, cuda or cuda:N)") from None


def check_device(device: str) -> None:
    """Raise :class:`ConfigError` unless ``device`` is known and available on this machine."""
    if parse_device(device).type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} requested but CUDA is not available")


@dataclass(frozen=True)
class RunConfig:
    """A run's tables. A presettable setting (:mod:`nnqs.app.presets`) is ``None`` until the
    run's preset fills it; any other value is the config's, from a file, the command line or
    code alike."""

    molecule: MoleculeConfig
    model: ModelConfig = field(default_factory=ModelConfig)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    start: StartSettings = field(default_factory=StartSettings)
    local_energy: LocalEnergyConfig = field(default_factory=LocalEnergyConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    stop: StopConfig = field(default_factory=StopConfig)
    subspace: SubspaceConfig = field(default_factory=SubspaceConfig)
    run: RunSettings = field(default_factory=RunSettings)

    def to_dict(self) -> dict:
        return {name: dataclasses.asdict(getattr(self, name)) for name in _SECTIONS}

    def matches(self, saved: dict) -> bool:
        """Whether ``saved`` (a run's effective config as saved, e.g. ``result.json``'s
        ``config``) is a run of this config: every setting this config sets has the saved value
        (those it leaves unset are the preset's, which the molecule's space decides)."""
        if not isinstance(saved, dict):
            return False
        mine = json.loads(json.dumps(self.to_dict()))   # tuples as JSON lists
        return all(isinstance(saved.get(section), dict) and key in saved[section] and saved[section][key] == value
                   for section, table in mine.items() for key, value in table.items() if value is not None)

    def dump_flags(self, logger: logging.Logger | None = None) -> None:
        """Log every setting of the run, one line per table (``[optim] steps = 700, lr = 0.1,
        ...``), as PySCF's ``dump_flags`` does; a run logs them once its preset is resolved."""
        for name, table in self.to_dict().items():
            (logger or log).info("[%s] %s", name, ", ".join(f"{k} = {v}" for k, v in table.items()))

    def replace(self, section: str, **changes) -> "RunConfig":
        """A copy with ``changes`` applied to one table (e.g. ``replace("optim", steps=10)``)."""
        try:
            table = dataclasses.replace(getattr(self, section), **changes)
        except ConfigError:
            raise
        except ValueError as error:  # the training and wavefunction settings raise ValueError
            raise ConfigError(f"[{section}] {error}") from None
        return dataclasses.replace(self, **{section: table})


_SECTIONS = {
    "molecule": MoleculeConfig,
    "model": ModelConfig,
    "sampler": SamplerConfig,
    "start": StartSettings,
    "local_energy": LocalEnergyConfig,
    "optim": OptimConfig,
    "stop": StopConfig,
    "subspace": SubspaceConfig,
    "run": RunSettings,
}

#: Keys that moved to another table (old ``table.key`` -> new ``table.key``); a config with an
#: old key stops with a line naming the new one.
MOVED = {
    "optim.pretrain": "start.mode",
    "optim.pretrain_hf": "start.hf_target",
    "optim.pretrain_cas": "start.cas",
    "optim.pretrain_steps": "start.steps",
    "optim.pretrain_max_determinants": "start.max_determinants",
    "optim.pretrain_tail": "start.tail",
    "optim.pretrain_sci_determinants": "start.sci_determinants",
    "optim.pretrain_min_fidelity": "start.min_fidelity",
    "optim.local_energy": "local_energy.mode",
    "optim.local_energy_threshold": "local_energy.threshold",
    "optim.coarse_steps": "local_energy.coarse_steps",
    "optim.coarse_local_energy": "local_energy.coarse_mode",
    "optim.coarse_threshold": "local_energy.coarse_threshold",
    "optim.amplitudes": "local_energy.amplitudes",
    "optim.weights": "sampler.weights",
    "optim.stop_window": "stop.window",
    "optim.stop_tolerance": "stop.tolerance",
    "run.recipe": "run.preset",
}
#: Keys that were removed, with the reason.
REMOVED = {
    "optim.anchors": "anchors were removed: they changed no measured energy (experiments/LOG.md)",
}


def _build(section: str, cls, values: dict):
    if not isinstance(values, dict):
        raise ConfigError(f"[{section}] must be a table")
    known = {f.name: f for f in dataclasses.fields(cls)}
    for key in sorted(set(values) - set(known)):
        old = f"{section}.{key}"
        if old in MOVED:
            new_table, new_key = MOVED[old].split(".")
            raise ConfigError(f"{old} is now {MOVED[old]} (key {new_key!r} in the [{new_table}] table)")
        if old in REMOVED:
            raise ConfigError(f"{old}: {REMOVED[old]}")
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(f'{section}.{k}' for k in unknown)}; known: {', '.join(sorted(known))}")
    converted: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, list):
            value = tuple(value)
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{section}.{key} must be a finite number, got {value!r}")
        default = known[key].default
        if default is None:   # a presettable setting: unset (None) or of the type of its default preset's value
            if value is None:
                converted[key] = value
                continue
            default = getattr(cls, "DEFAULTS", {}).get(key)
        expected = type(default) if default is not dataclasses.MISSING and default is not None else None
        if expected in (int, float, str, bool):
            ok = isinstance(value, expected) and not (expected is not bool and isinstance(value, bool))
            ok = ok or (expected is float and isinstance(value, int) and not isinstance(value, bool))
            if key == "orbital_order" and isinstance(value, tuple):
                ok = True
            if not ok:
                raise ConfigError(f"{section}.{key} must be of type {expected.__name__}, got {value!r}")
        converted[key] = value
    try:
        return cls(**converted)
    except ConfigError:
        raise
    except (TypeError, ValueError) as error:  # the layers below raise ValueError
        raise ConfigError(f"[{section}] {error}") from None


def config_from_dict(data: dict) -> RunConfig:
    """Build a :class:`RunConfig` from nested tables; raise :class:`ConfigError` on bad input."""
    unknown = sorted(set(data) - set(_SECTIONS))
    if unknown:
        raise ConfigError(f"unknown table(s) {unknown}; known: {sorted(_SECTIONS)}")
    if "molecule" not in data:
        raise ConfigError("the config needs a [molecule] table")
    return RunConfig(**{name: _build(name, cls, data[name]) for name, cls in _SECTIONS.items() if name in data})


def load_config(path: str | Path) -> RunConfig:
    """Read a TOML config file."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, not a TOML config file") from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the config ({error.strerror or error})") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: {error}") from None
    try:
        return config_from_dict(data)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None
