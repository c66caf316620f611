"""nnqs: autoregressive Transformer neural-network quantum states for quantum chemistry.

Four layers under ``nnqs/`` (beside ``hamiltonians`` and ``samplers``, which import nothing
of the project); each imports only those before it (docs/design.md §2):

* :mod:`nnqs.wavefunction`: tokens and the electron constraint, the KV cache, attention, the
  Transformer wavefunction (its public names are re-exported here);
* :mod:`nnqs.parallel`: the collectives of a step, for one process or a ``torch.distributed`` group;
* :mod:`nnqs.training`: settings, estimators, the trainer and its run loop, minSR, the start,
  the final evaluation, analysis;
* :mod:`nnqs.app`: the run configuration (TOML), the system, the whole method in memory
  (:class:`NNQS`, :mod:`nnqs.app.solver`), provenance, the run's files and the CLI.

``nnqs.NNQS(config).kernel(H)`` runs the method on a Hamiltonian in memory; ``nnqs.run(config,
out)`` is ``nnqs run``: the same method with a run folder.
"""

from nnqs import wavefunction
from nnqs.wavefunction import *  # noqa: F401,F403  (the wavefunction's public names)

__all__ = list(wavefunction.__all__) + ["run", "NNQS", "NNQSResult"]  # noqa: F405 (lazy, below)
__version__ = "0.1.0"


def run(config, out, **options) -> dict:
    """A run as ``nnqs run`` does it: ``config`` a :class:`nnqs.app.runconfig.RunConfig` or its
    tables as a dict (``{"molecule": {...}, "optim": {...}}``, the TOML's keys), into the folder
    ``out``; ``options`` are :func:`nnqs.app.run.run`'s (``resume``, ``overwrite``, ``stop_after``,
    ``progress``, ...). Returns the result (``result.json``'s fields)."""
    from nnqs.app.run import run as run_config
    from nnqs.app.runconfig import RunConfig, config_from_dict

    if not isinstance(config, RunConfig):
        config = config_from_dict(config)
    return run_config(config, out, **options)


def __getattr__(name: str):
    """``NNQS`` and ``NNQSResult`` (:mod:`nnqs.app.solver`), imported on first use."""
    if name in ("NNQS", "NNQSResult"):
        from nnqs.app import solver

        return getattr(solver, name)
    raise AttributeError(f"module 'nnqs' has no attribute {name!r}")
