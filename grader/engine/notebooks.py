"""Notebook submissions: tagged cells become the stage module.

``convert`` is used by ``grader.engine.submission``. A notebook is
read and validated with nbformat; only code cells tagged ``solution`` or
``course`` are kept, in order, joined by two blank lines. A kept cell with a
shell escape (``!cmd``) or a magic (``%time``, ``%%bash``) is refused with a
message, since it would not run as plain Python. A notebook must be named after
its stage (``a03_attention.ipynb``). Nothing here executes submitted code.

The notebook side (``setup``, ``check``) is ``grader.lab.course``.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from ..i18n import tr

KEEP_TAGS = {"solution", "course"}
CELL_SEPARATOR = "\n\n\n"          # two blank lines between cells, as between top-level definitions
MAGIC = re.compile(r"^\s*(!|%)", re.MULTILINE)
NOTEBOOK = re.compile(r"^(a\d\d_[a-z0-9_]+)\.ipynb$")
STAGE_IMPORT = re.compile(r"^\s*(?:from|import)\s+(a\d\d_[a-z0-9_]+)\b", re.MULTILINE)


class NotebookError(ValueError):
    """A notebook that cannot be turned into a stage module; the message says why."""


def read(text: str, name: str = "notebook"):
    """Parse and validate a notebook (nbformat v4); raise ``NotebookError`` with a readable reason.

    Uses nbformat when it is installed (it is in the course venv); a bare
    student bundle without it falls back to a structural check of the JSON.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        # i18n: {line} is a line of the notebook's file; {problem} is the JSON parser's message, in English.
        raise NotebookError(tr("{name} is not a readable Jupyter notebook: its JSON is broken at line "
                               "{line} ({problem}); was it saved from Jupyter/Colab as .ipynb?",
                               name=name, line=exc.lineno, problem=exc.msg)) from None
    if not isinstance(data, dict) or "cells" not in data or "nbformat" not in data:
        raise NotebookError(tr("{name} is not a valid Jupyter notebook (no 'cells' or 'nbformat' field)", name=name))
    try:
        import nbformat
    except ImportError:  # pragma: no cover - the course venv has nbformat
        if data.get("nbformat") != 4 or not isinstance(data.get("cells"), list):
            raise NotebookError(tr("{name} is not a valid Jupyter notebook in format 4", name=name)) from None
        return data
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # missing cell ids etc. are repaired, not worth a warning
        try:
            nb = nbformat.reads(text, as_version=4)
            try:
                nbformat.validate(nb)
            except nbformat.ValidationError:
                # outputs play no part in grading: a notebook whose only fault is in an output
                # (some frontends write odd ones) is read without them
                for cell in nb.get("cells", []):
                    if isinstance(cell, dict) and cell.get("cell_type") == "code":
                        cell["outputs"], cell["execution_count"] = [], None
                nbformat.validate(nb)
        except Exception as exc:  # nbformat.ValidationError, or a crash on a badly shaped field
            reason = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            # i18n: {problem} is the first line of the notebook validator's message, in English.
            raise NotebookError(tr("{name} is not a valid Jupyter notebook ({problem})",
                                   name=name, problem=str(reason).splitlines()[0][:200])) \
                from None
    return nb


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _tags(cell) -> set:
    tags = cell.get("metadata", {}).get("tags", [])
    return set(tags) if isinstance(tags, list) else set()


def _magic_line(source: str):
    """The first shell escape / magic line of a cell, or None. Plain Python never has one."""
    try:
        ast.parse(source)
        return None  # parses as Python: a '!' or '%' at a line start can only be inside a string
    except SyntaxError:
        match = MAGIC.search(source)
        return source[match.start():].strip().splitlines()[0] if match else None


def cells_to_source(nb, name: str) -> str:
    """The stage module: every code cell tagged ``solution`` or ``course``, in order."""
    kept, code_cells = [], 0
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        code_cells += 1
        if not _tags(cell) & KEEP_TAGS:
            continue
        source = _source(cell)
        magic = _magic_line(source)
        if magic is not None:
            # i18n: {cell} counts the notebook's code cells from 1; {tags} are the cell's tags, joined by "/"; {command}
            # is the start of the shell command or magic, quoted.
            raise NotebookError(tr("{name}: cell {cell} (tagged {tags}) runs a shell command "
                                   "or magic ({command}); graded cells must be plain Python. Move it to an "
                                   "untagged cell.",
                                   name=name, cell=i + 1,
                                   tags='/'.join(sorted(_tags(cell) & KEEP_TAGS)),
                                   command=f"{magic[:40]!r}"))
        kept.append(source)
    if not kept:
        raise NotebookError(tr("{name}: none of its {code_cells} code cells is tagged 'solution' or 'course', so "
                               "there is nothing to grade; did the cell tags get removed? Tag your code cells "
                               "'solution' again (Jupyter: the gear / property inspector; Colab: hand in the .py "
                               "file instead)", name=name, code_cells=code_cells))
    return CELL_SEPARATOR.join(kept) + "\n"


def notebook_to_source(path, name: str | None = None) -> str:
    """Read the notebook at ``path`` and return its stage module source (``NotebookError`` if impossible)."""
    path = Path(path)
    name = name or path.name
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise NotebookError(tr("{name} is not UTF-8 text ({reason} at byte {byte})",
                               name=name, reason=exc.reason, byte=exc.start)) from None
    return cells_to_source(read(text, name), name)


def convert(paths: list, dest: Path) -> list:
    """Write ``aNN_name.py`` into ``dest`` for each notebook; return (file name, error line) for each
    bad notebook, the line starting with the file's name."""
    errors = []
    for path in paths:
        name = Path(path).name
        match = NOTEBOOK.match(name)
        if not match:
            errors.append((name, tr("{name}: a notebook must be named after its stage, e.g. a03_attention.ipynb; "
                                    "ignored", name=name)))
            continue
        try:
            source = notebook_to_source(path, name)
        except (NotebookError, OSError) as exc:
            message = str(exc)
            if not message.startswith(name):
                message = f"{name}: {message}"
            errors.append((name, tr("{message} (the stage scores zero)", message=message)))
            continue
        (Path(dest) / f"{match.group(1)}.py").write_text(source, encoding="utf-8")
    return errors
