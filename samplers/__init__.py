"""Autoregressive samplers. They know a model only through :mod:`samplers.protocol`.

``samplers.bas.sample`` (cached BAS), ``samplers.naive.sample`` (the uncached baseline, same
samples for the same seed) and ``samplers.exact.enumerate_support`` (every configuration with
its probability, for small systems).
"""

from samplers.protocol import AutoregressiveModel, DecodeCache, SampleBatch

__all__ = ["AutoregressiveModel", "DecodeCache", "SampleBatch"]
