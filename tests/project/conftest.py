"""Shared fixtures of the project's own tests.

Grading is the slow part, so every report is computed once per session and
shared: ``graded(path, stages)`` returns the cached schema-v1 report.
"""
from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from grader.engine import run  # noqa: E402
from grader.engine.options import GradingOptions  # noqa: E402

_cache: dict = {}


def grade_cached(path, stages=None, kind="hidden", submission_id=None, **kw):
    """The report of grading ``path`` (once per session for the same arguments); ``kw`` are GradingOptions."""
    key = (str(path), tuple(stages or ()), kind, submission_id, tuple(sorted(kw.items())))
    if key not in _cache:
        options = GradingOptions(kind=kind, stage_ids=stages or None, **kw)
        _cache[key] = run.grade(str(path), options, submission_id)
    return _cache[key]


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: minutes of end-to-end runs; `make test` leaves them out, "
                                       "`make test-slow` runs them")


@pytest.fixture(scope="session")
def graded():
    return grade_cached


def stage_of(report, stage_id):
    return next(s for s in report["stages"] if s["id"] == stage_id)


def made_report(stages: list, **fields) -> dict:
    """A report made by hand, for tests that render or tally reports without grading: ``stages`` as the
    schema has them (a missing title, status, max_score or tests filled in: the id, graded, 8, none), the
    top-level fields a grading adds filled in unless given, the totals computed by report.Report."""
    from grader.engine.report import Report
    filled = [{"title": s["id"], "status": "graded", "max_score": 8.0, "tests": [], **s} for s in stages]
    base = {"kind": "hidden", "submission": {"id": "x", "path": "x", "sha256": "0" * 64, "format": "folder"},
            "errors": [], "isolation": {"mode": "strict"}, "environment": {"python": "3.11"}, "duration_s": 0.0}
    return Report.from_json({**base, **fields, "stages": filled}).to_json()


CATALOGUE = {"mutant": [], "alternative": []}


def pytest_runtest_logreport(report):
    """Count catalogue outcomes (runs in the xdist controller too, which sees every report)."""
    if report.when != "call" or "test_catalogue.py::" not in report.nodeid:
        return
    for kind in CATALOGUE:
        if f"::test_{kind}_" in report.nodeid:
            CATALOGUE[kind].append(report.passed)


def pytest_terminal_summary(terminalreporter):
    m, a = CATALOGUE["mutant"], CATALOGUE["alternative"]
    if m or a:
        terminalreporter.write_line(
            f"catalogue: mutants caught {sum(m)}/{len(m)}, alternatives full marks {sum(a)}/{len(a)}")


def load_module(path, name, deps=()):
    """Import ROOT/path as module `name` (so two stages' files never clash in sys.modules),
    with `deps` {import name: module} visible only while it is imported."""
    import importlib.util
    saved = {k: sys.modules.get(k) for k, _ in deps}
    sys.modules.update(dict(deps))
    try:
        spec = importlib.util.spec_from_file_location(name, ROOT / path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def pytest_collection_modifyitems(config, items):
    """A slow test runs only when asked for by a -m expression (`make test-slow` is `-m slow`)."""
    if config.option.markexpr:
        return
    skip = pytest.mark.skip(reason="slow: run with `make test-slow` (pytest -m slow)")
    for item in items:
        if item.get_closest_marker("slow"):
            item.add_marker(skip)


# ---------------------------------------------------------------- batch tests: a quiet console, a fake grading

def quiet_console():
    """A rich Console that writes to memory (its text: ``.file.getvalue()``), for run_batch's ``console``."""
    from rich.console import Console
    return Console(file=io.StringIO(), width=200)



FAKE_GRADER = textwrap.dedent('''
    """A stand-in for grader.classroom.grading_process.grade_path: misbehaves on demand, else a full-marks report."""
    import os, signal, time
    from grader.classroom import discovery, grading
    from grader.engine import stages

    def grade(path, submission_id, options):
        name = os.path.basename(path)
        if name.startswith("raises"):
            raise RuntimeError("boom inside the grader")
        if name.startswith("dies"):
            os.kill(os.getpid(), signal.SIGKILL)
        if name.startswith("hangs"):
            time.sleep(float(os.environ.get("FAKE_HANG_S", "600")))
        time.sleep(float(os.environ.get("FAKE_GRADE_DELAY", "0")))
        job = discovery.Job(submission_id, submission_id, path, "folder")
        discovery.fingerprint(job)
        rep = grading.not_graded_report(job, stages.resolve(options.stage_ids), "unused")
        for s in rep["stages"]:
            s.update(status="graded", score=s["max_score"])
            s.pop("message")
            for t in s["tests"]:
                t.update(status="passed", score=t["max_score"], feedback="")
        rep["score"], rep["errors"] = rep["max_score"], []
        if "bonus_score" in rep:
            rep["bonus_score"] = rep["bonus_max_score"]
        return rep
''')


@pytest.fixture
def fake_grader(tmp_path, monkeypatch):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "fakegrader.py").write_text(FAKE_GRADER)
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{lib}")
    return "fakegrader:grade"


@pytest.fixture(scope="session")
def fresh_copy(tmp_path_factory):
    """(kind, document) -> a fresh copy of what a reader has (test_documented_commands.py): "course" (the
    repository in `make setup`'s venv, a copy per document: doc_commands.repository_copy), "bundle" (`grader
    release`, one a session: a student has one folder, whose venv its first `make check` builds), "template"
    (`grader classroom`). Tests that share the bundle are in the xdist group "docs-bundle"."""
    from doc_commands import repository_copy
    made = {}

    def get(kind: str, doc: str = "") -> Path:
        key = (kind, doc if kind == "course" else "")
        if key not in made:
            base = tmp_path_factory.mktemp(kind)
            if kind == "course":
                made[key] = repository_copy(ROOT, base / "course", ROOT / ".venv")
            else:
                out = base / kind
                done = subprocess.run([sys.executable, "-m", "grader", "release" if kind == "bundle" else "classroom",
                                       str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
                assert done.returncode == 0, done.stderr
                made[key] = out
        return made[key]
    return get
