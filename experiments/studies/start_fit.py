"""How well does the supervised start fit its CI target? Fit variants side by side, one molecule.

Builds one molecule of the set (:mod:`experiments.drivers.molecule_set`) or a config's ``[molecule]``,
solves the start's CI target (:func:`nnqs.training.start.ci_target`) of ``--mode`` (default
``"sci"``: the auto CI state grown by CIPSI to ``--sci-determinants``; ``--pretrain`` is the
old name of the option), then fits a freshly initialised default network (same seed every
time) to it once per variant. A variant is ``name[:field=value...]`` with fields of
:func:`nnqs.training.fit.fit_to_state` (``steps``, ``lr``, ``final_lr_ratio``,
``max_determinants``, ``tail``, and ``phase_steps``) and of :func:`nnqs.training.fit.fit_phases`
prefixed ``phase_`` (``phase_lr``, ``phase_max_determinants``, ``phase_weight_power``, ``phase_warmup``; the
phase fit runs first either way, as in the package, with :func:`~nnqs.training.fit.fit_phases`'
own defaults for the fields not given). ``steps=0`` fits the phases alone: the
sign error does not depend on the amplitudes. Reports per variant the fidelity with the
target, the fit's seconds and, where the space can be enumerated (:data:`nnqs.training.analysis.MAX_DETERMINANTS`), the
network's exact energy error against FCI split into its amplitude and sign parts
(:func:`nnqs.training.analysis.analyse_state`); the target's own error beside it.

    python experiments/studies/start_fit.py --molecule h10 --out runs/start_fit/h10.json \\
        --variant base:steps=1000 --variant cos:steps=1000:final_lr_ratio=0.01 \\
        --variant phase_c2:steps=0:phase_weight_power=2

Prints a table and writes ``--out`` (JSON; the target's mode under ``"mode"``, as ``"pretrain"``
in files written before the rename).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from dataclasses import replace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

from experiments.common import default_config, molecule_set  # noqa: E402
from nnqs.app.io import write_json  # noqa: E402
from nnqs.app.runconfig import load_config  # noqa: E402
from nnqs.app.system import build_model, build_system  # noqa: E402
from nnqs.training.analysis import MAX_DETERMINANTS, analyse_state  # noqa: E402
from nnqs.training.fit import fit_phases, fit_to_state  # noqa: E402
from nnqs.training.start import ci_target  # noqa: E402
from nnqs.wavefunction.tokens import occupations_to_tokens  # noqa: E402

FIELDS = {"steps": int, "lr": float, "final_lr_ratio": float, "max_determinants": int, "phase_steps": int,
          "phase_lr": float, "phase_max_determinants": int, "phase_weight_power": float,
          "phase_warmup": int, "tail": int}


def parse_variant(spec: str) -> tuple[str, dict]:
    """``"name:steps=1000:lr=3e-3"`` -> ``("name", {"steps": 1000, "lr": 0.003})``."""
    name, *items = spec.split(":")
    fields = {}
    for item in items:
        key, _, value = item.partition("=")
        if key not in FIELDS or not value:
            raise ValueError(f"variant {spec!r}: expected field=value with field in {sorted(FIELDS)}, got {item!r}")
        fields[key] = FIELDS[key](value)
    if not name:
        raise ValueError(f"variant {spec!r}: no name")
    return name, fields


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--molecule", help=f"one of {list(molecule_set())}")
    source.add_argument("--config", help="a run config (its [molecule] and [model])")
    parser.add_argument("--out", required=True, help="JSON output")
    parser.add_argument("--mode", "--pretrain", dest="mode", default="sci", help="the start's [start] mode")
    parser.add_argument("--sci-determinants", type=int, default=8192)
    parser.add_argument("--variant", action="append", default=[], help="name[:field=value...]")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        variants = dict(parse_variant(v) for v in args.variant or ["defaults"])
    except ValueError as error:
        parser.error(str(error))
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    if args.molecule:
        config = default_config(molecule_set()[args.molecule][1])
    else:
        config = load_config(args.config)
    try:
        settings = replace(config.start, mode=args.mode, sci_determinants=args.sci_determinants)
    except ValueError as error:
        parser.error(str(error))
    system = build_system(config.molecule)
    H, fci = system.hamiltonian, system.references.get("fci")
    begin = time.perf_counter()
    state, chosen = ci_target(H, settings, hf_occupation=system.hf_occupation, order=system.order)
    result = {"molecule": config.molecule.name, "mode": args.mode, "chosen": chosen,
              "determinants": int(state.dets.shape[0]),
              "target_energy": state.energy, "fci": fci, "references": {k: v for k, v in system.references.items()
                                                                          if isinstance(v, float)},
              "target_seconds": time.perf_counter() - begin, "variants": {}}
    if fci is not None:
        result["target_error_mha"] = 1e3 * (state.energy - fci)
    tokens = occupations_to_tokens(state.dets.long())

    for name, fields in variants.items():
        torch.manual_seed(args.seed)
        model = build_model(config.model, system)
        fit = {"steps": settings.filled().steps, "max_determinants": settings.max_determinants or None} | fields
        phase = {key.removeprefix("phase_"): value for key, value in fit.items() if key.startswith("phase_")}
        amplitudes = {key: value for key, value in fit.items() if not key.startswith("phase_")}
        begin = time.perf_counter()
        fit_phases(model, tokens, state.coefficients, **phase)
        value = fit_to_state(model, tokens, state.coefficients, phases={"steps": 0}, **amplitudes)
        row = {"fields": fit, "fidelity": value, "seconds": time.perf_counter() - begin}
        if H.n_determinants <= MAX_DETERMINANTS:
            a = analyse_state(model, H, system.hf_occupation)
            row |= {"error_mha": a.error_mha, "amplitude_error_mha": a.error_with_exact_signs_mha,
                    "sign_error_mha": a.error_with_exact_amplitudes_mha, "fidelity_fci": a.fidelity}
        result["variants"][name] = row
        logging.info("%s: %s", name, row)
        write_json(args.out, result)
    print(f"{result['molecule']}: {args.mode} target ({chosen}), {result['determinants']} determinants, "
          f"error {result.get('target_error_mha', float('nan')):.2f} mHa")
    print(f"{'variant':>16} {'fidelity':>9} {'seconds':>8} {'error':>8} {'ampl.':>8} {'sign':>8}")
    for name, row in result["variants"].items():
        print(f"{name:>16} {row['fidelity']:9.5f} {row['seconds']:8.1f} {row.get('error_mha', float('nan')):8.2f} "
              f"{row.get('amplitude_error_mha', float('nan')):8.2f} {row.get('sign_error_mha', float('nan')):8.2f}")
    return result


if __name__ == "__main__":
    main()
