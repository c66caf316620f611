"""nnqs: autoregressive Transformer neural-network quantum states for quantum chemistry."""

from nnqs.cache import CacheFullError, KVCache
from nnqs.config import WavefunctionConfig
from nnqs.model import TransformerWavefunction
from nnqs.tokens import ElectronConstraint, occupations_to_tokens, tokens_to_occupations

__all__ = [
    "CacheFullError",
    "ElectronConstraint",
    "KVCache",
    "TransformerWavefunction",
    "WavefunctionConfig",
    "occupations_to_tokens",
    "tokens_to_occupations",
]
__version__ = "0.1.0"
