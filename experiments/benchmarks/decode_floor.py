"""Where the cached sampler's time goes, and the fastest an attention kernel could make it (issue 4).

Issue 4 asks for cached BAS to be at least ``0.5 * N`` times faster than the uncached baseline at
N = 40 and N = 80 (d_model 64, 4 layers, 4 heads, ~1,000 unique samples). This script measures,
for those points and in one run, how far each possible improvement could take the cached sampler:

* ``naive_seconds``, ``cached_seconds``: the two samplers as they are (same seed, same samples).
* ``attention_seconds``: the time the cached run spends inside its decode attention calls
  (``scaled_dot_product_attention`` wrapped by a timer, the tree unchanged), and
  ``outside_attention_seconds`` = cached - attention: projections, MLP, cache writes, reorders,
  the multinomial splits and the Python around them.
* ``replay_strided_seconds`` / ``replay_contiguous_seconds``: every recorded attention call replayed
  alone, on views of a ``[B, H_kv, N, d_head]`` buffer as the cache presents them, and on
  contiguous copies. Their ratio estimates what contiguous keys would save inside the run:
  ``contiguous_estimate_seconds`` = attention * contiguous / strided (the replays themselves
  run slower than the calls inside the sampler, so their absolute times are not used).
* ``attention_bytes`` and ``bandwidth_floor_seconds``: the keys and values the calls must read,
  divided by the read bandwidth this machine reaches on a large contiguous sum; no kernel that
  reads the cache can be faster.

From these it prints the best ratio each route allows: as measured; with the attention as fast
as SDPA on contiguous keys (``outside + contiguous estimate``); with a kernel at full memory
bandwidth (``outside + bandwidth floor``); with free attention (``outside`` only). The naive
sampler is timed once (a run takes 20-90 s) and the cached one as the best of ``--repeats``; a
slow naive run only raises every ratio.

Usage::

    python experiments/benchmarks/decode_floor.py [--orbitals 40,80] [--repeats 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from unittest import mock

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import (RESULTS, add_device_argument, build_model, calibrate, cpu_model_name, electrons_for,  # noqa: E402
                                generator, save_results)
from samplers import bas, naive  # noqa: E402

logger = logging.getLogger("decode_floor")
SDPA = F.scaled_dot_product_attention


def best_time(fn, repeats: int) -> float:
    """Best wall time of ``repeats`` calls (no peak-memory probe: the replayed calls take
    microseconds, and ``benchutil.best_of``'s per-call ``/proc`` reads would dominate them)."""
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def timed_attention_run(model, n_samples: int, seed: int):
    """One cached run with every attention call timed; ``(total s, attention s, call shapes)``."""
    spent, shapes = [0.0], []

    def timed_sdpa(q, k, v, *args, **kwargs):
        t = time.perf_counter()
        out = SDPA(q, k, v, *args, **kwargs)
        spent[0] += time.perf_counter() - t
        shapes.append((tuple(q.shape), tuple(k.shape)))
        return out

    with mock.patch.object(F, "scaled_dot_product_attention", timed_sdpa):
        t = time.perf_counter()
        bas.sample(model, n_samples, generator=generator(torch.device("cpu"), seed))
        total = time.perf_counter() - t
    return total, spent[0], shapes


def replay(shapes, n_orbitals: int, dtype: torch.dtype, repeats: int = 3) -> tuple[float, float, int]:
    """Summed best-of-``repeats`` SDPA time over ``shapes``, on strided cache views and on
    contiguous tensors; and the bytes of keys and values read."""
    strided = contiguous = 0.0
    nbytes = 0
    rows = max(k_shape[0] for _, k_shape in shapes)
    _, heads, _, d = shapes[0][1]
    kb, vb = (torch.randn(rows, heads, n_orbitals, d, dtype=dtype) for _ in range(2))
    for q_shape, (b, h, length, d) in shapes:
        q = torch.randn(q_shape, dtype=dtype)
        k, v = kb[:b, :, :length], vb[:b, :, :length]
        kc, vc = k.contiguous(), v.contiguous()
        strided += best_time(lambda: SDPA(q, k, v), repeats)
        contiguous += best_time(lambda: SDPA(q, kc, vc), repeats)
        nbytes += 2 * k.numel() * k.element_size()
    return strided, contiguous, nbytes


def read_bandwidth(nbytes: int = 1 << 28, repeats: int = 5) -> float:
    """Bytes per second of ``x.sum()`` over a contiguous float32 tensor of ``nbytes``."""
    x = torch.ones(nbytes // 4)
    return nbytes / best_time(lambda: x.sum(), repeats)


def floor_point(n: int, *, frontier: int, repeats: int, seed: int, bandwidth: float) -> dict:
    device = torch.device("cpu")
    model, _ = build_model("d64", n, electrons_for(n, frontier), "float32", device, seed)
    n_samples, batch = calibrate(model, frontier, device, seed)
    cached = best_time(lambda: bas.sample(model, n_samples, generator=generator(device, seed)), repeats)
    runs = [timed_attention_run(model, n_samples, seed) for _ in range(repeats)]
    total, attention, shapes = min(runs, key=lambda r: r[0])
    naive_s = best_time(lambda: naive.sample(model, n_samples, generator=generator(device, seed)), 1)
    strided, contiguous, nbytes = replay(shapes, n, model.dtype)
    outside = total - attention
    r = {
        "n_orbitals": n, "n_unique": batch.n_unique, "decode_rows": batch.stats["decode_rows"],
        "naive_seconds": naive_s, "cached_seconds": cached, "timed_run_seconds": total,
        "attention_seconds": attention, "outside_attention_seconds": outside, "attention_calls": len(shapes),
        "replay_strided_seconds": strided, "replay_contiguous_seconds": contiguous,
        "contiguous_estimate_seconds": attention * contiguous / strided,
        "attention_bytes": nbytes, "bandwidth_floor_seconds": nbytes / bandwidth,
        "target_seconds": naive_s / (0.5 * n),
    }
    routes = {
        "as_is": cached,
        "outside_plus_contiguous_estimate": outside + r["contiguous_estimate_seconds"],
        "outside_plus_bandwidth_floor": outside + r["bandwidth_floor_seconds"],
        "outside_only": outside,
    }
    r["ratio_over_n"] = {k: naive_s / t / n for k, t in routes.items()}
    return r


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--orbitals", default="40,80")
    p.add_argument("--frontier", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=os.path.join(RESULTS,
                                                 "decode_floor_cpu.json"))
    add_device_argument(p, cpu_only="the floor is the CPU's memory bandwidth")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    bandwidth = read_bandwidth()
    logger.info("read bandwidth %.1f GB/s", bandwidth / 1e9)
    results = []
    for n in (int(x) for x in args.orbitals.split(",")):
        logger.info("N=%d", n)
        results.append(floor_point(n, frontier=args.frontier, repeats=args.repeats, seed=args.seed,
                                   bandwidth=bandwidth))
    print(f"{'N':>3s} {'naive':>7s} {'target':>7s} {'cached':>7s} {'attn':>6s} {'outside':>7s} "
          f"{'strided':>7s} {'contig':>6s} {'estimate':>8s} {'bw floor':>8s}   "
          "ratio/N: as is, +contiguous estimate, +bw floor, outside only")
    for r in results:
        q = r["ratio_over_n"]
        print(f"{r['n_orbitals']:3d} {r['naive_seconds']:7.2f} {r['target_seconds']:7.3f} {r['cached_seconds']:7.3f} "
              f"{r['attention_seconds']:6.3f} {r['outside_attention_seconds']:7.3f} {r['replay_strided_seconds']:7.3f} "
              f"{r['replay_contiguous_seconds']:6.3f} {r['contiguous_estimate_seconds']:8.3f} "
              f"{r['bandwidth_floor_seconds']:8.3f}   " + ", ".join(f"{v:.2f}" for v in q.values()))
    meta = {"cpu": cpu_model_name(), "threads": 1, "torch": torch.__version__, "read_bandwidth_bytes_per_s": bandwidth,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "command": " ".join(["python", *sys.argv]),
            "model": "d64: d_model 64, 4 layers, 4 heads, float32", "target": "ratio/N >= 0.5"}
    save_results(args.out, results, args=args, **meta)
    logger.info("wrote %s", args.out)
    return results


if __name__ == "__main__":
    main()
