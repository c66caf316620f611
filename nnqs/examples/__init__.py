"""Example run configurations shipped with the package: ``nnqs run --example NAME``.

``lih`` is the README's main job (the defaults on LiH / STO-3G); the ``*_defaults`` are the
defaults alone on the molecules of the README's results table (H2O / 6-31G, N2 / 6-31G with a
frozen core, H2O / cc-pVDZ, N2 / cc-pVDZ with a frozen core).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["EXAMPLES", "example_path", "example_names"]

EXAMPLES = Path(__file__).resolve().parent


def example_names() -> list[str]:
    """The names ``--example`` accepts, sorted."""
    return sorted(p.stem for p in EXAMPLES.glob("*.toml"))


def example_path(name: str) -> Path:
    """The TOML of example ``name`` (``ValueError`` naming the choices when there is none)."""
    path = EXAMPLES / f"{name}.toml"
    if not path.is_file():
        raise ValueError(f"no example {name!r}: choose one of {', '.join(example_names())}")
    return path
