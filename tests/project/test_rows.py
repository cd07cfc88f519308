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
    warnings = canvas.write(tmp_path / "canvas.csv", rows, CHOSEN, CanvasSettings())
    header, points, dee = _read(tmp_path / "canvas.csv")
    assert warnings == [] and header[:5] == list(canvas.IDENTITY) and points[0] == canvas.POINTS_ROW
    assert dee[3] == "dee" and dee[5:] == ["8", "4", "12"]
