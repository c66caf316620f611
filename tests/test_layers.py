"""The import graph obeys docs/design.md §2: arrows one way between layers, no circles.

Read with ``ast`` from the source files, so an import inside a function counts too.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("nnqs", "samplers", "hamiltonians")

#: The parts of the hamiltonians package (below), every one of which nnqs may use.
HAMILTONIANS = {"hamiltonians", "hamiltonians.io", "hamiltonians.references", "hamiltonians.sci"}
# What each part of the project may import from the project (itself always allowed).
ALLOWED = {
    "nnqs.errors": set(),   # the error classes, which every layer of nnqs may raise
    "nnqs.examples": set(),   # the example configs (package data) and where they lie
    "nnqs.wavefunction": {"nnqs.errors"},
    "nnqs.parallel": {"nnqs.errors"},
    "nnqs.training": {"nnqs.errors", "nnqs.wavefunction", "nnqs.parallel", "samplers", *HAMILTONIANS},
    "nnqs.app": {"nnqs.errors", "nnqs.examples", "nnqs.wavefunction", "nnqs.parallel", "nnqs.training", "samplers",
                 *HAMILTONIANS},
    "nnqs": {"nnqs.errors", "nnqs.wavefunction", "nnqs.app"},  # the root package re-exports; __main__ runs the CLI
    "samplers": set(),
    # hamiltonians: the kernels and local energies at the bottom; file I/O on them; the references
    # (PySCF, block2) on both; selected CI on the kernels alone
    "hamiltonians": set(),
    "hamiltonians.io": {"hamiltonians"},
    "hamiltonians.references": {"hamiltonians", "hamiltonians.io"},
    "hamiltonians.sci": {"hamiltonians"},
}
#: Package roots that re-export their subpackages' public names (``from hamiltonians import from_pyscf``).
ROOT_EXPORTS = {"hamiltonians": {"hamiltonians.io", "hamiltonians.references"}}
#: Heavy optional libraries: imported only inside the functions that need them.
LAZY = ("pyscf", "openfermion", "block2", "pyblock2")
#: Modules that are PySCF objects (a solver subclasses ``pyscf.lib.StreamObject``), reached only
#: through ``nnqs.pyscf``, which a user imports to use PySCF.
LAZY_EXEMPT = {"nnqs/app/pyscf_solver.py"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def part_of(module: str) -> str:
    """The most specific key of ``ALLOWED`` that ``module`` lies in."""
    return max((k for k in ALLOWED if module == k or module.startswith(k + ".")), key=len)


def imports(tree: ast.Module, *, top_level_only: bool) -> list[tuple[str, int]]:
    """``(imported module, line)`` of every import (only those run at import time if asked)."""
    nodes = ast.walk(tree)
    if top_level_only:
        nodes = [n for stmt in tree.body if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                 for n in ast.walk(stmt)]
        nodes += [n for cls in tree.body if isinstance(cls, ast.ClassDef) for stmt in cls.body
                  if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(stmt)]
    found = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from a import b` imports module a.b if there is one, else names of module a.
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.append((sub if sub in KNOWN else node.module, node.lineno))
    return found


def sources():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path, module_name(path), ast.parse(path.read_text(), str(path))


KNOWN = {module for _, module, _ in sources()}


def test_arrows_point_one_way():
    bad = []
    for path, module, tree in sources():
        here = part_of(module)
        for target, line in imports(tree, top_level_only=False):
            if target.split(".")[0] not in PACKAGES:
                continue
            there = part_of(target)
            if there != here and there not in ALLOWED[here] | ROOT_EXPORTS.get(module, set()):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {here} imports {target}")
    assert not bad, "\n".join(bad)


def test_heavy_libraries_are_imported_lazily():
    bad = [f"{path.relative_to(ROOT)}:{line}: {target}"
           for path, _, tree in sources() for target, line in imports(tree, top_level_only=True)
           if target.split(".")[0] in LAZY and str(path.relative_to(ROOT)) not in LAZY_EXEMPT]
    assert not bad, "\n".join(bad)


def test_no_import_circles():
    graph = {}
    for _, module, tree in sources():
        graph[module] = set()
        for target, _ in imports(tree, top_level_only=False):
            graph[module].add(target)
    circles = []

    def visit(node, stack, on_stack, done):
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt in on_stack:
                circles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in done and nxt in graph:
                visit(nxt, stack, on_stack, done)
        on_stack.discard(node)
        stack.pop()
        done.add(node)

    done: set = set()
    for node in sorted(graph):
        if node not in done:
            visit(node, [], set(), done)
    assert not circles, "\n".join(circles)


def test_the_arrows_can_fail():
    """A kernel that imported selected CI, or selected CI that imported the file I/O, is caught."""
    assert part_of("hamiltonians.molecular") == "hamiltonians" and part_of("hamiltonians.sci.grow") == "hamiltonians.sci"
    assert "hamiltonians.sci" not in ALLOWED["hamiltonians"] and "hamiltonians.io" not in ALLOWED["hamiltonians.sci"]
    assert "hamiltonians.io" not in ALLOWED["hamiltonians"] | ROOT_EXPORTS.get("hamiltonians.rdm", set())


@pytest.mark.parametrize("rule", sorted(ALLOWED))
def test_every_layer_has_modules(rule):
    """The rules name real packages (a renamed folder must not silently disable them)."""
    assert any(m == rule or m.startswith(rule + ".") for m in KNOWN)


#: The application runs the start through its object and nothing else of training's internals:
#: no fit, no CI target, no local energies or estimators of its own.
APP_MAY_NOT_IMPORT = ("nnqs.training.fit", "nnqs.training.estimators", "nnqs.training.sr", "hamiltonians.sci.spaces",
                      "hamiltonians.local_energy")
#: ... and from the start and the trainer only their public names (no ``_private`` ones).
def test_the_application_holds_no_training_logic():
    bad = []
    for path, module, tree in sources():
        if part_of(module) != "nnqs.app":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [alias.name for alias in node.names]
                if node.module in APP_MAY_NOT_IMPORT or any(f"{node.module}.{n}" in APP_MAY_NOT_IMPORT for n in names):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports {node.module} {names}")
                if node.module.startswith("nnqs.training") and any(n.startswith("_") for n in names):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports private {names} of {node.module}")
            elif isinstance(node, ast.Import):
                bad += [f"{path.relative_to(ROOT)}:{node.lineno}: imports {a.name}" for a in node.names
                        if a.name in APP_MAY_NOT_IMPORT]
    assert not bad, "\n".join(bad)


def test_the_rule_above_can_fail(tmp_path):
    tree = ast.parse("from nnqs.training.fit import fit_to_state\nfrom nnqs.training.start import _auto_cas\n")
    names = [(n.module, [a.name for a in n.names]) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert names[0][0] in APP_MAY_NOT_IMPORT and names[1][1][0].startswith("_")
