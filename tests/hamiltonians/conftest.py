"""Shared molecules for the hamiltonians tests (STO-3G, built once per session)."""

import pytest

GEOMETRIES = {
    "H2": "H 0 0 0; H 0 0 0.7414",
    "LiH": "Li 0 0 0; H 0 0 1.5949",
    "H2O": "O 0 0 0; H 0 0.757 0.587; H 0 -0.757 0.587",
    "CH2": "C 0 0 0; H 0 0.9345 0.6505; H 0 -0.9345 0.6505",
}


@pytest.fixture(scope="session")
def molecules():
    from hamiltonians import from_pyscf

    cache = {}

    def get(name, **kw):
        key = (name, tuple(sorted(kw.items())))
        if key not in cache:
            cache[key] = from_pyscf(GEOMETRIES[name], kw.pop("basis", "sto-3g"), **kw)
        return cache[key]

    return get
