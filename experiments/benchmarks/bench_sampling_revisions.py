"""Cached BAS of this source tree against another git revision, timed side by side in one run.

For a sampler change: both trees sample the same random-weight models (``bench_sampling``'s d64
and d256 Transformers, seed 0, float32, one thread) with the same ``n_samples`` (calibrated once,
in this tree, for frontiers of about 1,000 and 10,000 unique prefixes). Each tree runs in its
own subprocess (the two trees define the same packages); the rounds alternate between the trees,
so drifts of a shared machine hit both alike, and each point keeps its best time over all rounds.
It also records each tree's samples (a checksum), unique count, peak live cache bytes and the
bytes the cache allocated.

Usage::

    python experiments/benchmarks/bench_sampling_revisions.py --rev HEAD~1 [--rounds 3] [--repeats 3] [--device cpu] [--quick]

Writes JSON (default ``experiments/results/bench_sampling_revisions_<device>.json``) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, HERE)

from experiments.common import add_device_argument, save_results  # noqa: E402

POINTS = [("d64", 10, 1000), ("d64", 20, 1000), ("d64", 40, 1000), ("d64", 80, 1000),
          ("d64", 10, 10000), ("d64", 20, 10000), ("d256", 10, 1000), ("d256", 20, 1000)]
QUICK_POINTS = [("d64", 6, 40), ("d64", 10, 40)]

# Runs inside each tree: only names that every revision has, in experiments/common.py or (revisions
# before the experiments/ layout by kind) in experiments/bench_sampling.py.
WORKER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(1)
try:
    from experiments.common import build_model, electrons_for, generator
except ImportError:
    from experiments.bench_sampling import build_model, electrons_for, generator
from samplers import bas
device = torch.device(sys.argv[4])
def sync():
    if device.type == "cuda":
        torch.cuda.synchronize(device)
out = []
for p in json.loads(sys.argv[2]):
    model, _ = build_model(p["model"], p["n"], electrons_for(p["n"], p["frontier"]), "float32", device, 0)
    batch = bas.sample(model, p["n_samples"], generator=generator(device, 0))  # warm-up
    best = float("inf")
    for _ in range(int(sys.argv[3])):
        sync()
        t = time.perf_counter()
        batch = bas.sample(model, p["n_samples"], generator=generator(device, 0))
        sync()
        best = min(best, time.perf_counter() - t)
    weights = torch.arange(1, batch.tokens.shape[1] + 1)
    out.append({"seconds": best, "n_unique": batch.n_unique,
                "checksum": int(((batch.tokens * weights).sum(1) * batch.counts).sum()),
                "peak_state_bytes": batch.stats["peak_state_bytes"],
                "peak_allocated_bytes": batch.stats.get("peak_allocated_bytes")})
print(json.dumps(out))
"""


def calibrated_points(points, device) -> list[dict]:
    import torch

    from experiments.common import build_model, calibrate, electrons_for

    torch.set_num_threads(1)
    out = []
    for name, n, frontier in points:
        model, _ = build_model(name, n, electrons_for(n, frontier), "float32", device, 0)
        n_samples, _ = calibrate(model, frontier, device, 0)
        out.append({"model": name, "n": n, "frontier": frontier, "n_samples": n_samples})
    return out


def time_tree(tree: str, points: list[dict], repeats: int, device="cpu") -> list[dict]:
    proc = subprocess.run([sys.executable, "-c", WORKER, tree, json.dumps(points), str(repeats), str(device)],
                          capture_output=True, text=True, check=True, cwd=tree)
    return json.loads(proc.stdout)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rev", required=True, help="the git revision to compare against (e.g. HEAD~1)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="two tiny points (smoke test)")
    add_device_argument(p)
    p.add_argument("--out", default=None, help="JSON (default results/bench_sampling_revisions_<device>.json)")
    args = p.parse_args(argv)
    args.out = args.out or os.path.join(HERE, "experiments", "results",
                                        f"bench_sampling_revisions_{args.device.type}.json")
    points = calibrated_points(QUICK_POINTS if args.quick else POINTS, args.device)
    with tempfile.TemporaryDirectory() as tmp:
        before = os.path.join(tmp, "before")
        subprocess.run(["git", "-C", HERE, "worktree", "add", "--detach", before, args.rev],
                       check=True, capture_output=True)
        try:
            rev = subprocess.run(["git", "-C", before, "rev-parse", "HEAD"], capture_output=True, text=True,
                                 check=True).stdout.strip()
            runs = {"before": [], "after": []}
            for _ in range(args.rounds):
                runs["before"].append(time_tree(before, points, args.repeats, args.device))
                runs["after"].append(time_tree(HERE, points, args.repeats, args.device))
        finally:
            subprocess.run(["git", "-C", HERE, "worktree", "remove", "--force", before], capture_output=True)
    rows = []
    for i, point in enumerate(points):
        row = dict(point)
        for side in ("before", "after"):
            last = runs[side][-1][i]
            row[side] = {**last, "seconds": min(r[i]["seconds"] for r in runs[side])}
        row["after_over_before"] = row["after"]["seconds"] / row["before"]["seconds"]
        row["same_samples"] = row["after"]["checksum"] == row["before"]["checksum"]
        rows.append(row)
    print(f"{'model':5s} {'N':>3s} {'front':>6s} {'uniq b/a':>13s} {'before s':>9s} {'after s':>8s} {'a/b':>5s} "
          f"{'same':>5s} {'alloc MiB b/a':>14s}")
    for r in rows:
        b, a = r["before"], r["after"]
        alloc = "/".join(f"{x['peak_allocated_bytes'] / 2**20:.0f}" if x["peak_allocated_bytes"] else "-" for x in (b, a))
        print(f"{r['model']:5s} {r['n']:3d} {r['frontier']:6d} {b['n_unique']:6d}/{a['n_unique']:<6d} "
              f"{b['seconds']:9.3f} {a['seconds']:8.3f} {r['after_over_before']:5.2f} {str(r['same_samples']):>5s} {alloc:>14s}")
    return save_results(args.out, rows, args=args, before=rev, rounds=args.rounds, repeats=args.repeats,
                        timing="time.perf_counter, best over rounds x repeats, after one warm-up call per point")


if __name__ == "__main__":
    main()
