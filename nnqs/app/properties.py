"""``nnqs analyse``'s observables of a trained run: RDMs (saved), ``<S^2>``, natural occupations
and, for a run with a geometry, the dipole moment (printed, plotted, in ``analysis.json`` and
merged into ``result.json``).

Outputs in the run folder: ``rdms.npz`` and ``natural_occupations.png``. ``rdms.npz`` holds
``dm1a, dm1b, dm2aa, dm2ab, dm2bb`` and their ``*_stderr`` (PySCF's conventions, the molecule's own
orbital order whatever the network's), ``unseen_mass``, ``network_order`` (the network's
autoregressive order: position ``i`` holds molecule orbital ``network_order[i]``) and, for a run
with a geometry, ``mo_coeff`` ``[nao, N]``: the run's active orbitals (rotated ones included) in
PySCF's AO basis, the RDMs' columns, so ``mo_coeff @ dm1 @ mo_coeff.T`` is the active AO density
(add the core's); for a run
whose orbitals were rotated (``[molecule] orbitals``), ``orbital_rotation`` ``[N, N]``: the run's
orbitals in the given ones, so ``R @ dm1 @ R.T`` is the 1-RDM in the FCIDUMP's orbitals.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import cast

import numpy as np

from nnqs.app.folder import reading
from nnqs.app.io import atomic_write, write_json
from nnqs.app.report import save_figure
from nnqs.app.trained import TrainedRun
from nnqs.training.observables import Observables, estimate_observables
from nnqs.training.settings import EXACT_MAX_DETERMINANTS

__all__ = ["run_properties", "format_properties", "EXACT_MAX_DETERMINANTS", "DEFAULT_SAMPLES"]

log = logging.getLogger(__name__)

DEFAULT_SAMPLES = 100_000


def run_properties(trained: TrainedRun, run_dir: str | Path, *, n_samples: int | None = None,
                   mode: str | None = None) -> Observables:
    """The observables of ``trained`` (:func:`nnqs.training.observables.estimate_observables`; the
    whole space up to :data:`EXACT_MAX_DETERMINANTS` determinants unless ``n_samples`` is given),
    their RDMs put back in the molecule's orbital order and written out (see the module).
    ``mode`` (default): ``"exact"`` over the whole space, ``"sampled"`` from samples (the exact
    mode's amplitudes of every connected configuration would take hours past enumeration)."""
    run_dir = Path(run_dir)
    H = trained.system.hamiltonian
    if n_samples is None and H.n_determinants > EXACT_MAX_DETERMINANTS:
        n_samples = DEFAULT_SAMPLES
    mode = mode or ("exact" if n_samples is None else "sampled")
    dipole = _dipole_operator(trained)
    functionals = {}
    if dipole is not None:
        order = trained.system.order
        functionals = {f"dipole_{axis}": {"dm1": -dipole[1][k][np.ix_(order, order)]} for k, axis in enumerate("xyz")}
    observables = estimate_observables(trained.model, H, n_samples=n_samples, mode=mode, functionals=functionals)
    if dipole is not None:   # the constant part: nuclei and core
        for k, axis in enumerate("xyz"):
            value, error = observables.functionals[f"dipole_{axis}"]
            observables.functionals[f"dipole_{axis}"] = (value + float(dipole[0][k]), error)
    observables.rdms = observables.rdms.reordered(trained.system.order)
    rdms = observables.rdms
    arrays = {name: getattr(rdms, name) for name in ("dm1a", "dm1b", "dm2aa", "dm2ab", "dm2bb")}
    arrays.update({f"{k}_stderr": v for k, v in rdms.stderr.items()})
    arrays["unseen_mass"] = np.float64(rdms.unseen_mass)
    arrays["network_order"] = np.asarray(trained.system.order, dtype=np.int64)
    if dipole is not None:
        arrays["mo_coeff"] = dipole[2]
    orbitals = trained.system.orbitals
    if orbitals is not None and orbitals.rotation is not None:
        arrays["orbital_rotation"] = orbitals.rotation

    def write_npz(tmp: str) -> None:
        with open(tmp, "wb") as f:
            np.savez_compressed(f, **arrays)

    atomic_write(run_dir / "rdms.npz", write_npz)
    _plot_occupations(run_dir / "natural_occupations.png", observables, trained.config.molecule.name)
    result_path = run_dir / "result.json"
    with reading(run_dir) as running:   # no run may write result.json between its read and this write
        if running:
            log.warning("%s is in use by its run (%s): the observables are not merged into its result.json",
                        run_dir, running)
        elif result_path.is_file():
            try:
                result = json.loads(result_path.read_text())
            except (ValueError, UnicodeDecodeError):   # written again, observables aside, by a --resume
                log.warning("%s: unreadable, the observables are not merged into it", result_path)
                return observables
            result["observables"] = observables.to_dict()
            write_json(result_path, result)
    return observables


def _dipole_operator(trained: TrainedRun):
    """``(constant [3], r [3, N, N], mo_coeff [nao, N])`` of the dipole in the molecule's orbital order
    (:func:`hamiltonians.io.pyscf_io.dipole_operator`, rotated into the run's orbitals where
    ``[molecule] orbitals`` rotated them), or ``None``: a run from an FCIDUMP has no
    geometry, and orbitals rebuilt unlike the saved ones (a sign, a degenerate pair) would give a
    wrong dipole, so none is given (with a warning)."""
    molecule = trained.config.molecule
    if not molecule.geometry:
        return None
    from hamiltonians.io.pyscf_io import dipole_operator
    from nnqs.app.system import original_hamiltonian

    constant, r, h1, mo_coeff = dipole_operator(molecule.geometry, molecule.basis, charge=molecule.charge, spin=molecule.spin,
                                      frozen_core=molecule.frozen_core,
                                      # MoleculeConfig checks that a given active_space has two entries
                                      active_space=cast("tuple[int, int] | None", tuple(molecule.active_space) or None))
    orbitals = trained.system.orbitals
    if orbitals is not None and orbitals.rotation is not None:   # into the run's orbitals (h1' = R^T h1 R)
        rotation = np.asarray(orbitals.rotation)
        h1, r = rotation.T @ h1 @ rotation, np.einsum("ap,kab,bq->kpq", rotation, r, rotation)
        mo_coeff = mo_coeff @ rotation
    saved = original_hamiltonian(trained.system).h1.double().cpu().numpy()
    if saved.shape != h1.shape or np.abs(saved - h1).max() > 1e-6:
        log.warning("the rebuilt orbitals differ from those the run trained on (an orbital's sign or a degenerate "
                    "pair): no dipole moment")
        return None
    return constant, r, mo_coeff


def format_properties(o: Observables) -> str:
    """Lines for the terminal."""
    how = "exact enumeration" if o.n_samples is None else f"{o.n_samples} samples, {o.n_unique} unique"
    occ = " ".join(f"{x:.4f}" for x in o.natural_occupations)
    return "\n".join([
        f"observables ({how}, {o.mode} local estimators, {o.seconds:.1f} s):",
        f"  energy (mean E_loc)    {o.energy:.8f} +- {o.energy_stderr:.1e} Ha",
        f"  <S^2>                  {o.spin_square:.4f} +- {o.spin_square_stderr:.4f}",
        f"  natural occupations    {occ}",
        *(["  dipole (a.u.)          " + "  ".join(f"{o.functionals[f'dipole_{a}'][0]:+.4f} +- "
                                                    f"{o.functionals[f'dipole_{a}'][1]:.4f}" for a in "xyz")]
          if "dipole_x" in o.functionals else []),
        *([f"  unreached probability  {o.rdms.unseen_mass:.1e} (Good-Turing); "
           + (f"an element can be off by about {o.rdms.unseen_bound('dm1'):.1e} (dm1), "
              f"{o.rdms.unseen_bound('dm2'):.1e} (dm2) beyond its error bar"
              if math.isfinite(o.rdms.unseen_bound("dm1")) else
              f"in {o.mode} mode an element can be off by more than that beyond its error bar")]
          if o.n_samples is not None else []),
        "  RDMs in rdms.npz (PySCF's conventions, the molecule's orbital order)",
    ])


def _plot_occupations(path: Path, o: Observables, name: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    k = np.arange(1, len(o.natural_occupations) + 1)
    ax.bar(k, o.natural_occupations, color="tab:blue")
    ax.set_xlabel("natural orbital")
    ax.set_ylabel("occupation")
    ax.set_ylim(0, 2.05)
    ax.set_title(f"{name}: natural occupations, <S^2> = {o.spin_square:.3f}")
    save_figure(fig, path)
