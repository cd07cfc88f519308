"""Finding student-facing text that does not go through the catalogue (``tests/project/test_i18n.py``).

A text reaches a student as the message of a failed test, a stage or a command: the first argument of an
exception the grader turns into feedback (AssertionError and the student-side problems), the message of an
``assert``, a comparison's ``hint=``, or the description of a catalogued mistake (a key of ``mistakes``).
Each must be a marked text (``tr``), a ``join`` of marked texts, or a value computed elsewhere (a module's
``*HINT*`` constants are hints too); a string
literal or f-string there bypasses the catalogue and stays English in every language.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

FEEDBACK_EXCEPTIONS = {"AssertionError", "StudentProblem", "StudentError", "StudentMissing", "StudentTimeout",
                       "WorkerCrashed", "ForbiddenCall", "UnreadableSubmission", "NotebookError", "UnknownStage"}
FEEDBACK_KEYWORDS = {"hint", "mistakes"}


@dataclass(frozen=True)
class Bypass:
    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text}"


def _is_text(node) -> bool:
    """A string literal or f-string with words in it (a bare separator or code fragment is not prose)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return any(c.isalpha() for c in node.value)
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(v, ast.Constant) and any(c.isalpha() for c in v.value) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _is_text(node.left) or _is_text(node.right)
    if isinstance(node, ast.IfExp):
        return _is_text(node.body) or _is_text(node.orelse)
    return False


def _name(func) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _texts(tree) -> list:
    """The nodes of ``tree`` where a literal would reach a student."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) \
                and _name(node.exc.func) in FEEDBACK_EXCEPTIONS:
            found += node.exc.args[:1]
        elif isinstance(node, ast.Assert) and node.msg is not None:
            found.append(node.msg)
        elif isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "hint":
                    found.append(kw.value)
                elif kw.arg == "mistakes" and isinstance(kw.value, ast.Dict):
                    found += [k for k in kw.value.keys if k is not None]
                elif kw.arg == "mistakes" and isinstance(kw.value, (ast.List, ast.Tuple)):
                    found += [e.elts[0] for e in kw.value.elts if isinstance(e, ast.Tuple) and e.elts]
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "mistakes" for t in node.targets):
            if isinstance(node.value, ast.Dict):
                found += [k for k in node.value.keys if k is not None]
            elif isinstance(node.value, ast.DictComp):
                found.append(node.value.key)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) and getattr(t.value, "id", "")
                                                  == "mistakes" for t in node.targets):
            found += [t.slice for t in node.targets if isinstance(t, ast.Subscript)]
        elif isinstance(node, ast.Assign) and any("HINT" in getattr(t, "id", "") for t in node.targets):
            found += node.value.values if isinstance(node.value, ast.Dict) else [node.value]
    return [n for n in found if _is_text(n)]


def bypasses(paths, root: Path) -> list:
    """Every literal in ``paths`` that reaches a student without going through the catalogue."""
    out = []
    for path in paths:
        source = Path(path).read_text(encoding="utf-8")
        for node in _texts(ast.parse(source)):
            out.append(Bypass(str(Path(path).relative_to(root)), node.lineno,
                              (ast.get_source_segment(source, node) or "")[:120]))
    return sorted(out, key=lambda b: (b.path, b.line))
