"""The course content is complete and consistent: every stage has its pieces,
points match the suites and the handouts, the reference scores full marks and the starter zero."""
import ast
import json
import os
import re
import subprocess
import sys
from fractions import Fraction

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
def test_every_test_has_exactly_one_points_entry_and_they_add_up(stage, kind):
    folder = paths.HIDDEN_TESTS if kind == "hidden" else paths.PUBLIC_TESTS
    functions = _test_functions(folder / f"test_{stage.id}.py")
    declared = set(stage.tests(kind))
    assert functions - declared == set(), f"tests without points in stage.toml [{kind}]"
    assert declared - functions == set(), f"stage.toml [{kind}] names tests that do not exist"
    points = stage.test_points(kind)
    assert sum(points.values()) == stage.points  # exact: load_stage also refuses anything else
    assert all(p > 0 and p % stages.POINTS_QUANTUM == 0 for p in points.values())


def test_stage_toml_refuses_weights_and_points_that_do_not_add_up(tmp_path, monkeypatch):
    folder = tmp_path / "a02_softmax"
    folder.mkdir()
    monkeypatch.setattr(paths, "ASSIGNMENTS", tmp_path)
    head = 'title = "t"\npoints = 2\n[hidden]\n'
    for body, says in [("test_a = { weight = 1 }\n", "has a weight"),
                       ("test_a = { points = 1 }\ntest_b = { points = 0.75 }\n", "add up to 1.75, not the stage's 2"),
                       ("test_a = { points = 1.9 }\ntest_b = { points = 0.1 }\n", "multiple of 0.25"),
                       ("test_a = { points = 2, visibility = 'secret' }\n", "visibility")]:
        (folder / "stage.toml").write_text(head + body)
        with pytest.raises(ValueError, match=re.escape(says)):
            stages.load_stage("a02_softmax")


def test_cases_of_a_function_share_its_points_in_quarters():
    assert stages.case_points(Fraction(3, 2), 3, "x") == Fraction(1, 2)
    with pytest.raises(ValueError, match=r"x: 3 cases share 1 points, 0.333333 each.*of cases \(0.75\)"):
        stages.case_points(Fraction(1), 3, "x")


HANDOUT_TABLE = {"en": ("| test | points |", r"^## How (?:you are|it is) graded \((\d+) (?:bonus )?points\)$"),
                 "ko": ("| 테스트 | 배점 |", r"^## 채점 방식 \((?:보너스 )?(\d+)점\)$")}


@pytest.mark.parametrize("stage", STAGES, ids=IDS)
@pytest.mark.parametrize("language", ["en", "ko"])
def test_handout_grading_table_shows_the_points_of_stage_toml(stage, language):
    """The handout's "how you are graded" heading gives the stage's points, and its table one
    row per hidden test, in stage.toml's order, with that test's points."""
    header, heading = HANDOUT_TABLE[language]
    lines = stage.handouts[language].read_text(encoding="utf-8").splitlines()
    totals = [int(m.group(1)) for line in lines if (m := re.match(heading, line))]
    assert totals == [stage.points], f"the grading heading should give {stage.points:g} points"
    assert not [line for line in lines if re.match(r"\|\s*(test|테스트)\s*\|\s*(weight|가중치)\s*\|", line)]
    assert lines.count(header) == 1, f"no grading table headed {header!r}"
    rows, i = [], lines.index(header) + 2  # past the |---|---| line
    while i < len(lines) and lines[i].startswith("|"):
        rows.append(lines[i])
        i += 1
    shown = [Fraction(row.rstrip().rstrip("|").rsplit("|", 1)[1].strip()) for row in rows]
    expected = list(stage.test_points("hidden").values())
    assert shown == expected, f"the table's points {[f'{float(x):g}' for x in shown]} are not stage.toml's " \
                              f"{[f'{float(x):g}' for x in expected]} (in the order of stage.toml [hidden])"


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


def test_every_test_case_is_worth_a_multiple_of_a_quarter_point(reference_report):
    public = grade_cached(paths.SOLUTIONS, kind="public")
    odd = [t["id"] for r in (reference_report, public) for s in r["stages"] for t in s["tests"]
           if t["max_score"] <= 0 or (Fraction(t["max_score"]) * 4).denominator != 1]
    assert not odd


def test_validate_names_the_stage_whose_score_is_not_the_sum_of_its_tests(reference_report):
    import copy

    import jsonschema
    broken = copy.deepcopy(reference_report)
    stage = broken["stages"][1]
    stage["tests"][0]["score"] -= 0.25
    with pytest.raises(jsonschema.ValidationError, match=f"stage {stage['id']}: score is {stage['score']!r}"):
        report.validate(broken)
    broken = copy.deepcopy(reference_report)
    broken["score"] -= 1e-6
    with pytest.raises(jsonschema.ValidationError, match="the report: score"):
        report.validate(broken)
    broken = copy.deepcopy(reference_report)
    broken["bonus_score"] = 9.75
    with pytest.raises(jsonschema.ValidationError, match="the report: bonus_score"):
        report.validate(broken)


@pytest.mark.parametrize("stage_id", IDS)
def test_reference_scores_full_marks(reference_report, stage_id):
    s = stage_of(reference_report, stage_id)
    failed = [f"{t['id']}: {t['feedback']}" for t in s["tests"] if t["status"] != "passed"]
    assert s["score"] == s["max_score"] == stages.get(stage_id).points and not failed, failed


@pytest.mark.parametrize("stage_id", IDS)
def test_starter_scores_zero_and_says_not_implemented(starter_report, stage_id):
    s = stage_of(starter_report, stage_id)
    assert s["score"] == 0
    assert any("NotImplementedError" in t["feedback"] for t in s["tests"])


def test_check_runs_its_pytest_session_itself_and_its_report_follows_schema_v1_too():
    """`check` skips the schema check at run time (it only prints its report); the report is valid."""
    code = ("import json, sys; from grader.engine import report, run; "
            "from grader.engine.options import GradingOptions; "
            "r = run.grade(sys.argv[1], GradingOptions(kind='public', stage_ids=['a02_softmax', 'a05_encoder'], "
            "pytest_here=True, validate=False)); report.validate(r); print(json.dumps([r['score'], r['max_score']]))")
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
