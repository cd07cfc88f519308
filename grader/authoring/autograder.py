"""The Gradescope autograder zip (``python -m grader gradescope OUT.zip``).

Gradescope unpacks it into ``/autograder/source``, runs ``setup.sh`` there once
when it builds the image, and ``/autograder/run_autograder`` for every
submission. Both scripts are files in ``templates/`` beside this module.
"""
from __future__ import annotations

import os
import zipfile
from pathlib import Path

from grader.engine import paths

TEMPLATES = Path(__file__).resolve().parent / "templates"
SCRIPTS = ("setup.sh", "run_autograder")
SOURCE_PARTS = ("grader", "solutions", "starter", "assignments", "tests/hidden", "tests/grading.ini",
                "requirements.txt")


def _add_tree(zf: zipfile.ZipFile, rel: str) -> None:
    src = paths.ROOT / rel
    files = [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file())
    for p in files:
        if "__pycache__" not in p.parts:
            zf.write(p, str(p.relative_to(paths.ROOT)))


def build(out_zip: str) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(out_zip)), exist_ok=True)
    with zipfile.ZipFile(out_zip, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in SCRIPTS:
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16
            zf.writestr(info, (TEMPLATES / name).read_text(encoding="utf-8"))
        for rel in SOURCE_PARTS:
            _add_tree(zf, rel)
    return out_zip
