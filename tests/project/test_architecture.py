"""The grader's wings and what may import what (docs/ARCHITECTURE.md draws it).

Every import inside ``grader/`` is read from the source (module level and inside
functions), so an arrow hidden in a function counts like any other.
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grader.engine import paths

PACKAGE = paths.PACKAGE
WINGS = ("engine", "sandbox", "classroom", "authoring", "lab", "i18n")
# wing -> the wings it may import (besides itself). Nothing imports the command line (grader.cli).
ALLOWED = {
    "sandbox": set(),                  # the worker side: nothing of the trusted side, ever
    "i18n": set(),                     # the message catalogue: what every other trusted wing says with
    "engine": {"sandbox", "i18n"},     # the trusted session talks to workers through sandbox.protocol
    "lab": {"engine", "i18n"},         # notebooks read notebooks the way the grader does
    "classroom": {"engine", "i18n"},
    "authoring": {"engine", "lab", "i18n"},
    "cli": {"engine", "classroom", "authoring", "i18n"},
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


MAX_FUNCTION_LINES = 60


def _long_functions(source: str) -> list:
    """(name, first line, lines) of each function or method of ``source`` longer than MAX_FUNCTION_LINES, counted
    as a linter counts them: from its ``def`` to its last line, docstring included (decorators not)."""
    return [(node.name, node.lineno, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]


def test_the_length_of_a_function_is_counted_from_its_def_to_its_last_line():
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES - 3))
    fits = f"@decorated\ndef fits():\n    \"\"\"Doc.\"\"\"\n{body}    return 0\n"
    nested = f"class C:\n    def method(self):\n        def inner():\n{textwrap.indent(body, '        ')}" \
             f"            return 1\n        return inner\n"
    assert _long_functions(fits) == []
    assert _long_functions(fits.replace("return 0", "x = 1\n    return 0")) == [("fits", 2, MAX_FUNCTION_LINES + 1)]
    assert _long_functions(nested) == [("method", 2, MAX_FUNCTION_LINES + 1)]


def test_no_function_of_the_grader_is_over_60_lines():
    """A teaching assistant reads a function on one screen: a longer one is split into helpers named for what
    they do."""
    long = [f"{p.relative_to(PACKAGE.parent)}:{line} {name} ({n} lines)"
            for p in SOURCES for name, line, n in _long_functions(p.read_text(encoding="utf-8"))]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_no_grading_without_the_boundary_in_the_product():
    hits = [str(p) for p in SOURCES + [paths.SCHEMA] if "inprocess" in p.read_text(encoding="utf-8").lower()]
    assert not hits


def test_ruff_passes():
    """The lint configuration of pyproject.toml holds for the whole repository."""
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(paths.ROOT)],
                          cwd=paths.ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


# ---------------------------------------------------------------- docs/ARCHITECTURE.md's table of the wings

def _without_parentheses(text: str) -> str:
    out, depth = [], 0
    for ch in text:
        depth += ch == "("
        if depth == 0:
            out.append(ch)
        depth -= ch == ")" and depth > 0
    return "".join(out)


def _documented() -> dict:
    """wing -> the names its row of the table lists (descriptions in parentheses left out): modules, and
    folders with a trailing slash."""
    rows = {}
    for line in (paths.ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`") and cells[0].strip("`").rstrip("/") in WINGS:
            rows[cells[0].strip("`").rstrip("/")] = set(re.findall(r"`([^`]+)`", _without_parentheses(cells[2])))
    return rows


def _in_the_tree(wing: str) -> set:
    folder = PACKAGE / wing
    modules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    folders = {f"{p.name}/" for p in folder.iterdir() if p.is_dir() and p.name != "__pycache__"}
    return modules | folders


def test_the_architecture_table_lists_every_module_of_every_wing():
    """A module (or a folder) added or removed without its line in docs/ARCHITECTURE.md fails here."""
    table = _documented()
    assert sorted(table) == sorted(WINGS)
    for wing in WINGS:
        listed = {name for name in table[wing] if name.count("/") <= 1}     # templates/github/ is inside templates/
        missing, stale = _in_the_tree(wing) - listed, listed - _in_the_tree(wing)
        assert not missing and not stale, \
            f"{wing}/: not in the table {sorted(missing)}, not in the tree {sorted(stale)}"


def test_every_module_has_its_tests_named_in_the_projects_test_index():
    """tests/project/README.md maps each module of grader/ to the files that test it; each file it names exists."""
    index = (paths.ROOT / "tests" / "project" / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`([a-z0-9_]+/[a-z_]+/?|cli|__main__)`", index))  # a wing's name may hold digits: i18n
    modules = {m.removeprefix("grader.").replace(".", "/") for m in GRAPH if _wing(m) in WINGS and m.count(".") == 2}
    folders = {f"{w}/{p.name}/" for w in WINGS for p in (PACKAGE / w).iterdir()
               if (p / "__init__.py").is_file()}
    missing = sorted((modules | folders | {"cli", "__main__"}) - named)
    assert not missing, f"not in tests/project/README.md: {missing}"
    files = set(re.findall(r"`(test_[a-z0-9_]+\.py)`", index))
    assert not [f for f in files if not (paths.ROOT / "tests" / "project" / f).is_file()]
