"""Sampling benchmark: cached BAS (KV cache) against the uncached baseline.

Random-weight Transformer wavefunctions (d_model 64, 4 layers, 4 heads; and one 256-wide model) for
``n_orbitals`` in {10, 20, 40, 80} and frontiers of about 1,000 and 10,000 unique prefixes. For each
point, side by side in one run and from the same seed:

* cached BAS (``samplers.bas``): one ``decode_step`` per depth through the per-layer KV cache, the
  cache following the tree with ``KVCache.reorder``;
* naive BAS (``samplers.naive``): the same tree walk, but at depth ``L`` it recomputes the whole
  prefix with one uncached causal pass ``model.conditionals`` over ``[U, L + 1]`` tokens
  (``O(L)`` token positions and ``O(L^2)`` attention per row and depth instead of ``O(1)``/``O(L)``).

Both consume the random stream identically; the script asserts that their samples are identical.
It reports wall time (CPU: ``time.perf_counter``, best of ``--repeats``; CUDA: CUDA events after
warm-up), the ratio, decoded token-steps per second (frontier rows summed over depths / time),
the peak cache bytes against ``2 * B * N * L * H_kv * d_head * bytes``, the bytes the cache
allocated (once per call, within the sampler's budget), and peak memory (CUDA:
``torch.cuda.max_memory_allocated``; CPU: the rise of the process's peak RSS).
On CUDA it runs float32 and bfloat16 and gives the largest ``|delta p|`` of the conditionals
against the float64 model on the sampled configurations.

A naive point whose time, extrapolated from the previous ``n_orbitals`` of its series as
``N^3``, would exceed ``--naive-budget`` seconds is skipped and marked so (the cached one still runs).

Usage::

    python experiments/benchmarks/bench_sampling.py [--quick] [--device cpu|cuda] [--out FILE] [--threads 1]

Writes JSON (default ``experiments/results/bench_sampling_<device>.json``) and a log-log PNG of time
against ``n_orbitals`` beside it, and prints a table.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import platform
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import (LONG_RUN_S, MODELS, RESULTS, add_device_argument, best_of, build_model,  # noqa: E402
                                calibrate, cpu_model_name, electrons_for, generator, save_results)
from nnqs.app.io import atomic_write  # noqa: E402
from samplers import bas, naive  # noqa: E402

logger = logging.getLogger("bench_sampling")

NAIVE_DESCRIPTION = (
    "samplers.naive: the same BAS tree walk as samplers.bas; at depth L it calls model.conditionals "
    "on the [U, L+1] prefixes (plus a placeholder) and keeps the last row: one full uncached causal "
    "pass per depth, no state between depths"
)


# ----------------------------------------------------------------------------- helpers
def cache_formula(model, rows: int) -> int:
    c = model.config
    return 2 * rows * c.n_orbitals * c.n_layers * c.kv_heads * c.d_head * torch.empty(0, dtype=model.dtype).element_size()


@torch.no_grad()
def max_delta_p(model, reference, tokens: torch.Tensor, rows: int = 2000) -> float:
    """Largest ``|p - p_float64|`` over all conditionals of (up to ``rows``) sampled configurations."""
    x = tokens[:rows]
    p = model.conditionals(x).double().cpu()
    p64 = reference.to(x.device).conditionals(x).cpu()
    reference.cpu()
    return float((p - p64).abs().max())


# ----------------------------------------------------------------------------- one grid point
def bench_point(model_name, n, frontier, *, dtype, device, repeats, seed, naive_skip_reason):
    n_e = electrons_for(n, frontier)
    model, reference = build_model(model_name, n, n_e, dtype, device, seed)
    n_samples, _ = calibrate(model, frontier, device, seed)
    run = {
        "model": model_name, **MODELS[model_name], "dtype": dtype, "n_orbitals": n, "n_alpha": n_e, "n_beta": n_e,
        "target_frontier": frontier, "n_samples": n_samples,
    }
    # cached: best of `repeats` (already warm from the calibration runs)
    cached, best, cached_mem = best_of(device, repeats, lambda: bas.sample(model, n_samples, generator=generator(device, seed)))
    stats = cached.stats
    formula = cache_formula(model, stats["peak_rows"])
    run.update({
        "n_unique": cached.n_unique, "peak_frontier_rows": stats["peak_rows"], "decode_rows": stats["decode_rows"],
        "cached_seconds": best, "cached_token_steps_per_s": stats["decode_rows"] / best,
        "cached_peak_memory_bytes": cached_mem,
        "cache_bytes": stats["peak_state_bytes"], "cache_bytes_formula": formula,
        "cache_bytes_match_formula": stats["peak_state_bytes"] == formula,
        "cache_allocated_bytes": stats["peak_allocated_bytes"],
        "cache_budget_bytes": bas.DEFAULT_MAX_CACHE_BYTES,
        "cache_within_budget": stats["peak_allocated_bytes"] <= bas.DEFAULT_MAX_CACHE_BYTES,
    })
    if naive_skip_reason:
        run.update({"naive_seconds": None, "naive_skipped": naive_skip_reason, "samples_identical": None})
    else:
        uncached, best, naive_mem = best_of(
            device, repeats, lambda: naive.sample(model, n_samples, generator=generator(device, seed)))
        identical = torch.equal(cached.tokens, uncached.tokens) and torch.equal(cached.counts, uncached.counts)
        assert identical, f"cached and naive samples differ at {model_name} N={n} frontier={frontier}"
        ratio = best / run["cached_seconds"]
        run.update({
            "naive_seconds": best, "naive_token_steps_per_s": stats["decode_rows"] / best,
            "naive_peak_memory_bytes": naive_mem, "samples_identical": identical,
            "ratio": ratio, "ratio_over_n": ratio / n, "meets_half_n": ratio >= 0.5 * n,
        })
    if dtype != "float64":
        run["max_abs_delta_p_vs_float64"] = max_delta_p(model, reference, cached.tokens)
    return run


def fit_exponents(results):
    """Slope of log time against log N per (model, dtype, frontier) series and sampler."""
    fits = []
    keys = sorted({(r["model"], r["dtype"], r["target_frontier"]) for r in results})
    for key in keys:
        series = sorted((r for r in results if (r["model"], r["dtype"], r["target_frontier"]) == key),
                        key=lambda r: r["n_orbitals"])
        entry = {"model": key[0], "dtype": key[1], "target_frontier": key[2]}
        for sampler in ("cached", "naive"):
            pts = [(r["n_orbitals"], r[f"{sampler}_seconds"]) for r in series if r.get(f"{sampler}_seconds")]
            pts = [p for p in pts if p[0] >= 20] if sum(p[0] >= 20 for p in pts) >= 2 else pts
            if len(pts) >= 2:
                xs = [math.log(p[0]) for p in pts]
                ys = [math.log(p[1]) for p in pts]
                mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
                slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
                entry[f"{sampler}_exponent"] = slope
                entry[f"{sampler}_fit_n"] = [p[0] for p in pts]
        fits.append(entry)
    return fits


# ----------------------------------------------------------------------------- output
def print_table(results):
    head = (f"{'model':5s} {'dtype':8s} {'N':>3s} {'front':>6s} {'uniq':>6s} {'cached s':>9s} {'naive s':>9s} "
            f"{'ratio':>7s} {'r/N':>5s} {'tok-steps/s c':>13s} {'tok-steps/s n':>13s} {'cache MiB':>9s} {'formula':>7s} "
            f"{'alloc MiB':>9s}")
    print(head)
    for r in results:
        naive_s = f"{r['naive_seconds']:9.3f}" if r.get("naive_seconds") else f"{'skipped':>9s}"
        ratio = f"{r['ratio']:7.2f}" if r.get("ratio") else f"{'-':>7s}"
        rn = f"{r['ratio_over_n']:5.2f}" if r.get("ratio") else f"{'-':>5s}"
        ns = f"{r['naive_token_steps_per_s']:13.3e}" if r.get("naive_seconds") else f"{'-':>13s}"
        print(f"{r['model']:5s} {r['dtype']:8s} {r['n_orbitals']:3d} {r['target_frontier']:6d} {r['n_unique']:6d} "
              f"{r['cached_seconds']:9.3f} {naive_s} {ratio} {rn} {r['cached_token_steps_per_s']:13.3e} {ns} "
              f"{r['cache_bytes'] / 2**20:9.1f} {'ok' if r['cache_bytes_match_formula'] else 'DIFF':>7s} "
              f"{r['cache_allocated_bytes'] / 2**20:9.1f}")


def plot(results, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    keys = sorted({(r["model"], r["dtype"], r["target_frontier"]) for r in results})
    for i, key in enumerate(keys):
        series = sorted((r for r in results if (r["model"], r["dtype"], r["target_frontier"]) == key),
                        key=lambda r: r["n_orbitals"])
        label = f"{key[0]} {key[1]} ~{key[2]} uniq"
        color = f"C{i}"
        xs = [r["n_orbitals"] for r in series]
        ax.plot(xs, [r["cached_seconds"] for r in series], "o-", color=color, label=f"cached {label}")
        pts = [(r["n_orbitals"], r["naive_seconds"]) for r in series if r.get("naive_seconds")]
        if pts:
            ax.plot(*zip(*pts), "s--", color=color, label=f"naive {label}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n_orbitals N")
    ax.set_ylabel("wall time per sample() call [s]")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6)
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=120))
    plt.close(fig)


# ----------------------------------------------------------------------------- main
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_argument(p, default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--quick", action="store_true", help="a small subset (smoke test)")
    p.add_argument("--out", default=None, help="JSON path (PNG beside it)")
    p.add_argument("--dtypes", default=None,
                   help="comma-separated parameter dtypes (default: float32 on CPU, float32,bfloat16 on CUDA)")
    p.add_argument("--repeats", type=int, default=None,
                   help="timed runs per sampler, best kept (default 2; a run over 10 s is not repeated)")
    p.add_argument("--naive-budget", type=float, default=None,
                   help="skip a naive point whose N^3-extrapolated time exceeds this many seconds")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: on a shared CPU, 2+ threads spin-wait)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtypes = args.dtypes.split(",") if args.dtypes else (["float32", "bfloat16"] if device.type == "cuda" else ["float32"])
    if args.quick:
        grid = [("d64", [6, 10], [40])]
        repeats = args.repeats or 1
        naive_budget = args.naive_budget or 30.0
    else:
        grid = [("d64", [10, 20, 40, 80], [1000, 10000]), ("d256", [10, 20, 40, 80], [1000])]
        repeats = args.repeats or 2
        naive_budget = args.naive_budget or 200.0
    results = []
    for dtype in dtypes:
        for model_name, orbitals, frontiers in grid:
            for frontier in frontiers:
                previous = None
                for n in orbitals:
                    skip = None
                    if previous and previous.get("naive_seconds"):
                        estimate = previous["naive_seconds"] * (n / previous["n_orbitals"]) ** 3
                        if estimate > naive_budget:
                            skip = f"estimated {estimate:.0f} s (N^3 from N={previous['n_orbitals']}) > --naive-budget {naive_budget:.0f} s"
                    elif previous and previous.get("naive_skipped"):
                        skip = previous["naive_skipped"]
                    logger.info("%s %s N=%d frontier~%d%s", model_name, dtype, n, frontier,
                                " (naive skipped)" if skip else "")
                    r = bench_point(model_name, n, frontier, dtype=dtype, device=device,
                                    repeats=repeats,
                                    seed=args.seed, naive_skip_reason=skip)
                    results.append(r)
                    previous = r
    meta = {
        "device": str(device), "cpu": cpu_model_name(), "threads": torch.get_num_threads(),
        "torch": torch.__version__, "python": platform.python_version(), "quick": args.quick,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "command": " ".join(["python", *sys.argv]),
        "naive": NAIVE_DESCRIPTION,
        "timing": ("CUDA events after warm-up" if device.type == "cuda" else "time.perf_counter") +
                  f", best of {repeats} (1 when a run takes > {LONG_RUN_S:.0f} s); the calibration runs are the warm-up",
        "memory": ("torch.cuda.max_memory_allocated rise" if device.type == "cuda" else
                   "rise of peak RSS (VmHWM) over RSS before; cache_bytes = peak cache.nbytes"),
        "token_steps": "decode_rows (frontier rows summed over depths) per second; the same numerator for both",
        "target": "cached >= 0.5*N times faster than naive at N = 40 and N = 80; cached ~N^2, naive ~N^3",
    }
    if device.type == "cuda":
        meta["gpu"] = torch.cuda.get_device_name(device)
    fits = fit_exponents(results)
    print_table(results)
    for f in fits:
        print(f"fit {f['model']} {f['dtype']} ~{f['target_frontier']}: time ~ N^"
              f"{f.get('cached_exponent', float('nan')):.2f} cached, N^{f.get('naive_exponent', float('nan')):.2f} naive")
    out = args.out or os.path.join(RESULTS,
                                   f"bench_sampling_{device.type}.json")
    payload = save_results(out, results, args=args, extra={"fits": fits}, **meta)
    png = os.path.splitext(out)[0] + ".png"
    plot(results, png, f"BAS sampling, {meta['cpu'] if device.type == 'cpu' else meta['gpu']}, "
                       f"{meta['threads']} thread(s), torch {meta['torch']}")
    logger.info("wrote %s and %s", out, png)
    return payload


if __name__ == "__main__":
    main()
