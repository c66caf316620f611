"""Shared test models."""

import torch

from nnqs import TransformerWavefunction, WavefunctionConfig


def make_model(n_orbitals=5, n_alpha=2, n_beta=2, *, seed=0, dtype="float64", **kwargs):
    """A small random model; float64 by default for exactness tests."""
    torch.manual_seed(seed)
    defaults = dict(d_model=16, n_layers=2, n_heads=4, phase_hidden=(8,))
    defaults.update(kwargs)
    config = WavefunctionConfig(n_orbitals=n_orbitals, n_alpha=n_alpha, n_beta=n_beta, dtype=dtype, **defaults)
    model = TransformerWavefunction(config).eval()
    # Larger-than-default weights make the conditionals far from uniform, so a wrong
    # mask, position or cache row shows up as a large difference.
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return model
