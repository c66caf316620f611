"""The application layer: the TOML run config, the system, the run loop and the CLI.

Read in this order: ``runconfig``, ``system`` (integrals + orbital order + references, and the
network for them), ``io`` (atomic writes, checkpoints), ``report`` (metrics.csv, plot), ``run``
(the run loop), ``cli``. Nothing below this layer imports it.
"""
