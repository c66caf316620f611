import torch

from hamiltonians import from_pyscf
from hamiltonians.ci import cisd
from nnqs.training.estimators import exact_variational_energy
from nnqs.training.pretrain import fidelity, pretrain_to_state
from nnqs.wavefunction.tokens import occupations_to_tokens
from tests.models import make_model


def test_cisd_pretraining_reaches_the_target_and_lowers_the_energy():
    H = from_pyscf("Li 0 0 0; H 0 0 1.5949", "sto-3g")
    state = cisd(H)
    tokens = occupations_to_tokens(state.dets.long())
    torch.manual_seed(0)
    model = make_model(H.n_orbitals, H.n_alpha, H.n_beta, seed=0, dtype="float64", d_model=16,
                       n_layers=2, n_heads=2, phase_hidden=(32,))
    before = fidelity(model, tokens, state.coefficients)
    after = pretrain_to_state(model, tokens, state.coefficients, steps=400, lr=1e-2, target_fidelity=0.99)
    assert before < 0.5 < 0.99 <= after
    assert after == fidelity(model, tokens, state.coefficients)
    # A state with fidelity 0.99 to CISD lies well below HF.
    assert exact_variational_energy(model, H) < H.hf_energy() - 5e-3
