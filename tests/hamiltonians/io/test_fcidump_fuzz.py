"""Fuzzing the FCIDUMP reader: damaged files either read or raise FCIDUMPError, nothing else."""

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from hamiltonians import FCIDUMPError, MolecularHamiltonian, read_fcidump  # noqa: E402
from tests.hamiltonians.io.test_fcidump import GOOD  # noqa: E402

FUZZ = settings(max_examples=150, derandomize=True, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def read_or_reject(tmp_path, data: bytes):
    path = tmp_path / "fuzz.fcidump"
    path.write_bytes(data)
    try:
        H = read_fcidump(path)
    except FCIDUMPError as error:
        assert str(error).startswith(str(path)) and "\n" not in str(error)
        return None
    assert isinstance(H, MolecularHamiltonian)
    return H


@FUZZ
@given(cut=st.integers(0, len(GOOD.encode())))
def test_truncations(tmp_path, cut):
    H = read_or_reject(tmp_path, GOOD.encode()[:cut])
    core_line = " 0.7199689944489797\n"
    if cut <= len(GOOD.encode()) - len(core_line):  # cut before the core-energy line: detected
        assert H is None


@FUZZ
@given(flips=st.lists(st.tuples(st.integers(0, len(GOOD.encode()) - 1), st.integers(0, 255)), min_size=1, max_size=4))
def test_byte_flips(tmp_path, flips):
    data = bytearray(GOOD.encode())
    for at, byte in flips:
        data[at] = byte
    read_or_reject(tmp_path, bytes(data))


@FUZZ
@given(ops=st.lists(st.tuples(st.sampled_from(["delete", "duplicate", "swap"]), st.integers(0, 50)), min_size=1,
                    max_size=4))
def test_deleted_duplicated_and_swapped_lines(tmp_path, ops):
    lines = GOOD.splitlines()
    for op, k in ops:
        k %= len(lines)
        if op == "delete" and len(lines) > 1:
            del lines[k]
        elif op == "duplicate":
            lines.insert(k, lines[k])
        else:
            lines[k], lines[-1] = lines[-1], lines[k]
    read_or_reject(tmp_path, ("\n".join(lines) + "\n").encode())


@FUZZ
@given(header=st.text(alphabet=st.sampled_from(list("&FCIENDORBLSYM=,/ 0123456789-+.\n")), max_size=80))
def test_random_headers(tmp_path, header):
    body = GOOD.split("&END\n", 1)[1]
    read_or_reject(tmp_path, (header + "\n" + body).encode())
