"""Bad input gets a clear message and a zero for that part only; the grader never crashes."""
import os
import shutil
import stat
import subprocess
import sys
import zipfile

import pytest
from conftest import ROOT, grade_cached, stage_of

STAGES = ["a01_similarity", "a02_softmax"]
GOOD_A01 = ROOT / "solutions" / "a01_similarity.py"
REF_A02 = (ROOT / "solutions" / "a02_softmax.py").read_text(encoding="utf-8")


def folder_with(tmp_path, a02_source: str | bytes | None, name="sub"):
    sub = tmp_path / name
    sub.mkdir()
    shutil.copy(GOOD_A01, sub)
    if a02_source is not None:
        data = a02_source.encode() if isinstance(a02_source, str) else a02_source
        (sub / "a02_softmax.py").write_bytes(data)
    return sub


def graded_a02(tmp_path, source):
    rep = grade_cached(folder_with(tmp_path, source), stages=STAGES)
    assert stage_of(rep, "a01_similarity")["score"] == stage_of(rep, "a01_similarity")["max_score"], \
        "a problem in a02 cost a01 points"
    return rep, stage_of(rep, "a02_softmax")


def test_syntax_error_names_the_line(tmp_path):
    rep, s = graded_a02(tmp_path, "def softmax(x, axis=-1)\n    return x\n")
    assert s["score"] == 0 and all(t["status"] == "error" for t in s["tests"])
    assert "SyntaxError" in s["tests"][0]["feedback"] and "line 1" in s["tests"][0]["feedback"]


def test_import_error_is_reported(tmp_path):
    rep, s = graded_a02(tmp_path, "import no_such_package_here\n" + REF_A02)
    assert s["score"] == 0 and "no_such_package_here" in s["tests"][0]["feedback"]


def test_missing_module_scores_zero_with_status_missing(tmp_path):
    rep = grade_cached(folder_with(tmp_path, None), stages=STAGES)
    s = stage_of(rep, "a02_softmax")
    assert s["status"] == "missing" and s["score"] == 0 and {t["status"] for t in s["tests"]} == {"missing"}
    assert stage_of(rep, "a01_similarity")["score"] == stage_of(rep, "a01_similarity")["max_score"]


def test_missing_name_costs_only_its_tests(tmp_path):
    source = REF_A02.replace("def log_softmax(", "def _renamed_log_softmax(")
    rep, s = graded_a02(tmp_path, source)
    missing = [t for t in s["tests"] if t["status"] == "missing"]
    assert missing and all("log_softmax" in t["feedback"] for t in missing)
    assert any(t["status"] == "passed" for t in s["tests"]), "softmax tests should still pass"


def test_wrong_signature_is_reported_as_an_error(tmp_path):
    source = REF_A02.replace("def softmax(x, axis=-1)", "def softmax(x)").replace(
        "def softmax(x, axis: int = -1)", "def softmax(x)")
    assert source != REF_A02, "could not find softmax's signature in the reference"
    rep, s = graded_a02(tmp_path, source + "\naxis = -1\n")
    errors = [t for t in s["tests"] if t["status"] == "error"]
    assert errors and any("TypeError" in t["feedback"] and "axis" in t["feedback"] for t in errors)


def test_non_utf8_source_is_explained_and_zero_when_python_cannot_read_it(tmp_path):
    rep, s = graded_a02(tmp_path, REF_A02.encode() + b'\nGREETING = "caf\xe9"\n')
    assert s["score"] == 0
    assert any("UTF-8" in e for e in rep["errors"])
    assert "utf-8" in s["tests"][0]["feedback"].lower()


def test_non_utf8_bytes_in_a_comment_are_noted_but_cost_nothing(tmp_path):
    """Python itself tolerates them there, so the grader does too (with a note)."""
    rep, s = graded_a02(tmp_path, b"# caf\xe9\n" + REF_A02.encode())
    assert s["score"] == s["max_score"]
    assert any("UTF-8" in e for e in rep["errors"])


# -- archives and the command line ------------------------------------------------

def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "grader", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)


def make_zip(path, entries):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name)
            info.external_attr = mode << 16
            zf.writestr(info, data)
    return path


@pytest.mark.parametrize("entries, words", [
    ([("../../evil.py", "x = 1", 0o644), ("a01_similarity.py", "", 0o644)], "escapes"),
    ([("/etc/a01_similarity.py", "x = 1", 0o644)], "escapes"),
    ([("a01_similarity.py", "/etc/passwd", stat.S_IFLNK | 0o777)], "symbolic link"),
    ([("a01_similarity.py", "\0" * (80 << 20), 0o644)], "MB"),
    ([("notes.txt", "no code here", 0o644)], "no stage module"),
], ids=["dotdot", "absolute", "symlink", "size-bomb", "empty"])
def test_bad_archives_exit_2_with_one_line(tmp_path, entries, words):
    archive = make_zip(tmp_path / "sub.zip", entries)
    proc = run_cli("grade", str(archive), "--stages", "a01_similarity", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path.parent / "evil.py").exists() and not (tmp_path / "evil.py").exists()


def test_not_a_zip_at_all_exits_2(tmp_path):
    fake = tmp_path / "sub.zip"
    fake.write_bytes(b"PK\x03\x04 this is not really a zip")
    proc = run_cli("grade", str(fake), cwd=tmp_path)
    assert proc.returncode == 2 and "not a readable zip" in proc.stderr


def test_usage_errors_exit_2(tmp_path):
    assert run_cli("grade", "--stages", "a99_nothing", cwd=tmp_path).returncode == 2
    assert run_cli("frobnicate", cwd=tmp_path).returncode == 2
    assert run_cli("grade", str(tmp_path / "does-not-exist"), cwd=tmp_path).returncode == 2


def test_a_good_zip_grades_and_writes_only_its_output(tmp_path):
    archive = make_zip(tmp_path / "alice.zip", [("alice/a01_similarity.py", GOOD_A01.read_text(), 0o644)])
    before = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
    work = tmp_path / "cwd"
    work.mkdir()
    proc = run_cli("grade", str(archive), "--stages", "a01_similarity", "--out", "r.json", "--quiet", cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(work)) == ["r.json"]
    after = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
    assert before == after, "grading changed files in the repository"
