"""How far can a state on U determinants get? Selected CI energy against its size.

Grows a selected CI from the Hartree-Fock determinant, doubling the space each round
(:func:`hamiltonians.sci.spaces.pt2_selection`, then the lowest eigenstate in the space), and reports
its energy against FCI (or DMRG, from the reference cache) at every size. A state supported on
U determinants lies at or above the lowest energy in their span, and CIPSI's space is close to
the best U-determinant one, so the curve is a floor for anything whose energy only sees U
configurations: the sampled local energy of the coarse phase with U unique samples (its
estimate is the energy of the network projected on the samples), or a network fitted to the
U largest determinants of a CI state.

    python experiments/studies/sci_floor.py --config experiments/configs/h2o_631g_coarse.toml --out runs/sci_floor.json

Prints a table and writes ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

from experiments.common import default_config, molecule_set  # noqa: E402
from hamiltonians.sci.grow import grow  # noqa: E402
from hamiltonians.sci.spaces import ci_state  # noqa: E402
from nnqs.app.io import write_json  # noqa: E402
from nnqs.app.runconfig import load_config  # noqa: E402
from nnqs.app.system import build_system  # noqa: E402


def sci_curve(H, reference: torch.Tensor, max_determinants: int, exact: float | None) -> list[dict]:
    """Rows ``{"determinants", "energy", "error_mha", "seconds"}``, one per round of
    CIPSI (:func:`hamiltonians.sci.grow.grow`) from HF (``reference`` ``[2N]``) to ``max_determinants``;
    ``error_mha`` against ``exact`` (None without one)."""
    reference = reference.to(torch.uint8)
    begin, rows = time.perf_counter(), []

    def record(state) -> None:
        rows.append({"determinants": int(state.dets.shape[0]), "energy": state.energy,
                     "error_mha": None if exact is None else 1e3 * (state.energy - exact),
                     "seconds": time.perf_counter() - begin})

    grow(H, ci_state(H, reference[None], reference), select="pt2", growth=2.0, max_size=max_determinants,
         reference=reference, on_round=record)
    return rows


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--molecule", help=f"one of {list(molecule_set())}")
    source.add_argument("--config", help="a run config (its [molecule])")
    parser.add_argument("--max-determinants", type=int, default=32768)
    parser.add_argument("--out", required=True, help="JSON output")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    molecule = molecule_set()[args.molecule][1] if args.molecule else load_config(args.config).molecule
    system = build_system(default_config(molecule).molecule)
    refs = system.references
    exact, against = (refs.get("fci"), "fci") if refs.get("fci") is not None else (refs.get("dmrg"), "dmrg")
    rows = sci_curve(system.hamiltonian, system.hf_occupation, args.max_determinants, exact)
    print(f"{'determinants':>12} {'energy':>16} {'error mHa':>10} {'seconds':>8}")
    for row in rows:
        error = "-" if row["error_mha"] is None else f"{row['error_mha']:.3f}"
        print(f"{row['determinants']:>12} {row['energy']:>16.8f} {error:>10} {row['seconds']:>8.1f}")
    result = {"molecule": molecule.name, "exact": exact, "exact_method": against if exact is not None else None,
              "references": {k: v for k, v in refs.items() if isinstance(v, float)}, "rows": rows}
    write_json(args.out, result)
    return result


if __name__ == "__main__":
    main()
