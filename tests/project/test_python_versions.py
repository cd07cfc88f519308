"""The grader, `check` and the student bundle on every other supported Python (3.10-3.13).

Slow (`make test-slow`; `make test` leaves it out): for each version but the one running, a venv of
that Python (`python -m grader.authoring.pyversions`, kept in the git-ignored `.pyvenvs/` and built
again only when requirements.txt or `constraints/pyX.Y.txt` changes) with requirements.txt and the
data packages, no dev extra. In it: `check` on the reference (full marks) and on starter/ (zero),
`grade` of the reference on three stages (full marks, a valid schema-v1 report), and the release
bundle built with that Python, then `check` inside it. A version this machine lacks is skipped.
"""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import time

import pytest

from grader.authoring import pyversions
from grader.engine import paths, report, stages

GRADED = ("a01_similarity", "a02_softmax", "a05_encoder")
OTHERS = [v for v in pyversions.VERSIONS if v != ".".join(platform.python_version_tuple()[:2])]
TIMES = {}


def _env():
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.setdefault("HF_HUB_OFFLINE", "1")
    return env


def _run(py, args, cwd, timeout=900):
    start = time.monotonic()
    done = subprocess.run([py, "-m", "grader", *args], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, f"grader {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done.stdout, round(time.monotonic() - start, 1)


def _total(table: str):
    """(score, max) of a printed report's total row."""
    m = re.search(r"total\s*│\s*│\s*([\d.]+) / ([\d.]+)", table)
    assert m, table[-2000:]
    return float(m.group(1)), float(m.group(2))


@pytest.fixture(scope="module", params=OTHERS)
def venv(request):
    version = request.param
    if pyversions.find_python(version) is None:
        pytest.skip(f"no Python {version} on this machine (pyenv's versions, python{version} on PATH)")
    info = pyversions.build(version, log=lambda m: print(m))
    TIMES.setdefault(version, {})["venv"] = {k: info.get(k) for k in
                                            ("python", "torch", "build", "size_mb", "install_s", "reused")}
    return version, str(pyversions.VENVS / f"py{version}" / "bin" / "python"), info


@pytest.mark.slow
def test_check_on_the_reference_and_the_starter(venv):
    version, py, info = venv
    full = sum(s.points for s in stages.all_stages() if not s.bonus)
    out, t_ref = _run(py, ["check", "", str(paths.SOLUTIONS)], cwd=paths.ROOT)
    assert _total(out) == (full, full), out[-2000:]
    out, t_starter = _run(py, ["check"], cwd=paths.ROOT)
    assert _total(out) == (0, full), out[-2000:]
    TIMES[version].update(check_reference_s=t_ref, check_starter_s=t_starter)


@pytest.mark.slow
def test_grade_three_stages_of_the_reference(venv, tmp_path):
    version, py, info = venv
    out_file = tmp_path / "report.json"
    _, t = _run(py, ["grade", str(paths.SOLUTIONS), "--stages", ",".join(GRADED), "--out", str(out_file),
                     "--quiet"], cwd=paths.ROOT)
    rep = json.loads(out_file.read_text())
    report.validate(rep)
    assert rep["schema_version"] == 1 and rep["environment"]["python"].startswith(version + ".")
    assert [s["id"] for s in rep["stages"]] == list(GRADED)
    assert rep["score"] == rep["max_score"] == sum(stages.get(s).points for s in GRADED)
    if os.geteuid() == 0:
        assert rep["isolation"]["mode"] == "strict", rep["isolation"]
    TIMES[version].update(grade_s=t)


@pytest.mark.slow
def test_release_bundle_and_check_in_it(venv, tmp_path):
    version, py, info = venv
    bundle = tmp_path / "student"
    _, t_release = _run(py, ["release", str(bundle)], cwd=paths.ROOT)
    assert not (bundle / "solutions").exists() and (bundle / "requirements.txt").is_file()
    out, t_starter = _run(py, ["check", "a02_softmax"], cwd=bundle)
    assert "NotImplementedError" in out and _total(out) == (0, stages.get("a02_softmax").points)
    work = tmp_path / "mywork"
    work.mkdir()
    start = time.monotonic()
    for stage_id in ("a02_softmax", "a05_encoder"):  # a numpy stage; a torch stage whose public tests use probes
        shutil.copy(paths.SOLUTIONS / f"{stage_id}.py", work)
        out, _ = _run(py, ["check", stage_id[:3], str(work)], cwd=bundle)
        points = stages.get(stage_id).points
        assert _total(out) == (points, points), out[-2000:]
    TIMES[version].update(release_s=t_release, bundle_check_starter_s=t_starter,
                          bundle_check_reference_s=round(time.monotonic() - start, 1))


def test_every_version_of_the_table_is_a_supported_one():
    """pyproject.toml's requires-python admits every version the slow test runs on (and no older one)."""
    text = (paths.ROOT / "pyproject.toml").read_text()
    assert 'requires-python = ">=3.10"' in text and 'target-version = "py310"' in text
    assert pyversions.VERSIONS[0] == "3.10"
    for version in pyversions.VERSIONS:
        if version != "3.11":
            assert pyversions.constraint_file(version) is not None, f"constraints/py{version}.txt missing"


@pytest.fixture(scope="module", autouse=True)
def _record_times():
    """Each version's venv and timings, kept in .pyvenvs/timings.json (docs/maintainers.md's table comes from it)."""
    yield
    if TIMES:
        out = pyversions.VENVS / "timings.json"
        old = json.loads(out.read_text()) if out.is_file() else {}
        out.write_text(json.dumps({**old, **TIMES}, indent=1, sort_keys=True) + "\n")
