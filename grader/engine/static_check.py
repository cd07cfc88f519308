"""Reading a submission's source (never running it): forbidden APIs, and reaching around the grader.

The worker refuses forbidden calls as they happen (grader/sandbox/forbid.py), but the student's module runs
first in that worker and could rewrite what refuses them. What is read here cannot be rewritten: the trusted
side reads every file of the submission that a stage's worker imports.

* :func:`scan`: the stage's forbidden APIs, with import aliases resolved (``import torch.nn.functional as F``
  makes ``F.scaled_dot_product_attention`` recognised while a student's own method of that name is not).
* :func:`reach_arounds`: what correct code never needs and undoing the rules does (docs/TRUST.md): walking
  frames, closures and globals, the garbage collector, ctypes, building or running code at run time,
  ``sys.modules``, the grader's own modules, torch's dispatcher, and ``getattr`` with a name computed at run
  time (where the static reading cannot follow it). A stage whose files do any of these is scored as if it
  used a forbidden API. Code the course provides (the same line in the starter) is not counted.
"""
from __future__ import annotations

import ast
import functools
import os
import re

from ..i18n import tr

# Attributes that expose frames, closures, globals, code or the interpreter's internals.
REACHING_ATTRIBUTES = {"__closure__", "cell_contents", "__wrapped__", "__globals__", "__code__", "__builtins__",
                       "__subclasses__", "__getattribute__", "__import__", "__loader__", "f_back", "f_globals",
                       "f_locals", "f_code", "f_builtins", "tb_frame", "gi_frame", "cr_frame", "ag_frame"}
# Modules (and names in them) whose use reaches around the rules; a name listed means the module is otherwise fine.
REACHING_MODULES = ("gc", "ctypes", "_ctypes", "cffi", "inspect", "importlib", "runpy", "code", "codeop", "marshal",
                    "pickle", "_pickle", "dill", "cloudpickle", "copyreg", "builtins", "__builtin__", "grader",
                    "sys.modules", "sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile",
                    "sys.meta_path", "sys.path_hooks", "sys.path_importer_cache", "threading.settrace",
                    "threading.setprofile", "types.FunctionType", "types.CodeType", "types.LambdaType",
                    "types.FrameType", "torch._C", "torch.ops", "torch.library", "torch.overrides",
                    "torch.utils.cpp_extension", "torch.utils._python_dispatch", "numpy.ctypeslib")
DYNAMIC_BUILTINS = {"exec", "eval", "compile", "__import__", "globals", "vars", "breakpoint"}
NAME_FACTORIES = {"operator.attrgetter", "operator.methodcaller"}  # objects that look attributes up by name
CHANGEABLE_LIBRARY_STATE = ("torch.backends",)  # library attributes a correct module may set (flags, not code)
NAME_TAKERS = {"getattr", "setattr", "delattr"}  # builtins whose second argument is an attribute's name
SELF_NAMES = {"self", "cls"}
_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")  # a plain name: no leading underscore, so no dunder


def _aliases(nodes) -> dict:
    """Local name -> the dotted module path it was imported as (``nodes``: a tree's, :func:`_parsed`)."""
    aliases = {}
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def _dotted(node, aliases):
    """'torch.nn.functional.x' for an attribute chain rooted at an imported name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id in aliases:
        return ".".join([aliases[node.id], *reversed(parts)])
    return None


def _matches(dotted: str, banned: str) -> bool:
    return dotted == banned or dotted.startswith(banned + ".")


@functools.lru_cache(maxsize=256)
def _parsed(source: str):
    """Every node of the tree of ``source`` (in ``ast.walk``'s order), parsed and walked once a process: every
    stage's worker scans the earlier stages' files again, and each reading below goes over all the nodes
    (nothing here changes a tree). None when it does not parse."""
    try:
        return tuple(ast.walk(ast.parse(source)))
    except (SyntaxError, ValueError):
        return None  # the import will report it


def _imported_names(nodes):
    """(node, dotted name) of every module or name an import statement brings in."""
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node, a.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                yield node, node.module
                yield node, f"{node.module}.{a.name}"


def _used_names(nodes, aliases):
    """(node, dotted name) of every imported name and attribute chain the code uses."""
    yield from _imported_names(nodes)
    for node in nodes:
        if isinstance(node, ast.Attribute):
            dotted = _dotted(node, aliases)
            if dotted:
                yield node, dotted
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in aliases:
            yield node, aliases[node.id]


def scan(source: str, filename: str, forbidden: list) -> list:
    """Lines like 'a05_encoder.py:12 uses torch.nn.MultiheadAttention'."""
    nodes = _parsed(source) if forbidden else None
    if nodes is None:
        return []
    hits = {}
    for node, dotted in _used_names(nodes, _aliases(nodes)):
        banned = next((b for b in forbidden if _matches(dotted, b)), None)
        if banned is not None:
            hits[(node.lineno, banned)] = tr("{filename}:{line} uses {banned}, which this stage forbids",
                                             filename=filename, line=node.lineno, banned=banned)
    return [hits[k] for k in sorted(hits)]


# ---------------------------------------------------------------- reaching around

def _rooted_at_self(node) -> bool:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return isinstance(node, ast.Name) and node.id in SELF_NAMES


def _literal_names(nodes) -> dict:
    """Loop variables that only take plain identifier strings from a literal tuple or list
    (``for name in ("w_q", "w_k"): getattr(layer, name)``) -> those strings."""
    names, tainted = {}, set()
    for node in nodes:
        if isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name):
            values = node.iter.elts if isinstance(node.iter, (ast.Tuple, ast.List)) else None
            if values is not None and all(isinstance(v, ast.Constant) and isinstance(v.value, str)
                                          and _IDENTIFIER.match(v.value) for v in values):
                names.setdefault(node.target.id, set()).update(v.value for v in values)
            else:
                tainted.add(node.target.id)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            tainted.update(t.id for t in targets if isinstance(t, ast.Name))
    return {k: v for k, v in names.items() if k not in tainted}


@functools.lru_cache(maxsize=256)
def _reaching_in(source: str) -> tuple:
    """((line number, what) for each way around the rules in ``source``), read once a process (the course's
    files and the earlier stages' are read again by every stage's worker)."""
    nodes = _parsed(source)
    return () if nodes is None else tuple((node.lineno, what) for node, what in _reaching(nodes, _aliases(nodes)))


def _reaching(nodes, aliases) -> list:
    """[(node, what)] for each way around the rules in the tree whose nodes are ``nodes``."""
    found = []
    literal = _literal_names(nodes)
    calls = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
    for node, dotted in _used_names(nodes, aliases):
        banned = next((m for m in REACHING_MODULES if _matches(dotted, m)), None)
        if banned is not None:
            found.append((node, banned))
    for node in nodes:
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            changed = _changed_library(node.value, aliases)
            if changed:
                found.append((node, tr("changes {what}", what=changed)))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in REACHING_ATTRIBUTES:
            found.append((node, node.value))
        elif isinstance(node, ast.Call) and _dotted(node.func, aliases) in NAME_FACTORIES and not all(
                isinstance(a, ast.Constant) for a in node.args):
            found.append((node, tr("{name} with a name computed at run time", name=_dotted(node.func, aliases))))
        elif isinstance(node, ast.Attribute) and node.attr in REACHING_ATTRIBUTES:
            found.append((node, node.attr))
        elif isinstance(node, ast.Attribute) and node.attr == "__dict__" and not _rooted_at_self(node.value):
            found.append((node, "__dict__"))
        elif isinstance(node, ast.Name) and node.id in REACHING_ATTRIBUTES and node.id not in aliases:
            found.append((node, node.id))
        elif isinstance(node, ast.Name) and node.id in DYNAMIC_BUILTINS | NAME_TAKERS and node.id not in aliases:
            if id(node) not in calls:
                found.append((node, tr("{name} passed around as a value", name=node.id)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in aliases:
            found += _reaching_call(node, node.func.id, literal, aliases)
    return found


def _changed_library(target, aliases) -> str | None:
    """What an assignment to an attribute of ``target`` changes, if it is not the student's own object: a
    library's module or class (``np.lib.format.write_array = ...``), or a class reached through an object
    (``type(x).numpy = ...``, ``x.__class__.f = ...``)."""
    dotted = _dotted(target, aliases)
    if dotted is not None:
        return None if any(_matches(dotted, ok) for ok in CHANGEABLE_LIBRARY_STATE) else dotted
    for node in ast.walk(target):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type") or (
                isinstance(node, ast.Attribute) and node.attr in ("__class__", "__bases__", "__mro__", "__base__")):
            return tr("a class through one of its objects")
    return None


def _reaching_call(node: ast.Call, name: str, literal: dict, aliases: dict) -> list:
    if name in DYNAMIC_BUILTINS - {"vars"} or (name == "vars" and not all(map(_rooted_at_self, node.args))):
        return [(node, f"{name}()")]
    if name not in NAME_TAKERS or len(node.args) < 2:
        return []
    obj, attr = node.args[0], node.args[1]
    changed = _changed_library(obj, aliases) if name != "getattr" else None
    if changed:
        return [(node, tr("changes {what}", what=changed))]
    if isinstance(attr, ast.Constant) and isinstance(attr.value, str):
        return [(node, attr.value)] if attr.value == "__dict__" else []  # other names: any string constant
    if _rooted_at_self(obj) or (isinstance(attr, ast.Name) and attr.id in literal):
        return []
    return [(node, tr("{name}() with a name computed at run time", name=name))]


def reach_arounds(source: str, filename: str, course_source: str | None = None) -> list:
    """Lines like 'a05_encoder.py:12 reaches around the grader's rules (sys.modules)'. A line the course's
    own file for this module (``course_source``, the starter) has too is the course's, not counted."""
    found = _reaching_in(source)
    if not found:
        return []
    course = set()
    if course_source:
        lines = course_source.splitlines()
        course = {(str(what), lines[lineno - 1].strip()) for lineno, what in _reaching_in(course_source)}
    lines = source.splitlines()
    hits = {}
    for lineno, what in found:
        if (str(what), lines[lineno - 1].strip()) not in course:
            hits.setdefault(lineno, tr("{filename}:{line} reaches around the grader's rules ({what}); the stage "
                                            "is scored as if it used a forbidden API",
                                            filename=filename, line=lineno, what=what))
    return [hits[k] for k in sorted(hits)]


def imported_files(submission_dir: str, first: list) -> list:
    """The submission's files a worker that imports the modules ``first`` runs: those modules' files and,
    following their import statements, every file of the submission they import, in order."""
    order, todo = [], list(first)
    while todo:
        name = todo.pop(0)
        path = os.path.join(submission_dir, f"{name}.py")
        if name in order or not os.path.isfile(path):
            continue
        order.append(name)
        with open(path, encoding="utf-8", errors="replace") as f:
            nodes = _parsed(f.read())
        for _node, dotted in _imported_names(nodes) if nodes is not None else ():
            todo.append(dotted.split(".")[0])
    return [f"{name}.py" for name in order]
