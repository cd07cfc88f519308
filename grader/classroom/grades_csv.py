"""``grades.csv``: one row per submission, the class's grades as the instructor keeps them.

Each stage's score as the tests gave it, total, bonus, then what lateness did (days late, late
days charged and left, the penalty) and the final figures: ``final_total``, ``final_bonus`` and
``course_total`` (final core plus bonus, never above the core's maximum). A submission with no
grade has empty score cells and its reason, never a silent zero.

Then, for each stage, ``<stage> status``: what its score stands for (``rows.Row.stage_states``: graded, not
handed in, does not import with the error's first line, or grader error). A module that does not import is
also named in the row's ``error``, so that a broken file is never taken for a stage left undone.
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


def _error(row: Row) -> str:
    """The row's ``error``: why it has no grade, or which modules do not import."""
    rep = row.graded
    broken = [f"{s.id}.py does not import ({s.import_error})" for s in rep.stages if s.import_error] if rep else []
    return "; ".join([e for e in (row.error, *broken) if e])


def write(path: Path, rows: list[Row], chosen) -> None:
    """grades.csv (see the module's docstring)."""
    stage_ids = [s.id for s in chosen]
    core_max = fmt(sum(s.points for s in chosen if not s.bonus))
    table = [["student", *stage_ids, "total", "bonus", "max_total", *LATE_COLUMNS, *FINAL_COLUMNS,
              "status", "error", "sha256", "graded_at", *(f"{sid} status" for sid in stage_ids)]]
    for r in rows:
        tests, after = _grade_cells(r, stage_ids)
        table.append([safe_cell(r.job.id), *tests, core_max, *after, r.status.value, safe_cell(_error(r)),
                      r.job.sha256, r.graded_at or "", *(safe_cell(c) for c in r.stage_states(stage_ids))])
    spreadsheet.write(path, table)
