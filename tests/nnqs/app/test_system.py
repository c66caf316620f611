"""nnqs.app.system: orbital orders, the HF determinant in them, the CI starts they move, FCIDUMP symmetries."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from hamiltonians import from_pyscf, read_fcidump, write_fcidump
from hamiltonians.molecular import permute_orbitals
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
    below CISD (by 120 mHa at 2 A, in the stable RHF's orbitals). The union of their spaces lies below both
    everywhere (by 0.5 mHa at 2 A, where CASCI holds nearly all it adds), and
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
    assert state.energy < min(e_cisd, e_cas) - 2e-4
    assert torch.equal(state.dets[0], system.hf_occupation)
    for name, expected in (("cisd", e_cisd), ("casci", e_cas)):
        alone, _ = ci_target(system.hamiltonian, StartSettings(mode=name, cas=(6, 6)), **where)
        assert abs(alone.energy - expected) < 1e-9


@pytest.mark.parametrize("spin", [0, 2])
def test_a_shuffled_fcidump_starts_where_the_canonical_one_does(tmp_path, spin):
    """H2O and triplet O2 in STO-3G with their orbitals shuffled in the FCIDUMP: the run's reference
    determinant is the shuffled HF determinant (not the lowest-index one, 2-4 Ha above it), so the
    CISD start has the canonical file's energy; the result records how it was found."""
    from hamiltonians.molecular import permute_orbitals
    from hamiltonians.sci.spaces import cisd
    from nnqs.app.runconfig import MoleculeConfig
    from nnqs.app.system import build_system

    geometry = "O 0 0 0.1173; H 0 0.7572 -0.4692; H 0 -0.7572 -0.4692" if spin == 0 else "O 0 0 0; O 0 0 1.2"
    H = from_pyscf(geometry, "sto-3g", spin=spin)
    perm = torch.randperm(H.n_orbitals, generator=torch.Generator().manual_seed(7)).tolist()
    write_fcidump(H, tmp_path / "canonical.fcidump")
    write_fcidump(permute_orbitals(H, perm), tmp_path / "shuffled.fcidump")
    systems = [build_system(MoleculeConfig(fcidump=str(tmp_path / f"{name}.fcidump")), references=False)
               for name in ("canonical", "shuffled")]
    energies = [cisd(s.hamiltonian, reference=s.hf_occupation).energy for s in systems]
    assert abs(energies[0] - energies[1]) < 1e-9
    shuffled = systems[1].reference
    assert shuffled is not None and shuffled.found_by.startswith("Hartree-Fock")
    assert shuffled.aufbau_energy - shuffled.energy > 1.0
    aufbau = build_system(MoleculeConfig(fcidump=str(tmp_path / "shuffled.fcidump"), reference="aufbau"),
                          references=False)
    assert aufbau.reference is None
    assert cisd(aufbau.hamiltonian, reference=aufbau.hf_occupation).energy - energies[0] > 0.01   # what "aufbau" costs (34 mHa for H2O)


def test_fiedler_order_is_taken_from_the_integrals(tmp_path):
    """``orbital_order = "fiedler"`` orders the orbitals along the exchange graph; the reference
    determinant moves with them."""
    from hamiltonians.reference_determinant import fiedler_order
    from nnqs.app.runconfig import MoleculeConfig
    from nnqs.app.system import build_system

    lih = {"geometry": "Li 0 0 0; H 0 0 1.5949", "basis": "sto-3g"}
    plain = build_system(MoleculeConfig(**lih), references=False)
    system = build_system(MoleculeConfig(**lih, orbital_order="fiedler"), references=False)
    assert system.order == fiedler_order(plain.hamiltonian)
    expected = plain.hf_occupation.view(-1, 2)[system.order].flatten()
    assert torch.equal(system.hf_occupation, expected)
    with pytest.raises(ConfigError, match="reference must be one of"):
        MoleculeConfig(**lih, reference="lowest")


def test_saved_integrals_are_not_rotated_again(tmp_path):
    """A run resumed from its saved integrals (``system_in_order``: the FCIDUMP it was built from is
    gone) keeps the orbitals the run chose: natural orbitals of localised ones, in the reversed order,
    come back unchanged rather than as the natural orbitals of the natural orbitals."""
    from nnqs.app.runconfig import MoleculeConfig
    from nnqs.app.system import build_system, system_in_order
    from tests.systems import localised_chain

    path = tmp_path / "h6.fcidump"
    write_fcidump(localised_chain(6, 1.8), path)
    config = MoleculeConfig(name="h6", fcidump=str(path), orbitals="natural", orbital_order="reversed")
    built = build_system(config, references=False)
    assert built.orbitals is not None and built.orbitals.kind == "natural"
    # In natural orbitals the reference is the most occupied ones (not the lowest <D|H|D>), wherever the order puts them.
    from hamiltonians.determinants import hf_occupation_in_order

    assert built.reference is not None and built.reference.found_by.startswith("aufbau (the most occupied")
    assert torch.equal(built.hf_occupation, hf_occupation_in_order(built.order, 3, 3).to(torch.uint8))
    # The references are computed (and cached) on the given integrals, not the rotated ones.
    from nnqs.app.system import references_hamiltonian

    given = references_hamiltonian(built)
    from hamiltonians import read_fcidump

    assert torch.equal(given.h1, read_fcidump(path).h1) and not torch.allclose(given.h1, built.hamiltonian.h1)
    again = system_in_order(config, built.hamiltonian, references=False)
    assert again.order == built.order
    assert torch.allclose(again.hamiltonian.h1, built.hamiltonian.h1, rtol=0, atol=1e-12)
    assert torch.equal(again.hf_occupation, built.hf_occupation)
    assert again.reference is not None and again.reference.found_by.startswith("aufbau (the most occupied")
    # "auto" that chose natural orbitals: the saved choice (run_system's ORBITALS_FILE) says so, and the
    # reference is theirs again; without it the config's "auto" cannot tell, and the lowest <D|H|D> is found.
    auto = MoleculeConfig(name="h6", fcidump=str(path), orbitals="auto", orbital_order="reversed")
    told = system_in_order(auto, built.hamiltonian, references=False, orbitals="natural")
    assert torch.equal(told.hf_occupation, built.hf_occupation)
    untold = system_in_order(auto, built.hamiltonian, references=False)
    assert untold.reference is not None and not untold.reference.found_by.startswith("aufbau (the most occupied")


def test_a_run_folder_records_its_orbitals_and_a_resume_without_its_source_uses_them(tmp_path):
    import json

    from nnqs.app.runconfig import MoleculeConfig
    from nnqs.app.system import ORBITALS_FILE, run_system
    from tests.systems import localised_chain

    path = tmp_path / "h6.fcidump"
    write_fcidump(localised_chain(6, 1.8), path)
    out = tmp_path / "run"
    out.mkdir()
    config = MoleculeConfig(name="h6", fcidump=str(path), orbitals="natural")
    built = run_system(config, out, resume=False, references=False)
    saved = json.loads((out / ORBITALS_FILE).read_text())
    assert saved["kind"] == "natural" and saved["natural"]["size"] == built.orbitals.natural["size"]
    path.unlink()   # the source gone: the saved integrals and the saved choice alone
    again = run_system(MoleculeConfig(name="h6", fcidump=str(path), orbitals="auto"), out, resume=True,
                       references=False)
    assert torch.equal(again.hf_occupation, built.hf_occupation)
    assert again.reference is not None and again.reference.found_by.startswith("aufbau (the most occupied")
    (out / ORBITALS_FILE).write_text("{not json")   # damaged: a warning, the config's orbitals ("auto": found again)
    damaged = run_system(MoleculeConfig(name="h6", fcidump=str(path), orbitals="auto"), out, resume=True,
                         references=False)
    assert damaged.reference is not None and not damaged.reference.found_by.startswith("aufbau (the most occupied")


def test_a_resume_takes_the_orbitals_its_run_chose_without_choosing_again(tmp_path, monkeypatch, caplog):
    """A resumed run rotates the config's integrals by the saved rotation (``orbitals.json``) and
    runs no trial: the same integrals and reference as when it began, even where the config now
    asks for other orbitals. A saved rotation that does not fit (damaged), none where one is needed
    (a folder from an older nnqs), or one that gives integrals other than the saved ones (as
    degenerate orbitals returned in another basis would) is a warning, and the orbitals are chosen
    again."""
    import json

    import nnqs.app.system as system_module
    from nnqs.app.runconfig import MoleculeConfig
    from nnqs.app.system import ORBITALS_FILE, run_system
    from tests.systems import localised_chain

    path = tmp_path / "h6.fcidump"
    write_fcidump(localised_chain(6, 1.8), path)
    out = tmp_path / "run"
    out.mkdir()
    built = run_system(MoleculeConfig(name="h6", fcidump=str(path), orbitals="natural"), out, resume=False,
                       references=False)
    record = json.loads((out / ORBITALS_FILE).read_text())
    assert np.abs(np.asarray(record["rotation"]) - built.orbitals.rotation).max() == 0   # exact through JSON

    def no_trial(*args, **kwargs):
        raise AssertionError("the orbitals were chosen again")

    with monkeypatch.context() as patch:
        patch.setattr(system_module, "choose_orbitals", no_trial)
        again = run_system(MoleculeConfig(name="h6", fcidump=str(path), orbitals="given"), out, resume=True,
                           references=False)
    assert again.orbitals.kind == "natural" and torch.equal(again.hf_occupation, built.hf_occupation)
    assert torch.allclose(again.given_hamiltonian.h1, read_fcidump(path).h1, rtol=0, atol=0)
    saved = read_fcidump(out / "hamiltonian.fcidump")
    assert torch.equal(again.hamiltonian.h1, saved.h1)
    rebuilt = system_module.rotate_orbitals(read_fcidump(path), built.orbitals.rotation)
    assert torch.allclose(permute_orbitals(rebuilt, again.order).h1, saved.h1, rtol=0, atol=1e-12)
    cases = {"do not fit": {**record, "rotation": [[1.0, 0.0], [0.0, 1.0]]},
             "without their rotation": {k: v for k, v in record.items() if k != "rotation"},
             "in the orbitals orbitals.json records": {**record, "rotation": np.eye(6).tolist()}}   # other orbitals
    for message, damaged in cases.items():
        (out / ORBITALS_FILE).write_text(json.dumps(damaged))
        calls = []
        real = system_module.choose_orbitals
        with monkeypatch.context() as patch:
            patch.setattr(system_module, "choose_orbitals", lambda *a, **k: calls.append(1) or real(*a, **k))
            caplog.clear()
            redone = run_system(MoleculeConfig(name="h6", fcidump=str(path), orbitals="natural"), out, resume=True,
                                references=False)
        assert calls == [1] and torch.equal(redone.hf_occupation, built.hf_occupation)
        assert message in caplog.text and "chosen again" in caplog.text
