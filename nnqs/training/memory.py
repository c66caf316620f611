"""The memory a run will need, planned before it is spent.

A step holds, at its peak, the autograd graph of ``log psi`` over its unique samples, or over
``[optim] grad_chunk`` of them when it has more (kept from the local energies to the update),
plus the larger of the local energies' working set and the update's arrays (minSR's Jacobian,
its float64 centred copies and the ``2U x 2U`` Gram matrix; sr_top's ``K`` rows). Sampling
holds the KV cache's budget. The start's amplitude fit holds the graph of its batch. :func:`plan_memory` estimates each part from the model's size and the
settings (the graph's bytes per configuration, position and width were measured on the CPU,
``experiments/LOG.md``), and :func:`available_memory` reads what the machine (or its cgroup)
has free. The application compares them (:func:`check_memory`) before the start.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hamiltonians.determinants import n_words
from hamiltonians.protocol import Hamiltonian

#: Bytes of the autograd graph of ``log psi`` per configuration, per position and per unit of
#: d_model, per layer, in float32 (its measurement: ``experiments/LOG.md``).
GRAPH_BYTES = 80.0
#: Bytes per connection the local-energy kernel holds in a chunk, besides the packed keys
#: (value, row, position in the batch, the complex term, the masks).
CONNECTION_BYTES = 48
#: Configurations per amplitude evaluation (``hamiltonians.local_energy.DEFAULT_PSI_CHUNK``)
#: and per ``vmap`` call of the minSR Jacobian (``nnqs.training.sr.log_psi_jacobian``).
PSI_CHUNK, JACOBIAN_CHUNK = 1024, 512


@dataclass(frozen=True)
class MemoryPlan:
    """Estimated peak bytes of a run's parts at ``n_unique`` unique samples per step.

    Attributes:
        parts: ``{name: bytes}``: ``graph`` (log psi's autograd graph over the step's samples),
            ``local_energy`` (a kernel chunk, its outside configurations, an amplitude batch),
            ``update`` (the update rule's arrays), ``sampling`` (the KV cache's budget),
            ``start`` (the start fit's graph), ``fixed`` (parameters, optimiser moments, integrals).
        peak: the step's peak: ``fixed + max(sampling, start, graph + max(local_energy, update))``.
    """

    n_unique: int
    parts: dict

    @property
    def peak(self) -> int:
        p = self.parts
        step = p["graph"] + max(p["local_energy"], p["update"])
        return int(p["fixed"] + max(p["sampling"], p["start"], step))

    def largest(self) -> str:
        """The part that dominates the peak."""
        p = {k: v for k, v in self.parts.items() if k != "fixed"}
        return max(p, key=p.__getitem__)

    def describe(self) -> str:
        parts = ", ".join(f"{k} {v / 2**30:.2f}" for k, v in sorted(self.parts.items(), key=lambda kv: -kv[1]))
        return f"{self.peak / 2**30:.2f} GiB at {self.n_unique} unique samples ({parts} GiB)"


def graph_bytes(model, n_configurations: int) -> float:
    """The autograd graph of ``log psi`` over ``n_configurations`` (see :data:`GRAPH_BYTES`)."""
    c = model.config
    itemsize = 8 if str(c.dtype) == "float64" else 4
    return GRAPH_BYTES * c.n_layers * n_configurations * c.n_orbitals * c.d_model * itemsize / 4


def plan_memory(model, H: Hamiltonian, *, n_unique: int, method: str, sr_top: int = 32, cache_bytes: int = 256 * 2**20,
                fit_batch: int = 0, kernel_chunk: int | None = None, grad_chunk: int = 0) -> MemoryPlan:
    """The :class:`MemoryPlan` of ``model`` on ``H`` at ``n_unique`` unique samples per step with
    the update rule ``method`` (``sr_top`` rows for ``"sr_top"``), a KV cache budget of
    ``cache_bytes``, a start fit over ``fit_batch`` configurations (0: none) and gradients
    back-propagated ``grad_chunk`` samples at a time (0: all at once). The graph is counted
    whatever the rule: a minSR run's AdamW phase keeps it."""
    p = sum(t.numel() for t in model.parameters())
    itemsize = 8 if str(model.config.dtype) == "float64" else 4
    chunk = kernel_chunk or H.chunk_size
    words = n_words(2 * H.n_orbitals)
    kernel = chunk * (8 * words + CONNECTION_BYTES) * 5   # a chunk, and 4 chunks of outside x' awaiting evaluation
    amplitudes = PSI_CHUNK * H.n_orbitals * model.config.d_model * itemsize * 8 * model.config.mlp_ratio
    if method == "minsr":
        jacobian = n_unique * 2 * p * itemsize                      # [U, 2, P], zero-initialised
        centred = n_unique * p * (8 + itemsize)                     # float64 blocks and their working copies
        gram = 4 * n_unique ** 2 * (itemsize + 8 + 8)               # 2U x 2U rows, float64 copy, the solve's
        per_sample = JACOBIAN_CHUNK * p * itemsize * 2              # vmap's per-sample gradients
        update = jacobian + centred + gram + per_sample
    elif method == "sr_top":
        k = min(sr_top, n_unique)
        update = k * 2 * p * itemsize + 2 * k * p * 8 + JACOBIAN_CHUNK * p * itemsize + p * 8 * 3
    else:
        update = p * 8 * 3
    fixed = p * itemsize * 6 + H.n_orbitals ** 4 * 8 * 3          # parameters, grads, moments, roll-back copy
    return MemoryPlan(int(n_unique), {
        "graph": int(graph_bytes(model, min(n_unique, grad_chunk or n_unique))),
        "local_energy": int(kernel + amplitudes),
        "update": int(update),
        "sampling": int(cache_bytes * 1.25),
        "start": int(graph_bytes(model, fit_batch)) if fit_batch else 0,
        "fixed": int(fixed),
    })


def available_memory() -> int | None:
    """Bytes this process can still take: ``MemAvailable`` of ``/proc/meminfo``, or less when a
    cgroup (a container, a batch job) limits it; ``None`` where neither can be read."""
    found = []
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    for limit, usage in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                         ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit) as f:
                text = f.read().strip()
            with open(usage) as f:
                used = int(f.read().strip())
        except (OSError, ValueError):
            continue
        if text != "max" and int(text) < 2**60:
            found.append(max(int(text) - used, 0))
    return min(found) if found else None


def check_memory(plan: MemoryPlan, limit_bytes: int | None) -> str | None:
    """``None`` if ``plan`` fits in ``limit_bytes`` (``None``: unknown, anything fits), else the
    reason in one line with the settings that lower the part that dominates."""
    if limit_bytes is None or plan.peak <= limit_bytes:
        return None
    advice = {
        "update": "lower [sampler] unique_window's upper end or use [optim] method = \"sr_top\" or \"adamw\" "
                  "(minSR grows as U^2)",
        "graph": "lower [optim] grad_chunk, [sampler] unique_window's upper end or [model] d_model",
        "local_energy": "lower the kernel's chunk (MolecularHamiltonian.chunk_size)",
        "sampling": "lower [sampler] cache_mib",
        "start": "lower [start] max_determinants or tail",
    }[plan.largest()]
    return (f"a step needs about {plan.describe()}, more than the {limit_bytes / 2**30:.2f} GiB available: "
            f"{advice}, or raise [run] max_memory_gib")


def gib(value: float) -> int | None:
    """``[run] max_memory_gib`` in bytes (0: none)."""
    return None if not value or math.isinf(value) else int(value * 2**30)

