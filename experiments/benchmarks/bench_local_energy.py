"""Benchmark of the batched Slater–Condon / local-energy kernel against a per-determinant reference.

For N2/STO-3G (20 spin orbitals) and N2/cc-pVDZ with a frozen 1s core (52 spin orbitals), on a
batch of realistic determinants (HF, its singles and doubles, and some of their doubles), this
measures, side by side in one run:

* the PyTorch kernel (``MolecularHamiltonian.connected_keys``) and the compiled Numba kernel
  (:mod:`hamiltonians.compiled_kernel`): connected elements/s and samples/s, both for plain
  generation ("connected") and with each ``x'`` looked up in the batch ("screened", what the
  local energy uses);
* ``local_energy`` in exact, truncated (1e-3) and sampled mode with each kernel and a cheap
  analytic log psi (no network);
* the per-determinant Python reference (``hamiltonians.slater_condon_reference.connected_reference``) on a
  subset of the same samples;
* peak memory: on CUDA ``torch.cuda.max_memory_allocated``; on CPU the rise of the process's
  peak RSS (``VmHWM``, reset through ``/proc/self/clear_refs``) over the resident size before.

Usage::

    python experiments/benchmarks/bench_local_energy.py [--device cpu|cuda] [--quick] [--out FILE]

Writes JSON (default ``experiments/results/bench_local_energy_<device>.json``) and prints a table.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import (RESULTS, PeakMemory, add_device_argument, cpu_model_name, save_results,  # noqa: E402
                                timed)
from hamiltonians import from_pyscf, local_energy  # noqa: E402
from hamiltonians.determinants import pack_occupations  # noqa: E402
from hamiltonians.slater_condon_reference import connected_reference  # noqa: E402

logger = logging.getLogger("bench_local_energy")

SYSTEMS = {
    "N2_sto-3g": {"geometry": "N 0 0 0; N 0 0 1.098", "basis": "sto-3g", "frozen_core": 0},
    "N2_cc-pvdz_fc": {"geometry": "N 0 0 0; N 0 0 1.098", "basis": "cc-pvdz", "frozen_core": 2},
}


# ----------------------------------------------------------------------------- memory
# ----------------------------------------------------------------------------- samples
def realistic_batch(H, size: int, seed: int = 0) -> torch.Tensor:
    """HF, singles and doubles of HF, then doubles of those (quadruples): ``size`` unique rows."""
    g = torch.Generator().manual_seed(seed)
    hf = H.aufbau_occupation().cpu()[None]
    sd, _, _ = H.connected(hf)
    pool = [hf, sd]
    n_more = max(0, size - 1 - sd.shape[0])
    if n_more:
        parents = sd[torch.randint(0, sd.shape[0], (min(sd.shape[0], max(1, n_more // 50)),), generator=g)]
        more, _, _ = H.connected(parents)
        pool.append(more[torch.randperm(more.shape[0], generator=g)[: 4 * n_more]])
    allx = torch.cat(pool)
    keys = pack_occupations(allx)
    _, idx = torch.unique(keys, dim=0, return_inverse=True)
    first = torch.full((int(idx.max()) + 1,), allx.shape[0], dtype=torch.int64)
    first.scatter_reduce_(0, idx, torch.arange(allx.shape[0]), reduce="amin")
    uniq = allx[torch.sort(first).values]  # HF first, then singles/doubles, then the rest
    return uniq[:size].clone()


def cheap_log_psi(n_spin_orbitals: int, device):
    """A network-free log psi: complex linear function of the occupations."""
    g = torch.Generator().manual_seed(1)
    w = torch.complex(0.3 * torch.randn(n_spin_orbitals, generator=g, dtype=torch.float64),
                      torch.randn(n_spin_orbitals, generator=g, dtype=torch.float64)).to(device)

    def fn(occ):
        return occ.to(w.dtype) @ w

    return fn


# ----------------------------------------------------------------------------- runs
def bench_system(name, spec, *, device, batch_size, ref_samples, chunks, repeats):
    H = from_pyscf(**spec).to(device)
    batch = realistic_batch(H, batch_size).to(device)
    b = batch.shape[0]
    fn = cheap_log_psi(H.n_spin_orbitals, device)
    out = {
        "system": name, **{k: v for k, v in spec.items() if k != "geometry"},
        "n_orbitals": H.n_orbitals, "n_spin_orbitals": H.n_spin_orbitals,
        "n_alpha": H.n_alpha, "n_beta": H.n_beta, "n_excitations": H.n_excitations,
        "batch": b, "kernel": [], "local_energy": [],
    }

    kernels = ["torch"] + (["compiled"] if H.compiled_kernel_available() else [])

    def run_kernel(chunk, kernel, what):
        """Connected elements produced: ``connected`` is every nonzero ``(x', H_xx')`` (no batch
        lookup); ``screened`` also finds each ``x'`` in the batch (what local energies use)."""
        if what == "screened":
            return sum(p[0].shape[0] for p in H.screened_connections(batch, chunk=chunk, eps=1e-12, kernel=kernel))
        if kernel == "torch":
            return sum(keys.shape[0] for _, keys, _, _ in H.connected_keys(batch, chunk=chunk, eps=1e-12))
        compiled, step = H._compiled(), H.samples_per_chunk(chunk)
        no_batch = compiled.batch_table(H.pack(batch[:0]))
        return sum(compiled.connections(batch[s : s + step], no_batch, capacity=step * H.n_excitations,
                                        eps=1e-12)[0].shape[0] for s in range(0, b, step))

    for chunk in chunks:
        for kernel in kernels:
            for what in ("connected", "screened"):
                run_kernel(chunk, kernel, what)  # warm-up (and the compile of the compiled kernel)
                best = float("inf")
                for _ in range(repeats):
                    with PeakMemory(device) as mem:
                        n_el, dt = timed(device, lambda: run_kernel(chunk, kernel, what))
                    best = min(best, dt)
                out["kernel"].append({
                    "kernel": kernel, "what": what, "chunk": chunk, "samples_per_chunk": H.samples_per_chunk(chunk),
                    "connected": n_el, "seconds": best, "elements_per_s": n_el / best, "samples_per_s": b / best,
                    "peak_memory_bytes": mem.peak,
                })
            for mode, threshold in (("exact", 0.0), ("truncated", 1e-3), ("sampled", 0.0)):
                lp_x = fn(batch)

                def run():
                    return local_energy(H, batch, fn, mode=mode, threshold=threshold, log_psi_x=lp_x, chunk=chunk,
                                        kernel=kernel)

                run()  # warm-up
                with PeakMemory(device) as mem:
                    res, dt = timed(device, run)
                out["local_energy"].append({
                    "kernel": kernel, "mode": mode, "threshold": threshold, "chunk": chunk, "seconds": dt,
                    "samples_per_s": b / dt, "elements_per_s": res.n_connected / dt, "n_unique": res.n_unique,
                    "n_evaluated": res.n_evaluated, "kept_fraction": res.kept_fraction,
                    "peak_memory_bytes": mem.peak,
                })
    # per-determinant reference on the first ref_samples rows (CPU, plain Python)
    sub = batch[:ref_samples].cpu().tolist()
    Hc = H.to("cpu")
    with PeakMemory(torch.device("cpu")) as mem:
        t = time.perf_counter()
        n_ref = 0
        ref_out = []
        for row in sub:
            d = connected_reference(Hc, row)
            n_ref += sum(1 for v in d.values() if v != 0.0) - 1
            ref_out.append(d)
        dt = time.perf_counter() - t
    out["reference"] = {
        "samples": len(sub), "connected": n_ref, "seconds": dt, "elements_per_s": n_ref / dt,
        "samples_per_s": len(sub) / dt, "peak_memory_bytes": mem.peak,
    }
    # sanity: the kernel and the reference agree on the reference rows
    xp, vals, rows = Hc.connected(torch.tensor(sub[: min(5, len(sub))]))
    worst = 0.0
    for x, v, r in zip(xp.tolist(), vals.tolist(), rows.tolist()):
        worst = max(worst, abs(ref_out[r][tuple(x)] - v))
    out["max_abs_diff_vs_reference"] = worst
    best_kernel = max(out["kernel"], key=lambda k: k["samples_per_s"])
    out["speedup_kernel_vs_reference"] = best_kernel["samples_per_s"] / out["reference"]["samples_per_s"]

    def best_rate(kernel, what):
        return max(k["elements_per_s"] for k in out["kernel"] if k["kernel"] == kernel and k["what"] == what)

    if "compiled" in kernels:
        out["speedup_compiled_vs_torch"] = {w: best_rate("compiled", w) / best_rate("torch", w)
                                            for w in ("connected", "screened")}
    best_le = max((r for r in out["local_energy"] if r["mode"] == "exact"), key=lambda r: r["samples_per_s"])
    out["speedup_exact_local_energy_vs_reference"] = best_le["samples_per_s"] / out["reference"]["samples_per_s"]
    return out


def _fmt_mem(x):
    return "n/a" if x is None else f"{x / 2**20:8.1f}"


def print_table(results):
    print(f"{'system':16s} {'what':24s} {'chunk':>9s} {'elem/s':>11s} {'samples/s':>11s} {'peak MiB':>9s}")
    for r in results:
        for k in r["kernel"]:
            print(f"{r['system']:16s} {k['kernel'] + ' ' + k['what']:24s} {k['chunk']:9d} {k['elements_per_s']:11.3e} "
                  f"{k['samples_per_s']:11.1f} {_fmt_mem(k['peak_memory_bytes']):>9s}")
        for k in r["local_energy"]:
            print(f"{r['system']:16s} {k['kernel'] + ' E_loc ' + k['mode']:24s} {k['chunk']:9d} "
                  f"{k['elements_per_s']:11.3e} {k['samples_per_s']:11.1f} {_fmt_mem(k['peak_memory_bytes']):>9s}")
        ref = r["reference"]
        print(f"{r['system']:16s} {'per-det reference':24s} {'-':>9s} {ref['elements_per_s']:11.3e} "
              f"{ref['samples_per_s']:11.1f} {_fmt_mem(ref['peak_memory_bytes']):>9s}")
        print(f"{r['system']:16s} speedup kernel {r['speedup_kernel_vs_reference']:.0f}x, exact local energy "
              f"{r['speedup_exact_local_energy_vs_reference']:.0f}x (batch {r['batch']}, "
              f"{r['n_excitations']} excitations/det, max |diff| {r['max_abs_diff_vs_reference']:.1e})")
        if "speedup_compiled_vs_torch" in r:
            sp = r["speedup_compiled_vs_torch"]
            print(f"{r['system']:16s} compiled / torch kernel: {sp['connected']:.1f}x connected, "
                  f"{sp['screened']:.1f}x screened (elements/s, same run)")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_argument(p, default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--quick", action="store_true", help="small batches (smoke test)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: on a shared CPU, OpenMP spin-waits make 2+ threads far slower)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    plan = {
        "N2_sto-3g": dict(batch_size=300 if args.quick else 4000, ref_samples=30 if args.quick else 200,
                          chunks=[1 << 16, 1 << 19]),
        "N2_cc-pvdz_fc": dict(batch_size=100 if args.quick else 1000, ref_samples=3 if args.quick else 20,
                              chunks=[1 << 18, 1 << 21]),
    }
    results = []
    for name, spec in SYSTEMS.items():
        logger.info("benchmarking %s on %s", name, device)
        results.append(bench_system(name, spec, device=device, repeats=1 if args.quick else 3, **plan[name]))
    meta = {
        "device": str(device), "torch": torch.__version__, "threads": torch.get_num_threads(),
        "cpu": cpu_model_name(), "quick": args.quick,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "memory_note": "CUDA: max_memory_allocated; CPU: rise of peak RSS (VmHWM) over RSS before",
        "target": ">= 50x the per-determinant reference on N2 STO-3G",
    }
    if device.type == "cuda":
        meta["gpu"] = torch.cuda.get_device_name(device)
    print_table(results)
    out = args.out or os.path.join(RESULTS,
                                   f"bench_local_energy_{device.type}.json")
    save_results(out, results, args=args, **meta)
    logger.info("wrote %s", out)
    return results


if __name__ == "__main__":
    main()
