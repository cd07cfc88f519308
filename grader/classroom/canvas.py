"""``grades-canvas.csv``: the class's final grades in the layout Canvas's gradebook import reads.

Canvas (Grades > Import) takes the layout of its own export: the columns ``Student``, ``ID``,
``SIS User ID``, ``SIS Login ID``, ``Section``, then one column per assignment, and a second row
``Points Possible``. It matches each row to a student by ``ID``, ``SIS User ID`` or ``SIS Login
ID``; a column named ``Name`` creates that assignment, ``Name (12345)`` updates assignment 12345. A
blank cell changes nothing, so a student with no grade here keeps what Canvas has.

The grades are final: each stage's score after the late policy, and the course total (the core
stages after lateness plus the bonus, never above the core's maximum). Who is who comes from
``[canvas]`` of course.toml: Canvas's own export (its identity columns) and the column of it that
holds this grader's student ids, optionally through a roster (GitHub user name -> identifier: GitHub
Classroom's ``classroom_roster.csv`` or Classroom 50's ``roster.csv``, user name -> e-mail). Without
an export, each row carries the student id as ``SIS Login ID``.
"""
from __future__ import annotations

import csv
from pathlib import Path

from grader.i18n import Message, tr

from . import spreadsheet
from .rows import Row
from .spreadsheet import fmt, safe_cell
from .term import CanvasSettings, TermError

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


def _unmatched(who: list, settings: CanvasSettings) -> Message | str:
    """The one warning of a batch whose Canvas file names students Canvas cannot match (``who``), with what to
    set (a marked text: the batch says it in its language); "" when it can match every row."""
    if not who:
        return ""
    names = ", ".join(who[:5])
    if len(who) > 5:
        names = tr("{names} and {count} more", names=names, count=len(who) - 5)
    if settings.export is None:
        return tr("grades-canvas.csv cannot be matched to Canvas students ({count} rows: {names}): without "
                  "[canvas] export in course.toml its ID and SIS User ID columns are blank and SIS Login ID holds "
                  "the grader's id. Set [canvas] export to a gradebook exported from Canvas (Grades > Export) and "
                  "match_column to its column holding these ids (or add roster), then run the batch again",
                  count=len(who), names=names)
    return tr("grades-canvas.csv: {count} students are not in the Canvas export's {column} column ({names}), so "
              "Canvas will not match them: check [canvas] match_column and roster in course.toml, or export the "
              "gradebook from Canvas again", count=len(who), column=repr(settings.match_column), names=names)


def write(path: Path, rows: list[Row], chosen, settings: CanvasSettings) -> Message | str:
    """Write grades-canvas.csv; return the one warning about the students Canvas will not be able to match
    (``_unmatched``), or ""."""
    who = identities(settings)
    stage_cols = ([(s, settings.columns.get(s.id) or f"{s.id}: {s.title}") for s in chosen]
                  if settings.stage_columns else [])
    core_max = sum(s.points for s in chosen if not s.bonus)
    table = [[*IDENTITY, *(name for _, name in stage_cols), settings.total_column],
             [POINTS_ROW, "", "", "", "", *(fmt(s.points) for s, _ in stage_cols), fmt(core_max)]]
    unmatched = []
    for r in rows:
        final = r.final
        if final is None:
            continue
        sid = r.job.id
        ident = who.get(sid)
        if ident is None:
            unmatched.append(sid)
            ident = {"Student": sid, "ID": "", "SIS User ID": "", "SIS Login ID": sid, "Section": ""}
        table.append([*(safe_cell(ident[c]) for c in IDENTITY),
                      *(fmt(final.stages.get(s.id, 0.0)) for s, _ in stage_cols), fmt(final.total)])
    spreadsheet.write(path, table)
    return _unmatched(unmatched, settings)
