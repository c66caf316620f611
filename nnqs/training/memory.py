"""The memory a run will need, planned before it is spent, phase by phase.

A plan is made at :class:`Sizes` (the unique samples of a step, the fits' rows, the start's CI
space, the loop's pool and spaces, the final space, PT2's parents): before a run, at the upper
ends its settings allow (:func:`sizes_of`); to check the plan, at the sizes a run reached. Its
parts are the run's phases, named as :mod:`nnqs.training.memory_peaks` measures them, each the
bytes it holds above a base (the process as it stands when the plan is made, the compiled
kernels once they have run, the parameters, gradients, optimiser moments and integrals); the peak
is the base plus the largest part:

* ``start.target``: the start's CI space (its ``H_S`` built in CSR, the CIPSI selection's sums
  over its largest parents); ``start.fit`` / ``loop.fit``: the amplitude fit's autograd graph over
  its rows, the phase fit's, the fidelity's pass (one chunk at a time) and the target's tokens;
* ``loop.sample``: the KV cache's rows the draws' frontier touches (about three per unique
  sample, at most ``[sampler] cache_mib``); ``loop.extend``: the sums over every outside
  determinant the pool connects to, at most ``[subspace] extend_mib`` (bucketed passes beyond); ``loop.diagonalise``: ``H_S`` of the merged space and the
  Lanczos vectors;
* ``vmc``: the autograd graph of ``log psi`` over the step's unique samples (or ``[optim]
  grad_chunk`` of them) plus the larger of the local energies' working set and the update's
  arrays (minSR's Jacobian, its float64 centred copies and the ``2U x 2U`` Gram matrix; sr_top's
  ``K`` rows), plus the sampler's cache rows the draws touched (they stay resident);
  ``evaluation``: the same without a graph;
* ``final.space``: ``H_S`` of the final space (or the draws' cache); ``final.pt2``: PT2's sums
  (deterministic, bounded by hash buckets, or the semistochastic deterministic part and one batch);
  ``final.extrapolation``: the same on the largest truncation.

The determinant counts that depend on the state (the elements of ``H_S`` per row, the distinct
outside determinants per parent) follow :class:`Density`, power laws in the space's size fitted
to measured CIPSI and loop spaces (``experiments/studies/memory_plan.py``). Byte constants were
measured on the CPU (resident set, glibc). :func:`available_memory` reads what the machine (or
its cgroup) has free; :func:`check_memory` compares them before the start.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from hamiltonians.exact import MATRIX_BUILD_BYTES
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
#: Rows per chunk of a pass without gradients over a whole space
#: (:meth:`nnqs.wavefunction.model.TransformerWavefunction.log_psi_no_grad`).
NO_GRAD_CHUNK = 4096
#: Resident bytes per distinct key of a ``KeySums`` table of one column at its peak (its keys,
#: sums and slots, grown by doubling, the old buffers held while copied), measured.
KEY_BYTES = 96
#: PT2's budget for one pass's sums (``hamiltonians.sci.pt2.DEFAULT_MAX_BYTES``).
PT2_MAX_BYTES = 2 << 30
#: The extension's default budget (``hamiltonians.sci.connections.EXTEND_MAX_BYTES``, ``[subspace] extend_mib``);
#: a copy, so that planning loads no compiled kernel.
EXTEND_MAX_BYTES = 2 << 30
#: What a run holds at the opening of its phases beyond the process at the plan and the plan's
#: fixed part (Numba's compiled code, the allocator's retained heap, the fitted state between
#: phases): part of every phase's base; the median over the default runs' phases, measured by
#: ``experiments/studies/memory_plan.py`` from each phase's entry.
RUNTIME_BYTES = 224 * 2**20


@dataclass(frozen=True)
class Density:
    """How many determinants a space of ``D`` touches, per determinant (power laws in ``D``).

    ``n_connections`` is the reference determinant's nonzero singles and doubles. A row of
    ``H_S`` holds ``min(n_connections, in_space * n_connections * (D / n_connections) **
    in_space_power)`` elements; a parent adds ``min(n_connections, outside * n_connections *
    (D / n_connections) ** outside_power)`` distinct outside determinants. The defaults were fitted
    to the final spaces of the default runs at 26, 32 and 52 spin orbitals and their truncations
    (``experiments/studies/memory_plan.py --calibrate``); between systems a row's elements stray
    from the law by up to 2x, the outside determinants by up to 5x.
    """

    n_connections: int
    in_space: float = 0.038
    in_space_power: float = 0.46
    outside: float = 0.31
    outside_power: float = -0.55

    @classmethod
    def of(cls, H: Hamiltonian) -> Density:
        """The density of ``H`` (its lowest-index determinant's connections counted by the kernel)."""
        reference = H.aufbau_occupation()[None]
        return cls(max(1, int(sum(int(p[4]) for p in H.screened_connections(reference, threshold=0.0)))))

    def _law(self, d: int, a: float, power: float) -> float:
        n = self.n_connections
        return min(float(n), a * n * (max(d, 1) / n) ** power)

    def nnz(self, d: int) -> int:
        """Elements of ``H_S`` (diagonal included) on a space of ``d`` determinants."""
        return int(d * (1 + min(d - 1, self._law(d, self.in_space, self.in_space_power))))

    def n_outside(self, d: int) -> int:
        """Distinct determinants outside a space of ``d`` connected to its determinants."""
        return int(d * self._law(d, self.outside, self.outside_power))


@dataclass(frozen=True)
class Sizes:
    """The sizes a plan is made at (0: the phase does not run).

    Attributes:
        n_unique: unique samples of a VMC step; eval_unique: of the final evaluation;
            loop_unique: of a cycle's draws (and the final space's).
        start_rows, loop_rows: the amplitude fits' rows (largest determinants plus tail).
        phase_rows: the phase fit's rows.
        start_space: the start's CI space; start_parents: its selection's parents.
        loop_pool: the largest pool a cycle extends; loop_space: the largest space it diagonalises.
        final_space: the final space; pt2_parents: PT2's deterministic parents (the whole space
            when deterministic); pt2_draws: a semistochastic batch's draws (0: deterministic).
    """

    n_unique: int
    eval_unique: int = 0
    loop_unique: int = 0
    start_rows: int = 0
    loop_rows: int = 0
    phase_rows: int = 0
    start_space: int = 0
    start_parents: int = 1024
    loop_pool: int = 0
    loop_space: int = 0
    final_space: int = 0
    pt2_parents: int = 0
    pt2_draws: int = 0


@dataclass(frozen=True)
class MemoryPlan:
    """Estimated bytes of a run's phases above ``base`` (see the module).

    Attributes:
        n_unique: the VMC step's unique samples it was made at.
        parts: ``{phase: bytes above the base}``.
        base: the process when the plan was made plus parameters, moments and integrals.
        sizes: the :class:`Sizes` it was made at.
    """

    n_unique: int
    parts: dict
    base: int = 0
    sizes: Sizes | None = None

    @property
    def peak(self) -> int:
        return int(self.base + max(self.parts.values(), default=0))

    def phase_peak(self, name: str) -> int:
        """The planned resident bytes at the peak of phase ``name``."""
        return int(self.base + self.parts[name])

    def largest(self) -> str:
        """The phase that dominates the peak."""
        return max(self.parts, key=self.parts.__getitem__)

    def to_dict(self) -> dict:
        return {"n_unique": self.n_unique, "parts": dict(self.parts), "base": self.base, "peak": self.peak,
                "largest": self.largest(), "sizes": asdict(self.sizes) if self.sizes is not None else None}

    def describe(self) -> str:
        big = sorted(self.parts.items(), key=lambda kv: -kv[1])[:4]
        parts = ", ".join(f"{k} {v / 2**30:.2f}" for k, v in big)
        return f"{self.peak / 2**30:.2f} GiB at its peak ({self.base / 2**30:.2f} base + the largest phases: {parts} GiB)"


def graph_bytes(model, n_configurations: int) -> float:
    """The autograd graph of ``log psi`` over ``n_configurations`` (see :data:`GRAPH_BYTES`)."""
    c = model.config
    itemsize = 8 if str(c.dtype) == "float64" else 4
    return GRAPH_BYTES * c.n_layers * n_configurations * c.n_orbitals * c.d_model * itemsize / 4


def _update_bytes(p: int, itemsize: int, n_unique: int, method: str, sr_top: int) -> int:
    if method == "minsr":
        jacobian = n_unique * 2 * p * itemsize                      # [U, 2, P], zero-initialised
        centred = n_unique * p * (8 + itemsize)                     # float64 blocks and their working copies
        gram = 4 * n_unique ** 2 * (itemsize + 8 + 8)               # 2U x 2U rows, float64 copy, the solve's
        per_sample = JACOBIAN_CHUNK * p * itemsize * 2              # vmap's per-sample gradients
        return jacobian + centred + gram + per_sample
    if method == "sr_top":
        k = min(sr_top, n_unique)
        return k * 2 * p * itemsize + 2 * k * p * 8 + JACOBIAN_CHUNK * p * itemsize + p * 8 * 3
    return p * 8 * 3


def plan_memory(model, H: Hamiltonian, *, n_unique: int | None = None, sizes: Sizes | None = None, method: str,
                sr_top: int = 32, cache_bytes: int = 256 * 2**20, fit_batch: int = 0, kernel_chunk: int | None = None,
                grad_chunk: int = 0, process_bytes: int = 0, density: Density | None = None,
                extend_bytes: int = EXTEND_MAX_BYTES) -> MemoryPlan:
    """The :class:`MemoryPlan` of ``model`` on ``H`` at ``sizes`` (or, for a VMC step alone,
    ``n_unique`` unique samples with a start fit over ``fit_batch`` rows) with the update rule
    ``method`` (``sr_top`` rows for ``"sr_top"``), a KV cache budget of ``cache_bytes``, gradients
    back-propagated ``grad_chunk`` samples at a time (0: all at once), the process holding
    ``process_bytes`` now, the state's :class:`Density` (default :meth:`Density.of` ``H``) and the
    extension's budget ``extend_bytes`` (``[subspace] extend_mib``)."""
    if sizes is None:
        if n_unique is None:
            raise ValueError("plan_memory needs sizes or n_unique")
        sizes = Sizes(n_unique=n_unique, start_rows=fit_batch)
    c = model.config
    p = sum(t.numel() for t in model.parameters())
    itemsize = 8 if str(c.dtype) == "float64" else 4
    n_so = 2 * H.n_orbitals
    chunk = kernel_chunk or H.chunk_size
    kernel = chunk * (16 + CONNECTION_BYTES)                          # a chunk of connections in flight
    amplitudes = PSI_CHUNK * H.n_orbitals * c.d_model * itemsize * 8 * c.mlp_ratio
    local_energy = kernel * 5 + amplitudes                            # a chunk and 4 chunks of outside x'
    per_row = c.n_layers * 2 * n_so // 2 * c.d_model * itemsize   # one cached prefix (keys and values)

    def sampling(n_unique: int) -> float:   # the cache's rows that are touched: the frontier, ~3 U rows
        return min(cache_bytes, 3 * max(n_unique, 1) * per_row) + n_unique * n_so * 8
    no_grad = graph_bytes(model, NO_GRAD_CHUNK) / 4                   # one chunk's activations, no graph kept
    phase_graph = sizes.phase_rows * (n_so * 4 + 2 * sum(c.phase_hidden)) * itemsize * 4
    density = density or Density.of(H)

    def matrix(d: int) -> float:
        return MATRIX_BUILD_BYTES * density.nnz(d) + kernel + 10 * 8 * d if d else 0

    def sums(n_keys: int, columns: int = 1) -> float:
        return n_keys * (KEY_BYTES + 12 * (columns - 1))

    def fit(rows: int, space: int) -> float:
        if not rows:
            return 0
        return graph_bytes(model, rows) + phase_graph + no_grad + space * H.n_orbitals * 8 * 3

    def pt2(space: int, parents: int, draws: int) -> float:
        if not space:
            return 0
        deterministic = min(sums(density.n_outside(parents)), PT2_MAX_BYTES) + kernel
        if not draws:
            return deterministic
        return deterministic + sums(density.n_outside(min(draws, space)), 3)   # one batch's drawn parents

    graph = graph_bytes(model, min(sizes.n_unique, grad_chunk or sizes.n_unique))
    update = _update_bytes(p, itemsize, sizes.n_unique, method, sr_top)
    parts = {
        "start.target": max(matrix(sizes.start_space),
                            sums(density.n_outside(min(sizes.start_parents, sizes.start_space)), 2) + kernel)
        if sizes.start_space else 0,
        "start.fit": fit(sizes.start_rows, sizes.start_space),
        "loop.sample": sampling(sizes.loop_unique) if sizes.loop_pool else 0,
        "loop.extend": min(sums(density.n_outside(sizes.loop_pool)), extend_bytes) + kernel if sizes.loop_pool else 0,
        "loop.diagonalise": matrix(sizes.loop_space),
        "loop.fit": fit(sizes.loop_rows, sizes.loop_space) if sizes.loop_pool else 0,
        # the sampler's cache rows, once touched, stay resident through the step's local energies
        "vmc": sampling(sizes.n_unique) + graph + max(local_energy, update),
        "evaluation": sampling(sizes.eval_unique) + local_energy if sizes.eval_unique else 0,
        "final.space": max(sampling(sizes.loop_unique), matrix(sizes.final_space)) if sizes.final_space else 0,
        "final.pt2": pt2(sizes.final_space, sizes.pt2_parents, sizes.pt2_draws),
        "final.extrapolation": max(matrix(sizes.final_space // 2),
                                   pt2(sizes.final_space // 2, min(sizes.pt2_parents, sizes.final_space // 2),
                                       sizes.pt2_draws)) if sizes.final_space else 0,
    }
    parts = {k: int(v) for k, v in parts.items() if v}
    fixed = p * itemsize * 6 + H.n_orbitals ** 4 * 8 * 3          # parameters, grads, moments, roll-back copy
    return MemoryPlan(int(sizes.n_unique), parts, int(process_bytes + fixed + RUNTIME_BYTES), sizes)


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


#: The settings that shrink each phase.
ADVICE = {
    "vmc": "lower [sampler] unique_window's upper end, [optim] grad_chunk or use [optim] method = \"sr_top\" or "
           "\"adamw\" (minSR grows as U^2)",
    "evaluation": "lower [sampler] cache_mib or the kernel's chunk (MolecularHamiltonian.chunk_size)",
    "loop.sample": "lower [sampler] cache_mib",
    "start.target": "lower [start] sci_determinants",
    "start.fit": "lower [start] max_determinants, tail or phase_determinants",
    "loop.fit": "lower [subspace] fit_determinants or fit_tail",
    "loop.extend": "lower [subspace] extend_mib",
    "loop.diagonalise": "lower [subspace] pool, extend or cycles",
    "final.space": "lower [subspace] final_samples, pool or cycles",
    "final.pt2": "lower [subspace] pt2_exact_max, pt2_deterministic or pt2_draws",
    "final.extrapolation": "set [subspace] extrapolation = [] or lower [subspace] pool",
}


def check_memory(plan: MemoryPlan, limit_bytes: int | None) -> str | None:
    """``None`` if ``plan``'s peak fits in ``limit_bytes``, the resident bytes the process may hold
    (``None``: unknown, anything fits), else the reason in one line naming the phase that does not
    fit and the settings that shrink it."""
    if limit_bytes is None or plan.peak <= limit_bytes:
        return None
    largest = plan.largest()
    return (f"the run needs about {plan.describe()}, more than the {limit_bytes / 2**30:.2f} GiB it may hold: "
            f"{largest} does not fit; {ADVICE.get(largest, 'lower its sizes')}, or raise [run] max_memory_gib")


def gib(value: float) -> int | None:
    """``[run] max_memory_gib`` in bytes (0: none)."""
    return None if not value or math.isinf(value) else int(value * 2**30)
