"""Could a second-order fit beat Adam's start? Levenberg-Marquardt on the amplitudes, one molecule.

The default start fits the Transformer's amplitudes to a CI target by Adam on the cross-entropy
(:func:`nnqs.training.fit.fit_to_state`); on H10 / STO-3G it plateaus near fidelity
0.997 (6-7 mHa of amplitude error; ``experiments/studies/start_fit.py``). This probe replaces Adam by
Levenberg-Marquardt steps solved in the space of the fitted determinants, as minSR solves VMC's:
with ``J`` ``[K, P]`` the rows ``d r_x / d theta`` (:func:`nnqs.training.sr.log_psi_jacobian`),

    d = J^T (J J^T + lambda mean(diag J J^T) I)^{-1} r,   theta <- theta - d,

accepting a step only when the loss falls (``lambda`` / 3 then, x 4 and retry otherwise). The
residuals ``r`` over the ``K`` largest determinants of the target ``c`` (normalised over all of
its determinants):

* ``log``: ``|c_x| (log|psi_x| - log|c_x|)``: the weighted log error (Adam's cross-entropy to
  second order, without its normalisation term);
* ``hellinger``: ``|psi_x| - |c_x|``, plus one row ``sqrt(p_out) - sqrt(c_out)`` for the weight
  outside the ``K`` (the Hellinger distance of the coarse-grained distributions).

The phases are fitted first as in the package (:func:`nnqs.training.fit.fit_phases`), to the
default start's CI target (:func:`nnqs.training.start.ci_target`).
Where the space can be enumerated, reports the fidelity with the target, the network's exact
error against FCI and its amplitude part (:func:`nnqs.training.analysis.analyse_state`):

    python experiments/studies/gauss_newton_fit.py --molecule h10 --residual log --determinants 512 \\
        --steps 25 --out runs/gn/h10_log512.json
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
from nnqs.app.io import write_json  # noqa: E402
from nnqs.app.system import build_model, build_system  # noqa: E402
from nnqs.training.analysis import analyse_state  # noqa: E402
from nnqs.training.fit import fidelity, fit_phases  # noqa: E402
from nnqs.training.sr import log_psi_jacobian  # noqa: E402
from nnqs.training.start import ci_target  # noqa: E402
from nnqs.wavefunction.tokens import occupations_to_tokens  # noqa: E402

#: ``sqrt(p_out)`` in the outside row's derivative is floored here (a network with all its
#: weight on the ``K`` would otherwise divide by zero).
OUTSIDE_FLOOR = 1e-2


def residuals(model, tokens: torch.Tensor, target: torch.Tensor, kind: str, *, jacobian: bool):
    """The residuals ``[R]`` (float64) and, with ``jacobian``, their derivatives ``[R, P_amp]``."""
    with torch.no_grad():
        half_log_p = 0.5 * model.log_prob(tokens, validate=False).double()
    amplitude = half_log_p.exp()
    if kind == "log":
        r = target * (half_log_p - target.log())
    else:
        p_out = (1 - amplitude.square().sum()).clamp(min=1e-12)
        c_out = (1 - target.square().sum()).clamp(min=0)
        r = torch.cat([amplitude - target, (p_out.sqrt() - c_out.sqrt())[None]])
    if not jacobian:
        return r, None
    n_amplitude = sum(p.numel() for p in model.amplitude_parameters())   # the Jacobian's first columns
    j = log_psi_jacobian(model, tokens)[:, 0, :n_amplitude].double()    # d (0.5 log p) / d theta
    if kind == "log":
        return r, target[:, None] * j
    outside = -(amplitude.square()[:, None] * j).sum(0) / p_out.sqrt().clamp(min=OUTSIDE_FLOOR)
    return r, torch.cat([amplitude[:, None] * j, outside[None]])


def lm_fit(model, tokens, target, kind: str, steps: int, *, on_step=None) -> list[dict]:
    """``steps`` accepted-or-abandoned Levenberg-Marquardt steps; returns one row per step."""
    params = model.amplitude_parameters()
    damping, rows = 1e-3, []
    r, _ = residuals(model, tokens, target, kind, jacobian=False)
    loss = float(r.square().sum())
    begin = time.perf_counter()
    for step in range(steps):
        r, j = residuals(model, tokens, target, kind, jacobian=True)
        gram = j @ j.T
        scale = float(gram.diagonal().mean())
        saved = [p.detach().clone() for p in params]
        while damping < 1e6:
            a = gram.clone()
            a.diagonal().add_(damping * scale)
            d = j.T @ torch.linalg.solve(a, r)
            with torch.no_grad():
                for p, chunk in zip(params, d.split([p.numel() for p in params])):
                    p -= chunk.view_as(p).to(p.dtype)
            new = float(residuals(model, tokens, target, kind, jacobian=False)[0].square().sum())
            if new < loss:
                loss, damping = new, max(damping / 3, 1e-9)
                break
            with torch.no_grad():
                for p, s in zip(params, saved):
                    p.copy_(s)
            damping *= 4
        rows.append({"step": step, "loss": loss, "damping": damping, "seconds": time.perf_counter() - begin})
        if on_step is not None:
            on_step(rows[-1])
    return rows


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--molecule", required=True, help=f"one of {list(molecule_set())}")
    parser.add_argument("--residual", choices=("log", "hellinger"), default="log")
    parser.add_argument("--determinants", type=int, default=512, help="fit on this many largest determinants")
    parser.add_argument("--steps", type=int, default=25)
    parser.add_argument("--report-every", type=int, default=0, help="exact analysis every this many steps")
    parser.add_argument("--out", required=True, help="JSON output")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    config = default_config(molecule_set()[args.molecule][1])
    system = build_system(config.molecule)
    H, fci = system.hamiltonian, system.references.get("fci")
    state, _ = ci_target(H, config.start, hf_occupation=system.hf_occupation, order=system.order)
    tokens = occupations_to_tokens(state.dets.long())
    c = state.coefficients / state.coefficients.norm()
    torch.manual_seed(args.seed)
    model = build_model(config.model, system)
    begin = time.perf_counter()
    fit_phases(model, tokens, c)
    phase_seconds = time.perf_counter() - begin
    top = torch.argsort(c.abs(), descending=True)[: args.determinants]
    result = {"molecule": args.molecule, "residual": args.residual, "determinants": args.determinants,
              "target_determinants": int(tokens.shape[0]), "target_error_mha": 1e3 * (state.energy - fci),
              "weight_outside": float(1 - c[top].abs().square().sum()), "phase_seconds": phase_seconds,
              "command": " ".join(["python", "experiments/studies/gauss_newton_fit.py", *(argv or sys.argv[1:])]),
              "steps": [], "reports": []}

    def report(row):
        if args.report_every and (row["step"] + 1) % args.report_every == 0:
            a = analyse_state(model, H, system.hf_occupation)
            result["reports"].append({"step": row["step"], "seconds": row["seconds"],
                                      "fidelity": fidelity(model, tokens, c), "error_mha": a.error_mha,
                                      "amplitude_error_mha": a.error_with_exact_signs_mha})
        result["steps"].append(row)
        logging.info("step %d loss %.3g damping %.3g %.1f s", row["step"], row["loss"], row["damping"], row["seconds"])

    lm_fit(model, tokens[top], c[top].abs().double(), args.residual, args.steps, on_step=report)
    with torch.no_grad():
        p = model.log_prob(tokens[top], validate=False).double().exp()
    a = analyse_state(model, H, system.hf_occupation)
    result |= {"fidelity": fidelity(model, tokens, c), "error_mha": a.error_mha,
               "amplitude_error_mha": a.error_with_exact_signs_mha, "sign_error_mha": a.error_with_exact_amplitudes_mha,
               "network_weight_on_fitted": float(p.sum()), "target_weight_on_fitted": float(c[top].abs().square().sum())}
    write_json(args.out, result)
    print(f"{args.molecule} {args.residual} K={args.determinants}: fidelity {result['fidelity']:.5f}, "
          f"error {result['error_mha']:.2f} mHa (amplitudes {result['amplitude_error_mha']:.2f}); weight on the "
          f"fitted {result['network_weight_on_fitted']:.4f} against {result['target_weight_on_fitted']:.4f}")
    return result


if __name__ == "__main__":
    main()
