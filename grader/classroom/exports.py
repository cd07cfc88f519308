"""The class's grades as spreadsheets: ``grades.csv`` and ``grades-canvas.csv``.

``grades.csv``: one row per submission: each stage's score as the tests gave it, total, bonus,
then what lateness did (days late, late days charged and left, the penalty) and the final figures:
``final_total``, ``final_bonus`` and ``course_total`` (final core plus bonus, never above the core's
maximum). A submission with no grade has empty score cells and its reason, never a silent zero.

``grades-canvas.csv``: the layout Canvas's gradebook import reads. Canvas (Grades > Import) takes
the layout of its own export: the columns ``Student``, ``ID``, ``SIS User ID``, ``SIS Login ID``,
``Section``, then one column per assignment, and a second row ``Points Possible``. It matches each
row to a student by ``ID``, ``SIS User ID`` or ``SIS Login ID``; a column named ``Name`` creates that
assignment, ``Name (12345)`` updates assignment 12345. A blank cell changes nothing, so a student
with no grade here keeps what Canvas has.

The grades are final: each stage's score after the late policy, and the course total (the core
stages after lateness plus the bonus, never above the core's maximum). Who is who comes from
``[canvas]`` of course.toml: Canvas's own export (its identity columns) and the column of it that
holds this grader's student ids, optionally through a roster (GitHub user name -> identifier: GitHub
Classroom's ``classroom_roster.csv`` or Classroom 50's ``roster.csv``, user name -> e-mail). Without
an export, each row carries the student id as ``SIS Login ID``.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

from grader.engine.atomic import write_bytes

from .term import CanvasSettings, TermError

HAS_GRADE = ("graded", "outdated")   # row statuses that come with scores
IDENTITY = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
POINTS_ROW = "    Points Possible"   # as Canvas writes it in its exports
# A roster's (GitHub user name, what Canvas knows the student by) columns: GitHub Classroom's classroom_roster.csv,
# Classroom 50's roster.csv.
ROSTERS = (("github_username", "identifier"), ("username", "email"))


def _read_csv(path: Path, what: str, needed) -> list:
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            missing = [c for c in needed if c not in (reader.fieldnames or ())]
            if missing:
                raise TermError(f"{what} {path} has no column {', '.join(missing)}")
            return list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise TermError(f"cannot read {what} {path}: {exc}") from None


def identities(settings: CanvasSettings) -> dict:
    """The grader's student id -> Canvas's identity columns (empty without an export)."""
    if settings.export is None:
        return {}
    rows = _read_csv(settings.export, "the Canvas export", [*IDENTITY[:1], settings.match_column])
    by_key = {}
    for row in rows:
        key = (row.get(settings.match_column) or "").strip()
        if key and not row["Student"].strip().startswith("Points Possible"):
            by_key[key] = {c: row.get(c, "") for c in IDENTITY}
    if settings.roster is None:
        return by_key
    rows = _read_csv(settings.roster, "the roster", [])
    layout = next((cols for cols in ROSTERS if rows and all(c in rows[0] for c in cols)), None)
    if layout is None:
        raise TermError(f"the roster {settings.roster} has neither {' nor '.join(','.join(c) for c in ROSTERS)} "
                        "columns")
    user, key = layout
    return {r[user].strip(): by_key[r[key].strip()] for r in rows if r[user].strip() and r[key].strip() in by_key}


def final_scores(row: dict) -> dict | None:
    """A graded row's scores after lateness: stage id -> score, ``core``, ``bonus`` and ``total``
    (the course total: core plus bonus, never above the core's maximum)."""
    rep = row.get("report")
    if row["status"] not in HAS_GRADE or not rep:
        return None
    lt = row.get("late")
    per = {s["id"]: s["score_after"] for s in lt["stages"]} if lt else {s["id"]: s["score"] for s in rep["stages"]}
    core = lt["score_after"] if lt else rep["score"]
    bonus = lt.get("bonus_after", 0.0) if lt else rep.get("bonus_score", 0.0)
    return {**per, "core": core, "bonus": bonus, "total": min(rep["max_score"], core + bonus)}


def write_grades(path: Path, rows: list, chosen) -> None:
    """grades.csv: one row per submission (see the module's docstring)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    stage_ids = [s.id for s in chosen]
    w.writerow(["student", *stage_ids, "total", "bonus", "max_total", "days_late", "days_charged",
                "late_days_left", "late_penalty", "final_total", "final_bonus", "course_total",
                "status", "error", "sha256", "graded_at"])
    core_max = sum(s.points for s in chosen if not s.bonus)
    for r in rows:
        rep, final, lt = r["report"], final_scores(r), r.get("late")
        if final is not None:
            per = {s["id"]: s["score"] for s in rep["stages"]}
            cells = [*(fmt(per.get(sid, 0.0)) for sid in stage_ids), fmt(rep["score"]),
                     fmt(rep.get("bonus_score", 0.0))]
            late_cells = ([lt["days_late"], lt["days_charged"], lt["late_days_left"], fmt(lt["penalty"])]
                          if lt else [""] * 4)
            final_cells = [fmt(final["core"]), fmt(final["bonus"]), fmt(final["total"])]
        else:
            cells, late_cells, final_cells = [""] * (len(stage_ids) + 2), [""] * 4, [""] * 3
        w.writerow([safe_cell(r["job"].id), *cells, fmt(core_max), *late_cells, *final_cells, r["status"],
                    safe_cell(r["error"] or ""), r["job"].sha256, r["graded_at"] or ""])
    write_bytes(str(path), buf.getvalue().encode())


def write_canvas(path: Path, rows: list, chosen, settings: CanvasSettings) -> list:
    """Write the Canvas CSV; return warnings (students Canvas will not be able to match)."""
    who = identities(settings)
    stage_cols = ([(s, settings.columns.get(s.id) or f"{s.id}: {s.title}") for s in chosen]
                  if settings.stage_columns else [])
    core_max = sum(s.points for s in chosen if not s.bonus)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*IDENTITY, *(name for _, name in stage_cols), settings.total_column])
    w.writerow([POINTS_ROW, "", "", "", "", *(fmt(s.points) for s, _ in stage_cols), fmt(core_max)])
    warnings = []
    for r in rows:
        scores = final_scores(r)
        if scores is None:
            continue
        sid = r["job"].id
        ident = who.get(sid)
        if ident is None:
            if settings.export is not None:
                warnings.append(f"{sid} is not in the Canvas export's {settings.match_column!r} column")
            ident = {"Student": sid, "ID": "", "SIS User ID": "", "SIS Login ID": sid, "Section": ""}
        w.writerow([*(safe_cell(ident[c]) for c in IDENTITY), *(fmt(scores.get(s.id, 0.0)) for s, _ in stage_cols),
                    fmt(scores["total"])])
    write_bytes(str(path), buf.getvalue().encode())
    return warnings


def safe_cell(text: str) -> str:
    """Text a spreadsheet will not run as a formula (a folder or zip name is chosen by the student)."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def fmt(x) -> str:
    """A score as a spreadsheet cell: up to 4 decimals, no trailing zeros."""
    return f"{float(x):.4f}".rstrip("0").rstrip(".") if x not in ("", None) else ""
