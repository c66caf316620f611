"""The training layer: VMC on a wavefunction, given a Hamiltonian and its own settings.

Read in this order: ``settings`` (:class:`SamplerConfig`, :class:`LocalEnergyConfig`,
:class:`OptimConfig`, :class:`StopConfig`), ``estimators`` (weights, local energies, energy and
loss), ``window`` (adaptive ``n_samples``), ``state`` (the variational state: model, sampler, random
streams; ``sample``, ``expect``, ``expect_and_grad``), ``schedule`` (learning rates), ``sr``
(minSR), ``preconditioners`` (identity, minSR, sr_top: a direction from the samples),
``callbacks`` (stop on plateau, the NaN guard), ``driver`` (the run loop; VMC's step = sample,
local energies, preconditioner, optimiser; checkpointable), ``evaluation`` (the final evaluation),
``fit`` and ``start`` (the start: the network fitted to a CI state), ``analysis``
(amplitude/sign split of a trained state's error), ``convergence`` (stopping, extrapolation).
It imports the wavefunction and parallel layers, ``samplers`` and ``hamiltonians``; never
:mod:`nnqs.app`.
"""

from nnqs.training.callbacks import RollBack, StopOnPlateau
from nnqs.training.driver import VMC, Driver, StepRecord, build_vmc
from nnqs.training.estimators import EnergyEstimate, estimate_energy, local_energies, sample_weights, vmc_loss
from nnqs.training.evaluation import FinalEvaluation, final_evaluation
from nnqs.training.preconditioners import Direction, Identity, MinSR, TopSR
from nnqs.training.settings import LocalEnergyConfig, OptimConfig, SamplerConfig, StopConfig
from nnqs.training.start import Start, StartSettings
from nnqs.training.state import Evaluation, VariationalState
from nnqs.training.state import UniqueWindow

__all__ = [
    "VMC",
    "Direction",
    "Driver",
    "EnergyEstimate",
    "Evaluation",
    "Identity",
    "MinSR",
    "RollBack",
    "TopSR",
    "VariationalState",
    "build_vmc",
    "FinalEvaluation",
    "LocalEnergyConfig",
    "OptimConfig",
    "SamplerConfig",
    "Start",
    "StartSettings",
    "StepRecord",
    "StopConfig",
    "StopOnPlateau",
    "UniqueWindow",
    "estimate_energy",
    "final_evaluation",
    "local_energies",
    "sample_weights",
    "vmc_loss",
]
