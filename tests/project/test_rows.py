"""A batch's rows (grader.classroom.rows) and the spreadsheets written from them (grades_csv, canvas,
spreadsheet), without grading: which rows come with scores, the final scores, the cells."""
from __future__ import annotations

import csv

import pytest
from conftest import made_report

from grader.classroom import canvas, grades_csv
from grader.classroom.discovery import Job
from grader.classroom.rows import Row, Status
from grader.classroom.term import CanvasSettings
from grader.engine import stages

CHOSEN = stages.resolve(["a01_similarity", "a02_softmax"])


def _report(a01: float, a02: float, bonus: float | None = None) -> dict:
    extra = [{"id": "a09_retrieval", "score": bonus, "max_score": 10.0, "bonus": True}] if bonus is not None else []
    return made_report([{"id": "a01_similarity", "score": a01}, {"id": "a02_softmax", "score": a02}, *extra])


def _late(a01: float, a02: float, penalty: float) -> dict:
    return {"score_after": a01 + a02, "days_late": 2, "days_charged": 1, "late_days_left": 0, "penalty": penalty,
            "stages": [{"id": "a01_similarity", "score_after": a01}, {"id": "a02_softmax", "score_after": a02}]}


def _job(sid: str) -> Job:
    return Job(sid, sid, f"/class/{sid}", "folder", "0" * 64)


@pytest.mark.parametrize("status", list(Status))
def test_only_graded_and_outdated_rows_with_a_report_have_a_grade(status):
    row = Row(_job("x"), status, _report(8, 8))
    assert row.has_grade == (status in (Status.GRADED, Status.OUTDATED))
    assert (row.final is None) == (not row.has_grade) and (row.graded is None) == (not row.has_grade)
    assert not Row(_job("x"), status, None).has_grade
    assert f"{status:>10}".strip() == str(status) == status.value


def test_final_scores_are_the_late_policys_when_there_is_one():
    on_time = Row(_job("ann"), Status.GRADED, _report(8, 6))
    assert (on_time.final.core, on_time.final.total, on_time.final.stages) == (14, 14, {"a01_similarity": 8,
                                                                                        "a02_softmax": 6})
    late = Row(_job("bo"), Status.OUTDATED, _report(8, 6), late=_late(8, 4.5, 1.5))
    assert late.final.core == 12.5 and late.final.stages["a02_softmax"] == 4.5 and late.scores["a02_softmax"] == 6
    bonus = Row(_job("cy"), Status.GRADED, _report(8, 8, bonus=5.0))
    assert bonus.final.bonus == 5.0 and bonus.final.total == 16.0, "the course total never passes the core's maximum"


def _read(path) -> list:
    with open(path, newline="") as f:
        return list(csv.reader(f))


def test_grades_csv_blank_for_no_grade_and_safe_from_formulas(tmp_path):
    rows = [Row(_job("=cmd|' /C calc'!A0"), Status.GRADED, _report(8, 6), graded_at="2027-03-01T10:00:00+00:00"),
            Row(_job("dee"), Status.OUTDATED, _report(8, 8), late=_late(8, 4, 4)),
            Row(_job("eve"), Status.UNREADABLE, None, "no stage module")]
    grades_csv.write(tmp_path / "grades.csv", rows, CHOSEN)
    header, first, second, third = _read(tmp_path / "grades.csv")
    cells = [dict(zip(header, r)) for r in (first, second, third)]
    assert cells[0]["student"] == "'=cmd|' /C calc'!A0" and cells[0]["total"] == "14" and cells[0]["days_late"] == ""
    assert cells[0]["course_total"] == "14" and cells[0]["graded_at"] == "2027-03-01T10:00:00+00:00"
    assert cells[1]["a02_softmax"] == "8" and cells[1]["final_total"] == "12" and cells[1]["late_penalty"] == "4"
    assert cells[1]["status"] == "outdated"
    assert cells[2]["status"] == "unreadable" and cells[2]["error"] == "no stage module"
    assert all(cells[2][c] == "" for c in ("a01_similarity", "total", "final_total", "course_total"))
    assert cells[2]["max_total"] == "16"


def test_canvas_has_the_final_grades_of_graded_rows_only(tmp_path):
    rows = [Row(_job("dee"), Status.GRADED, _report(8, 8), late=_late(8, 4, 4)),
            Row(_job("eve"), Status.ERROR, None, "grading took longer than 300 s")]
    warning = canvas.write(tmp_path / "canvas.csv", rows, CHOSEN, CanvasSettings())
    header, points, dee = _read(tmp_path / "canvas.csv")
    assert "[canvas] export" in warning and "dee" in warning, "without an export Canvas cannot match anyone"
    assert header[:5] == list(canvas.IDENTITY) and points[0] == canvas.POINTS_ROW
    assert dee[3] == "dee" and dee[5:] == ["8", "4", "12"]


def _test(fn: str, status: str, feedback: str = "") -> dict:
    return {"id": f"a01_similarity::{fn}", "name": fn, "score": 0.0 if status != "passed" else 4.0,
            "max_score": 4.0, "status": status, "visibility": "visible", "feedback": feedback, "duration_s": 0.0}


STUB = "dot_product(<ndarray (3,)>) raised NotImplementedError: multiply matching components"
STUBS = {"id": "a01_similarity", "score": 0.0,
         "tests": [_test("test_a", "error", STUB), _test("test_b", "error", STUB)]}
BROKEN = {"id": "a01_similarity", "score": 0.0, "import_error": "SyntaxError: a01_similarity.py line 1: expected ':'",
          "tests": [_test("test_a", "error", "could not import the module: SyntaxError"),
                    _test("test_b", "error", "could not import the module: SyntaxError")]}


def test_grades_csv_tells_each_stage_apart_and_names_a_module_that_does_not_import(tmp_path):
    """Each stage is graded, not handed in (absent, or still the starter's stubs), does not import (with the
    error's first line, also in the row's error), or a grader error; a pending row says nothing yet."""
    half = {"id": "a01_similarity", "score": 4.0, "tests": [_test("test_a", "passed"), _test("test_b", "error", STUB)]}
    missing = {"id": "a02_softmax", "score": 0.0, "status": "missing"}
    rows = [Row(_job("bob"), Status.GRADED, made_report([BROKEN, missing])),
            Row(_job("cy"), Status.GRADED, made_report([STUBS, {"id": "a02_softmax", "score": 8.0}])),
            Row(_job("dee"), Status.GRADED, made_report([half, {"id": "a02_softmax", "score": 2.0}])),
            Row(_job("eve"), Status.ERROR, None, "the grader failed on this submission: ..."),
            Row(_job("fay"), Status.PENDING, None, "not graded yet")]
    grades_csv.write(tmp_path / "grades.csv", rows, CHOSEN)
    header, *lines = _read(tmp_path / "grades.csv")
    cells = {r[0]: dict(zip(header, r)) for r in lines}
    states = {who: (c["a01_similarity status"], c["a02_softmax status"]) for who, c in cells.items()}
    assert states == {"bob": ("does not import: SyntaxError: a01_similarity.py line 1: expected ':'", "not handed in"),
                      "cy": ("not handed in", "graded"), "dee": ("graded", "graded"),
                      "eve": ("grader error", "grader error"), "fay": ("", "")}
    assert cells["bob"]["status"] == "graded" and cells["bob"]["a01_similarity"] == "0"
    assert cells["bob"]["error"] == ("a01_similarity.py does not import (SyntaxError: a01_similarity.py line 1: "
                                     "expected ':')")
    assert cells["cy"]["error"] == "" and cells["eve"]["error"].startswith("the grader failed")


def test_the_most_failed_tests_count_only_what_was_attempted():
    """A module that does not import and functions still raising the starter's NotImplementedError are counted
    apart: the most-failed list holds only the tests of those who attempted them."""
    from grader.classroom import html_report
    wrong = {"id": "a01_similarity", "score": 4.0,
             "tests": [_test("test_a", "passed"), _test("test_b", "failed", "off by 0.5")]}
    rows = [Row(_job(who), Status.GRADED, made_report([stage])) for who, stage in
            (("ann", wrong), ("bob", BROKEN), ("cy", STUBS))]
    st = html_report.class_stats(rows, CHOSEN[:1])
    assert st["attempts"] == {"a01_similarity::test_a": 1, "a01_similarity::test_b": 1}
    assert st["fails"] == {"a01_similarity::test_b": 1}
    assert st["not_importable"] == {"a01_similarity": {"bob"}} and st["unfinished"] == {"a01_similarity": {"cy"}}
    page = html_report.class_page(rows, CHOSEN[:1])
    assert "Does not import" in page and "bob" in page


def test_the_outputs_of_a_class_read_each_row_s_typed_report_built_once(tmp_path, monkeypatch):
    """grades.csv, grades-canvas.csv, the HTML pages and the console summary each read a row's report as types
    (``Row.graded``, ``scores``, ``final``, ``stage_states``): it is built once a row, not once a read; a report
    the late policy replaces is built again, once."""
    from io import StringIO

    from rich.console import Console

    from grader.classroom import html_report, summary
    from grader.classroom.grading import Counts
    from grader.engine.report import Report
    rows = [Row(_job("ann"), Status.GRADED, _report(8, 6)), Row(_job("bo"), Status.OUTDATED, _report(8, 8)),
            Row(_job("cy"), Status.GRADED, _report(2, 0)), Row(_job("eve"), Status.UNREADABLE, None, "no module")]
    built, from_json = [], Report.from_json
    monkeypatch.setattr(Report, "from_json", staticmethod(lambda data: built.append(data) or from_json(data)))
    grades_csv.write(tmp_path / "grades.csv", rows, CHOSEN)
    canvas.write(tmp_path / "canvas.csv", rows, CHOSEN, CanvasSettings())
    html_report.write_all(tmp_path / "html", rows, CHOSEN)
    summary.print_summary(Console(file=StringIO()), rows, CHOSEN, Counts(found=4, skipped=0))
    assert len(built) == 3 and {id(r) for r in built} == {id(r.report) for r in rows[:3]}
    rows[0].report = {**rows[0].report, "late": None}
    assert rows[0].graded is rows[0].graded and len(built) == 4
