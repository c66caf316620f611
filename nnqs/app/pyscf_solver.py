"""nnqs as PySCF's active-space solver: ``mc.fcisolver = NNQSSolver(...)`` in CASCI / CASSCF,
state averaging (``mc.state_average_``), NEVPT2 (``mrpt.NEVPT``) and spin targeting (``fix_spin_``).

Each :meth:`NNQSSolver.kernel` call runs the whole method in memory
(:class:`nnqs.app.solver.NNQS`) on the active space's integrals: no file is written, unless
:attr:`NNQSSolver.workdir` is set (then the last call's ``result.json`` and final determinant space
``subspace.npz`` are replaced there, each atomically, the space first: ``result.json``'s ``call``
and ``subspace_sha256`` name the pair; the folder is this process's while a solver on it lives,
another process's solver or run on it fails at once). A call that fails raises a one-line
:class:`~nnqs.errors.NNQSError` (the exception's type and first line; the original chained) and
leaves the folder as the last good call wrote it. What it hands PySCF depends on
:attr:`NNQSSolver.wavefunction`:

* ``"subspace"`` (default): the run's determinant space ``S`` (the network's samples merged with
  its selected-CI pool; with the previous call's space on a warm start) is grown for every root
  and re-diagonalised until the roots stop moving (:func:`hamiltonians.sci.grow.grow` by connection, through
  :class:`hamiltonians.sci.solver.SelectedCI`:
  ``grow`` determinants per root per round, at most ``max_cycle`` rounds, ``conv_tol``,
  ``max_space``), with the spin penalty of :meth:`NNQSSolver.fix_spin_`. The roots are exact
  eigenstates of ``H`` on ``S``: variational energies and noise-free RDMs. ``converged`` is
  :func:`~hamiltonians.sci.grow.grow`'s: the last round moved no root by more than
  ``conv_tol`` Hartree, or ``S`` holds the roots' whole connected space.
* ``"network"``: the trained network itself (one root), its RDMs estimated with error bars;
  ``converged`` means the call's VMC energy stopped improving
  (:func:`nnqs.training.convergence.has_stopped_improving` over its last ``2 * window`` steps,
  ``window`` a tenth of the steps, at least 5).

The CI vectors are PySCF FCI vectors when the active space has at most ``dense_max``
determinants (so every PySCF method applies, NEVPT2 included), else
:class:`~nnqs.app.pyscf_states.NNQSState` objects (see :mod:`nnqs.app.pyscf_states`). A warm
start (``ci0`` anything, once a call has run: CASSCF's macro-iterations, PySCF's ``mc2step``
restart flag) continues from the last network and the last call's determinant space (the first
pool, re-diagonalised in the new integrals) with ``warm_steps`` steps and no start fit;
:meth:`NNQSSolver.approx_kernel` (CASSCF's micro-iterations) only re-diagonalises the last space
in the new integrals. ``mc.newton()`` needs CI-Hessian products, which the solver refuses.

Conventions are PySCF's: ``make_rdm12`` returns ``dm1[p,q] = <q^+ p>`` and ``dm2[p,q,r,s] =
sum_{st} <p_s^+ r_t^+ s_t q_s>`` (see :mod:`hamiltonians.rdm`); energies include ``ecore``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from pyscf import lib
from pyscf.lib import logger

from hamiltonians import MolecularHamiltonian
from hamiltonians.determinants import n_determinants
from hamiltonians.protocol import Hamiltonian
from nnqs.app.pyscf_states import NEWTON_MESSAGE, NNQSState, large_ci_of, refusal, sparse_rdms, spin_square_of_state
from nnqs.app.runconfig import RunConfig, config_from_dict, load_config
from nnqs.errors import InputError, NNQSError
from nnqs.training.settings import EXACT_MAX_DETERMINANTS

if TYPE_CHECKING:
    from nnqs.app.system import System

__all__ = ["NNQSSolver", "NNQSState", "casci", "casscf", "EXACT_MAX_DETERMINANTS"]

WAVEFUNCTIONS = ("subspace", "network")


class NNQSSolver(lib.StreamObject):
    """A PySCF ``fcisolver`` that trains an nnqs network on the active space.

    Attributes:
        config: the run settings (:class:`nnqs.app.runconfig.RunConfig` tables; of
            ``[molecule]`` only ``orbital_order``: each call fills the rest with its FCIDUMP).
        workdir: where the last call's ``result.json`` and ``subspace.npz`` go (default ``None``:
            nowhere; the solver works in memory).
        wavefunction: ``"subspace"`` or ``"network"`` (see the module).
        nroots: roots per call (PySCF's ``state_average_`` sets it); ``"network"``: 1.
        conv_tol, max_cycle, grow, max_space: the growth of ``S`` (see the module).
        ss_penalty, ss_value: the spin penalty's shift and target ``<S^2>``
            (:meth:`fix_spin_`; ``ss_penalty = 0``: none).
        dense_max: the largest active space (determinants) handed to PySCF as FCI vectors.
        warm_steps: VMC steps of a warm-started call; default a quarter of ``[optim] steps``.
        approx_steps: ``"network"`` only: steps of :meth:`approx_kernel`.
        rdm_samples, rdm_mode: ``"network"`` only: draws for the RDMs (``None``: the whole space
            up to :data:`EXACT_MAX_DETERMINANTS` determinants, else 100000) and which connected
            configurations enter (``"exact"``, ``"truncated"``, ``"sampled"``; default exact over
            an enumerated space, sampled past it).
        progress: show each run's progress bar.
        converged: whether the last call converged (see the module).
        e_states, spin_squares: the last call's energies and ``<S^2>`` per root.
        history: the last call's growth rounds (``{"size", "energies", "change"}``).
        last: the last call's :class:`NNQSState` (network weights, system, result).
    """

    nroots = 1
    spin = None
    wfnsym = None
    _keys = {"config", "orbital_order", "workdir", "wavefunction", "nroots", "conv_tol", "max_cycle", "grow",
             "max_space", "ss_penalty", "ss_value", "dense_max", "warm_steps", "approx_steps", "rdm_samples",
             "rdm_mode", "progress", "converged", "e_states", "spin_squares", "history", "calls", "last", "space",
             "spin", "wfnsym", "mol"}

    def __init__(self, config: RunConfig | dict | str | Path | None = None, *, workdir: str | Path | None = None,
                 wavefunction: str = "subspace", nroots: int = 1, conv_tol: float = 1e-6, max_cycle: int = 8,
                 grow: int = 2000, max_space: int = 200_000, dense_max: int = 20_000_000,
                 warm_steps: int | None = None, approx_steps: int = 20, rdm_samples: int | None = None,
                 rdm_mode: str | None = None, progress: bool = False, mol=None) -> None:
        if isinstance(config, (str, Path)):
            config = load_config(config)
        if isinstance(config, RunConfig):
            config = config.to_dict()
        config = dict(config or {})
        # of [molecule], only the network's orbital order applies to an active space
        self.orbital_order = (config.pop("molecule", None) or {}).get("orbital_order", "given")
        self.config = config
        optim = config_from_dict({"molecule": {"fcidump": "check"}, **self.config}).optim  # bad settings fail here
        if wavefunction not in WAVEFUNCTIONS:
            raise InputError(f"wavefunction must be one of {WAVEFUNCTIONS}, got {wavefunction!r}")
        self.mol = mol
        if mol is not None:
            self.verbose, self.stdout = mol.verbose, mol.stdout
        self.workdir = Path(workdir) if workdir is not None else None
        self.wavefunction, self.nroots = wavefunction, int(nroots)
        self.conv_tol, self.max_cycle, self.grow, self.max_space = conv_tol, max_cycle, grow, max_space
        self.ss_penalty, self.dense_max = 0.0, dense_max
        self.ss_value: float | None = None
        self.warm_steps = warm_steps if warm_steps is not None else max(optim.filled().steps // 4, 1)
        self.approx_steps = approx_steps
        self.rdm_samples, self.rdm_mode, self.progress = rdm_samples, rdm_mode, progress
        self.converged = False
        self.e_states: list[float] = []
        self.spin_squares: list[float] = []
        self.history: list[dict] = []
        self.calls = 0
        self.last: NNQSState | None = None
        self.space: torch.Tensor | None = None
        self._holds: tuple | None = None   # (id of the holder, workdir) once workdir is held

    def dump_flags(self, verbose=None) -> NNQSSolver:
        """Write the settings to PySCF's output (``mc.dump_flags`` calls it)."""
        log = logger.new_logger(self, verbose)
        log.info("******** NNQSSolver (nnqs) ********")
        log.info("wavefunction = %s, nroots = %d, workdir = %s", self.wavefunction, self.nroots, self.workdir)
        if self.wavefunction == "subspace":
            log.info("growth: %d determinants per root per round, max_cycle = %d, conv_tol = %g, max_space = %d",
                     self.grow, self.max_cycle, self.conv_tol, self.max_space)
        if self.ss_penalty:
            log.info("spin penalty: shift %g, target <S^2> = %s", self.ss_penalty,
                     "the sector's lowest" if self.ss_value is None else self.ss_value)
        log.info("warm_steps = %d, approx_steps = %d, dense_max = %d", self.warm_steps, self.approx_steps,
                 self.dense_max)
        log.info("run settings: %s", self.config or "the defaults")
        return self

    def fix_spin_(self, shift: float = 0.2, ss: float | None = None) -> NNQSSolver:
        """Target a spin: the roots are those of ``H + shift * P`` (PySCF's penalty, see
        :mod:`hamiltonians.sci.diagonalise`); ``ss``: the target ``<S^2>`` (default the sector's lowest)."""
        if self.wavefunction != "subspace":
            raise InputError("fix_spin_ needs wavefunction = 'subspace' (the penalty enters its diagonalisation)")
        self.ss_penalty, self.ss_value = float(shift), ss
        return self

    # --- the energy -----------------------------------------------------------------------
    def kernel(self, h1e, eri, norb, nelec, ci0=None, ecore=0, *, nroots: int | None = None, wfnsym=None,
               steps: int | None = None, verbose=None, **kwargs):
        """Train on the active space, then solve for the roots (see the module). Returns
        ``(e_tot, ci)`` for one root, ``(list of e_tot, list of ci)`` for several."""
        log = logger.new_logger(self, verbose)
        nroots = self.nroots if nroots is None else int(nroots)
        if self.wavefunction == "network" and nroots != 1:
            raise InputError("nroots > 1 needs wavefunction = 'subspace' (excited states diagonalised in the "
                             "sampled space)")
        try:
            H = _hamiltonian(h1e, eri, norb, nelec, ecore)
            call = self._train(H, ci0, steps, log)
            if self.wavefunction == "network":
                return self._network_state(call, log)
            dets = call.space_dets
            assert dets is not None   # one process: the run has a final space
            if self.space is not None and self.space.shape[1] == dets.shape[1]:
                dets = torch.cat([dets, self.space])   # the last call's space joins (CASSCF macro-iterations)
            return self._solve(H, dets, nroots, self.max_cycle, call, log)
        except NNQSError:
            raise
        except Exception as error:
            raise self._failed(error) from error

    def _failed(self, error: Exception) -> NNQSError:
        first = (str(error).strip().splitlines() or [""])[0]
        return NNQSError(f"NNQSSolver call {self.calls} failed: {type(error).__name__}: {first}")

    def approx_kernel(self, h1e, eri, norb, nelec, ci0=None, ecore=0, *, nroots: int | None = None, **kwargs):
        """CASSCF's micro-iterations: ``"subspace"`` re-diagonalises the last space in the new
        integrals (one growth round, no training); ``"network"`` runs ``approx_steps`` warm steps."""
        nroots = self.nroots if nroots is None else int(nroots)
        if self.wavefunction == "network" or self.space is None or self.last is None:
            warm = self.last is not None
            return self.kernel(h1e, eri, norb, nelec, ci0=ci0, ecore=ecore, nroots=nroots,
                               steps=self.approx_steps if warm and self.wavefunction == "network" else None)
        log = logger.new_logger(self, kwargs.get("verbose"))
        try:
            H = _hamiltonian(h1e, eri, norb, nelec, ecore)
            return self._solve(H, self.space, nroots, 1, self.last, log)
        except NNQSError:
            raise
        except Exception as error:
            raise self._failed(error) from error

    def _train(self, H: MolecularHamiltonian, ci0, steps: int | None, log) -> _Call:
        from nnqs.app.solver import NNQS

        if self.workdir is not None and self._holds != (id(self), str(self.workdir)):
            from nnqs.app.folder import share_folder   # before any work: another process's solver fails here
            share_folder(self.workdir, self, "give each process's solver its own workdir")
            self._holds = (id(self), str(self.workdir))
        tables = {k: dict(v) for k, v in self.config.items()}
        warm = ci0 is not None and self.last is not None
        if warm:   # any ci0 (a vector, a list of them, mc2step's bool): the last network and space
            tables["start"] = {**tables.get("start", {}), "mode": "none"}
            tables["optim"] = {**tables.get("optim", {}), "steps": steps or self.warm_steps}
        elif steps is not None:
            tables["optim"] = {**tables.get("optim", {}), "steps": steps}
        molecule = {"name": "active_space", "fcidump": "(in memory)", "slow_references": False, "dmrg": False,
                    "orbital_order": self.orbital_order}
        config = config_from_dict({"molecule": molecule, **tables})
        self.calls += 1
        log.info("NNQSSolver: CAS(%d, %d) call %d, %s", H.n_alpha + H.n_beta, H.n_orbitals, self.calls,
                 "warm start" if warm else "from the start")
        energies = _Energies(self.progress, config.optim.steps)
        solver = NNQS(config)
        found = solver.kernel(H, callbacks=[energies],
                              initial_model=self.last.weights if warm and self.last is not None else None,
                              initial_pool=self.space if warm and self.space is not None else None)
        energies.close()
        weights = {k: v.detach().cpu().clone() for k, v in found.model.state_dict().items()}
        log.info("NNQSSolver: VMC energy %.10f +- %.1e; subspace %s on %s determinants; + PT2 %s",
                 found.energy, found.energy_stderr, _fmt(found.energy_subspace),
                 found.fields.get("subspace_size"), _fmt(found.energy_pt2))
        if self.workdir is not None:
            self._write(found, solver.system)
        return _Call(found.fields, weights, solver.system, found.model, found.dets_in_molecule_order(), energies)

    def _write(self, found, system) -> None:
        """The last call's ``subspace.npz``, then its ``result.json`` naming it, into
        :attr:`workdir` (each atomic)."""
        import hashlib

        from nnqs.app.io import write_json
        from nnqs.app.trained import SUBSPACE_FILE, save_subspace

        workdir = self.workdir
        assert workdir is not None   # _train writes only with one
        fields = {**found.fields, "call": self.calls, "subspace_sha256": None}
        if found.space is not None:
            save_subspace(workdir / SUBSPACE_FILE, found.space, system.order)
            fields["subspace_sha256"] = hashlib.sha256((workdir / SUBSPACE_FILE).read_bytes()).hexdigest()
        write_json(workdir / "result.json", fields)

    def _solve(self, H: Hamiltonian, dets, nroots: int, max_cycle: int, call, log):
        from hamiltonians.io.pyscf_io import to_pyscf_ci
        from hamiltonians.sci.solver import SelectedCI

        sci = SelectedCI(select="connection", nroots=nroots, n_new=self.grow, growth=None, max_cycle=max_cycle,
                         conv_tol=self.conv_tol, max_size=self.max_space, pt2="none", with_spin=True)
        sci.fix_spin_(self.ss_penalty or 0.0, self.ss_value)
        _, roots = sci.kernel(H, dets)
        converged, history = sci.converged, sci.history
        assert roots.spin_squares is not None   # with_spin
        self.space, self.history, self.converged = roots.dets, history, converged
        self.e_states, self.spin_squares = roots.energies.tolist(), roots.spin_squares.tolist()
        dense = n_determinants(H.n_orbitals, H.n_alpha, H.n_beta) <= self.dense_max
        states = [NNQSState(call.weights, float(roots.energies[k]), 0.0, call.result, roots.dets,
                            roots.vectors[:, k].numpy(), call.system, call.model) for k in range(nroots)]
        cis = [to_pyscf_ci(s.dets, s.coefficients, H.n_orbitals, H.n_alpha, H.n_beta) if dense else s for s in states]
        for k in range(nroots):
            log.note("NNQSSolver root %d: E = %.12f  <S^2> = %.4f  on %d determinants", k, roots.energies[k],
                     roots.spin_squares[k], roots.dets.shape[0])
        self.last = states[0]
        log.info("NNQSSolver: %s after %d growth rounds", "converged" if converged else "not converged",
                 len(history) - 1)
        if nroots == 1:
            return float(roots.energies[0]), cis[0]
        return roots.energies.tolist(), cis

    def _network_state(self, call: _Call, log):
        from nnqs.training.convergence import has_stopped_improving

        result = call.result
        exact = result.get("energy_exact_variational")
        e_tot = float(exact if exact is not None else result["energy"])
        energies, stderrs = call.energies.energies, call.energies.stderrs
        self.converged = has_stopped_improving(energies, stderrs, window=max(5, len(energies) // 10))
        state = NNQSState(call.weights, e_tot, 0.0 if exact is not None else float(result["energy_stderr"]),
                          result, system=call.system, model=call.model)
        self.e_states, self.last, self.space = [e_tot], state, None
        log.note("NNQSSolver (network): E = %.12f +- %.1e, %s", e_tot, state.e_stderr,
                 "converged" if self.converged else "still improving")
        return e_tot, state

    # --- what PySCF asks of the states ------------------------------------------------------
    _fci = None

    @property
    def fci(self):
        """PySCF's ``direct_spin1.FCISolver``, whose kernels answer for FCI vectors."""
        if self._fci is None:
            from pyscf.fci import direct_spin1

            self._fci = direct_spin1.FCISolver()
        return self._fci

    def _rdms(self, state, norb, nelec):
        if isinstance(state, (list, tuple)):   # only mc.newton() hands make_rdm12 a list of vectors
            raise NotImplementedError(NEWTON_MESSAGE)
        if not isinstance(state, NNQSState):
            raise TypeError(f"expected a PySCF FCI vector or the NNQSState that NNQSSolver.kernel returned, "
                            f"got {type(state).__name__}")
        if state.rdms is None:
            if state.dets is not None:
                state.rdms = sparse_rdms(_sector(norb, nelec), state.dets, state.coefficients)
            else:
                state.rdms = self._network_rdms(state)
        return state.rdms

    def _network_rdms(self, state: NNQSState):
        from nnqs.training.observables import estimate_observables

        model, system = state.model, state.system
        assert model is not None and system is not None   # a network state carries both
        model.load_state_dict(state.weights)
        H = system.hamiltonian
        samples, mode = self.rdm_samples, self.rdm_mode
        if samples is None and H.n_determinants > EXACT_MAX_DETERMINANTS:
            samples = 100_000
        if mode is None:   # past enumeration the exact mode's outside amplitudes cost hours
            mode = "exact" if samples is None else "sampled"
        state.observables = estimate_observables(model, H, n_samples=samples, mode=mode)
        return state.observables.rdms.reordered(system.order)

    def make_rdm1s(self, civec, norb, nelec, link_index=None, **kwargs):
        if isinstance(civec, np.ndarray):
            return self.fci.make_rdm1s(civec, norb, nelec, link_index)
        rdms = self._rdms(civec, norb, nelec)
        return rdms.dm1a, rdms.dm1b

    def make_rdm1(self, civec, norb, nelec, link_index=None, **kwargs):
        if isinstance(civec, np.ndarray):
            return self.fci.make_rdm1(civec, norb, nelec, link_index)
        return self._rdms(civec, norb, nelec).dm1

    def make_rdm12s(self, civec, norb, nelec, link_index=None, reorder=True, **kwargs):
        if isinstance(civec, np.ndarray):
            return self.fci.make_rdm12s(civec, norb, nelec, link_index, reorder)
        rdms = self._rdms(civec, norb, nelec)
        return (rdms.dm1a, rdms.dm1b), (rdms.dm2aa, rdms.dm2ab, rdms.dm2bb)

    def make_rdm12(self, civec, norb, nelec, link_index=None, reorder=True, **kwargs):
        if isinstance(civec, np.ndarray):
            return self.fci.make_rdm12(civec, norb, nelec, link_index, reorder)
        rdms = self._rdms(civec, norb, nelec)
        return rdms.dm1, rdms.dm2

    def make_rdm123(self, civec, norb, nelec, link_index=None, reorder=True, **kwargs):
        if isinstance(civec, np.ndarray):
            return self.fci.make_rdm123(civec, norb, nelec, link_index, reorder)
        raise refusal("make_rdm123", self.dense_max)

    def trans_rdm1s(self, cibra, ciket, norb, nelec, link_index=None, **kwargs):
        return self._trans("trans_rdm1s", cibra, ciket, norb, nelec, link_index)

    def trans_rdm1(self, cibra, ciket, norb, nelec, link_index=None, **kwargs):
        return self._trans("trans_rdm1", cibra, ciket, norb, nelec, link_index)

    def trans_rdm12s(self, cibra, ciket, norb, nelec, link_index=None, reorder=True, **kwargs):
        return self._trans("trans_rdm12s", cibra, ciket, norb, nelec, link_index, reorder)

    def trans_rdm12(self, cibra, ciket, norb, nelec, link_index=None, reorder=True, **kwargs):
        return self._trans("trans_rdm12", cibra, ciket, norb, nelec, link_index, reorder)

    def _trans(self, name, cibra, ciket, norb, nelec, *args):
        if isinstance(cibra, np.ndarray) and isinstance(ciket, np.ndarray):
            return getattr(self.fci, name)(cibra, ciket, norb, nelec, *args)
        raise refusal(name, self.dense_max)

    def spin_square(self, civec, norb, nelec):
        """``(<S^2>, 2S + 1)`` as PySCF's ``spin_square``."""
        if isinstance(civec, np.ndarray):
            return self.fci.spin_square(civec, norb, nelec)
        if civec.dets is None:
            self._rdms(civec, norb, nelec)
        ss = spin_square_of_state(civec)
        s = math.sqrt(max(ss, 0.0) + 0.25) - 0.5
        return ss, 2 * s + 1

    def large_ci(self, civec, norb, nelec, tol=0.1, return_strs=True):
        """PySCF's ``large_ci``: ``[(c, alpha string, beta string)]`` with ``|c| >= tol``."""
        if isinstance(civec, np.ndarray):
            return self.fci.large_ci(civec, norb, nelec, tol, return_strs)
        if civec.dets is None:
            raise InputError("large_ci needs a root on the determinant space (wavefunction = 'subspace')")
        return large_ci_of(civec, norb, tol, return_strs)

    def energy(self, h1e, eri, civec, norb, nelec, link_index=None):
        """``<H>`` of the state without the core energy, from its RDMs (PySCF's ``energy``)."""
        from pyscf import ao2mo

        dm1, dm2 = self.make_rdm12(civec, norb, nelec)
        eri = ao2mo.restore(1, np.asarray(eri, dtype=np.float64), norb)
        return float(np.einsum("pq,qp", h1e, dm1) + 0.5 * np.einsum("pqrs,pqrs", eri, dm2))

    def contract_ss(self, civec, norb, nelec):
        if isinstance(civec, np.ndarray):
            return self.fci.contract_ss(civec, norb, nelec)
        raise refusal("contract_ss", self.dense_max)

    # --- what mc.newton() would need --------------------------------------------------------
    def contract_2e(self, *args, **kwargs):
        raise NotImplementedError(NEWTON_MESSAGE)

    def absorb_h1e(self, *args, **kwargs):
        raise NotImplementedError(NEWTON_MESSAGE)


class _Energies:
    """A callback: each VMC step's energy and error (the network wavefunction's convergence
    test), and a progress bar when asked."""

    def __init__(self, progress: bool, total: int | None) -> None:
        self.energies: list[float] = []
        self.stderrs: list[float] = []
        self.bar = None
        if progress:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc="NNQSSolver", dynamic_ncols=True)

    def __call__(self, driver, record) -> None:
        self.energies.append(float(record.energy))
        self.stderrs.append(float(record.stderr))
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@dataclass
class _Call:
    """One kernel call's training: ``result.json``'s fields, the network's weights, the system,
    the model, the final space's determinants (the molecule's order) and the steps' energies."""

    result: dict
    weights: dict
    system: System | None
    model: torch.nn.Module
    space_dets: torch.Tensor | None
    energies: _Energies


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.10f}"


def _hamiltonian(h1e, eri, norb, nelec, ecore) -> MolecularHamiltonian:
    from pyscf import ao2mo
    from pyscf.fci.addons import _unpack_nelec

    n_alpha, n_beta = _unpack_nelec(nelec)
    h1 = np.asarray(h1e, dtype=np.float64)
    eri = ao2mo.restore(1, np.asarray(eri, dtype=np.float64), norb)   # CASCI passes packed integrals
    return MolecularHamiltonian(int(norb), int(n_alpha), int(n_beta), float(ecore), torch.from_numpy(h1.copy()),
                                torch.from_numpy(np.ascontiguousarray(eri)))


def _sector(norb, nelec) -> MolecularHamiltonian:
    """A Hamiltonian of the sector with zero integrals: the RDM estimators need only its shape."""
    return _hamiltonian(np.zeros((norb, norb)), np.zeros((norb,) * 4), norb, nelec, 0.0)


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
