"""The network as a proposer: does a network trained on first-order amplitudes find what
connection growth would add next? (issue 50, item 4)

One config's molecule (built as a run builds it) and a pool: the run's start space grown by
CIPSI to ``--pool`` determinants (``[start] mode = "sci"``), its ground state ``psi`` at ``E``.
Every determinant ``a`` outside the pool that ``H`` connects to it is summed
(:func:`hamiltonians.sci.connections.outside_sums`): ``<a|H|psi>``, its first-order amplitude
``c1_a = <a|H|psi> / (E - H_aa)`` and its Epstein-Nesbet energy ``e_a = <a|H|psi>^2 / (E - H_aa)``,
ranked by ``|e_a|`` (CIPSI's order). A cycle of connection growth adds the ``--fitted`` first.

Each target (``--targets``) is fitted by a fresh network (the config's ``[model]``, a run's start
fit: phases then amplitudes) and sampled (``--draws`` draws, BAS); its unique samples outside the
pool and outside the ``--fitted`` first are its proposals:

* ``eigenvector``: the pool's ground state (what the subspace loop fits every cycle);
* ``first_order``: the pool's state and the ``--fitted`` first ``c1_a``, normalised together;
* ``first_order_only``: the ``--fitted`` first ``c1_a`` alone, normalised (a sampler of what
  CIPSI selects, to be drawn beyond what it was fitted to).

``--unique U`` draws ``U`` distinct configurations without replacement
(:func:`samplers.without_replacement.sample_without_replacement`) in place of ``--draws``.

Printed and saved per target: the fit's fidelity and seconds, the unique samples, how many lie in
the pool, in the fitted set, among the other connected ``a`` (and their ``sum |e_a|``, mHa, against
CIPSI's next as many by rank) or nowhere connected (worth nothing to PT2 this cycle).

    python experiments/studies/proposer.py --config nnqs/examples/n2_631g_fc_defaults.toml \
        --out experiments/results/proposer_n2_631g_fc.json
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import save_results  # noqa: E402
from hamiltonians.determinants import lookup_keys, pack_occupations, unique_keys, unpack_keys  # noqa: E402
from hamiltonians.sci.connections import outside_sums  # noqa: E402
from nnqs.app.runconfig import load_config  # noqa: E402
from nnqs.app.system import build_model, build_system  # noqa: E402
from nnqs.training.fit import fit_to_state  # noqa: E402
from nnqs.training.start import ci_target  # noqa: E402
from nnqs.wavefunction.tokens import occupations_to_tokens, tokens_to_occupations  # noqa: E402
from samplers.bas import sample  # noqa: E402
from samplers.without_replacement import sample_without_replacement  # noqa: E402

log = logging.getLogger("proposer")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--pool", type=int, default=8192)
    parser.add_argument("--fitted", type=int, default=5000)
    parser.add_argument("--targets", default="eigenvector,first_order")
    parser.add_argument("--draws", type=float, default=1e5)
    parser.add_argument("--unique", type=int, default=0, help="draw this many distinct ones instead (0: --draws)")
    parser.add_argument("--steps", type=int, default=1000, help="amplitude steps of each fit")
    parser.add_argument("--phase-steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    config = load_config(args.config)
    system = build_system(config.molecule, references=False)
    H, n_so = system.hamiltonian, system.hamiltonian.n_spin_orbitals
    settings = dataclasses.replace(config.start, mode="sci", sci_determinants=args.pool)
    pool, label = ci_target(H, settings.filled(), hf_occupation=system.hf_occupation, order=system.order)
    began = time.perf_counter()
    keys, values = outside_sums(H, pool.dets, pool.coefficients).result()
    outside = unpack_keys(keys, n_so)
    v = values[:, 0]
    gap = pool.energy - H.diagonal(outside.to(H.device)).detach().cpu().double().numpy()
    c1, e = v / gap, v ** 2 / gap   # e <= 0
    order = np.argsort(e, kind="stable")   # most negative first: CIPSI's order
    sorted_keys, inverse = unique_keys(keys)   # the outside keys, sorted for lookup_keys
    rank = np.empty(order.size, dtype=np.int64)
    rank[inverse.numpy()[order]] = np.arange(order.size)   # rank[i]: CIPSI's rank of sorted_keys[i]
    sum_seconds = time.perf_counter() - began
    fitted = order[:args.fitted]
    pool_keys = unique_keys(pack_occupations(pool.dets))[0]
    log.info("pool %s: %d determinants, E %.8f; %d connected outside (%.1f s), PT2 %.3f mHa, the first %d: %.3f mHa",
             label, pool.dets.shape[0], pool.energy, order.size, sum_seconds, 1e3 * e.sum(), args.fitted,
             1e3 * e[fitted].sum())
    rows = []
    for target in args.targets.split(","):
        if target == "eigenvector":
            dets, coefficients = pool.dets, pool.coefficients.double()
        elif target == "first_order":
            dets = torch.cat((pool.dets, outside[torch.from_numpy(fitted)]))
            coefficients = torch.cat((pool.coefficients.double(), torch.from_numpy(c1[fitted])))
            coefficients = coefficients / coefficients.norm()
        elif target == "first_order_only":
            dets, coefficients = outside[torch.from_numpy(fitted)], torch.from_numpy(c1[fitted])
            coefficients = coefficients / coefficients.norm()
        else:
            parser.error(f"unknown target {target!r}")
        torch.manual_seed(args.seed)
        model = build_model(config.model, system)
        began = time.perf_counter()
        fidelity = fit_to_state(model, occupations_to_tokens(dets.long()), coefficients, steps=args.steps,
                                max_determinants=1024, tail=512, phases={"steps": args.phase_steps})
        fit_seconds = time.perf_counter() - began
        with torch.no_grad():
            generator = torch.Generator().manual_seed(args.seed)
            batch = (sample_without_replacement(model, args.unique, generator=generator) if args.unique else
                     sample(model, int(args.draws), generator=generator))
        drawn = pack_occupations(tokens_to_occupations(batch.tokens).to(torch.uint8))
        in_pool = int((lookup_keys(pool_keys, drawn) >= 0).sum())   # the outside keys lie outside the pool
        where = lookup_keys(sorted_keys, drawn)
        ranks = rank[where[where >= 0].numpy()]
        beyond = ranks[ranks >= args.fitted]
        proposed = float(-1e3 * e[order[beyond]].sum()) if beyond.size else 0.0
        next_cipsi = float(-1e3 * e[order[args.fitted:args.fitted + beyond.size]].sum())
        rows.append({"target": target, "fidelity": fidelity, "fit_seconds": fit_seconds, "unique": int(drawn.shape[0]),
                     "in_pool": in_pool, "in_fitted": int((ranks < args.fitted).sum()),
                     "beyond_fitted": int(beyond.size), "unconnected": int(drawn.shape[0]) - in_pool - int(ranks.size),
                     "beyond_pt2_mha": proposed, "cipsi_next_pt2_mha": next_cipsi,
                     "beyond_median_rank": float(np.median(beyond)) if beyond.size else None})
        log.info("%s", rows[-1])
    return save_results(args.out, rows, args=args, extra={
        "pool": {"label": label, "determinants": int(pool.dets.shape[0]), "energy": pool.energy},
        "connected": int(order.size), "pt2_mha": float(1e3 * e.sum()),
        "fitted_pt2_mha": float(1e3 * e[fitted].sum())})


if __name__ == "__main__":
    main()
