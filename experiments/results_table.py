"""The table of run results, generated from ``experiments/results/vmc/*.json``.

A run result is a ``result.json`` kept under ``results/vmc/`` (it has ``energy``, ``references`` and
``config``; analyses and other JSON beside them are skipped). One row per result: the system
(name / basis, frozen core), spin orbitals, the error against the best reference (FCI, else DMRG)
in mHa with its statistical error bar, CCSD(T)'s error against the same reference, steps, CPU
minutes (wall minutes, marked, where the result predates ``cpu_seconds``), the config file that
made it (marked ``(removed)`` where a commit deleted it since) and the commit (the result's own
``provenance.commit``, else the commit that added the file, marked ``(committed)``). Results of
every layout read alike: those written before the config tables were split (``pretrain``,
``anchors``) and the current ones (``start``, ``provenance``); only the fields above are used.

Writes ``experiments/RESULTS.md`` (every run result) and, when ``README.md`` holds the markers
``<!-- results-table:begin -->`` and ``<!-- results-table:end -->``, replaces the text between them
with the table of the results in :data:`README_SELECTION` (nothing else in the README changes).
``--check`` writes nothing and exits 1 when either file is stale.

    python -m experiments.results_table [--check]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

EXPERIMENTS = Path(__file__).resolve().parent
REPO = EXPERIMENTS.parent
BEGIN, END = "<!-- results-table:begin -->", "<!-- results-table:end -->"

#: The README's rows (file names under results/vmc/, in this order; RESULTS.md has them all): runs of
#: today's defaults only, nothing but the molecule in their configs (the main job, the STO-3G set's
#: hardest two, the four larger systems). Edit this list to change the README's table.
README_SELECTION = [
    "main_defaults.json", "c2_defaults.json", "h10_defaults.json",
    "h2o_631g_defaults.json", "n2_631g_fc_defaults.json", "h2o_ccpvdz_defaults.json", "n2_ccpvdz_fc_defaults.json",
    "n2_631g_fc_2p2.json", "h12_sto3g_2bohr_pm.json", "cr2_cas12_18_pm.json",
]

HEADER = ("| system | spin orbitals | NNQS error (mHa) | subspace (mHa) | subspace + PT2 (mHa) | vs | CCSD(T) error (mHa) "
          "| steps | CPU min | config | commit |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|\n")


def is_run_result(data) -> bool:
    return isinstance(data, dict) and "energy" in data and isinstance(data.get("references"), dict) \
        and isinstance(data.get("config"), dict)


def _git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else ""


def added_commit(path: Path) -> str | None:
    """Short hash of the commit that added ``path``, following exact renames back (``None`` when
    the file is not committed)."""
    try:
        rel = str(Path(path).resolve().relative_to(REPO))
    except ValueError:
        return None
    rev = "HEAD"
    for _ in range(10):
        commits = _git("log", "--diff-filter=A", "--format=%h", rev, "--", rel).split()
        if not commits:
            return None
        commit = commits[-1]
        renamed = None
        for line in _git("show", "-M100%", "--name-status", "--format=", commit).splitlines():
            parts = line.split("\t")
            if len(parts) == 3 and parts[0] == "R100" and parts[2] == rel:
                renamed = parts[1]
        if renamed is None:
            return commit
        rel, rev = renamed, f"{commit}^"
    return commit


def system_key(data: dict) -> str:
    """The electronic problem a result solved (geometry, basis, charge, spin, frozen core, active space)."""
    m = data["config"].get("molecule", {})
    return json.dumps([m.get(k) for k in ("geometry", "basis", "charge", "spin", "frozen_core", "active_space", "fcidump")])


def reference_energies(data: dict) -> dict:
    """``{"fci": E, "dmrg": E}`` as far as this result knows them (a DMRG energy read from outside
    the run is recovered from ``error_vs_dmrg_mha``)."""
    refs = {k: data["references"].get(k) for k in ("fci", "dmrg")}
    if refs["dmrg"] is None and data.get("error_vs_dmrg_mha") is not None:
        refs["dmrg"] = data["energy"] - data["error_vs_dmrg_mha"] / 1e3
    return {k: v for k, v in refs.items() if v is not None}


def best_reference(data: dict, shared: dict | None = None) -> tuple[str, float] | None:
    """``(name, error in mHa)`` against FCI where there is one, else against DMRG: the run's own,
    else one another result of the same system knows (``shared``: name -> energy)."""
    for name in ("fci", "dmrg"):
        err = data.get(f"error_vs_{name}_mha")
        if err is not None:
            return name, float(err)
    for name in ("fci", "dmrg"):
        if (shared or {}).get(name) is not None:
            return name, (data["energy"] - shared[name]) * 1e3
    return None


def ccsd_t_error(data: dict, ref: tuple[str, float] | None) -> float | None:
    """CCSD(T) minus the reference energy, in mHa (from the run's two errors, so a DMRG energy
    read from outside the run counts too)."""
    if ref is None:
        return None
    if data.get("error_vs_ccsd_t_mha") is not None:
        return ref[1] - float(data["error_vs_ccsd_t_mha"])
    refs = data["references"]
    if refs.get("ccsd_t") is not None:
        return ref[1] - (data["energy"] - refs["ccsd_t"]) * 1e3
    return None


def config_file(path: Path, data: dict, configs: Path) -> str:
    """The config that made the result: a file of ``configs`` (or a shipped example, shown as
    ``--example NAME``) named after the result (its name up to the first dot) or its molecule,
    whose every setting the result's effective config holds; ``-`` where none does (the
    molecule set's defaults)."""
    from nnqs.examples import EXAMPLES

    stems = [stem for stem in (path.name.split(".")[0], data["config"].get("molecule", {}).get("name", "")) if stem]
    for stem in stems:
        for folder, shown in ((configs, f"{stem}.toml"), (EXAMPLES, f"--example {stem}")):
            if (folder / f"{stem}.toml").exists() and _holds(data["config"], folder / f"{stem}.toml"):
                return shown
    for stem in stems:
        if was_removed(configs / f"{stem}.toml"):
            return f"{stem}.toml"
    return "-"


def _holds(config: dict, toml_path: Path) -> bool:
    """Whether every key the TOML sets has that value in ``config`` (lists and tuples alike)."""
    try:
        import tomllib
    except ModuleNotFoundError:   # Python 3.10
        import tomli as tomllib

    with open(toml_path, "rb") as f:
        wanted = tomllib.load(f)
    return all(json.dumps(config.get(table, {}).get(key)) == json.dumps(value)
               for table, keys in wanted.items() if isinstance(keys, dict) for key, value in keys.items())


def was_removed(path: Path) -> bool:
    """Whether ``path`` (absent now) was a committed file that a commit deleted: the config of a
    historical result that has gone since (its settings are in the result's ``config``)."""
    if path.exists():
        return False
    try:
        rel = str(path.resolve().relative_to(REPO))
    except ValueError:
        return False
    return bool(_git("log", "-1", "--diff-filter=D", "--format=%h", "HEAD", "--", rel))


def row(path: Path, data: dict, configs: Path, shared: dict | None = None) -> dict:
    molecule = data["config"].get("molecule", {})
    ref = best_reference(data, shared)
    stderr = data.get("energy_stderr")
    prov = data.get("provenance") or {}
    if prov.get("commit"):
        commit = prov["commit"][:7] + (" (dirty)" if prov.get("dirty") else "")
    else:
        added = added_commit(path)
        commit = f"{added} (committed)" if added else "uncommitted"
    if data.get("cpu_seconds") is not None:
        minutes = f"{data['cpu_seconds'] / 60:.1f}"
    elif data.get("wall_seconds") is not None:
        minutes = f"{data['wall_seconds'] / 60:.1f} (wall)"
    else:
        minutes = "-"
    source = "FCIDUMP" if molecule.get("fcidump") else molecule.get("basis", "?")   # a file's basis is its own
    system = f"{molecule.get('name', path.stem)} / {source}"
    if molecule.get("frozen_core"):
        system += f", frozen core {molecule['frozen_core']}"
    n = data.get("n_orbitals")
    ct = ccsd_t_error(data, ref)
    config = config_file(path, data, configs)
    extra = {}
    if ref is not None:   # the subspace and PT2 energies against the same reference as the network's
        ref_energy = data["energy"] - ref[1] / 1e3
        for key, field in (("subspace_error_mha", "energy_subspace"), ("pt2_error_mha", "energy_pt2")):
            extra[key] = None if data.get(field) is None else 1e3 * (data[field] - ref_energy)
    pt2_stderr = data.get("energy_pt2_stderr")
    return {
        "file": path.name, "system": system, "spin_orbitals": 2 * n if n else None,
        "reference": ref[0] if ref else None, "error_mha": ref[1] if ref else None,
        "error_stderr_mha": stderr * 1e3 if stderr is not None else None,
        "ccsd_t_error_mha": ct, "steps": data.get("steps"), "cpu_minutes": minutes,
        "config": config, "config_removed": config != "-" and was_removed(configs / config), "commit": commit,
        "subspace_error_mha": extra.get("subspace_error_mha"), "pt2_error_mha": extra.get("pt2_error_mha"),
        "pt2_stderr_mha": pt2_stderr * 1e3 if pt2_stderr else None,
    }


def load_rows(results: Path, configs: Path) -> list[dict]:
    found = []
    for path in sorted(results.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if is_run_result(data):
            found.append((path, data))
    shared: dict[str, dict] = {}
    for _, data in found:
        for name, energy in reference_energies(data).items():
            shared.setdefault(system_key(data), {}).setdefault(name, energy)
    rows = [row(path, data, configs, shared.get(system_key(data))) for path, data in found]
    rows.sort(key=lambda r: (r["spin_orbitals"] or 0, r["file"]))
    return rows


def table(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        if r["error_mha"] is None:
            err = "-"
        else:
            err = f"{r['error_mha']:.2f}" + (f" ± {r['error_stderr_mha']:.2f}" if r["error_stderr_mha"] is not None else "")
        ct = "-" if r["ccsd_t_error_mha"] is None else f"{r['ccsd_t_error_mha']:.2f}"
        sub = "-" if r.get("subspace_error_mha") is None else f"{r['subspace_error_mha']:.3f}"
        pt2 = "-" if r.get("pt2_error_mha") is None else f"{r['pt2_error_mha']:.3f}" + (
            f" ± {r['pt2_stderr_mha']:.3f}" if r.get("pt2_stderr_mha") else "")
        ref = (r["reference"] or "-").upper()
        config = f"`{r['config']}`" + (" (removed)" if r.get("config_removed") else "")
        lines.append(f"| {r['system']} | {r['spin_orbitals'] or '-'} | {err} | {sub} | {pt2} | {ref} | {ct} | {r['steps'] or '-'} | "
                     f"{r['cpu_minutes']} | {config} | {r['commit']} |\n")
    return HEADER + "".join(lines)


def results_page(rows: list[dict]) -> str:
    return ("# Results\n\n"
            "<!-- Generated by `python -m experiments.results_table` from experiments/results/vmc/*.json; "
            "do not edit by hand. -->\n\n"
            "Every run result under `experiments/results/vmc/` (file names: the config, then the commit that\n"
            "added the run where a config has several). NNQS error: the network's energy minus the best\n"
            "reference (FCI, else DMRG), ± one statistical error; subspace: H diagonalised on the run's pool\n"
            "and the network's samples (variational); + PT2: with its Epstein-Nesbet correction; CCSD(T): its\n"
            "error against the same reference. How each run was made and what it showed is in `LOG.md`.\n\n"
            "| file | " + HEADER.splitlines()[0][2:] + "\n|---" + HEADER.splitlines()[1] + "\n"
            + "".join(f"| `{r['file']}` " + line for r, line in zip(rows, table(rows).splitlines(True)[2:])))


def with_readme_table(text: str, rows: list[dict]) -> str | None:
    """``text`` with the table between the markers replaced, or ``None`` without the markers."""
    i, j = text.find(BEGIN), text.find(END)
    if i < 0 or j < i:
        return None
    return text[: i + len(BEGIN)] + "\n" + table(rows) + text[j:]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is stale")
    p.add_argument("--results", type=Path, default=EXPERIMENTS / "results" / "vmc")
    p.add_argument("--configs", type=Path, default=EXPERIMENTS / "configs")
    p.add_argument("--out", type=Path, default=EXPERIMENTS / "RESULTS.md")
    p.add_argument("--readme", type=Path, default=REPO / "README.md")
    p.add_argument("--select", default=None,
                   help="comma-separated result file names for the README (default: README_SELECTION; "
                        "'all' for every result)")
    args = p.parse_args(argv)
    rows = load_rows(args.results, args.configs)
    if args.select == "all":
        chosen = rows
    else:
        names = README_SELECTION if args.select is None else args.select.split(",")
        by_name = {r["file"]: r for r in rows}
        chosen = [by_name[n] for n in names if n in by_name]
    targets = {args.out: results_page(rows)}
    if args.readme.exists():
        new = with_readme_table(args.readme.read_text(), chosen)
        if new is not None:
            targets[args.readme] = new
    stale = [path for path, text in targets.items() if not path.exists() or path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"stale: {path} (run python -m experiments.results_table)", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.write_text(targets[path])
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
