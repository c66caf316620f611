"""A finished run's final evaluation again, with the current code.

For a run whose evaluation a later change would do otherwise (e.g. one made before the final
evaluation always weighed by counts): the checkpoint's network, effective config and random
stream, so the fresh sample is the one the run's own evaluation drew when the checkpoint is the
last one. Writes the :class:`nnqs.training.evaluation.FinalEvaluation`, the errors against the
references in the run's ``result.json`` and the provenance.

    python experiments/tools/reevaluate.py RUN_DIR [--samples N] [--out FILE]

Default output ``RUN_DIR/reevaluation.json``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from experiments.common import save_results  # noqa: E402
from nnqs.app.runconfig import config_from_dict  # noqa: E402
from nnqs.app.trained import load_trained  # noqa: E402
from nnqs.training.evaluation import final_evaluation  # noqa: E402
from nnqs.training.driver import build_vmc  # noqa: E402

log = logging.getLogger("reevaluate")


def reevaluate(run_dir: str | Path, samples: int = 0) -> dict:
    """The final evaluation of ``run_dir``'s checkpoint with the current code, and the errors
    (mHa) against the references of its ``result.json`` (when there is one)."""
    run_dir = Path(run_dir)
    trained = load_trained(run_dir)
    state = trained.checkpoint
    config = config_from_dict(state["config"])
    H = trained.system.hamiltonian
    trainer = build_vmc(trained.model, H, config.optim, config.sampler, config.local_energy, seed=config.run.seed)
    trainer.load_state_dict(state["trainer"])
    evaluation = final_evaluation(trainer, trained.system.hf_tokens, samples or None).to_dict()
    result_path = run_dir / "result.json"
    references = json.loads(result_path.read_text()).get("references", {}) if result_path.is_file() else {}
    errors = {f"error_vs_{k}_mha": 1e3 * (evaluation["energy"] - v) for k, v in references.items()
              if isinstance(v, (int, float))}
    return {"run": str(run_dir), "step": trainer.step, "evaluation": evaluation, "references": references, **errors}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir")
    p.add_argument("--samples", type=int, default=0, help="draws (default: the run's eval_samples rule)")
    p.add_argument("--out", default=None, help="JSON (default RUN_DIR/reevaluation.json)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    torch.set_num_threads(1)
    result = reevaluate(args.run_dir, args.samples)
    ev = result["evaluation"]
    print(f"step {result['step']}: E = {ev['energy']:.8f} +- {ev['energy_stderr']:.8f} Ha ({ev['local_energy']}, "
          f"{ev['n_unique']} unique of {ev['n_samples']} draws); sample-space energy {ev['sample_space_energy']:.8f}")
    for key, value in result.items():
        if key.startswith("error_vs_"):
            print(f"  {key}: {value:.3f}")
    return save_results(args.out or os.path.join(args.run_dir, "reevaluation.json"), [result], args=args)


if __name__ == "__main__":
    main()
