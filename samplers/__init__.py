"""Autoregressive samplers. They know a model only through :mod:`samplers.protocol`."""

from samplers.adaptive import UniqueWindow
from samplers.protocol import AutoregressiveModel, SampleBatch

__all__ = ["AutoregressiveModel", "SampleBatch", "UniqueWindow"]
