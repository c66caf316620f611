"""nnqs: autoregressive Transformer neural-network quantum states for quantum chemistry.

Three layers, each importing only the ones before it:

* :mod:`nnqs.wavefunction`: tokens and the electron constraint, the KV cache, attention, the
  Transformer wavefunction (its public names are re-exported here);
* :mod:`nnqs.training`: estimators, the VMC trainer, minSR, supervised starts, analysis;
* :mod:`nnqs.app`: the run configuration (TOML), the system, the run loop and the CLI.
"""

from nnqs import wavefunction
from nnqs.wavefunction import *  # noqa: F401,F403  (the wavefunction's public names)

__all__ = list(wavefunction.__all__)
__version__ = "0.1.0"
