"""starter/ is generated from solutions/, stays in sync, and gives nothing away."""
import ast
import importlib.util
import inspect
import sys

import pytest

from grader.authoring import starter
from grader.engine import paths, stages

SOLUTION_FILES = sorted(paths.SOLUTIONS.glob("a[0-9][0-9]_*.py"))


def test_starter_is_up_to_date_with_solutions():
    assert starter.out_of_date() == [], "run `make starter` and commit starter/"


@pytest.mark.parametrize("path", SOLUTION_FILES, ids=lambda p: p.stem)
def test_no_solution_line_survives(path):
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    outside, inside = set(), []
    cursor = 0
    for start, end, _, _ in starter.regions(source, path.name):
        outside.update(l.strip() for l in lines[cursor:start])
        inside += [l.strip() for l in lines[start + 1:end]]
        cursor = end + 1
    outside.update(l.strip() for l in lines[cursor:])
    generated = {l.strip() for l in (paths.STARTER / path.name).read_text(encoding="utf-8").splitlines()}
    leaked = [l for l in inside if l and not l.startswith("#") and len(l) >= 8 and l not in outside and l in generated]
    assert not leaked, f"solution lines in starter/{path.name}: {leaked[:3]}"


def _functions_with_regions(path):
    """(qualified name, def node) of every function whose body holds a solution region."""
    source = path.read_text(encoding="utf-8")
    starts = {s + 1 for s, _, _, _ in starter.regions(source, path.name)}
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and any(item.lineno < l <= item.end_lineno for l in starts):
                    found.append((f"{node.name}.{item.name}", item))
        elif isinstance(node, ast.FunctionDef) and node.col_offset == 0:
            if any(node.lineno < l <= node.end_lineno for l in starts):
                found.append((node.name, node))
    return found


def _load_starter(name):
    sys.path.insert(0, str(paths.STARTER))
    try:
        spec = importlib.util.spec_from_file_location(f"starter_{name}", stages.get(name).starter)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(paths.STARTER))


@pytest.mark.parametrize("path", SOLUTION_FILES, ids=lambda p: p.stem)
def test_every_starter_function_raises_not_implemented(path):
    module = _load_starter(path.stem)
    functions = _functions_with_regions(path)
    assert functions, f"{path.name} has no solution region"
    for qualname, _ in functions:
        owner_name, _, method = qualname.rpartition(".")
        if owner_name:
            cls = getattr(module, owner_name)
            fn = getattr(cls, method)
        else:
            fn = getattr(module, qualname)
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        args = [None] * len(params)
        kwargs = {p.name: None for p in inspect.signature(fn).parameters.values()
                  if p.kind is p.KEYWORD_ONLY and p.default is p.empty}
        with pytest.raises(NotImplementedError):
            if method == "__init__":
                cls(*args[1:], **kwargs)
            elif owner_name:
                fn(object.__new__(cls), *args[1:], **kwargs)
            else:
                fn(*args, **kwargs)
