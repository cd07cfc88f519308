"""The Gradescope autograder runs against a fake /autograder layout and writes valid results."""
import json
import os
import shutil
import subprocess
import sys
import zipfile

from grader.authoring import autograder
from grader.engine import gradescope, paths


def test_results_json_from_a_report_has_gradescopes_fields(graded):
    rep = graded(paths.SOLUTIONS, stages=["a01_similarity", "a02_softmax"])
    results = gradescope.results_json(rep)
    assert results["score"] == rep["score"]
    for t in results["tests"]:
        assert set(t) >= {"name", "score", "max_score", "status", "output", "visibility"}
        assert t["status"] in ("passed", "failed") and t["visibility"] in ("visible", "hidden", "after_due_date")


def test_run_autograder_in_a_fake_autograder_folder(tmp_path):
    archive = autograder.build(str(tmp_path / "autograder.zip"))
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    with zipfile.ZipFile(archive) as zf:
        names = zf.namelist()
        assert "setup.sh" in names and "run_autograder" in names
        assert not [n for n in names if n.startswith(("tests/project", "tests/mutants", "tests/alternatives"))]
        zf.extractall(root / "source")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    os.chmod(root / "run_autograder", 0o755)
    (root / "submission").mkdir()
    shutil.copy(paths.SOLUTIONS / "a01_similarity.py", root / "submission")
    (root / "submission" / "a02_softmax.py").write_text("def softmax(x, axis=-1):\n    return x\n")
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    proc = subprocess.run(["bash", str(root / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads((root / "results" / "results.json").read_text())
    by_stage = {}
    for t in results["tests"]:
        stage = t["name"].split(":")[0]
        by_stage.setdefault(stage, []).append(t)
    assert all(t["status"] == "passed" for t in by_stage["a01_similarity"])
    assert any(t["status"] == "failed" for t in by_stage["a02_softmax"])
    assert 0 < results["score"] < 100


def test_run_autograder_with_nothing_gradable_still_writes_results(tmp_path):
    archive = autograder.build(str(tmp_path / "autograder.zip"))
    root = tmp_path / "autograder"
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(root / "source")
    (root / "submission").mkdir()
    (root / "submission" / "notes.txt").write_text("I forgot the code")
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    proc = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["score"] == 0 and "no stage module" in results["output"]
