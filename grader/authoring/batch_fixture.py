"""A made-up class to grade: ``python -m grader.authoring.batch_fixture OUT_DIR --count 50``.

Writes ``count`` submissions into OUT_DIR, a mix of what a real class hands in:
the reference (``solutions/``), untouched stubs (``starter/``) and the
catalogued mistakes of ``tests/mutants/*.toml`` (built with
``grader.authoring.mutants.build_submission``), as folders, ``.zip`` files and folders of
notebooks, plus (``--unreadable``) a few that cannot be read (a corrupt zip, a
folder with no stage module). Deterministic for a given ``--seed``.

    python -m grader.authoring.batch_fixture /tmp/class --count 50 --stages a01_similarity,a02_softmax
    python -m grader batch /tmp/class --stages a01_similarity,a02_softmax --workers 2 --out /tmp/class-out
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

from grader.engine import paths, stages

from . import mutants


def _notebook(source: str) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
            "cells": [{"cell_type": "markdown", "metadata": {}, "source": "My work for this stage."},
                      {"cell_type": "code", "metadata": {"tags": ["solution"]}, "execution_count": None,
                       "outputs": [], "source": source}]}


def _as_notebooks(folder: Path, dest: Path) -> None:
    dest.mkdir(parents=True)
    for p in sorted(folder.glob("a[0-9][0-9]_*.py")):
        (dest / f"{p.stem}.ipynb").write_text(json.dumps(_notebook(p.read_text(encoding="utf-8")), indent=1),
                                              encoding="utf-8")


def _as_zip(folder: Path, dest: Path, inner: str) -> None:
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted(folder.glob("*.py")):
            z.write(p, f"{inner}/{p.name}")


def _copy_modules(src: Path, dest: Path, wanted) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for p in src.glob("a[0-9][0-9]_*.py"):
        if wanted is None or p.stem in wanted:
            shutil.copy(p, dest / p.name)
    return dest


def build(out: Path, count: int, stage_ids=None, seed: int = 0, unreadable: int = 0,
          formats=("folder", "zip", "notebooks")) -> list:
    """Write the class into ``out``; return [(name, kind, format)]."""
    rng = random.Random(seed)
    chosen = [s.id for s in stages.resolve(stage_ids)] if stage_ids else None
    catalogue = [m for m in mutants.load() if chosen is None or m.stage in chosen]
    out.mkdir(parents=True, exist_ok=True)
    made = []
    kinds = []
    for i in range(count):
        r = i % 10
        kinds.append("reference" if r in (0, 5) else "starter" if r == 3 else "mutant")
    if not catalogue:
        kinds = ["reference" if k == "mutant" else k for k in kinds]
    with tempfile.TemporaryDirectory() as tmp:
        for i, kind in enumerate(kinds):
            name = f"student_{i + 1:03d}"
            work = Path(tmp) / name
            if kind == "reference":
                _copy_modules(paths.SOLUTIONS, work, chosen)
                label = "reference"
            elif kind == "starter":
                _copy_modules(paths.STARTER, work, chosen)
                label = "starter"
            else:
                m = catalogue[(i * 7 + seed) % len(catalogue)]
                mutants.build_submission(m, work)
                if chosen is not None:
                    for p in work.glob("*.py"):
                        if p.stem not in chosen:
                            p.unlink()
                label = f"mutant {m.key}"
            fmt = formats[rng.randrange(len(formats))]
            if fmt == "zip":
                _as_zip(work, out / f"{name}.zip", inner=name)
            elif fmt == "notebooks":
                _as_notebooks(work, out / name)
            else:
                shutil.copytree(work, out / name)
            made.append((name, label, fmt))
    for j in range(unreadable):
        name = f"broken_{j + 1:02d}"
        if j % 2 == 0:
            (out / f"{name}.zip").write_bytes(b"PK\x03\x04 this is not really a zip file")
            made.append((name, "unreadable", "zip"))
        else:
            (out / name).mkdir()
            (out / name / "notes.txt").write_text("I could not finish in time, sorry\n")
            made.append((name, "unreadable", "folder"))
    return made


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m grader.authoring.batch_fixture", description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--count", type=int, default=50)
    p.add_argument("--stages", help="comma-separated stage ids: only these modules and their mutants")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--unreadable", type=int, default=0, help="also add this many unreadable submissions")
    args = p.parse_args(argv)
    stage_ids = [s for s in (args.stages or "").split(",") if s] or None
    made = build(Path(args.out_dir), args.count, stage_ids, args.seed, args.unreadable)
    kinds = {}
    for _, label, _ in made:
        k = label.split()[0]
        kinds[k] = kinds.get(k, 0) + 1
    print(f"{len(made)} submissions in {args.out_dir}: " + ", ".join(f"{v} {k}" for k, v in sorted(kinds.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
