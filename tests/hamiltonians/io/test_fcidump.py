"""FCIDUMP round trip, PySCF compatibility, and every malformed case naming its line."""

import numpy as np
import pytest
import torch

from hamiltonians import FCIDUMPError, read_fcidump, write_fcidump
from hamiltonians.exact import ground_state_energy

GOOD = """ &FCI NORB=   2,NELEC=2,MS2=0,
  ORBSYM=1,1,
  ISYM=1,
 &END
 0.6757101548035162    1    1    1    1
 0.1809311997842379    2    1    2    1
 0.6645817302552968    2    2    1    1
 0.6985613499177    2    2    2    2
 -1.252477303982924    1    1    0    0
 -0.4759344611440753    2    2    0    0
 0.7199689944489797    0    0    0    0
"""


def test_round_trip_identical(molecules, tmp_path):
    H = molecules("LiH")
    path = tmp_path / "LIH.FCIDUMP"
    write_fcidump(H, path)
    H2 = read_fcidump(path)
    assert (H2.n_orbitals, H2.n_alpha, H2.n_beta) == (H.n_orbitals, H.n_alpha, H.n_beta)
    assert torch.equal(H2.h1, H.h1) and torch.equal(H2.eri, H.eri)
    assert H2.constant == H.constant
    assert ground_state_energy(H2) == pytest.approx(ground_state_energy(H), abs=1e-12)
    assert H2.hf_energy() == H.hf_energy()


def test_open_shell_round_trip(molecules, tmp_path):
    H = molecules("CH2", spin=2)
    write_fcidump(H, tmp_path / "f")
    H2 = read_fcidump(tmp_path / "f")
    assert (H2.n_alpha, H2.n_beta) == (5, 3)
    assert torch.equal(H2.eri, H.eri)


def test_pyscf_compatibility(molecules, tmp_path):
    from pyscf.tools import fcidump

    H = molecules("H2O")
    h1, eri = H.h1.numpy(), H.eri.numpy()
    fcidump.from_integrals(str(tmp_path / "pyscf"), h1, eri, H.n_orbitals, H.n_electrons, H.constant)
    ours = read_fcidump(tmp_path / "pyscf")
    assert torch.allclose(ours.eri, H.eri, atol=1e-14) and torch.allclose(ours.h1, H.h1, atol=1e-14)
    write_fcidump(H, tmp_path / "ours")
    back = fcidump.read(str(tmp_path / "ours"))
    assert back["NORB"] == H.n_orbitals and back["NELEC"] == H.n_electrons
    np.testing.assert_array_equal(back["H1"], h1)
    from pyscf import ao2mo

    np.testing.assert_allclose(ao2mo.restore(1, back["H2"], H.n_orbitals), eri, atol=0, rtol=0)
    assert back["ECORE"] == H.constant


def test_good_minimal_file(tmp_path):
    p = tmp_path / "good"
    p.write_text(GOOD)
    H = read_fcidump(p)
    assert H.eri[0, 1, 0, 1] == H.eri[1, 0, 1, 0] == pytest.approx(0.1809311997842379)
    assert H.constant == pytest.approx(0.7199689944489797)


def _replace(text, old, new):
    assert old in text
    return text.replace(old, new, 1)


BAD = {
    "no header": (lambda t: t.split("&END\n", 1)[1], 1, "&FCI"),
    "unterminated header": (lambda t: _replace(t, " &END\n", ""), 10, "&END"),
    "missing NORB": (lambda t: _replace(t, "NORB=   2,", ""), 4, "NORB"),
    "missing NELEC": (lambda t: _replace(t, "NELEC=2,", ""), 4, "NELEC"),
    "malformed NORB": (lambda t: _replace(t, "NORB=   2", "NORB=two"), 1, "NORB"),
    "malformed line": (lambda t: _replace(t, "    2    1    2    1", "    2    1    2"), 6, "malformed"),
    "non-numeric value": (lambda t: _replace(t, "0.6645817302552968", "0.66x"), 7, "malformed"),
    "nan": (lambda t: _replace(t, "0.6985613499177", "nan"), 8, "non-finite"),
    "inf": (lambda t: _replace(t, "-1.252477303982924", "-inf"), 9, "non-finite"),
    "index out of range": (lambda t: _replace(t, "    2    2    0    0", "    3    2    0    0"), 10, "range"),
    "negative index": (lambda t: _replace(t, "    2    2    0    0", "   -1    2    0    0"), 10, "range"),
    "NELEC too big": (lambda t: _replace(t, "NELEC=2", "NELEC=5"), 1, "NELEC"),
    "MS2 parity": (lambda t: _replace(t, "MS2=0", "MS2=1"), 1, "MS2"),
    "MS2 too big": (lambda t: _replace(t, "NELEC=2,MS2=0", "NELEC=4,MS2=2"), 1, "fit"),
    "ORBSYM length": (lambda t: _replace(t, "ORBSYM=1,1,", "ORBSYM=1,"), 2, "ORBSYM"),
    "bad index pattern": (lambda t: _replace(t, "    2    2    0    0", "    2    0    2    0"), 10, "pattern"),
    "no integrals": (lambda t: t.split("&END\n")[0] + "&END\n", 4, "no integrals"),
    "cut at a line boundary": (lambda t: t.rsplit(" 0.7199689944489797", 1)[0], 10, "core-energy"),
    "conflicting symmetric duplicate": (lambda t: _replace(t, " 0.7199689944489797", " 0.5 1 2 1 2\n 0.7199689944489797"),
                                        11, "contradicts line 6"),
    "second core energy": (lambda t: t + " 0.1 0 0 0 0\n", 12, "second core energy"),
    "unrestricted": (lambda t: _replace(t, "  ISYM=1,", "  ISYM=1,\n  IUHF=1,"), 4, "unrestricted"),
    "complex value": (lambda t: _replace(t, " 0.6645817302552968    2    2    1    1",
                                         " (0.66,0.01)    2    2    1    1"), 7, "complex"),
    "non-symmetric one-body": (lambda t: _replace(t, " 0.7199689944489797", " -0.3 1 2 0 0\n -0.2 2 1 0 0\n 0.7199689944489797"),
                               12, "contradicts line 11"),
    "NORB above the orbitals used": (lambda t: _replace(_replace(t, "NORB=   2", "NORB=   3"), "ORBSYM=1,1,", "ORBSYM=1,1,1,"),
                                     1, "NORB=3, but no integral uses an orbital above 2"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_raises_with_line(tmp_path, case):
    edit, line, word = BAD[case]
    p = tmp_path / "bad.fcidump"
    p.write_text(edit(GOOD))
    with pytest.raises(FCIDUMPError) as info:
        read_fcidump(p)
    msg = str(info.value)
    assert msg.startswith(f"{p}:{line}: "), msg
    assert word.lower() in msg.lower(), msg
    assert info.value.line == line
    assert isinstance(info.value, ValueError)


def test_missing_file(tmp_path):
    with pytest.raises(FCIDUMPError, match="no such file") as info:
        read_fcidump(tmp_path / "nope")
    assert str(tmp_path / "nope") in str(info.value)


@pytest.mark.parametrize("variant", ["molpro slash terminator", "fortran D exponents", "crlf", "repeated equal values"])
def test_what_real_writers_produce_is_accepted(tmp_path, variant):
    text = {
        "molpro slash terminator": GOOD.replace(" &END\n", " /\n"),
        "fortran D exponents": GOOD.replace("0.6757101548035162", "0.6757101548035162D+00")
                                   .replace("-1.252477303982924", "-1.252477303982924d0"),
        "crlf": GOOD.replace("\n", "\r\n"),
        "repeated equal values": GOOD.replace(" 0.7199689944489797", " 0.1809311997842379 1 2 1 2\n 0.7199689944489797"),
    }[variant]
    p = tmp_path / "f"
    p.write_bytes(text.encode())
    H = read_fcidump(p)
    ref = tmp_path / "ref"
    ref.write_text(GOOD)
    R = read_fcidump(ref)
    assert torch.equal(H.eri, R.eri) and torch.equal(H.h1, R.h1) and H.constant == R.constant


def test_other_header_keys_are_accepted_and_named(tmp_path, caplog):
    """Symmetry and occupation fields the reader does not use: the same Hamiltonian, a warning
    naming them; ORBSYM and ISYM are kept for writing back."""
    p = tmp_path / "sym.fcidump"
    p.write_text(_replace(GOOD, "  ISYM=1,", "  ISYM=1,\n  PNTGRP='D2H', OCC=1,0,"))
    plain = tmp_path / "plain.fcidump"
    plain.write_text(GOOD)
    H, reference = read_fcidump(p), read_fcidump(plain)
    assert torch.equal(H.h1, reference.h1) and torch.equal(H.eri, reference.eri)
    assert "OCC, PNTGRP" in caplog.text and H.source["orbsym"] == [1, 1] and H.source["isym"] == 1
