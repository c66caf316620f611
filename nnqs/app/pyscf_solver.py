"""nnqs as PySCF's active-space solver: ``mc.fcisolver = NNQSSolver(...)`` in CASCI / CASSCF.

Each :meth:`NNQSSolver.kernel` call is an ordinary run (:func:`nnqs.app.run.run`) on the active
space's integrals, written as an FCIDUMP into its own folder under :attr:`NNQSSolver.workdir`
(``call_000``, ``call_001``, ...: config, metrics, checkpoint and ``result.json`` as for any
run). The CI "vector" it hands PySCF is an :class:`NNQSState`, the trained network; the RDMs
PySCF asks for are estimated from it (:func:`nnqs.training.observables.estimate_observables`) in
the active space's own orbital order. A ``ci0`` that is an :class:`NNQSState` warm-starts the
next run from its weights (CASSCF's macro-iterations), with ``warm_steps`` steps and no start
fit; so does the bool that PySCF's ``mc2step`` hands an external solver instead of its vector
(the solver keeps its last state), whether it says the orbitals rotated little (``True``) or
not: the last network is a better start than a fresh fit either way. Use ``mc.mc2step()``: ``mc.newton()`` needs products of the CI Hessian with CI vectors,
which a network does not have.

Conventions are PySCF's: ``make_rdm12`` returns ``dm1[p,q] = <q^+ p>`` and ``dm2[p,q,r,s] =
sum_{st} <p_s^+ r_t^+ s_t q_s>`` (see :mod:`hamiltonians.rdm`).
"""

from __future__ import annotations

import logging
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from hamiltonians import MolecularHamiltonian
from hamiltonians.fcidump import write_fcidump
from hamiltonians.rdm import RDMs
from nnqs.app.runconfig import RunConfig, config_from_dict, load_config
from nnqs.app.trained import load_trained
from nnqs.training.observables import estimate_observables
from nnqs.training.settings import EXACT_MAX_DETERMINANTS

__all__ = ["NNQSSolver", "NNQSState", "casci", "casscf", "EXACT_MAX_DETERMINANTS"]

log = logging.getLogger(__name__)

NEWTON_MESSAGE = ("mc.newton() needs CI-Hessian products with CI vectors (contract_2e), which a network "
                  "wavefunction does not have: use mc.mc2step()")


@dataclass
class NNQSState:
    """What :meth:`NNQSSolver.kernel` returns as the CI vector: the run folder, the trained
    weights, the energies and (once asked for) the RDMs in the active space's orbital order.
    Deliberately neither a list nor a tuple (PySCF would take it for several roots)."""

    run_dir: Path
    weights: dict
    e_tot: float
    e_stderr: float
    result: dict
    observables: object = field(default=None, repr=False)

    def ravel(self):
        """What ``mc.newton()`` asks of a CI vector first; a network has none (one line why)."""
        raise NotImplementedError(NEWTON_MESSAGE)


class NNQSSolver:
    """A PySCF ``fcisolver`` that trains an nnqs network on the active space.

    Attributes:
        config: the run settings (:class:`nnqs.app.runconfig.RunConfig` tables; of
            ``[molecule]`` only ``orbital_order``: each call fills the rest with its FCIDUMP).
        workdir: folder of the calls' run folders (default: a new temporary folder).
        warm_steps: VMC steps of a warm-started call (``ci0`` an :class:`NNQSState`); default
            a quarter of ``[optim] steps`` (of the default preset's when unset).
        approx_steps: steps of :meth:`approx_kernel` (CASSCF's micro-iterations).
        rdm_samples: draws for the RDMs; ``None``: the whole space when it has at most
            :data:`EXACT_MAX_DETERMINANTS` determinants, else 100000.
        rdm_mode: which connected configurations enter the RDMs (``"exact"``, ``"truncated"``,
            ``"sampled"``); default ``"exact"`` over an enumerated space (every ``x'`` is in it)
            and ``"sampled"`` past it (the RDMs of the state projected on the samples: the
            exact mode's amplitudes of every connected ``x'`` would cost hours per call).
        progress: show each run's progress bar.
        converged: whether the last run stopped because its energy stopped improving.
        last: the :class:`NNQSState` of the last call (warm start when PySCF passes a bool).
        nroots: always 1 (PySCF reads it).
    """

    nroots = 1

    def __init__(self, config: RunConfig | dict | str | Path | None = None, *, workdir: str | Path | None = None,
                 warm_steps: int | None = None, approx_steps: int = 20, rdm_samples: int | None = None,
                 rdm_mode: str | None = None, progress: bool = False) -> None:
        if isinstance(config, (str, Path)):
            config = load_config(config)
        if isinstance(config, RunConfig):
            config = config.to_dict()
        config = dict(config or {})
        # of [molecule], only the network's orbital order applies to an active space
        self.orbital_order = (config.pop("molecule", None) or {}).get("orbital_order", "given")
        self.config = config
        optim = config_from_dict({"molecule": {"fcidump": "check"}, **self.config}).optim  # bad settings fail here
        steps = optim.filled().steps
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="nnqs-casci-"))
        self.warm_steps = warm_steps if warm_steps is not None else max(steps // 4, 1)
        self.approx_steps = approx_steps
        self.rdm_samples, self.rdm_mode, self.progress = rdm_samples, rdm_mode, progress
        self.converged = False
        self.calls = 0
        self.last: NNQSState | None = None

    def dump_flags(self, verbose=None) -> None:
        """Log the settings (PySCF calls it from ``mc.dump_flags``)."""
        log.info("NNQSSolver: workdir %s, warm_steps %d, approx_steps %d, RDMs %s (%s mode)", self.workdir,
                 self.warm_steps, self.approx_steps,
                 "by enumeration up to %d determinants" % EXACT_MAX_DETERMINANTS if self.rdm_samples is None
                 else f"from {self.rdm_samples} samples", self.rdm_mode or "auto")
        log.info("NNQSSolver run settings: %s", self.config or "the defaults")

    # --- the energy -----------------------------------------------------------------------
    def kernel(self, h1e, eri, norb, nelec, ci0=None, ecore=0, *, steps: int | None = None, **kwargs):
        """Train on the active space; returns ``(e_tot, NNQSState)`` with ``e_tot`` including
        ``ecore``: the network's exact energy when the space has at most
        :data:`EXACT_MAX_DETERMINANTS` determinants, else the final evaluation's estimate."""
        from pyscf import ao2mo
        from pyscf.fci.addons import _unpack_nelec

        from nnqs.app.run import run

        n_alpha, n_beta = _unpack_nelec(nelec)
        h1 = np.asarray(h1e, dtype=np.float64)
        eri = ao2mo.restore(1, np.asarray(eri, dtype=np.float64), norb)   # CASCI passes packed integrals
        H = MolecularHamiltonian(int(norb), int(n_alpha), int(n_beta), float(ecore), torch.from_numpy(h1.copy()),
                                 torch.from_numpy(np.ascontiguousarray(eri)))
        out = self.workdir / f"call_{self.calls:03d}"
        self.calls += 1
        out.mkdir(parents=True, exist_ok=True)
        write_fcidump(H, out / "active_space.fcidump")
        tables = {k: dict(v) for k, v in self.config.items()}
        initial = None
        if isinstance(ci0, bool) and self.last is not None:
            ci0 = self.last   # PySCF's mc2step hands an external solver a restart flag, not its vector
        if isinstance(ci0, NNQSState):
            initial = ci0.weights
            tables["start"] = {**tables.get("start", {}), "mode": "none"}
            tables["optim"] = {**tables.get("optim", {}), "steps": steps or self.warm_steps}
        elif steps is not None:
            tables["optim"] = {**tables.get("optim", {}), "steps": steps}
        molecule = {"name": "active_space", "fcidump": str(out / "active_space.fcidump"), "slow_references": False,
                    "dmrg": False, "orbital_order": self.orbital_order}
        config = config_from_dict({"molecule": molecule, **tables})
        log.info("NNQSSolver: CAS(%d, %d) %s in %s", n_alpha + n_beta, norb,
                 "warm start" if initial is not None else "from the start", out / "run")
        result = run(config, out / "run", overwrite=True, progress=self.progress, initial_model=initial)
        trained = load_trained(out / "run")
        exact = result.get("energy_exact_variational")
        e_tot = float(exact if exact is not None else result["energy"])
        self.converged = bool(result.get("stopped_early"))
        state = NNQSState(out / "run", {k: v.clone() for k, v in trained.model.state_dict().items()}, e_tot,
                          0.0 if exact is not None else float(result["energy_stderr"]), result)
        log.info("NNQSSolver: E = %.10f (+- %.1e)", e_tot, state.e_stderr)
        self.last = state
        return e_tot, state

    def approx_kernel(self, h1e, eri, norb, nelec, ci0=None, ecore=0, **kwargs):
        """A short warm-started run (``approx_steps`` steps) for CASSCF's micro-iterations."""
        warm = isinstance(ci0, NNQSState) or (isinstance(ci0, bool) and self.last is not None)
        return self.kernel(h1e, eri, norb, nelec, ci0=ci0, ecore=ecore, steps=self.approx_steps if warm else None)

    # --- the RDMs --------------------------------------------------------------------------
    def _rdms(self, state: NNQSState) -> RDMs:
        if not isinstance(state, NNQSState):
            raise TypeError(f"expected the NNQSState that NNQSSolver.kernel returned, got {type(state).__name__}")
        if state.observables is None:
            trained = load_trained(state.run_dir)
            trained.model.load_state_dict(state.weights)
            H = trained.system.hamiltonian
            samples, mode = self.rdm_samples, self.rdm_mode
            if samples is None and H.n_determinants > EXACT_MAX_DETERMINANTS:
                samples = 100_000
            if mode is None:   # past enumeration the exact mode's outside amplitudes cost hours
                mode = "exact" if samples is None else "sampled"
            state.observables = estimate_observables(trained.model, H, n_samples=samples, mode=mode)
            state.observables.rdms = state.observables.rdms.reordered(trained.system.order)
        return state.observables.rdms

    def make_rdm1s(self, civec, norb, nelec, link_index=None, **kwargs):
        rdms = self._rdms(civec)
        return rdms.dm1a, rdms.dm1b

    def make_rdm1(self, civec, norb, nelec, link_index=None, **kwargs):
        return self._rdms(civec).dm1

    def make_rdm12s(self, civec, norb, nelec, link_index=None, **kwargs):
        rdms = self._rdms(civec)
        return (rdms.dm1a, rdms.dm1b), (rdms.dm2aa, rdms.dm2ab, rdms.dm2bb)

    def make_rdm12(self, civec, norb, nelec, link_index=None, **kwargs):
        rdms = self._rdms(civec)
        return rdms.dm1, rdms.dm2

    def spin_square(self, civec, norb, nelec):
        """``(<S^2>, 2S + 1)`` as PySCF's ``spin_square``."""
        self._rdms(civec)
        ss = civec.observables.spin_square
        s = math.sqrt(max(ss, 0.0) + 0.25) - 0.5
        return ss, 2 * s + 1

    # --- what mc.newton() would need --------------------------------------------------------
    def contract_2e(self, *args, **kwargs):
        raise NotImplementedError(NEWTON_MESSAGE)

    def absorb_h1e(self, *args, **kwargs):
        raise NotImplementedError(NEWTON_MESSAGE)


def casci(mf, ncas: int, nelecas, **solver_options):
    """``pyscf.mcscf.CASCI(mf, ncas, nelecas)`` with an :class:`NNQSSolver` (``solver_options``)."""
    from pyscf import mcscf

    mc = mcscf.CASCI(mf, ncas, nelecas)
    mc.fcisolver = NNQSSolver(**solver_options)
    return mc


def casscf(mf, ncas: int, nelecas, **solver_options):
    """``pyscf.mcscf.CASSCF(mf, ncas, nelecas)`` with an :class:`NNQSSolver`; run it with
    ``mc.mc2step()`` (a noisy solver needs the two-step optimiser)."""
    from pyscf import mcscf

    mc = mcscf.CASSCF(mf, ncas, nelecas)
    mc.fcisolver = NNQSSolver(**solver_options)
    return mc
