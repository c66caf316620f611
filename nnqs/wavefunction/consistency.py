"""Cached decode vs uncached full pass: the check behind ``nnqs check-consistency``.

The equivalence the design rests on (docs/design.md §3): for any weights and any valid prefix,
row ``i`` of ``model.conditionals(x)`` equals the ``i``-th output of ``decode_step`` fed
``x_0 .. x_{i-1}``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from nnqs.wavefunction.config import WavefunctionConfig
from nnqs.wavefunction.model import TransformerWavefunction
from nnqs.wavefunction.tokens import random_valid_tokens

log = logging.getLogger(__name__)

#: Maximum |p_cached - p_full| accepted per parameter dtype.
TOLERANCES = {"float64": 1e-12, "float32": 1e-5, "bfloat16": 5e-2}


@torch.no_grad()
def cached_conditionals(model: TransformerWavefunction, tokens: torch.Tensor) -> torch.Tensor:
    """Conditionals ``[B, N, 4]`` decoded one position at a time through a fresh cache."""
    cache = model.init_cache(tokens.shape[0])
    tokens = tokens.to(model.device)
    rows = [model.decode_step(None, cache)]
    for i in range(1, model.n_orbitals):
        rows.append(model.decode_step(tokens[:, i - 1], cache))
    return torch.stack(rows, dim=1)


@torch.no_grad()
def max_difference(model: TransformerWavefunction, tokens: torch.Tensor) -> float:
    """``max |conditionals(tokens) - cached_conditionals(tokens)|`` over all entries."""
    full = model.conditionals(tokens)
    return float((full - cached_conditionals(model, tokens)).abs().max())


@dataclass(frozen=True)
class ConsistencyResult:
    dtype: str
    max_abs_diff: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.max_abs_diff <= self.tolerance


def check_consistency(
    *,
    n_orbitals: int = 16,
    n_layers: int = 4,
    n_heads: int = 4,
    n_kv_heads: int | None = None,
    d_model: int = 32,
    batch: int = 64,
    dtypes: tuple[str, ...] = ("float64", "float32"),
    device: str = "cpu",
    seed: int = 0,
    compile: bool = False,
) -> list[ConsistencyResult]:
    """Random model per dtype, random valid configurations; compare both passes (``compile``:
    both through ``torch.compile``, :meth:`TransformerWavefunction.compile_passes`)."""
    results = []
    for dtype in dtypes:
        torch.manual_seed(seed)
        n_alpha = n_orbitals // 2
        config = WavefunctionConfig(
            n_orbitals=n_orbitals,
            n_alpha=n_alpha,
            n_beta=n_orbitals - n_alpha,
            d_model=d_model,
            n_layers=n_layers,
            n_heads=n_heads,
            n_kv_heads=n_kv_heads,
            dtype=dtype,
            phase_hidden=(),
        )
        model = TransformerWavefunction(config).to(device).eval()
        model.compile_passes(compile)
        generator = torch.Generator().manual_seed(seed)
        tokens = random_valid_tokens(model.constraint, batch, generator).to(device)
        diff = max_difference(model, tokens)
        results.append(ConsistencyResult(dtype, diff, TOLERANCES[dtype]))
        log.info("%s: max |p_cached - p_full| = %.3e", dtype, diff)
    return results
