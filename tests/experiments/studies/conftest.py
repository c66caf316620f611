"""Fixtures of the studies' tests."""

import pytest


@pytest.fixture
def tiny_loop_config():
    """A function writing a tiny config of H2O / STO-3G with a one-cycle subspace loop into a
    folder, returning its path: the studies from the loop's network run on it in seconds."""

    def write(folder):
        config = folder / "h2o.toml"
        config.write_text(
            '[molecule]\nname = "h2o"\ngeometry = "O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692"\n'
            'basis = "sto-3g"\nslow_references = false\n[model]\nd_model = 8\nn_layers = 1\nn_heads = 2\n'
            'phase_hidden = [8]\n[sampler]\nn_samples = 2000\nunique_window = []\n[start]\nmode = "cisd"\nsteps = 20\n'
            'phase_steps = 20\n[optim]\nsteps = 10\nmethod = "adamw"\nlr = 1e-3\nwarmup = 1\n[subspace]\ncycles = 1\n'
            'n_samples = 2000\npool = 200\nextend = 40\nfit_steps = 5\nphase_steps = 5\n')
        return config

    return write
