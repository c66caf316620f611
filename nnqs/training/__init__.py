"""The training layer: VMC on a wavefunction, given a Hamiltonian and its own settings.

Read in this order: ``settings`` (:class:`SamplerConfig`, :class:`OptimConfig`), ``estimators``
(weights, local energies, energy and loss), ``window`` (adaptive ``n_samples``), ``sr`` (minSR),
``trainer`` (one step = sample, evaluate, update; checkpointable state), ``pretrain``
(supervised CI starts), ``analysis`` (amplitude/sign split of a trained state's error).
It imports the wavefunction layer, ``samplers`` and ``hamiltonians``; never :mod:`nnqs.app`.
"""

from nnqs.training.estimators import EnergyEstimate, estimate_energy, local_energies, sample_weights, vmc_loss
from nnqs.training.settings import OptimConfig, SamplerConfig
from nnqs.training.trainer import StepRecord, Trainer
from nnqs.training.window import UniqueWindow

__all__ = [
    "EnergyEstimate",
    "OptimConfig",
    "SamplerConfig",
    "StepRecord",
    "Trainer",
    "UniqueWindow",
    "estimate_energy",
    "local_energies",
    "sample_weights",
    "vmc_loss",
]
