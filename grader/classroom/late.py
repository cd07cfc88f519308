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
from enum import Enum
from fractions import Fraction
from itertools import groupby
from zoneinfo import ZoneInfo

from grader.engine.report import Report, StageResult, StageStatus

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


class LateStatus(str, Enum):
    """A stage's status in the report's ``late`` object."""
    ON_TIME = "on_time"
    LATE = "late"
    AFTER_CUTOFF = "after_cutoff"
    NO_TIME = "no_time"              # no submission time known: counted on time
    NOT_SUBMITTED = "not_submitted"


@dataclass
class StageLateness:
    """One stage of a report under the late policy (``late.stages[]``)."""
    id: str
    deadline: dt.datetime
    status: LateStatus
    before: Fraction                 # the score the tests gave
    after: Fraction                  # the score after lateness (never above ``before``)
    bonus: bool
    seen: Seen | None = None         # when (and how) its graded version was first seen
    days_late: int = 0
    days_penalised: int = 0

    def to_json(self, zone) -> dict:
        return {"id": self.id, "status": self.status.value, "deadline": _iso(self.deadline, zone),
                "submitted_at": _iso(self.seen.at if self.seen else None, zone),
                "seen_via": self.seen.via if self.seen else None, "days_late": self.days_late,
                "days_penalised": self.days_penalised, "score_before": float(self.before),
                "score_after": float(self.after)}


def _stage_lateness(policy: LatePolicy, student: str, stage: StageResult, seen: dict,
                    cut_off: dict) -> StageLateness:
    """Where one stage stands before the budget is spent: on time, late by how many days, or after the cut-off."""
    sid, before = stage.id, Fraction(stage.score)
    at = seen.get(sid) or cut_off.get(sid)
    row = StageLateness(sid, policy.deadline(student, sid), LateStatus.ON_TIME, before, before, stage.bonus, at)
    if sid in cut_off or (at and policy.after_cutoff(student, sid, at.at)):
        row.status, row.after = LateStatus.AFTER_CUTOFF, Fraction(0)
        row.days_late = policy.days_late(student, sid, at.at)
    elif at is None:
        row.status = LateStatus.NOT_SUBMITTED if stage.status is StageStatus.MISSING else LateStatus.NO_TIME
    else:
        row.days_late = policy.days_late(student, sid, at.at)
        row.status = LateStatus.LATE if row.days_late else LateStatus.ON_TIME
    return row


def assess(policy: LatePolicy, student: str, report: dict, seen: dict, cut_off: dict | None = None) -> dict:
    """The report's ``late`` object. ``seen``: stage id -> Seen of the graded version; ``cut_off``:
    stage id -> Seen of work that was left out because it came after the cut-off (collected repositories)."""
    zone = ZoneInfo(policy.timezone)
    rows = sorted((_stage_lateness(policy, student, s, seen, cut_off or {}) for s in Report.from_json(report).stages),
                  key=lambda r: (r.deadline, r.id))
    left, deadlines = policy.late_days, []
    for due, group in groupby(rows, key=lambda r: r.deadline):
        group = list(group)
        late = [r for r in group if r.status is LateStatus.LATE]
        charged = min(max((r.days_late for r in late if r.before > 0), default=0), left)
        left -= charged
        for r in late:
            if r.before > 0:
                r.days_penalised = max(0, r.days_late - charged)
                r.after = r.before * max(Fraction(0), 1 - policy.penalty_per_day * r.days_penalised)
        deadlines.append({"deadline": _iso(due, zone), "stages": [r.id for r in group],
                          "days_late": max((r.days_late for r in group), default=0), "days_charged": charged})

    def total(bonus: bool, after: bool) -> Fraction:
        return sum((r.after if after else r.before for r in rows if r.bonus == bonus), Fraction(0))

    out = {"policy": policy.describe(),
           "days_late": sum(d["days_late"] for d in deadlines),
           "days_charged": sum(d["days_charged"] for d in deadlines),
           "late_days_left": left,
           "penalty": float(total(False, False) - total(False, True)),
           "score_before": float(total(False, False)), "score_after": float(total(False, True)),
           "deadlines": deadlines,
           "stages": [r.to_json(zone) for r in rows]}
    if any(r.bonus for r in rows):
        out["bonus_before"], out["bonus_after"] = float(total(True, False)), float(total(True, True))
    return out
