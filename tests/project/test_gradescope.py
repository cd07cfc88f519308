"""The Gradescope autograder runs against a fake /autograder layout and writes valid results;
its scripts parse; its README declares the settings; and as root with Docker's default
capabilities, in a memory cgroup limited to what the README declares, it gives the reference
full marks and the starter zero."""
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
from test_places import PLACES, filtered

from benchmarks.common import CgroupUnavailable, MemoryCgroup
from grader.authoring import autograder
from grader.engine import gradescope, paths
from grader.i18n import languages


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


def _valid_results(results):
    assert isinstance(results["score"], (int, float)) and isinstance(results["tests"], list)
    for t in results["tests"]:
        assert set(t) >= {"name", "score", "max_score", "status", "output", "visibility"}
        assert t["status"] in ("passed", "failed") and t["visibility"] in ("visible", "hidden", "after_due_date")
        assert 0 <= t["score"] <= t["max_score"] + 1e-9


def _unpacked(tmp_path):
    """A fake /autograder: the zip in source/, run_autograder beside it; (root, README text)."""
    archive = autograder.build(str(tmp_path / "autograder.zip"))
    root = tmp_path / "autograder"
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(root / "source")
        readme = zf.read("README").decode()
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    os.chmod(root / "run_autograder", 0o755)
    (root / "submission").mkdir()
    return root, readme


AS_ROOT = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                             reason="Docker's default capabilities are made from root with setpriv")


def _run_autograder(root, prefix):
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    proc = subprocess.run([*prefix, "bash", str(root / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc, json.loads((root / "results" / "results.json").read_text())


@AS_ROOT
def test_run_autograder_in_a_default_docker_container(tmp_path):
    """Root with Docker's capabilities under its default seccomp profile's answer to namespaces (no
    unshare): the reference's stages score full marks, with the secrets hidden and the network cut."""
    root, _ = _unpacked(tmp_path)
    for stage in ("a01_similarity", "a02_softmax"):
        shutil.copy(paths.SOLUTIONS / f"{stage}.py", root / "submission")
    proc, results = _run_autograder(root, PLACES["docker"].prefix)
    _valid_results(results)
    handed_in = [t for t in results["tests"] if t["name"].startswith(("a01_similarity:", "a02_softmax:"))]
    assert results["score"] == 16 and handed_in and all(t["status"] == "passed" for t in handed_in), results["output"]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("isolation "))
    assert line.startswith("isolation strict: ") and "without namespaces" in line, proc.stdout
    assert "secrets_hidden" in line and "network" in line


@AS_ROOT
def test_when_the_autograder_cannot_grade_the_student_is_told_and_the_staff_see_why(tmp_path):
    """Every worker fails to confine itself (a filter refuses a limit the probe never sets): the student's
    result says the autograder could not run and where the instructor sees why; the autograder's output
    (stdout, for staff only) holds the one-line reason. Nothing claims the instructor was told."""
    root, _ = _unpacked(tmp_path)
    shutil.copy(paths.SOLUTIONS / "a01_similarity.py", root / "submission")
    proc, results = _run_autograder(root, filtered("host", "--refuse-processes-limit"))
    assert results == gradescope.not_graded("1") and results["score"] == 0
    assert "could not run" in results["output"] and "autograder's output" in results["output"]
    assert "has been told" not in results["output"]
    reason = [x for x in proc.stdout.splitlines() if x.startswith("error: ")]
    assert len(reason) == 1 and "a worker of a01_similarity could not be set up and confined" in reason[0], proc.stdout


@pytest.mark.parametrize("script", autograder.SCRIPTS)
def test_the_scripts_parse_as_bash(script, tmp_path):
    archive = autograder.build(str(tmp_path / "autograder.zip"))
    with zipfile.ZipFile(archive) as zf:
        # the course's language (course.toml) is the one thing filled in at build time
        assert zf.read(script).decode() == (autograder.TEMPLATES / script).read_text().replace(
            "@LANGUAGE@", languages.from_course())
    proc = subprocess.run(["bash", "-n", str(autograder.TEMPLATES / script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_setup_picks_python_311_or_the_images_own_and_torchs_cpu_build():
    text = (autograder.TEMPLATES / "setup.sh").read_text()
    assert "apt-get install -y -qq python3.11 python3.11-venv" in text
    assert "sys.version_info < (3, 10)" in text
    assert "--index-url https://download.pytorch.org/whl/cpu" in text
    # only the image's package sources and the package registries
    hosts = set(re.findall(r"https?://([^/\s\"']+)", text))
    assert hosts <= {"download.pytorch.org", "pypi.org"}, hosts


def test_the_readme_declares_memory_cpu_and_timeout_from_the_measured_peak(tmp_path):
    _, readme = _unpacked(tmp_path)
    got = autograder.settings()
    measured = json.loads(autograder.MEASURED.read_text())
    assert got["memory_mb"] >= max(measured["peak_pss_mb"], measured["cgroup_peak_mb"])
    assert got["memory_mb"] % 256 == 0
    assert f"at least {got['memory_mb']} MB" in readme and "1 CPU" in readme
    assert f"at least {got['timeout_min']} minutes" in readme
    assert f"{measured['peak_pss_mb']:.0f} MB" in readme
    assert ("too small" in readme) == (max(measured["peak_pss_mb"], measured["cgroup_peak_mb"]) > 768)
    small = autograder.settings({**measured, "peak_pss_mb": 500.0, "cgroup_peak_mb": 480.0})
    assert small["memory_mb"] == 768 and "fits" in small["fits_default"]


@pytest.mark.slow
@pytest.mark.xdist_group("gradescope-memory")
@AS_ROOT
@pytest.mark.parametrize("who,limit", [("solutions", "declared"), ("starter", "declared"), ("solutions", "default")])
def test_run_autograder_as_docker_root_within_the_declared_memory(who, limit, tmp_path):
    """The whole grading (every stage), in a memory cgroup limited to the README's figure; the reference
    also within Gradescope's default 768 MB, which the README says it fits."""
    root, readme = _unpacked(tmp_path)
    declared = autograder.settings()["memory_mb"]
    assert f"at least {declared} MB" in readme
    if limit == "default":
        assert "fits Gradescope's default" in readme
        declared = autograder.GRADESCOPE_DEFAULT_MB
    for f in sorted((paths.ROOT / who).glob("a*.py")):
        shutil.copy(f, root / "submission")
    try:
        cgroup = MemoryCgroup(declared, name="grader-gradescope-test")
    except CgroupUnavailable as exc:
        pytest.skip(f"no memory cgroup can be made here: {exc}")
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_PYTHON": sys.executable}
    with cgroup:
        proc = subprocess.run([*cgroup.prefix(), *PLACES["docker"].prefix, "bash", str(root / "run_autograder")],
                              env=env, capture_output=True, text=True, timeout=1800)
        peak, ooms = cgroup.peak_mb(), cgroup.oom_kills()
    where = f"{cgroup.describe()}: peak {peak} MB, OOM kills {ooms}"
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not ooms, where
    results = json.loads((root / "results" / "results.json").read_text())
    _valid_results(results)
    assert "isolation strict" in proc.stdout, proc.stdout[-2000:]
    stages = {t["name"].split(":")[0] for t in results["tests"]}
    assert len(stages) == 9, stages
    if who == "solutions":
        assert all(t["status"] == "passed" for t in results["tests"]), where
        assert results["score"] == 100, (results["score"], where)
    else:
        assert results["score"] == 0 and all(t["score"] == 0 for t in results["tests"]), where
