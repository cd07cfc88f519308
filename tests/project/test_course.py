"""The course content is complete and consistent: every stage has its pieces,
weights match the suites, the reference scores full marks and the starter zero."""
import ast
import json
import os
import re
import subprocess
import sys

import pytest
from conftest import grade_cached, stage_of

from grader.engine import paths, report, stages

pytestmark = pytest.mark.xdist_group("reference")  # shares the graded reference with test_determinism

STAGES = stages.all_stages()
IDS = [s.id for s in STAGES]


def test_all_nine_stages_exist_and_core_totals_100():
    assert IDS == ["a01_similarity", "a02_softmax", "a03_attention", "a04_positional", "a05_encoder",
                   "a06_decoder", "a07_bert_mlm", "a08_sentiment", "a09_retrieval"]
    assert sum(s.points for s in STAGES if not s.bonus) == 100
    assert [s.id for s in STAGES if s.bonus] == ["a09_retrieval"]


def _test_functions(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


@pytest.mark.parametrize("stage", STAGES, ids=IDS)
@pytest.mark.parametrize("kind", ["hidden", "public"])
def test_every_test_has_exactly_one_weight(stage, kind):
    folder = paths.HIDDEN_TESTS if kind == "hidden" else paths.PUBLIC_TESTS
    functions = _test_functions(folder / f"test_{stage.id}.py")
    declared = set(stage.tests(kind))
    assert functions - declared == set(), f"tests without a weight in stage.toml [{kind}]"
    assert declared - functions == set(), f"stage.toml [{kind}] names tests that do not exist"


@pytest.mark.parametrize("stage", STAGES, ids=IDS)
def test_handouts_exist_in_both_languages_and_cite_slides(stage):
    english = (stage.folder / "README.md").read_text(encoding="utf-8")
    korean = (stage.folder / "README.ko.md").read_text(encoding="utf-8")
    assert re.search(r"[Ss]lides? \d+", english), "the English handout cites no slide"
    assert re.search(r"슬라이드 ?\d+", korean), "the Korean handout cites no slide"
    assert re.search(r"[가-힣]{20,}", korean.replace(" ", "")) or len(re.findall(r"[가-힣]", korean)) > 200


@pytest.mark.parametrize("stage", [s for s in STAGES if s.library == "numpy"], ids=lambda s: s.id)
def test_numpy_stages_import_no_torch_and_no_other_stage(stage):
    tree = ast.parse(stage.solution.read_text(encoding="utf-8"))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert "torch" not in imported
    assert not {i for i in imported if re.match(r"a\d\d_", i)}


@pytest.fixture(scope="module")
def reference_report():
    return grade_cached(paths.SOLUTIONS)


@pytest.fixture(scope="module")
def starter_report():
    return grade_cached(paths.STARTER)


def test_reports_follow_schema_v1(reference_report, starter_report):
    report.validate(reference_report)
    report.validate(starter_report)


@pytest.mark.parametrize("stage_id", IDS)
def test_reference_scores_full_marks(reference_report, stage_id):
    s = stage_of(reference_report, stage_id)
    failed = [f"{t['id']}: {t['feedback']}" for t in s["tests"] if t["status"] != "passed"]
    assert s["score"] == pytest.approx(s["max_score"]) and not failed, failed


@pytest.mark.parametrize("stage_id", IDS)
def test_starter_scores_zero_and_says_not_implemented(starter_report, stage_id):
    s = stage_of(starter_report, stage_id)
    assert s["score"] == 0
    assert any("NotImplementedError" in t["feedback"] for t in s["tests"])


def test_check_runs_its_pytest_session_itself_and_its_report_follows_schema_v1_too():
    """`check` skips the schema check at run time (it only prints its report); the report is valid."""
    code = ("import json, sys; from grader.engine import report, run; "
            "r = run.grade(sys.argv[1], kind='public', stage_ids=['a02_softmax', 'a05_encoder'], pytest_here=True, "
            "validate=False); report.validate(r); print(json.dumps([r['score'], r['max_score']]))")
    done = subprocess.run([sys.executable, "-c", code, str(paths.SOLUTIONS)], cwd=paths.ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(paths.ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    score, max_score = json.loads(done.stdout.strip().splitlines()[-1])
    assert score == max_score > 0


def test_public_tests_pass_on_reference_and_fail_on_starter():
    ref = grade_cached(paths.SOLUTIONS, kind="public")
    start = grade_cached(paths.STARTER, kind="public")
    for s in ref["stages"]:
        failed = [t["feedback"] for t in s["tests"] if t["status"] != "passed"]
        assert s["score"] == pytest.approx(s["max_score"]), failed
    assert start["score"] == 0 and start.get("bonus_score", 0) == 0
