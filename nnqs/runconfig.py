"""Run configuration: documented frozen dataclasses, read from TOML.

A config file has the tables ``[molecule]``, ``[model]``, ``[sampler]``, ``[optim]`` and ``[run]``;
every key is optional except the molecule's source. Unknown tables or keys raise
:class:`ConfigError` naming them, so a typo never passes silently::

    [molecule]
    geometry = "Li 0 0 0; H 0 0 1.5949"   # PySCF atom string, Angstrom
    basis = "sto-3g"

    [optim]
    steps = 1000
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ConfigError(ValueError):
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
        orbital_order: ``"given"``, ``"reversed"`` or a permutation (list of spatial orbital
            indices): the autoregressive order of the orbitals.
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

    def __post_init__(self) -> None:
        if bool(self.geometry) == bool(self.fcidump):
            raise ConfigError("[molecule] needs exactly one of 'geometry' or 'fcidump'")
        if self.active_space and len(self.active_space) != 2:
            raise ConfigError("[molecule] active_space must be [n_electrons, n_orbitals]")
        order = self.orbital_order
        if isinstance(order, str) and order not in ("given", "reversed"):
            raise ConfigError(f"[molecule] orbital_order must be 'given', 'reversed' or a list, got {order!r}")


@dataclass(frozen=True)
class ModelConfig:
    """Network architecture (see :class:`nnqs.WavefunctionConfig` for the meaning)."""

    d_model: int = 32
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int | None = None
    mlp_ratio: int = 4
    phase_hidden: tuple[int, ...] = (512, 512)
    phase_init_std: float = 1.0
    dtype: str = "float32"


@dataclass(frozen=True)
class SamplerConfig:
    """Batched autoregressive sampling.

    Attributes:
        n_samples: draws per step (initial value when ``unique_window`` is set).
        unique_window: ``[low, high]``: adapt ``n_samples`` by ``factor`` so the number of
            unique samples stays inside; empty = fixed ``n_samples``.
        factor: the adaptive step factor.
        max_unique: frontier rows decoded at once (depth-first chunks beyond); 0 = unbounded.
        eval_samples: draws for the final energy evaluation (0 = 10 x the last n_samples).
    """

    n_samples: int = 100_000
    unique_window: tuple[int, ...] = ()
    factor: float = 1.25
    max_unique: int = 0
    eval_samples: int = 0

    def __post_init__(self) -> None:
        if self.n_samples < 1:
            raise ConfigError("[sampler] n_samples must be >= 1")
        if self.unique_window and (len(self.unique_window) != 2 or not 1 <= self.unique_window[0] <= self.unique_window[1]):
            raise ConfigError("[sampler] unique_window must be [low, high] with 1 <= low <= high")


@dataclass(frozen=True)
class OptimConfig:
    """Optimisation.

    Attributes:
        steps: VMC steps.
        lr: peak learning rate of ``method`` (with an AdamW phase first: of the minSR phase).
        warmup: linear warm-up steps (of the first phase; minSR after AdamW starts at its peak).
        final_lr_ratio: the learning rate decays by a cosine to ``lr * final_lr_ratio``.
        betas, eps, weight_decay: AdamW settings.
        clip: gradient-norm clipping (0 = none); with minSR it bounds the update direction.
        method: ``"adamw"`` or ``"minsr"`` (stochastic reconfiguration in sample space, applied
            as ``theta -= lr * d``; use a larger ``lr``, e.g. 0.02-0.1).
        sr_shift: minSR diagonal shift.
        adamw_steps: with ``method = "minsr"``, run this many AdamW steps first (cheap early
            progress from the pretrained start), then minSR for the rest; 0 = minSR throughout.
        adamw_lr: the peak learning rate of that AdamW phase. The NaN guard's halving of the
            learning rate carries over from one phase to the next.
        pretrain: the supervised start: ``"cisd"`` (fit the CISD wavefunction, signs included;
            see :mod:`nnqs.pretrain`), ``"casci"`` (the CASCI(``pretrain_cas``) one),
            ``"cisd_cas"`` (the ground state in the union of both spaces: for stretched bonds,
            where HF carries little weight and CISD fails; see :mod:`hamiltonians.ci`),
            ``"hf"`` (train ``-log p(HF)`` until ``p(HF)`` reaches ``pretrain_hf``) or ``"none"``.
        pretrain_hf: the ``p(HF)`` target of ``pretrain = "hf"``.
        pretrain_cas: ``[n_electrons, n_orbitals]``, the active space of ``"casci"`` and
            ``"cisd_cas"`` (around the Fermi level in energy-ordered orbitals, see
            :func:`hamiltonians.ci.cas_determinants`).
        pretrain_steps: at most this many Adam steps of the CI fit.
        local_energy: ``"exact"`` (every connected configuration) or ``"sampled"``.
        weights: ``"counts"`` (``c_u / n_samples``) or ``"psi2"`` (``|psi|^2`` renormalised
            over the unique samples).
    """

    steps: int = 1000
    lr: float = 1e-3
    warmup: int = 50
    final_lr_ratio: float = 0.1
    betas: tuple[float, ...] = (0.9, 0.99)
    eps: float = 1e-9
    weight_decay: float = 0.0
    clip: float = 1.0
    method: str = "adamw"
    sr_shift: float = 1e-4
    adamw_steps: int = 0
    adamw_lr: float = 1e-3
    pretrain: str = "cisd"
    pretrain_hf: float = 0.9
    pretrain_cas: tuple[int, ...] = ()
    pretrain_steps: int = 300
    local_energy: str = "exact"
    weights: str = "counts"

    def __post_init__(self) -> None:
        if self.steps < 0 or self.lr <= 0 or self.warmup < 0:
            raise ConfigError("[optim] steps >= 0, lr > 0 and warmup >= 0 are required")
        if self.local_energy not in ("exact", "sampled"):
            raise ConfigError(f"[optim] local_energy must be 'exact' or 'sampled', got {self.local_energy!r}")
        if self.method not in ("adamw", "minsr"):
            raise ConfigError(f"[optim] method must be 'adamw' or 'minsr', got {self.method!r}")
        if not 0 <= self.adamw_steps <= self.steps or self.adamw_lr <= 0:
            raise ConfigError(f"[optim] adamw_steps ({self.adamw_steps}) must lie in [0, steps] ({self.steps}) "
                              f"and adamw_lr ({self.adamw_lr}) must be > 0")
        if self.adamw_steps and self.method != "minsr":
            raise ConfigError("[optim] adamw_steps is the AdamW phase before minSR: it needs method = 'minsr'")
        if self.weights not in ("counts", "psi2"):
            raise ConfigError(f"[optim] weights must be 'counts' or 'psi2', got {self.weights!r}")
        if self.pretrain not in ("cisd", "casci", "cisd_cas", "hf", "none"):
            raise ConfigError("[optim] pretrain must be 'cisd', 'casci', 'cisd_cas', 'hf' or 'none', "
                              f"got {self.pretrain!r}")
        if self.pretrain in ("casci", "cisd_cas") and (
                len(self.pretrain_cas) != 2 or not all(type(x) is int and x >= 1 for x in self.pretrain_cas)):
            raise ConfigError(f"[optim] pretrain = {self.pretrain!r} needs pretrain_cas = [n_electrons, n_orbitals] "
                              f"(two positive integers), got {list(self.pretrain_cas)}")
        if not 0 <= self.pretrain_hf < 1:
            raise ConfigError("[optim] pretrain_hf must lie in [0, 1)")


@dataclass(frozen=True)
class RunSettings:
    """Where and how to run: seed, device, checkpoint and log cadence."""

    seed: int = 0
    device: str = "cpu"
    checkpoint_every: int = 100
    threads: int = 0  # torch CPU threads; 0 = PyTorch's default


@dataclass(frozen=True)
class RunConfig:
    molecule: MoleculeConfig
    model: ModelConfig = field(default_factory=ModelConfig)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    run: RunSettings = field(default_factory=RunSettings)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def replace(self, section: str, **changes) -> "RunConfig":
        """A copy with ``changes`` applied to one table (e.g. ``replace("optim", steps=10)``)."""
        return dataclasses.replace(self, **{section: dataclasses.replace(getattr(self, section), **changes)})


_SECTIONS = {
    "molecule": MoleculeConfig,
    "model": ModelConfig,
    "sampler": SamplerConfig,
    "optim": OptimConfig,
    "run": RunSettings,
}


def _build(section: str, cls, values: dict):
    if not isinstance(values, dict):
        raise ConfigError(f"[{section}] must be a table")
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(f'{section}.{k}' for k in unknown)}; known: {', '.join(sorted(known))}")
    converted = {}
    for key, value in values.items():
        if isinstance(value, list):
            value = tuple(value)
        default = known[key].default
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
    except TypeError as error:  # pragma: no cover - defensive
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
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: {error}") from None
    try:
        return config_from_dict(data)
    except ConfigError as error:
        raise ConfigError(f"{path}: {error}") from None
