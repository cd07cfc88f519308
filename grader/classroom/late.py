"""Lateness: what a stage handed in after its deadline costs, under the term's policy (course.toml).

The rules, in the order they apply (``assess``):

* A stage's time is when its graded version was **first seen** by the course: by ``grader collect``
  (the moment of collection, or earlier, when the instructor's clone already had it: its reflog) or
  in a manifest of an LMS export (``student,submitted_at``). A commit's own date is written by the
  student and is never used.
* Within ``grace_minutes`` after the deadline (plus the student's extension) it is on time;
  after that it is late by every day started since the deadline (1 minute late is 1 day).
* Work first seen more than ``cutoff_days`` after the deadline is not graded: the stage scores 0.
* Stages that share a deadline are one hand-in: being late for it costs its days once, not once
  per stage. The student's budget of ``late_days`` is spent in deadline order, on hand-ins whose
  late work scored points (a day spent on work worth nothing would be lost).
* Each day not covered by the budget costs ``penalty_per_day`` of the stage's score (at most all of it).
* A stage with no known time (a plain folder, no manifest) is on time; the report says so.

The scores the tests gave are never changed: the report's ``score`` stays theirs, and its ``late``
object gives the score before and after lateness (``score_after`` is the grade).
"""
from __future__ import annotations

import csv
import datetime as dt
from dataclasses import dataclass
from fractions import Fraction
from itertools import groupby
from zoneinfo import ZoneInfo

from .term import LatePolicy, TermError, parse_time


@dataclass(frozen=True)
class Seen:
    """When a stage's graded version was first seen, and by what."""
    at: dt.datetime
    via: str          # "collect" | "reflog" | "manifest"


def read_manifest(path, zone) -> dict:
    """``student,submitted_at`` rows (an LMS export's submission times; times without a UTC offset are in
    ``zone``) as student -> Seen. A row that cannot be read stops the batch with its line number: the
    instructor's file is wrong, and guessing a time would grade someone late or on time by mistake."""
    out = {}
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.DictReader(f)
            missing = {"student", "submitted_at"} - set(reader.fieldnames or ())
            if missing:
                raise TermError(f"{path}: the header must name the columns student,submitted_at "
                                f"(missing: {', '.join(sorted(missing))})")
            for row in reader:
                student = (row["student"] or "").strip()
                if not student:
                    continue
                where = f"{path} line {reader.line_num}"
                if student in out:
                    raise TermError(f"{where}: {student} is listed twice")
                out[student] = Seen(parse_time(row["submitted_at"] or "", zone, where), "manifest")
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise TermError(f"cannot read the manifest {path}: {exc}") from None
    return out


def choose(observed: list, policy: LatePolicy | None, student: str, stage_id: str, starter_blob: str = ""):
    """Which collected version of a stage counts: ``(observation or None, the latest observation left
    out because it came after the cut-off, or None)``. ``observed``: the student's collections of
    the stage, oldest first (``blob`` empty when the file was gone). The latest version counts; with
    ``late_changes = "ignore"`` the last version handed in on time does (a version still equal to the
    starter, ``starter_blob``, was not handed in). Never a version first seen after the cut-off."""
    if policy is None:
        last = observed[-1] if observed else None
        return (last if last and last["blob"] else None), None
    if policy.late_changes == "ignore":
        on_time = [o for o in observed if o["blob"] and o["blob"] != starter_blob
                   and policy.days_late(student, stage_id, o["first_seen"]) == 0]
        if on_time:
            return on_time[-1], None
    cut = None
    for o in reversed(observed):
        if not o["blob"]:
            return None, cut
        if policy.after_cutoff(student, stage_id, o["first_seen"]):
            cut = cut or o
            continue
        return o, cut
    return None, cut


def _iso(when: dt.datetime | None, zone) -> str | None:
    return None if when is None else when.astimezone(zone).isoformat(timespec="seconds")


def assess(policy: LatePolicy, student: str, report: dict, seen: dict, cut_off: dict | None = None) -> dict:
    """The report's ``late`` object. ``seen``: stage id -> Seen of the graded version; ``cut_off``:
    stage id -> Seen of work that was left out because it came after the cut-off (collected repositories)."""
    zone = ZoneInfo(policy.timezone)
    cut_off = cut_off or {}
    rows = []
    for s in report["stages"]:
        sid, before = s["id"], Fraction(s["score"])
        at = seen.get(sid) or cut_off.get(sid)
        row = {"id": sid, "deadline": policy.deadline(student, sid), "submitted_at": at.at if at else None,
               "seen_via": at.via if at else None, "days_late": 0, "days_penalised": 0,
               "before": before, "after": before, "bonus": bool(s.get("bonus"))}
        if sid in cut_off or (at and policy.after_cutoff(student, sid, at.at)):
            row.update(status="after_cutoff", days_late=policy.days_late(student, sid, at.at), after=Fraction(0))
        elif at is None:
            row["status"] = "not_submitted" if s["status"] == "missing" else "no_time"
        else:
            row["days_late"] = policy.days_late(student, sid, at.at)
            row["status"] = "late" if row["days_late"] else "on_time"
        rows.append(row)

    left, deadlines = policy.late_days, []
    rows.sort(key=lambda r: (r["deadline"], r["id"]))
    for due, group in groupby(rows, key=lambda r: r["deadline"]):
        group = list(group)
        late = [r for r in group if r["status"] == "late"]
        worth = [r["days_late"] for r in late if r["before"] > 0]
        charged = min(max(worth, default=0), left)
        left -= charged
        for r in late:
            if r["before"] > 0:
                r["days_penalised"] = max(0, r["days_late"] - charged)
                r["after"] = r["before"] * max(Fraction(0), 1 - policy.penalty_per_day * r["days_penalised"])
        deadlines.append({"deadline": _iso(due, zone), "stages": [r["id"] for r in group],
                          "days_late": max((r["days_late"] for r in group), default=0), "days_charged": charged})

    def total(key, bonus):
        return sum((r[key] for r in rows if r["bonus"] == bonus), Fraction(0))

    out = {"policy": policy.describe(),
           "days_late": sum(d["days_late"] for d in deadlines),
           "days_charged": sum(d["days_charged"] for d in deadlines),
           "late_days_left": left,
           "penalty": float(total("before", False) - total("after", False)),
           "score_before": float(total("before", False)), "score_after": float(total("after", False)),
           "deadlines": deadlines,
           "stages": [{"id": r["id"], "status": r["status"], "deadline": _iso(r["deadline"], zone),
                       "submitted_at": _iso(r["submitted_at"], zone), "seen_via": r["seen_via"],
                       "days_late": r["days_late"], "days_penalised": r["days_penalised"],
                       "score_before": float(r["before"]), "score_after": float(r["after"])} for r in rows]}
    if any(r["bonus"] for r in rows):
        out["bonus_before"], out["bonus_after"] = float(total("before", True)), float(total("after", True))
    return out
