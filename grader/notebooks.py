"""Notebook submissions: tagged cells become the stage module.

Only code cells tagged ``solution`` or ``course`` are kept (in order); a cell
with shell escapes (``!cmd``, ``%%bash``) or other magics is refused with a
message, since it would run outside Python. A notebook must be named after its
stage (``a03_attention.ipynb``).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

KEEP_TAGS = {"solution", "course"}
MAGIC = re.compile(r"^\s*(!|%)", re.MULTILINE)
NOTEBOOK = re.compile(r"^(a\d\d_[a-z0-9_]+)\.ipynb$")


def cells_to_source(nb: dict, name: str) -> str:
    kept = []
    for i, cell in enumerate(nb.get("cells", [])):
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell.get("cell_type") != "code" or not tags & KEEP_TAGS:
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        if MAGIC.search(source):
            raise ValueError(f"{name}: cell {i + 1} runs a shell command or magic ({source.strip().splitlines()[0][:40]!r}); "
                             "graded cells must be plain Python")
        kept.append(source)
    if not kept:
        raise ValueError(f"{name}: no code cell is tagged 'solution'; did the cell tags get removed?")
    return "\n\n".join(kept) + "\n"


def convert(paths: list, dest: Path) -> list:
    """Write ``aNN_name.py`` into ``dest`` for each notebook; return error lines."""
    errors = []
    for path in paths:
        match = NOTEBOOK.match(Path(path).name)
        if not match:
            errors.append(f"{Path(path).name}: a notebook must be named after its stage, e.g. a03_attention.ipynb")
            continue
        try:
            nb = json.loads(Path(path).read_text(encoding="utf-8"))
            if not isinstance(nb, dict) or "cells" not in nb:
                raise ValueError(f"{Path(path).name}: not a Jupyter notebook")
            source = cells_to_source(nb, Path(path).name)
        except (ValueError, UnicodeDecodeError) as exc:
            errors.append(f"{Path(path).name} could not be read: {exc}")
            continue
        (dest / f"{match.group(1)}.py").write_text(source, encoding="utf-8")
    return errors
