"""The wavefunction layer: tokens and masks, the KV cache, attention, the Transformer model.

It knows nothing of training or of run configs. Read in this order: ``tokens`` (docs/design.md §1
conventions, the electron constraint), ``cache``, ``attention``, ``config``, ``model``,
``consistency`` (cached decode against the full pass).
"""

from nnqs.wavefunction.cache import CacheFullError, KVCache
from nnqs.wavefunction.config import ModelConfig, WavefunctionConfig
from nnqs.wavefunction.model import TransformerWavefunction
from nnqs.wavefunction.tokens import ElectronConstraint, occupations_to_tokens, tokens_to_occupations

__all__ = [
    "CacheFullError",
    "ElectronConstraint",
    "KVCache",
    "ModelConfig",
    "TransformerWavefunction",
    "WavefunctionConfig",
    "occupations_to_tokens",
    "tokens_to_occupations",
]
