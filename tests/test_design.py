"""docs/design.md is true of the code: every module, object and file it names exists, and the
tests mirror the packages as it says (one test module per module, or one named below)."""

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DESIGN = (ROOT / "docs" / "design.md").read_text()
PACKAGES = ("nnqs", "samplers", "hamiltonians", "experiments")

#: Modules whose tests live in a test module of another name: module -> test modules (from tests/).
TESTED_IN = {
    "hamiltonians/excitations.py": ["hamiltonians/test_kernel.py", "hamiltonians/test_compiled_kernel.py"],
    "hamiltonians/io/openfermion_io.py": ["hamiltonians/io/test_openfermion.py"],
    "hamiltonians/rdm_matrices.py": ["hamiltonians/test_rdm.py"],
    "hamiltonians/references/rdms.py": ["hamiltonians/test_rdm.py"],
    "hamiltonians/slater_condon_reference.py": ["hamiltonians/test_kernel.py"],
    "nnqs/app/callbacks.py": ["nnqs/app/test_run.py", "test_readme.py"],
    "nnqs/app/cli.py": ["nnqs/app/test_cli_run.py", "nnqs/app/test_cli_errors.py", "nnqs/app/test_cli_analyse.py",
                        "nnqs/app/test_cli_check_consistency.py"],
    "nnqs/app/io.py": ["nnqs/app/test_run.py", "nnqs/app/test_full_disk.py"],
    "nnqs/app/pyscf_states.py": ["nnqs/app/test_pyscf_solver.py"],
    "nnqs/app/reference_run.py": ["nnqs/app/test_references.py"],
    "nnqs/app/trained.py": ["nnqs/app/test_observables_trained.py"],
    "nnqs/errors.py": ["nnqs/app/test_cli_errors.py"],
    "nnqs/parallel/launch.py": ["nnqs/parallel/test_comm.py"],
    "nnqs/parallel/local.py": ["nnqs/parallel/test_comm.py"],
    "nnqs/pyscf.py": ["nnqs/app/test_pyscf_solver.py"],
    "nnqs/wavefunction/config.py": ["nnqs/wavefunction/test_model.py"],
    "nnqs/wavefunction/consistency.py": ["nnqs/app/test_cli_check_consistency.py"],
    "samplers/naive.py": ["samplers/test_bas.py"],
    "samplers/protocol.py": ["samplers/test_bas.py"],
}


def _resolves(dotted: str) -> bool:
    """Whether ``a.b.c`` is a module, or an attribute chain of the longest importable prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def named_objects(text: str) -> set[str]:
    """The dotted names in backticks that start with a project package."""
    names = set(re.findall(r"`((?:%s)(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`" % "|".join(PACKAGES), text))
    return {n for n in names if not n.endswith((".py", ".md", ".toml", ".json", ".csv"))}


def named_paths(text: str) -> set[str]:
    """The repository paths in backticks (containing a slash; ``nnqs/`` alone is a folder)."""
    return {p for p in re.findall(r"`([A-Za-z_][A-Za-z0-9_./-]*/[A-Za-z0-9_./-]*)`", text) if not p.startswith("/")}


def test_every_named_module_and_object_exists():
    pytest.importorskip("torch")
    missing = sorted(n for n in named_objects(DESIGN) if not _resolves(n))
    assert not missing, f"docs/design.md names what does not exist: {missing}"


def test_every_named_path_exists():
    missing = sorted(p for p in named_paths(DESIGN) if not (ROOT / p).exists())
    assert not missing, f"docs/design.md names paths that do not exist: {missing}"


def test_the_checks_can_fail():
    assert not _resolves("nnqs.training.no_such_module") and not _resolves("nnqs.training.state.NoSuchThing")
    assert _resolves("nnqs.training.state.VariationalState.expect_and_grad")
    assert named_objects("`nnqs.app.recipe` and `result.json`") == {"nnqs.app.recipe"}
    assert named_paths("`nnqs/app/run.py`, `/tmp/x`") == {"nnqs/app/run.py"}


def test_tests_mirror_the_packages():
    """Every library module has ``tests/<its folder>/test_<its name>.py`` or is in :data:`TESTED_IN`."""
    library = sorted(str(p.relative_to(ROOT)) for pkg in ("nnqs", "samplers", "hamiltonians")
                     for p in (ROOT / pkg).rglob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    unmirrored = []
    for module in library:
        path = Path(module)
        mirror = ROOT / "tests" / path.parent / f"test_{path.name}"
        if not mirror.is_file() and module not in TESTED_IN:
            unmirrored.append(module)
    assert not unmirrored, f"modules with no test module (add one, or name it in TESTED_IN): {unmirrored}"
    for module, tests in TESTED_IN.items():
        assert (ROOT / module).is_file(), f"TESTED_IN names {module}, which does not exist"
        for test in tests:
            assert (ROOT / "tests" / test).is_file(), f"TESTED_IN: {test} does not exist"
            assert not (ROOT / "tests" / Path(module).parent / f"test_{Path(module).name}").is_file(), \
                f"{module} has its own test module: drop it from TESTED_IN"


def test_file_map_names_every_library_file():
    """docs/design.md's "Reading the code" table names every library file, by its path or by a
    folder row (``hamiltonians/sci/``) that covers the files beneath it."""
    match = re.search(r"^## \d+\. Reading the code\n(.*?)(?=^## |\Z)", DESIGN, flags=re.S | re.M)
    assert match, "docs/design.md has no 'Reading the code' section"
    named, folders = set(), []
    for cell in re.findall(r"^\| (`[^|]+`) \|", match.group(1), flags=re.M):
        paths = re.findall(r"`([^`]+)`", cell)
        folder = Path(paths[0]).parent
        for p in paths:
            if p.endswith("/"):
                folders.append(p)
            else:
                named.add(str(folder / Path(p).name) if "/" not in p else p)
    for p in named:
        assert (ROOT / p).is_file(), f"docs/design.md's file map names {p}, which does not exist"
    for p in folders:
        assert (ROOT / p).is_dir(), f"docs/design.md's file map names {p}, which does not exist"
    library = {str(p.relative_to(ROOT)) for pkg in ("nnqs", "samplers", "hamiltonians")
               for p in (ROOT / pkg).rglob("*.py") if p.name not in ("__init__.py", "__main__.py")}
    missing = sorted(f for f in library - named if not any(f.startswith(d) for d in folders))
    assert not missing, f"files missing from docs/design.md's file map: {missing}"
