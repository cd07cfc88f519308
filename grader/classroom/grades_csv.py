"""``grades.csv``: one row per submission, the class's grades as the instructor keeps them.

Each stage's score as the tests gave it, total, bonus, then what lateness did (days late, late
days charged and left, the penalty) and the final figures: ``final_total``, ``final_bonus`` and
``course_total`` (final core plus bonus, never above the core's maximum). A submission with no
grade has empty score cells and its reason, never a silent zero.
"""
from __future__ import annotations

from pathlib import Path

from . import spreadsheet
from .rows import Row
from .spreadsheet import fmt, safe_cell

LATE_COLUMNS = ("days_late", "days_charged", "late_days_left", "late_penalty")
FINAL_COLUMNS = ("final_total", "final_bonus", "course_total")


def _grade_cells(row: Row, stage_ids: list) -> tuple[list, list]:
    """(each stage, total and bonus as the tests gave them; the late policy's and the final cells)."""
    final = row.final
    if final is None:
        return [""] * (len(stage_ids) + 2), [""] * (len(LATE_COLUMNS) + len(FINAL_COLUMNS))
    rep, lt, per = row.report, row.late, row.scores
    tests = [*(fmt(per.get(sid, 0.0)) for sid in stage_ids), fmt(rep["score"]), fmt(rep.get("bonus_score", 0.0))]
    late = [lt["days_late"], lt["days_charged"], lt["late_days_left"], fmt(lt["penalty"])] if lt else [""] * 4
    return tests, [*late, fmt(final.core), fmt(final.bonus), fmt(final.total)]


def write(path: Path, rows: list[Row], chosen) -> None:
    """grades.csv (see the module's docstring)."""
    stage_ids = [s.id for s in chosen]
    core_max = fmt(sum(s.points for s in chosen if not s.bonus))
    table = [["student", *stage_ids, "total", "bonus", "max_total", *LATE_COLUMNS, *FINAL_COLUMNS,
              "status", "error", "sha256", "graded_at"]]
    for r in rows:
        tests, after = _grade_cells(r, stage_ids)
        table.append([safe_cell(r.job.id), *tests, core_max, *after, r.status.value, safe_cell(r.error or ""),
                      r.job.sha256, r.graded_at or ""])
    spreadsheet.write(path, table)
