"""nnqs.training.analysis: the amplitude/sign split on states whose errors are known by construction."""

import numpy as np
import pytest
import torch

from hamiltonians import from_pyscf
from hamiltonians.determinants import aufbau_occupation, pack_occupations
from hamiltonians.exact import ground_state
from nnqs.training.analysis import analyse_state, format_analysis
from nnqs.wavefunction.tokens import tokens_to_occupations


class TableState:
    """A 'model' whose psi is a given vector over the determinants ``dets``."""

    device = torch.device("cpu")

    def __init__(self, dets: torch.Tensor, psi: np.ndarray) -> None:
        self.keys = {tuple(row.tolist()): i for i, row in enumerate(pack_occupations(dets))}
        self.log = torch.from_numpy(np.log(psi.astype(np.complex128)))

    def log_psi(self, tokens: torch.Tensor) -> torch.Tensor:
        rows = pack_occupations(tokens_to_occupations(tokens).to(torch.uint8))
        return self.log[[self.keys[tuple(r.tolist())] for r in rows]]


@pytest.fixture(scope="module")
def lih():
    H = from_pyscf("Li 0 0 0; H 0 0 1.6", "sto-3g")
    e0, c, dets = ground_state(H)
    return H, e0, c, dets, aufbau_occupation(H.n_orbitals, H.n_alpha, H.n_beta)


def test_exact_state_has_no_error(lih):
    H, e0, c, dets, hf = lih
    a = analyse_state(TableState(dets, -2.5 * c), H, hf)  # any global factor, sign included
    assert abs(a.error_mha) < 1e-7 and abs(a.error_with_exact_signs_mha) < 1e-7
    assert abs(a.error_with_exact_amplitudes_mha) < 1e-7
    assert a.fidelity == pytest.approx(1.0, abs=1e-12) and a.wrong_sign_count == 0
    assert a.p_hf == pytest.approx(a.p_hf_exact, abs=1e-12) and a.p_hf_exact > 0.9
    exact, network = a.weight_on_top[10]
    assert network == pytest.approx(exact, abs=1e-12)
    assert "fidelity" in format_analysis(a)


def test_sign_and_amplitude_errors_are_told_apart(lih):
    H, e0, c, dets, hf = lih
    k = int(np.argsort(-np.abs(c))[1])                 # the largest correction to HF
    flipped = c.copy()
    flipped[k] *= -1
    a = analyse_state(TableState(dets, flipped), H, hf)
    assert a.error_mha > 0.1 and abs(a.error_with_exact_signs_mha) < 1e-7
    assert a.error_with_exact_amplitudes_mha == pytest.approx(a.error_mha, abs=1e-9)
    assert a.wrong_sign_count == 1 and a.wrong_sign_weight == pytest.approx(c[k] ** 2, abs=1e-12)

    damped = np.abs(c) * np.sign(c)
    damped[k] *= 0.5                                   # right sign, wrong amplitude
    b = analyse_state(TableState(dets, damped), H, hf)
    assert b.error_mha > 0.01 and abs(b.error_with_exact_amplitudes_mha) < 1e-7
    assert b.error_with_exact_signs_mha == pytest.approx(b.error_mha, abs=1e-9)
    assert b.p_hf > b.p_hf_exact and b.wrong_sign_count == 0
