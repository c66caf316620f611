"""Several processes, one VMC run: collectives over ``torch.distributed`` (docs/design.md §10).

:class:`Communicator` is the single process (every collective the identity) and
:class:`ProcessGroup` the ``torch.distributed`` one (gloo on CPU, NCCL on CUDA);
:func:`init_from_env` picks one from torchrun's environment. Training code is written once
against :class:`Communicator`, so one process runs exactly as it did without it.
"""

from nnqs.parallel.comm import LOCAL, Communicator, ProcessGroup, RankLostError
from nnqs.parallel.launch import init_from_env, shutdown

__all__ = ["LOCAL", "Communicator", "ProcessGroup", "RankLostError", "init_from_env", "shutdown"]
