"""nnqs.app.system: orbital orders, the HF determinant in them, the CI starts they move, FCIDUMP symmetries."""

from dataclasses import replace

import pytest
import torch

from hamiltonians import from_pyscf, write_fcidump
from nnqs.app.runconfig import ConfigError


@pytest.mark.parametrize("order", ["reversed", [1, 0, 3, 2, 5, 4]])
def test_orbital_order_permutes_integrals_not_energies(order):
    from hamiltonians.exact import ground_state_energy
    from nnqs.app.runconfig import MoleculeConfig
    from nnqs.app.system import build_system

    lih = {"geometry": "Li 0 0 0; H 0 0 1.5949", "basis": "sto-3g"}
    given = build_system(MoleculeConfig(**lih), references=False)
    permuted = build_system(MoleculeConfig(**lih, orbital_order=order if isinstance(order, str) else tuple(order)),
                            references=False)
    perm = permuted.order
    assert perm != list(range(6))
    H, P = given.hamiltonian, permuted.hamiltonian
    assert torch.equal(P.h1, H.h1[perm][:, perm])
    assert float(P.eri[0, 1, 2, 3]) == float(H.eri[perm[0], perm[1], perm[2], perm[3]])
    assert abs(ground_state_energy(P) - ground_state_energy(H)) < 1e-10
    # The HF determinant moves with the orbitals, and keeps its energy.
    hf = permuted.hf_occupation
    assert torch.equal(hf[0::2], torch.tensor([int(o < H.n_alpha) for o in perm], dtype=torch.uint8))
    assert abs(float(P.diagonal(hf[None])[0]) - H.hf_energy()) < 1e-10
    from hamiltonians.sci.spaces import cisd

    assert abs(cisd(P, reference=hf).energy - cisd(H).energy) < 1e-9
    with pytest.raises(ConfigError, match="permutation"):
        build_system(MoleculeConfig(**lih, orbital_order=(0, 0, 1, 2, 3, 4)), references=False)


def test_orbital_order_moves_fcidump_orbital_symmetries(tmp_path):
    """A permuted FCIDUMP run saves its integrals with ORBSYM in the new order."""
    from hamiltonians import read_fcidump
    from nnqs.app.runconfig import MoleculeConfig
    from nnqs.app.system import build_system

    H = from_pyscf("Li 0 0 0; H 0 0 1.5949", "sto-3g")
    source = tmp_path / "lih.fcidump"
    write_fcidump(H, source, orbsym=[1, 1, 1, 2, 3, 1])
    system = build_system(MoleculeConfig(fcidump=str(source), orbital_order="reversed"), references=False)
    saved = tmp_path / "saved.fcidump"
    write_fcidump(system.hamiltonian, saved)
    assert read_fcidump(saved).source["orbsym"] == [1, 3, 2, 1, 1, 1]


def test_frontier_last_order_puts_homo_and_lumo_at_the_end():
    from nnqs.app.system import resolve_order

    # 8 orbitals, 3 occupied: distances from the Fermi level 2 1 0 | 0 1 2 3 4
    assert resolve_order("frontier_last", 8, 3) == [7, 6, 0, 5, 1, 4, 2, 3]
    assert sorted(resolve_order("frontier_last", 5, 5)) == list(range(5))


@pytest.mark.parametrize("bond,order", [(1.1, "given"), (2.0, "given"), (2.0, "reversed")])
def test_cisd_cas_start_lies_below_cisd_and_casci(bond, order):
    """Near equilibrium CISD is below CASCI(6, 6); stretched, HF carries little weight and CASCI is
    below CISD (by 150 mHa at 2 A). The union of their spaces lies below both everywhere, and
    with the orbitals reordered its determinants move with them."""
    from hamiltonians.sci.spaces import casci, cisd
    from nnqs.app.runconfig import MoleculeConfig
    from nnqs.app.system import build_system
    from nnqs.training.start import StartSettings, ci_target

    molecule = MoleculeConfig(geometry=f"N 0 0 0; N 0 0 {bond}")
    plain = build_system(molecule, references=False).hamiltonian
    e_cisd, e_cas = cisd(plain).energy, casci(plain, 6, 6).energy
    assert (e_cisd < e_cas) == (bond < 1.5)
    system = build_system(replace(molecule, orbital_order=order), references=False)
    where = dict(hf_occupation=system.hf_occupation, order=system.order)
    state, _ = ci_target(system.hamiltonian, StartSettings(mode="cisd_cas", cas=(6, 6)), **where)
    assert state.energy < min(e_cisd, e_cas) - 1e-3
    assert torch.equal(state.dets[0], system.hf_occupation)
    for name, expected in (("cisd", e_cisd), ("casci", e_cas)):
        alone, _ = ci_target(system.hamiltonian, StartSettings(mode=name, cas=(6, 6)), **where)
        assert abs(alone.energy - expected) < 1e-9
