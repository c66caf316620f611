"""The training layer: VMC on a wavefunction, given a Hamiltonian and its own settings.

Read in this order: ``settings`` (:class:`SamplerConfig`, :class:`LocalEnergyConfig`,
:class:`OptimConfig`, :class:`StopConfig`), ``estimators`` (weights, local energies, energy and
loss), ``window`` (adaptive ``n_samples``), ``schedule`` (learning rates), ``sr`` (minSR),
``trainer`` (one step = sample, local energies, gradient, preconditioner, update; checkpointable
state), ``driver`` (the run loop and its callbacks), ``evaluation`` (the final evaluation),
``fit`` and ``start`` (the start: the network fitted to a CI state), ``analysis``
(amplitude/sign split of a trained state's error), ``convergence`` (stopping, extrapolation).
It imports the wavefunction and parallel layers, ``samplers`` and ``hamiltonians``; never
:mod:`nnqs.app`.
"""

from nnqs.training.driver import StopOnPlateau, run_steps
from nnqs.training.estimators import EnergyEstimate, estimate_energy, local_energies, sample_weights, vmc_loss
from nnqs.training.evaluation import FinalEvaluation, final_evaluation
from nnqs.training.settings import LocalEnergyConfig, OptimConfig, SamplerConfig, StopConfig
from nnqs.training.start import Start, StartSettings
from nnqs.training.trainer import StepRecord, Trainer
from nnqs.training.window import UniqueWindow

__all__ = [
    "EnergyEstimate",
    "FinalEvaluation",
    "LocalEnergyConfig",
    "OptimConfig",
    "SamplerConfig",
    "Start",
    "StartSettings",
    "StepRecord",
    "StopConfig",
    "StopOnPlateau",
    "Trainer",
    "UniqueWindow",
    "estimate_energy",
    "final_evaluation",
    "local_energies",
    "run_steps",
    "sample_weights",
    "vmc_loss",
]
