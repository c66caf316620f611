"""Where a trained network's energy error comes from: amplitudes or signs (small systems).

Compares the network ``psi`` with the exact ground state ``c`` over the whole determinant space
(``hamiltonians.exact``; feasible up to a few 1e5 determinants). After aligning the
global phase of ``psi`` to ``c``, three energies separate the two sources of error:

* ``E[psi]``: the network itself;
* ``E[|psi| sign(c)]``: the network's amplitudes with the exact signs (what is left is the
  amplitude error);
* ``E[|c| e^{i arg psi}]``: the exact amplitudes with the network's phases (the sign error).

It also reports the fidelity ``|<c|psi>|^2``, ``p(HF)`` against ``|c_HF|^2``, the exact weight
on determinants whose network sign is wrong, and how much probability the network puts on the
exact ground state's ``k`` largest determinants.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from hamiltonians.exact import hamiltonian_matrix, lowest_eigenpair
from hamiltonians.protocol import Hamiltonian
from nnqs.wavefunction.tokens import occupations_to_tokens

#: Largest determinant space :func:`analyse_state` diagonalises.
MAX_DETERMINANTS = 500_000
#: Determinants per forward pass.
CHUNK = 32_768


@dataclass(frozen=True)
class StateAnalysis:
    """Energies in Hartree, errors against the exact ground state in mHa.

    ``weight_on_top`` maps ``k`` to ``(exact, network)``: the total ``|c|^2`` and the total
    ``|psi|^2`` on the ``k`` determinants with the largest ``|c|``.
    """

    n_determinants: int
    exact_energy: float
    energy: float
    error_mha: float
    error_with_exact_signs_mha: float
    error_with_exact_amplitudes_mha: float
    fidelity: float
    p_hf: float
    p_hf_exact: float
    wrong_sign_weight: float
    wrong_sign_count: int
    weight_on_top: dict[int, tuple[float, float]]

    def to_dict(self) -> dict:
        data = asdict(self)
        data["weight_on_top"] = {str(k): list(v) for k, v in self.weight_on_top.items()}
        return data


def _energy(matrix, vector: np.ndarray) -> float:
    vector = vector / np.linalg.norm(vector)
    return float(np.real(np.vdot(vector, matrix @ vector)))


@torch.no_grad()
def analyse_state(model, H: Hamiltonian, hf_occupation: torch.Tensor, *, ranks=(1, 10, 100, 1000)) -> StateAnalysis:
    """Compare ``model`` with the exact ground state of ``H`` (see the module docstring).

    Args:
        model: anything with ``log_psi(tokens [B, N]) -> complex [B]``.
        H: a :class:`hamiltonians.MolecularHamiltonian` in the model's orbital order.
        hf_occupation: the HF determinant, occupations ``[2N]``.
        ranks: the ``k`` of ``weight_on_top``.

    Raises:
        ValueError: if the space has more than :data:`MAX_DETERMINANTS` determinants.
    """
    if H.n_determinants > MAX_DETERMINANTS:
        raise ValueError(f"{H.n_determinants} determinants: the analysis enumerates at most {MAX_DETERMINANTS}")
    matrix, dets = hamiltonian_matrix(H)
    e0, c = lowest_eigenpair(matrix)
    tokens = occupations_to_tokens(dets.long())
    log_psi = torch.cat([model.log_psi(part.to(model.device)).to(torch.complex128).cpu()
                         for part in tokens.split(CHUNK)]).numpy()
    psi = np.exp(log_psi - log_psi.real.max())
    psi /= np.linalg.norm(psi)
    overlap = np.vdot(c, psi)
    psi = psi * np.exp(-1j * np.angle(overlap))           # global phase aligned with c
    phases = np.exp(1j * np.angle(psi))
    wrong = np.real(psi) * c < 0

    hf_row = int(np.flatnonzero((dets == hf_occupation.to(dets.dtype)).all(dim=1).numpy())[0])
    order = np.argsort(-np.abs(c), kind="stable")
    weights = {int(k): (float(np.sum(c[order[:k]] ** 2)), float(np.sum(np.abs(psi[order[:k]]) ** 2)))
               for k in ranks if k <= len(c)}
    energy = _energy(matrix, psi)
    return StateAnalysis(
        n_determinants=len(c),
        exact_energy=float(e0),
        energy=energy,
        error_mha=1e3 * (energy - e0),
        error_with_exact_signs_mha=1e3 * (_energy(matrix, np.abs(psi) * np.sign(c)) - e0),
        error_with_exact_amplitudes_mha=1e3 * (_energy(matrix, np.abs(c) * phases) - e0),
        fidelity=float(abs(overlap) ** 2),
        p_hf=float(abs(psi[hf_row]) ** 2),
        p_hf_exact=float(c[hf_row] ** 2),
        wrong_sign_weight=float(np.sum(c[wrong] ** 2)),
        wrong_sign_count=int(wrong.sum()),
        weight_on_top=weights,
    )


def format_analysis(a: StateAnalysis) -> str:
    """A short human-readable report."""
    lines = [
        f"determinants: {a.n_determinants}; exact ground state {a.exact_energy:.8f} Ha",
        f"network <H>:                     {a.energy:.8f} Ha  error {a.error_mha:8.3f} mHa",
        f"network amplitudes, exact signs: error {a.error_with_exact_signs_mha:8.3f} mHa  (the amplitude error)",
        f"exact amplitudes, network signs: error {a.error_with_exact_amplitudes_mha:8.3f} mHa  (the sign error)",
        f"fidelity |<exact|psi>|^2 = {a.fidelity:.6f};  p(HF) = {a.p_hf:.5f} (exact {a.p_hf_exact:.5f})",
        f"wrong signs on {a.wrong_sign_count} determinants carrying exact weight {a.wrong_sign_weight:.2e}",
        "weight on the exact state's k largest determinants (exact / network):",
    ]
    lines += [f"  k = {k:6d}: {e:.7f} / {n:.7f}" for k, (e, n) in a.weight_on_top.items()]
    return "\n".join(lines)
