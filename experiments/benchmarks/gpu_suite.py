"""One command that measures what a GPU user asks, on one device, and writes one JSON and a
markdown table with the device named.

Sections (each saved as soon as it is done; a rerun skips the sections the output already holds,
so an interrupted suite resumes; ``--fresh`` starts over):

* ``consistency``: the cached decode against the full pass (``nnqs check-consistency``) in
  float64, float32 and bfloat16, max ``|p_cached - p_full|`` against each dtype's tolerance;
* ``sampling``: cached BAS against the uncached baseline (the same tree walk, one full causal
  pass per depth; ``experiments.benchmarks.bench_sampling.bench_point``) at 26, 52 and 100 spin
  orbitals, d_model 32 and 64, about ``--unique`` unique configurations: unique configurations
  per second both ways, their ratio, identical samples, the KV cache's bytes against
  ``2 * B * N * L * H_kv * d_head * bytes``;
* ``local_energy``: the connection kernel and local energies on N2 / cc-pVDZ (frozen core, 52
  spin orbitals) on the device (the PyTorch kernel) and, when the device is not the CPU, on the
  CPU (the compiled kernel), side by side (``bench_local_energy.bench_system``);
* ``vmc_step``: one VMC step at 52 spin orbitals (``bench_vmc_step``, start ``none``: an untrained
  network) with about 1e4 and 1e5 unique samples;
* every section records the device's peak memory (CUDA ``max_memory_allocated``; CPU: ``None``).

Usage::

    python experiments/benchmarks/gpu_suite.py --device cuda                  # the whole suite
    python experiments/benchmarks/gpu_suite.py --device cpu --quick --out X   # the smoke test CI runs

Writes ``--out`` (default ``experiments/results/gpu_suite_<device>.json``) and ``--out`` with
``.md`` for ``.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import CONFIGS, RESULTS, add_device_argument, cpu_model_name, save_results  # noqa: E402
from nnqs.app.io import atomic_write  # noqa: E402

logger = logging.getLogger("gpu_suite")

SECTIONS = ("consistency", "sampling", "local_energy", "vmc_step")


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({cpu_model_name()})"


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak(device: torch.device) -> int | None:
    return int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else None


def run_consistency(device: torch.device, quick: bool) -> dict:
    from nnqs.wavefunction.consistency import check_consistency

    results = check_consistency(n_orbitals=8 if quick else 50, batch=8 if quick else 256, d_model=32,
                                dtypes=("float64", "float32", "bfloat16"), device=str(device))
    return {"rows": [{"dtype": r.dtype, "max_abs_diff": r.max_abs_diff, "tolerance": r.tolerance, "ok": r.ok}
                     for r in results]}


def run_sampling(device: torch.device, quick: bool, unique: int) -> dict:
    from experiments.benchmarks.bench_sampling import bench_point

    rows = []
    for spin_orbitals in ((8, 12) if quick else (26, 52, 100)):
        for model in ("d32", "d64"):
            dtype = "float64" if device.type == "cpu" else "float32"
            run = bench_point(model, spin_orbitals // 2, unique, dtype=dtype, device=device, repeats=1 if quick else 2,
                              seed=0, naive_skip_reason=None)
            run["spin_orbitals"] = spin_orbitals
            run["cached_unique_per_s"] = run["n_unique"] / run["cached_seconds"]
            run["naive_unique_per_s"] = run["n_unique"] / run["naive_seconds"] if run.get("naive_seconds") else None
            rows.append(run)
            logger.info("sampling %d spin orbitals %s: %d unique, cached %.3f s, uncached %.3f s", spin_orbitals, model,
                        run["n_unique"], run["cached_seconds"], run.get("naive_seconds") or float("nan"))
    return {"rows": rows}


def run_local_energy(device: torch.device, quick: bool) -> dict:
    from experiments.benchmarks.bench_local_energy import SYSTEMS, bench_system

    name = "N2_sto-3g" if quick else "N2_cc-pvdz_fc"
    plan = dict(batch_size=100 if quick else 4000, ref_samples=2 if quick else 5, chunks=[1 << 18 if quick else 1 << 21],
                repeats=1 if quick else 2)
    out = {"system": name, "device": bench_system(name, SYSTEMS[name], device=device, **plan)}
    if device.type != "cpu":
        out["cpu"] = bench_system(name, SYSTEMS[name], device=torch.device("cpu"), **plan)
    return out


def run_vmc_step(device: torch.device, quick: bool) -> dict:
    from experiments.benchmarks import bench_vmc_step

    rows = []
    for unique in ((None,) if quick else (10_000, 100_000)):
        with tempfile.TemporaryDirectory() as tmp:
            argv = ["--device", str(device), "--out", os.path.join(tmp, "step.json"), "--start-mode", "none",
                    "--floor-eps", "1e-1"]
            argv += ["--quick"] if quick else ["--config", str(CONFIGS / "n2_ccpvdz_fc.toml"), "--unique", str(unique),
                                               "--steps", "1"]
            result = bench_vmc_step.main(argv)["results"][0]
        step = result["steps"][-1]
        rows.append({"spin_orbitals": result["n_spin_orbitals"], "n_unique": step["n_unique"],
                     "seconds": step["seconds"], "sample_seconds": step["sample_seconds"],
                     "local_energy_seconds": step["local_energy_seconds"], "update_seconds": step["update_seconds"],
                     "n_amplitudes": step["n_amplitudes"], "peak_device_memory_bytes": result["peak_device_memory_bytes"]})
    return {"rows": rows}


def markdown(data: dict) -> str:
    """The short table: one line per measurement, the device named at the top."""
    meta, res = data["meta"], data["results"]
    lines = [f"# GPU suite on {meta['device_name']} (`{meta['device']}`), commit "
             f"{(meta['provenance'].get('commit') or 'none')[:7]}", "", "| section | what | value |", "|---|---|---|"]
    for r in res.get("consistency", {}).get("rows", []):
        lines.append(f"| consistency | {r['dtype']} max dp (tolerance {r['tolerance']:.0e}) | {r['max_abs_diff']:.2e} "
                     f"{'ok' if r['ok'] else 'FAIL'} |")
    for r in res.get("sampling", {}).get("rows", []):
        ratio = f", {r['ratio']:.1f}x the uncached" if r.get("ratio") else ""
        lines.append(f"| sampling | {r['spin_orbitals']} spin orbitals, {r['model']}, {r['n_unique']} unique | "
                     f"{r['cached_unique_per_s']:.3g} unique/s{ratio}; KV cache {r['cache_bytes'] / 2**20:.1f} MiB "
                     f"({'= formula' if r['cache_bytes_match_formula'] else 'OFF the formula'}) |")
    le = res.get("local_energy")
    if le:
        for where in ("device", "cpu"):
            if where not in le:
                continue
            best = max((r for r in le[where]["local_energy"] if r["mode"] == "truncated"), key=lambda r: r["samples_per_s"])
            lines.append(f"| local energy | {le['system']}, truncated, {where} ({best['kernel']} kernel) | "
                         f"{best['samples_per_s']:.3g} samples/s |")
    for r in res.get("vmc_step", {}).get("rows", []):
        memory = "" if r["peak_device_memory_bytes"] is None else f", peak {r['peak_device_memory_bytes'] / 2**30:.2f} GiB"
        lines.append(f"| VMC step | {r['spin_orbitals']} spin orbitals, {r['n_unique']} unique | {r['seconds']:.2f} s "
                     f"(sample {r['sample_seconds']:.2f}, local energies {r['local_energy_seconds']:.2f}, update "
                     f"{r['update_seconds']:.2f}){memory} |")
    for name in SECTIONS:
        if name in res:
            mem = res[name].get("peak_memory_bytes")
            lines.append(f"| {name} | wall seconds; peak device memory | {res[name]['seconds']:.1f} s; "
                         f"{'n/a (CPU)' if mem is None else f'{mem / 2**30:.2f} GiB'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_argument(p, default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--quick", action="store_true", help="tiny sizes: the smoke test (CPU, seconds)")
    p.add_argument("--unique", type=int, default=None, help="sampling: unique configurations (default 1e4; quick 100)")
    p.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    p.add_argument("--fresh", action="store_true", help="recompute every section (default: resume)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    out = Path(args.out or os.path.join(RESULTS, f"gpu_suite_{device.type}.json"))
    unique = args.unique or (100 if args.quick else 10_000)
    done = {}
    if out.exists() and not args.fresh:
        saved = json.loads(out.read_text())
        if saved["meta"].get("device") == str(device) and saved["meta"].get("quick") == args.quick:
            done = saved["results"]
    runners = {"consistency": lambda: run_consistency(device, args.quick),
               "sampling": lambda: run_sampling(device, args.quick, unique),
               "local_energy": lambda: run_local_energy(device, args.quick),
               "vmc_step": lambda: run_vmc_step(device, args.quick)}
    meta = {"device": str(device), "device_name": device_name(device), "quick": args.quick, "unique": unique}
    data = {"meta": meta, "results": done}
    for name in args.only:
        if name in done:
            logger.info("%s: already in %s (resumed)", name, out)
            continue
        reset_peak(device)
        began = time.perf_counter()
        section = runners[name]()
        section.update(seconds=time.perf_counter() - began, peak_memory_bytes=peak(device))
        done[name] = section
        data = save_results(out, done, args=args, **meta)   # after every section: an interrupted suite resumes
    atomic_write(out.with_suffix(".md"), lambda tmp: Path(tmp).write_text(markdown(data)))
    print(markdown(data))
    return data


if __name__ == "__main__":
    main()
