"""Command-line interface: ``nnqs check-consistency`` (and, later, ``nnqs run``).

Exit codes: 0 success, 1 a check failed, 2 bad input.
"""

from __future__ import annotations

import argparse
import logging
import sys

from nnqs.config import DTYPES

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad arguments in one line with exit code 2."""

    def error(self, message: str) -> None:  # pragma: no cover - argparse plumbing
        self.exit(EXIT_BAD_INPUT, f"nnqs: error: {message}\n")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="nnqs", description="Autoregressive Transformer NNQS for quantum chemistry")
    sub = parser.add_subparsers(dest="command", required=True)

    check = sub.add_parser(
        "check-consistency",
        help="compare cached decoding with the uncached full pass on a random model",
    )
    check.add_argument("--orbitals", type=int, default=16, help="spatial orbitals N (default 16)")
    check.add_argument("--layers", type=int, default=4)
    check.add_argument("--heads", type=int, default=4)
    check.add_argument("--kv-heads", type=int, default=None, help="key/value heads (default: --heads)")
    check.add_argument("--d-model", type=int, default=32)
    check.add_argument("--batch", type=int, default=64)
    check.add_argument(
        "--dtype", choices=sorted(DTYPES), action="append",
        help="repeatable; default: float64 and float32",
    )
    check.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ... (default cpu)")
    check.add_argument("--seed", type=int, default=0)
    return parser


def _check_consistency(args: argparse.Namespace) -> int:
    import torch

    from nnqs.consistency import check_consistency

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"nnqs: error: device {args.device!r} requested but CUDA is not available", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        results = check_consistency(
            n_orbitals=args.orbitals, n_layers=args.layers, n_heads=args.heads,
            n_kv_heads=args.kv_heads, d_model=args.d_model, batch=args.batch,
            dtypes=tuple(args.dtype or ("float64", "float32")), device=args.device, seed=args.seed,
        )
    except ValueError as error:
        print(f"nnqs: error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"cached vs uncached conditionals: N={args.orbitals} L={args.layers} H={args.heads} "
          f"H_kv={args.kv_heads or args.heads} batch={args.batch} device={args.device}")
    for r in results:
        status = "ok" if r.ok else "FAIL"
        print(f"  {r.dtype:9s} max |dp| = {r.max_abs_diff:.3e}  (tolerance {r.tolerance:.0e})  {status}")
    return EXIT_OK if all(r.ok for r in results) else EXIT_FAILED


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = _build_parser().parse_args(argv)
    if args.command == "check-consistency":
        return _check_consistency(args)
    raise AssertionError(f"unhandled command {args.command}")  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
