"""Configuration of the Transformer wavefunction (documented, frozen dataclasses).

:class:`ModelConfig` is the architecture alone: the ``[model]`` table of a run config, the
same for any molecule. :class:`WavefunctionConfig` adds what the molecule fixes (orbitals and
electrons) and is what :class:`nnqs.TransformerWavefunction` is built from. The architecture
fields are listed once, in :class:`ModelConfig`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from nnqs.errors import InputError
from nnqs.wavefunction.tokens import ElectronConstraint

DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class ModelConfig:
    """Architecture of :class:`nnqs.TransformerWavefunction`, independent of the molecule.

    Attributes:
        d_model: width of the residual stream.
        n_layers: Transformer blocks.
        n_heads: query heads; ``d_head = d_model // n_heads``.
        n_kv_heads: key/value heads (``None`` = ``n_heads``); fewer than ``n_heads`` gives
            grouped-query attention, and must divide ``n_heads``.
        mlp_ratio: hidden width of each block's MLP as a multiple of ``d_model``.
        phase_hidden: hidden layer widths of the phase MLP (input: one-hot tokens ``4N``); the
            default is two layers of 128 (minSR's solve grows with the parameter count ``P``).
            An empty tuple gives a constant (zero) phase.
        phase_init_std: standard deviation (radians) of the initial phases on random
            configurations; spread phases avoid the saddle at equal phases (0 = PyTorch's init).
        dtype: parameter dtype name: ``"float32"`` (default), ``"float64"`` or ``"bfloat16"``.
    """

    d_model: int = 32
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int | None = None
    mlp_ratio: int = 4
    phase_hidden: tuple[int, ...] = (128, 128)
    phase_init_std: float = 1.0
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.d_model < 1 or self.n_layers < 1 or self.n_heads < 1 or self.mlp_ratio < 1:
            raise InputError("d_model, n_layers, n_heads and mlp_ratio must be positive")
        if self.d_model % self.n_heads:
            raise InputError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        kv = self.kv_heads
        if kv < 1 or self.n_heads % kv:
            raise InputError(f"n_kv_heads={kv} must be positive and divide n_heads={self.n_heads}")
        if self.dtype not in DTYPES:
            raise InputError(f"dtype must be one of {tuple(DTYPES)}, got {self.dtype!r}")
        if any(int(h) < 1 for h in self.phase_hidden):
            raise InputError(f"phase_hidden widths must be positive, got {list(self.phase_hidden)}")
        object.__setattr__(self, "phase_hidden", tuple(int(h) for h in self.phase_hidden))

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def for_system(self, n_orbitals: int, n_alpha: int, n_beta: int) -> "WavefunctionConfig":
        """This architecture for a molecule with ``n_orbitals`` spatial orbitals."""
        return WavefunctionConfig(n_orbitals=n_orbitals, n_alpha=n_alpha, n_beta=n_beta, **dataclasses.asdict(self))


@dataclass(frozen=True, kw_only=True)
class WavefunctionConfig(ModelConfig):
    """An architecture for one molecule (all fields keyword-only).

    Attributes:
        n_orbitals: spatial orbitals ``N`` = sequence length (one token per orbital).
        n_alpha, n_beta: electrons of each spin; every conditional is masked so that exactly
            these are placed (see :class:`nnqs.wavefunction.tokens.ElectronConstraint`).
        (and every field of :class:`ModelConfig`)
    """

    n_orbitals: int
    n_alpha: int
    n_beta: int

    def __post_init__(self) -> None:
        super().__post_init__()
        self.electron_constraint()  # validates the electron counts

    @property
    def architecture(self) -> ModelConfig:
        """The :class:`ModelConfig` part."""
        names = [f.name for f in dataclasses.fields(ModelConfig)]
        return ModelConfig(**{name: getattr(self, name) for name in names})

    def electron_constraint(self) -> ElectronConstraint:
        return ElectronConstraint(self.n_orbitals, self.n_alpha, self.n_beta)
