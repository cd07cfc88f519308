"""The term's settings, from ``course.toml``: deadlines, late days, the Canvas export, repository names.

``course.toml`` (the repository's root, or ``--course PATH``) is data an instructor edits once a
term; this module only reads and checks it, and says which line is wrong when it is. The rules
that use it live in ``late.py`` (lateness), ``collect.py`` (repository names) and ``canvas.py``.
"""
from __future__ import annotations

import datetime as dt
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from grader.engine import paths, stages

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI (requirements.txt)
    import tomli as tomllib

DEFAULT_FILE = paths.ROOT / "course.toml"
LATE_CHANGES = ("count", "ignore")


class TermError(ValueError):
    """course.toml (or a manifest) says something that cannot be used; the message names what."""


@dataclass(frozen=True)
class LatePolicy:
    """When each stage is due and what lateness costs (``[late]`` of course.toml)."""
    deadlines: dict                      # stage id -> aware datetime (every stage of the course)
    grace: dt.timedelta = dt.timedelta(0)
    late_days: int = 0                   # each student's budget for the term
    penalty_per_day: Fraction = Fraction(0)
    cutoff: dt.timedelta | None = None   # after deadline (+ extension): not graded
    late_changes: str = "count"
    extensions: dict = field(default_factory=dict)  # student -> {stage id or "*": days}
    timezone: str = "UTC"

    def deadline(self, student: str, stage_id: str) -> dt.datetime:
        """The stage's deadline for this student, extension included."""
        ext = self.extensions.get(student, {})
        days = ext.get(stage_id, ext.get("*", 0))
        return self.deadlines[stage_id] + dt.timedelta(days=days)

    def days_late(self, student: str, stage_id: str, at: dt.datetime) -> int:
        """Whole days (started) after the deadline; 0 within the grace period."""
        due = self.deadline(student, stage_id)
        if at <= due + self.grace:
            return 0
        return -(-(at - due) // dt.timedelta(days=1))  # ceiling

    def after_cutoff(self, student: str, stage_id: str, at: dt.datetime) -> bool:
        return self.cutoff is not None and at > self.deadline(student, stage_id) + self.cutoff

    def describe(self) -> dict:
        """The policy as the report's ``late.policy`` shows it."""
        return {"late_days": self.late_days, "grace_minutes": self.grace / dt.timedelta(minutes=1),
                "penalty_per_day": float(self.penalty_per_day),
                "cutoff_days": None if self.cutoff is None else self.cutoff / dt.timedelta(days=1),
                "late_changes": self.late_changes, "timezone": self.timezone}


@dataclass(frozen=True)
class CanvasSettings:
    export: Path | None = None           # Canvas's own gradebook export: the identity columns
    match_column: str = "SIS Login ID"   # the column of the export holding the grader's student ids
    roster: Path | None = None           # a roster: GitHub user name -> what the export's match_column holds
    total_column: str = "Transformer course"
    stage_columns: bool = True
    columns: dict = field(default_factory=dict)  # stage id -> column header


@dataclass(frozen=True)
class Term:
    source: Path | None
    late: LatePolicy | None
    canvas: CanvasSettings
    repo_prefix: str = ""


def load(path=None, stage_ids=None) -> Term:
    """Read course.toml (``path``, else the repository's; a missing default file means no policy).
    ``stage_ids``: every stage the course has (their deadlines must all be known)."""
    explicit = path is not None
    file = Path(path) if explicit else DEFAULT_FILE
    if not file.is_file():
        if explicit:
            raise TermError(f"{file} does not exist")
        return Term(None, None, CanvasSettings())
    try:
        with open(file, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise TermError(f"{file} is not valid TOML: {exc}") from None
    if stage_ids is None:
        stage_ids = [s.id for s in stages.all_stages()]
    late = _late(data.get("late"), stage_ids, file) if data.get("late") else None
    return Term(file, late, _canvas(data.get("canvas", {}), file),
                repo_prefix=str(data.get("classroom", {}).get("repo_prefix", "")))


def _late(section: dict, stage_ids, file: Path) -> LatePolicy:
    where = f"{file} [late]"
    tz_name = str(section.get("timezone", "UTC"))
    try:
        zone = ZoneInfo(tz_name)
    except (ZoneInfoNotFoundError, ValueError):
        raise TermError(f"{where}: unknown timezone {tz_name!r} (an IANA name such as 'Asia/Seoul')") from None
    given = section.get("deadlines", {})
    unknown = sorted(set(given) - set(stage_ids))
    if unknown:
        raise TermError(f"{where}.deadlines: no such stage {', '.join(unknown)}")
    default = section.get("deadline")
    deadlines = {}
    for sid in stage_ids:
        value = given.get(sid, default)
        if value is None:
            raise TermError(f"{where}: no deadline for {sid} (give `deadline`, for every stage, or one in "
                            "[late.deadlines])")
        deadlines[sid] = parse_time(value, zone, f"{where} deadline of {sid}")
    changes = str(section.get("late_changes", "count"))
    if changes not in LATE_CHANGES:
        raise TermError(f"{where}: late_changes must be one of {', '.join(LATE_CHANGES)}, not {changes!r}")
    rate = Fraction(str(section.get("penalty_per_day", 0)))
    if not 0 <= rate <= 1:
        raise TermError(f"{where}: penalty_per_day is a share of the score per day, between 0 and 1")
    budget = section.get("late_days", 0)
    if not isinstance(budget, int) or budget < 0:
        raise TermError(f"{where}: late_days must be a whole number of days, 0 or more")
    cutoff = section.get("cutoff_days")
    return LatePolicy(
        deadlines=deadlines, grace=dt.timedelta(minutes=_number(section.get("grace_minutes", 0), where)),
        late_days=budget, penalty_per_day=rate,
        cutoff=None if cutoff is None else dt.timedelta(days=_number(cutoff, where)),
        late_changes=changes, extensions=_extensions(section.get("extensions", {}), stage_ids, where),
        timezone=tz_name)


def _extensions(section: dict, stage_ids, where: str) -> dict:
    out = {}
    for student, value in section.items():
        if isinstance(value, dict):
            bad = sorted(set(value) - set(stage_ids))
            if bad:
                raise TermError(f"{where}.extensions.{student}: no such stage {', '.join(bad)}")
            out[student] = {sid: _number(days, where) for sid, days in value.items()}
        else:
            out[student] = {"*": _number(value, where)}
    return out


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise TermError(f"{where}: {value!r} is not a number of 0 or more")
    return value


def _canvas(section: dict, file: Path) -> CanvasSettings:
    def path_of(key):
        value = section.get(key)
        return None if not value else (file.parent / value)
    return CanvasSettings(export=path_of("export"), match_column=str(section.get("match_column", "SIS Login ID")),
                          roster=path_of("roster"),
                          total_column=str(section.get("total_column", "Transformer course")),
                          stage_columns=bool(section.get("stage_columns", True)),
                          columns=dict(section.get("columns", {})))


def parse_time(value, zone: dt.tzinfo, what: str) -> dt.datetime:
    """A TOML datetime or a string ('2027-03-12 23:59', ISO 8601 with or without an offset) as an
    aware datetime; without an offset it is a time in ``zone``."""
    if isinstance(value, dt.datetime):
        when = value
    elif isinstance(value, dt.date):
        when = dt.datetime.combine(value, dt.time(23, 59, 59))
    else:
        text = str(value).strip().replace("Z", "+00:00")
        try:
            when = dt.datetime.fromisoformat(text)
        except ValueError:
            raise TermError(f"{what}: {value!r} is not a date and time (e.g. 2027-03-12 23:59)") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=zone)


def zone_of(term: Term) -> dt.tzinfo:
    return ZoneInfo(term.late.timezone) if term.late else dt.timezone.utc
