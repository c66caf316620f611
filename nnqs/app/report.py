"""Run outputs: ``metrics.csv`` (one row per step), ``result.json`` and the convergence plot."""

from __future__ import annotations

import csv
import logging
import os
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path

from hamiltonians.references.dmrg import dmrg_label
from nnqs.app.io import atomic_write
from nnqs.training.driver import StepRecord

log = logging.getLogger(__name__)

CHEMICAL_ACCURACY_HA = 1.6e-3
METRIC_FIELDS = [f.name for f in fields(StepRecord)] + ["error_vs_fci_mha"]


def write_csv(path: str | Path, names: list[str], rows: list[dict]) -> None:
    """``rows`` under the header ``names`` as ``path``, written atomically."""
    def write(tmp: str) -> None:
        with open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, names)
            writer.writeheader()
            writer.writerows(rows)

    atomic_write(path, write)


def readable_rows(path: Path, before: int, numbers: Sequence[str] = ()) -> list[dict]:
    """The rows of the CSV file ``path`` whose ``step`` is below ``before`` and that read back
    whole: a row cut short (a full disk, a crash mid-write) or damaged (a flipped bit: a ``step``
    or one of the ``numbers`` columns that is no number, a NUL, bytes that are no UTF-8) is
    dropped, with one warning naming the file, the count and the first line."""
    rows, bad = [], []
    with path.open(newline="", errors="replace") as f:
        reader = csv.DictReader(f)
        try:
            for r in reader:
                try:
                    if None in r.values() or None in r or "\ufffd" in "".join(r.values()):
                        raise ValueError("cut short or not UTF-8")
                    if int(r["step"]) >= before:
                        continue
                    for name in numbers:
                        float(r[name])
                except (ValueError, KeyError, TypeError):
                    bad.append(reader.line_num)
                    continue
                rows.append(r)
        except csv.Error:   # a NUL or a broken quote: nothing past it is trusted
            bad.append(reader.line_num)
    if bad:
        log.warning("%s: %d unreadable row(s) dropped (first at line %d); the run goes on from its checkpoint",
                    path, len(bad), bad[0])
    return rows


class MetricsLog:
    """Appends step records to ``metrics.csv``; on resume, drops rows past the checkpoint."""

    def __init__(self, path: str | Path, fci: float | None, *, resume_step: int | None = None) -> None:
        self.path, self.fci = Path(path), fci
        self.rows: list[dict] = []
        if resume_step is not None and self.path.exists():
            self.rows = readable_rows(self.path, resume_step, numbers=("energy", "seconds"))
        self._rewrite()

    def append(self, record: StepRecord) -> dict:
        row = asdict(record)
        row["error_vs_fci_mha"] = "" if self.fci is None else 1e3 * (record.energy - self.fci)
        self.rows.append(row)
        try:
            with self.path.open("a", newline="") as f:
                csv.DictWriter(f, METRIC_FIELDS).writerow(row)
        except OSError as error:   # a full disk: name the file (a partial row is dropped on --resume)
            raise OSError(error.errno, error.strerror, str(self.path)) from error
        return row

    def sync(self) -> None:
        """Flush the rows appended so far to the disk (at each checkpoint: after a crash the
        file then holds at least the checkpoint's steps)."""
        if self.path.exists():
            with self.path.open("rb") as f:
                os.fsync(f.fileno())

    @classmethod
    def read(cls, path: str | Path) -> "MetricsLog":
        """The rows of a finished run's ``metrics.csv`` (none if it is missing), read only."""
        log = cls.__new__(cls)
        log.path, log.fci, log.rows = Path(path), None, []
        if log.path.exists():
            with log.path.open() as f:
                log.rows = list(csv.DictReader(f))
        return log

    def _rewrite(self) -> None:
        write_csv(self.path, METRIC_FIELDS, self.rows)

    def energies(self) -> tuple[list[int], list[float]]:
        return [int(r["step"]) for r in self.rows], [float(r["energy"]) for r in self.rows]

    def column(self, name: str) -> list[float]:
        """A numeric column of the rows so far (rows read back from the file hold strings;
        an empty cell is NaN)."""
        return [float(r[name]) if r.get(name) not in ("", None) else float("nan") for r in self.rows]


def plot_convergence(path: str | Path, steps: list[int], energies: list[float], references: dict, title: str,
                     *, stderrs: list[float] | None = None, coarse_steps: int = 0,
                     final: tuple[int, float, str] | None = None, dmrg: dict | None = None, loop: Sequence[float] = (),
                     points: Sequence[tuple[float, str, str]] = ()) -> dict:
    """Energy per step (with its one-standard-error band) and the HF/CCSD(T)/FCI/DMRG lines, and
    below it the **signed** error ``E - E_ref`` (FCI, else DMRG) in mHa on a symlog axis (linear
    within 1e-3 mHa of zero, so a value below the reference shows as negative and an exact one
    as zero), with the chemical-accuracy band ``|E - E_ref| < 1.6 mHa``. Returns what each panel
    drew: ``{"error_panel": {label: [y values]}}`` (mHa), for tests.

    ``coarse_steps``: a dotted line where the coarse local energies end; ``final``: ``(step,
    energy, label)`` of the final evaluation; ``dmrg``: the DMRG reference's details, which name
    it extrapolated or variational (:func:`hamiltonians.references.dmrg.dmrg_label`); ``loop``: the
    subspace loop's pool energies, one per cycle, drawn at steps ``-len(loop) .. -1`` (before
    VMC's step 0); ``points``: ``(energy, label, marker)`` drawn at the final step (the subspace
    and PT2 energies). The title should name the run and its commit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    exact_name = "FCI" if references.get("fci") is not None else "DMRG"
    ref = references.get("fci") if references.get("fci") is not None else references.get("dmrg")
    fig, axes = plt.subplots(2 if ref is not None else 1, 1, figsize=(7, 7 if ref is not None else 4), squeeze=False)
    drawn: dict[str, list[float]] = {}
    e = np.asarray(energies, dtype=float)
    band = np.asarray(stderrs, dtype=float) if stderrs is not None else None

    def panel(ax, shown, record: bool) -> None:   # `shown`: energy -> the panel's y value
        ys = [shown(x) for x in e]
        ax.plot(steps, ys, lw=1, label="NNQS VMC, per step (sampled)")
        if band is not None and len(band) == len(e):
            ax.fill_between(steps, [shown(x) for x in e - band], [shown(x) for x in e + band], alpha=0.25,
                            lw=0, label="one standard error")
        if record:
            drawn["VMC"] = ys
        if loop:
            ax.plot(range(-len(loop), 0), [shown(x) for x in loop], "o-", ms=3, lw=1, color="tab:brown",
                    label="subspace loop: pool energy per cycle (variational)")
        x = final[0] if final is not None else (steps[-1] if steps else 0)
        for energy, label, marker in points:
            ax.plot([x], [shown(energy)], marker, ms=8, label=f"{label} {energy:.6f}")
            if record:
                drawn[label] = [shown(energy)]
        if final is not None:
            ax.plot([final[0]], [shown(final[1])], "*", color="tab:orange", ms=10, label=f"{final[2]} {final[1]:.6f}")
            if record:
                drawn[final[2]] = [shown(final[1])]
        if coarse_steps > 0:
            ax.axvline(coarse_steps - 0.5, color="gray", ls=":", lw=1, label="end of coarse local energies")

    ax = axes[0, 0]
    panel(ax, lambda x: x, False)
    styles = {"hf": ("HF", "tab:red", "--"), "ccsd_t": ("CCSD(T)", "tab:green", "-."), "fci": ("FCI", "k", ":"),
              "dmrg": (dmrg_label(dmrg), "tab:purple", ":")}
    for key, (label, color, ls) in styles.items():
        if references.get(key) is not None:
            ax.axhline(references[key], color=color, ls=ls, lw=1, label=f"{label} {references[key]:.6f}")
    if energies:
        low = min([*energies, *loop, *(p[0] for p in points),
                   *(v for k, v in references.items() if k in styles and v is not None)])
        high = references.get("hf") if references.get("hf") is not None else max(energies)
        pad = max(high - low, 1e-3) * 0.3
        ax.set_ylim(low - pad, high + pad)
    ax.set_xlabel("step")
    ax.set_ylabel("energy (Ha)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    if ref is not None:
        ax = axes[1, 0]
        panel(ax, lambda x: 1e3 * (x - ref), True)
        ax.set_yscale("symlog", linthresh=1e-3)
        ax.axhspan(-1e3 * CHEMICAL_ACCURACY_HA, 1e3 * CHEMICAL_ACCURACY_HA, color="tab:green", alpha=0.12,
                   label="chemical accuracy (|error| < 1.6 mHa)")
        ax.axhline(0.0, color="k", lw=0.8)
        if references.get("ccsd_t") is not None:
            ccsd_t = 1e3 * (references["ccsd_t"] - ref)
            ax.axhline(ccsd_t, color="tab:green", ls="-.", lw=1, label=f"CCSD(T) {ccsd_t:+.3f} mHa")
            drawn["CCSD(T)"] = [ccsd_t]
        ax.set_xlabel("step")
        ax.set_ylabel(f"E - E_{exact_name} (mHa, symlog)")
        handles = [(h, label) for h, label in zip(*ax.get_legend_handles_labels())
                   if label.startswith(("chemical", "CCSD(T)"))]   # the rest is named in the panel above
        ax.legend(*zip(*handles), fontsize=7) if handles else None
    save_figure(fig, path)
    return {"error_panel": drawn}


def save_figure(fig, path: str | Path) -> None:
    """Write a matplotlib figure as PNG, atomically, and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    plt.close(fig)


def write_result(out: Path, config, result: dict, metrics: MetricsLog, step: int) -> None:
    """A run's ``result.json`` and ``convergence.png`` (``config``: its
    :class:`~nnqs.app.runconfig.RunConfig`; ``metrics``: its steps so far)."""
    from nnqs.app.io import write_json

    write_json(out / "result.json", result)
    steps, energies = metrics.energies()
    stderrs = metrics.column("stderr")
    loop = []
    if (out / "subspace.csv").exists():
        with (out / "subspace.csv").open() as f:
            loop = [float(r["energy"]) for r in csv.DictReader(f)]
    points = [(result[key], label, marker) for key, label, marker in (
        ("energy_subspace", f"subspace energy ({result.get('subspace_size')} determinants, variational)", "s"),
        ("energy_pt2", "subspace + PT2", "D"),
        ("energy_extrapolated", "E_var extrapolated to PT2 -> 0", "P")) if result.get(key) is not None]
    commit = (result.get("provenance") or {}).get("commit") or "no commit"
    final = (f"VMC final evaluation (sampled, {result['local_energy']} local energies, "
             f"+- {result['energy_stderr']:.1e})")
    plot_convergence(out / "convergence.png", steps, energies, result["references"],
                     f"{config.molecule.name}: NNQS VMC, {out.name} (commit {commit[:7]})", stderrs=stderrs,
                     coarse_steps=min(config.local_energy.coarse_steps, step), final=(step, result["energy"], final),
                     dmrg=result["dmrg"], loop=loop, points=points)
