"""The student bundle: handouts, notebooks, starter stubs, public tests and the `check` tool.

Nothing secret goes in: no solutions, no hidden tests or their fixtures, no
mutants or alternatives, no stand-ins (they are working stages 5 and 7), and
each stage.toml keeps only its public table.
"""
from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from grader.engine import paths, stages

from . import pyversions

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (requirements.txt)
    import tomli as tomllib

STUDENT_FILES = {"requirements.txt": "requirements.txt"}
STUDENT_DOCS = {"students.md": "README.md", "students.ko.md": "README.ko.md"}  # docs/ page -> the bundle's name
ASSIGNMENT_SUFFIXES = (".md", ".ipynb", ".tsv", ".csv", ".json", ".jsonl", ".txt", ".py")
# What of grader/ students get (an allow-list: a new module ships only once it is named here).
STUDENT_GRADER = (
    "__init__.py", "__main__.py", "cli.py",  # `python -m grader check`
    "engine",                                # the trusted session `check` runs, its report
    "sandbox",                               # the worker side (less its stand-ins, below)
    "lab",                                   # what the notebooks import
    "i18n",                                  # the feedback in the student's language (not the hidden catalogue)
)
# Inside those: the stand-ins are working stages 5 and 7.
STUDENT_GRADER_SKIP = ("__pycache__", "standins")


def _public_stage_toml(path: Path) -> str:
    with open(path, "rb") as f:
        data = tomllib.load(f)
    lines = []
    for key, value in data.items():
        if key in ("hidden", "public"):
            continue
        if key == "standins":
            value = []  # no stand-ins in the bundle: `check` uses your own earlier stages
        lines.append(f"{key} = {_toml_value(value)}")
    lines.append("\n[public]")  # each public test's points, as stage.toml gives them
    for name, spec in data.get("public", {}).items():
        points = spec["points"] if isinstance(spec, dict) else spec
        lines.append(f"{name} = {{ points = {_toml_value(points)} }}")
    return "\n".join(lines) + "\n"


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} in the student stage.toml")


def write_pins(out: Path) -> None:
    """``out/constraints/pyX.Y.txt``: the versions the instructor's set-up pins, for each Python the course runs
    on (``make setup``'s constraints.txt for 3.11, ``make lock-pythons``' files for the others), which the
    bundle's Makefile installs with. A local version label (``torch==2.13.0+cpu``) is dropped: ``==2.13.0``
    admits the CPU build where an index offers it and PyPI's own wheel elsewhere."""
    (out / "constraints").mkdir()
    for version in pyversions.VERSIONS:
        source = pyversions.constraint_file(version)
        if source is None:
            continue
        pins = re.sub(r"^([A-Za-z0-9_.\-\[\]]+==[^+\s#]+)\+\S+", r"\1", source.read_text(encoding="utf-8"),
                      flags=re.MULTILINE)
        (out / "constraints" / f"py{version}.txt").write_text(pins, encoding="utf-8")


def build(out_dir: str) -> Path:
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty")
    out.mkdir(parents=True, exist_ok=True)
    for src, dst in STUDENT_FILES.items():
        shutil.copy(paths.ROOT / src, out / dst)
    for doc, name in STUDENT_DOCS.items():
        shutil.copy(paths.ROOT / "docs" / doc, out / name)
    shutil.copy(paths.ROOT / "docs" / "student.mk", out / "Makefile")
    write_pins(out)
    shutil.copytree(paths.STARTER, out / "starter", ignore=shutil.ignore_patterns("__pycache__"))
    (out / "tests" / "public").mkdir(parents=True)
    for stage in stages.all_stages():
        if stage.suite("public").exists():
            shutil.copy(stage.suite("public"), out / "tests" / "public" / stage.suite("public").name)
    shutil.copy(paths.PUBLIC_TESTS / "conftest.py", out / "tests" / "public" / "conftest.py")  # `pytest` alone: a hint
    shutil.copy(paths.TESTS / "grading.ini", out / "tests" / "grading.ini")
    for name in STUDENT_GRADER:
        src = paths.PACKAGE / name
        if src.is_dir():
            shutil.copytree(src, out / "grader" / name, ignore=shutil.ignore_patterns(*STUDENT_GRADER_SKIP))
        else:
            (out / "grader").mkdir(exist_ok=True)
            shutil.copy(src, out / "grader" / name)
    for stage in stages.all_stages():
        stage_dir, dest = stage.folder, out / "assignments" / stage.id
        dest.mkdir(parents=True)
        (dest / "stage.toml").write_text(_public_stage_toml(stage.toml), encoding="utf-8")
        for p in stage_dir.rglob("*"):
            if p.is_file() and p.suffix in ASSIGNMENT_SUFFIXES and "__pycache__" not in p.parts:
                target = dest / p.relative_to(stage_dir)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(p, target)
    return out
