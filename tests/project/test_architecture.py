"""The grader's wings and what may import what (docs/ARCHITECTURE.md draws it).

Every import inside ``grader/`` is read from the source (module level and inside
functions), so an arrow hidden in a function counts like any other.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from grader.engine import paths

PACKAGE = paths.PACKAGE
WINGS = ("engine", "sandbox", "classroom", "authoring", "lab")
# wing -> the wings it may import (besides itself). Nothing imports the command line (grader.cli).
ALLOWED = {
    "sandbox": set(),                  # the worker side: nothing of the trusted side, ever
    "engine": {"sandbox"},             # the trusted session talks to workers through sandbox.protocol
    "lab": {"engine"},                 # notebooks read notebooks the way the grader does
    "classroom": {"engine"},
    "authoring": {"engine", "lab"},
    "cli": {"engine", "classroom", "authoring"},
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path):
    """(imported module, line, whether inside a function, the line's text) of every grader import."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source)
    here = _module_name(path)
    package = here if path.name == "__init__.py" else here.rsplit(".", 1)[0]
    local = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            local.update(id(n) for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            names = [f"{mod}.{a.name}" if _is_module(f"{mod}.{a.name}") else mod for a in node.names]
        else:
            continue
        for name in names:
            if name == "grader" or name.startswith("grader."):
                yield name, node.lineno, id(node) in local, lines[node.lineno - 1]


def _is_module(name: str) -> bool:
    base = PACKAGE.parent.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _wing(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "top"


SOURCES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
GRAPH = {_module_name(p): list(_imports(p)) for p in SOURCES}


def test_every_module_sits_in_a_wing():
    loose = [m for m in GRAPH if _wing(m) not in (*WINGS, "top", "cli", "__main__")]
    assert not loose, f"modules outside the wings: {loose}"
    assert {m for m in GRAPH if m.count(".") == 1 and not _is_package(m)} <= {"grader.cli", "grader.__main__"}


def _is_package(module: str) -> bool:
    return (PACKAGE.parent.joinpath(*module.split(".")) / "__init__.py").is_file()


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_a_wing_imports_only_the_wings_it_may(module):
    wing = _wing(module)
    if wing in ("top", "__main__"):
        return
    allowed = ALLOWED[wing] | {wing}
    bad = [(name, line) for name, line, _, _ in GRAPH[module]
           if _wing(name) not in allowed and name != "grader"]
    assert not bad, f"{module} ({wing}) imports {bad}; {wing} may import only {sorted(allowed)}"


def test_no_import_circle_between_modules():
    edges = {m: {n for n, _, _, _ in GRAPH[m] if n in GRAPH and n != m} for m in GRAPH}
    state, path = {}, []

    def visit(m):
        state[m] = "open"
        path.append(m)
        for n in sorted(edges[m]):
            if state.get(n) == "open":
                raise AssertionError("import circle: " + " -> ".join(path[path.index(n):] + [n]))
            if n not in state:
                visit(n)
        path.pop()
        state[m] = "done"

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)


def test_a_function_local_import_says_why():
    """An import inside a function hides an arrow: allowed for start-up time or fork safety, said on its line."""
    silent = [f"{m}:{line}" for m in GRAPH for _, line, inside, text in GRAPH[m] if inside and "#" not in text]
    assert not silent, f"function-local grader imports without a comment saying why: {silent}"


def test_no_grading_without_the_boundary_in_the_product():
    hits = [str(p) for p in SOURCES + [paths.SCHEMA] if "inprocess" in p.read_text(encoding="utf-8").lower()]
    assert not hits


def test_ruff_passes():
    """The lint configuration of pyproject.toml holds for the whole repository."""
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(paths.ROOT)],
                          cwd=paths.ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
