"""nnqs: autoregressive Transformer neural-network quantum states for quantum chemistry.

Four layers under ``nnqs/`` (beside ``hamiltonians`` and ``samplers``, which import nothing
of the project); each imports only those before it (docs/design.md §2):

* :mod:`nnqs.wavefunction`: tokens and the electron constraint, the KV cache, attention, the
  Transformer wavefunction (its public names are re-exported here);
* :mod:`nnqs.parallel`: the collectives of a step, for one process or a ``torch.distributed`` group;
* :mod:`nnqs.training`: settings, estimators, the trainer and its run loop, minSR, the start,
  the final evaluation, analysis;
* :mod:`nnqs.app`: the run configuration (TOML), the system, provenance, the run's files and the CLI.
"""

from nnqs import wavefunction
from nnqs.wavefunction import *  # noqa: F401,F403  (the wavefunction's public names)

__all__ = list(wavefunction.__all__)
__version__ = "0.1.0"
