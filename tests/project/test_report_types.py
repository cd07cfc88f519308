"""engine/report: the typed report (Report, StageResult, TestResult) and the schema kept together.

Every report a grading returns passes ``report.validate``, which round-trips it through the types, so
every grading in the project's tests checks that the types and the schema agree; these tests show the
check can fail, and build the reports the engine makes without a grading."""
import copy

import jsonschema
import pytest

from grader.engine import paths, report, stages
from grader.engine.report import Report, StageStatus, TestStatus

NUMPY_STAGES = ["a01_similarity", "a02_softmax"]


@pytest.fixture(scope="module")
def reference(graded):
    return graded(paths.SOLUTIONS, stages=NUMPY_STAGES)


def test_a_graded_report_round_trips_through_the_types(reference):
    typed = Report.from_json(reference)
    assert typed.to_json() == reference
    assert [s.id for s in typed.stages] == NUMPY_STAGES
    assert all(t.status is TestStatus.PASSED for s in typed.stages for t in s.tests)
    assert all(s.status is StageStatus.GRADED for s in typed.stages)
    assert typed.score == typed.max_score == reference["score"] > 0


@pytest.mark.parametrize("tamper", ["extra_test_field", "extra_report_field", "unknown_status", "wrong_total"])
def test_a_report_the_types_do_not_fit_fails_validation(reference, tamper):
    bad = copy.deepcopy(reference)
    if tamper == "extra_test_field":
        bad["stages"][0]["tests"][0]["grade_letter"] = "A"
    elif tamper == "extra_report_field":
        bad["instructor_note"] = "x"
    elif tamper == "unknown_status":
        bad["stages"][0]["tests"][0]["status"] = "skipped"
    else:
        bad["score"] += 1
    with pytest.raises(jsonschema.ValidationError):
        report.validate(bad)


def test_a_submission_that_could_not_be_graded_gets_zero_everywhere_and_the_reason():
    chosen = stages.all_stages()
    sub = {"id": "ana", "path": "/class/ana.zip", "sha256": "0" * 64, "format": "zip"}
    rep = report.not_graded(sub, "hidden", chosen, "the worker ran out of memory", {"mode": "strict"})
    data = rep.to_json()
    assert data["score"] == 0 and data["max_score"] == sum(float(s.points) for s in chosen if not s.bonus)
    assert data["bonus_score"] == 0 and data["bonus_max_score"] == sum(float(s.points) for s in chosen if s.bonus)
    assert data["errors"] == ["the worker ran out of memory"]
    assert set(data["environment"]) == {"python", "platform"}
    assert all(t["status"] == "missing" and "the worker ran out of memory" in t["feedback"]
               for s in data["stages"] for t in s["tests"])
    assert Report.from_json(data).to_json() == data
