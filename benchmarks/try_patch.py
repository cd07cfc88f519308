"""Measure a proposed patch before applying it: a copy of the course with the patch applied.

    python -m benchmarks.try_patch benchmarks/proposed-inprocess-threads.patch        # build the copy
    python -m benchmarks.try_patch benchmarks/proposed-inprocess-threads.patch --run boundary

Copies the working tree (without .git, .venv, benchmarks/, caches and outputs)
to ``benchmarks/work/patched-<name>/``, applies the patch there with
``patch -p1``, and with ``--run`` runs ``python -m benchmarks.run --root COPY
--only ...`` so the figures are those of the patched grader (the repository
itself is not touched). Run the same benchmarks on the repository right after
to compare on the same load.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from .common import PY, ROOT, WORK

SKIP = {".git", ".venv", "benchmarks", "__pycache__", ".pytest_cache", "reports", "dist", "grading-out"}


def build(patch: Path) -> Path:
    dest = WORK / f"patched-{patch.stem.removeprefix('proposed-')}"
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(ROOT, dest, ignore=lambda d, names: [n for n in names if n in SKIP])
    r = subprocess.run(["patch", "-p1", "--forward", "--batch", "-i", str(patch.resolve())], cwd=dest,
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"the patch does not apply to the current tree:\n{r.stdout}{r.stderr}")
    return dest


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.try_patch")
    p.add_argument("patch")
    p.add_argument("--run", help="benchmarks to run on the patched copy (comma-separated), e.g. check,otter")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    dest = build(Path(args.patch))
    print(f"patched copy: {dest}")
    if args.run:
        cmd = [PY, "-m", "benchmarks.run", "--root", str(dest), "--only", args.run,
               "--json", str(WORK / "results" / f"{dest.name}.json")] + (["--quick"] if args.quick else [])
        return subprocess.call(cmd, cwd=ROOT)
    print(f"measure it with: python -m benchmarks.run --root {dest} --only check,otter")
    return 0


if __name__ == "__main__":
    sys.exit(main())
