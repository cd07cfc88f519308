"""A batch's rows: each submission of the class with its latest grading, as every output reads it.

The CSV files, the HTML pages, the late policy and the console summary all take the same
``Row``s: whether a row comes with scores is one property (``has_grade``), and the grades
after the late policy one more (``final``), instead of each output picking a dict apart.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from grader.engine import report
from grader.engine.atomic import write_json
from grader.engine.report import Report, StageResult, StageStatus, TestResult, TestStatus
from grader.i18n import tr

from .discovery import Job


class Status(str, Enum):
    """What became of a submission: a grading's outcome, or the row's state in the class."""
    GRADED = "graded"
    OUTDATED = "outdated"        # graded with an earlier version of the tests: its scores stand until regraded
    PENDING = "pending"          # not graded yet (an interrupted run)
    UNREADABLE = "unreadable"    # nothing to grade in it
    ERROR = "error"              # the grading failed (hung, crashed, the grader's own failure)

    @property
    def with_scores(self) -> bool:
        """A row of this status comes with the scores of a report."""
        return self in (Status.GRADED, Status.OUTDATED)

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


# A row's status as the instructor's console and pages say it (grades.csv keeps the English values).
STATUS_WORDS = {Status.GRADED.value: tr("graded"), Status.OUTDATED.value: tr("outdated"),
                Status.PENDING.value: tr("pending"), Status.UNREADABLE.value: tr("unreadable"),
                Status.ERROR.value: tr("error")}


class StageState(str, Enum):
    """What a stage's score stands for in a row (grades.csv's ``<stage> status``)."""
    GRADED = "graded"
    NOT_HANDED_IN = "not handed in"      # not in the submission, or still the starter's stubs
    DOES_NOT_IMPORT = "does not import"  # followed by the error's first line
    GRADER_ERROR = "grader error"        # the grading of the submission failed (the row's error says why)

    def __str__(self) -> str:
        return self.value


def unfinished(test: TestResult) -> bool:
    """The test failed on a stub left as the starter gave it (NotImplementedError, raised where a value or
    another exception was expected): not an attempt."""
    return test.status in (TestStatus.ERROR, TestStatus.FAILED) and "NotImplementedError" in test.feedback


def stage_state(stage: StageResult | None) -> str:
    """A graded stage's state (``StageState``; ``does not import: <first line>``)."""
    if stage is None or stage.status is StageStatus.MISSING or (stage.tests and all(map(unfinished, stage.tests))):
        return str(StageState.NOT_HANDED_IN)
    if stage.import_error:
        return f"{StageState.DOES_NOT_IMPORT}: {stage.import_error}"
    return str(StageState.GRADED)


@dataclass(frozen=True)
class FinalScores:
    """A graded row's grades after the late policy (as the tests gave them when there is none)."""
    stages: dict        # stage id -> score
    core: float
    bonus: float
    total: float        # the course total: core plus bonus, never above the core's maximum


@dataclass
class Row:
    """One submission of the class with its latest grading (``report``: schema v1, or None)."""
    job: Job
    status: Status
    report: dict | None = None
    error: str = ""
    graded_at: str | None = None     # ISO 8601, UTC
    late: dict | None = None         # the report's ``late`` object, once the late policy applied
    _typed: tuple = field(default=(None, None), init=False, repr=False, compare=False)  # (report, its types)

    @property
    def has_grade(self) -> bool:
        return self.status.with_scores and bool(self.report)

    @property
    def graded(self) -> Report | None:
        """The report as types, when the row comes with scores: built once for every output that reads the row
        (again only when the report is replaced, as the late policy's step does)."""
        if not self.has_grade:
            return None
        built_from, typed = self._typed
        if built_from is not self.report:
            typed = Report.from_json(self.report)
            self._typed = (self.report, typed)
        return typed

    @property
    def scores(self) -> dict:
        """Stage id -> score as the tests gave it (empty without a grade)."""
        rep = self.graded
        return {s.id: s.score for s in rep.stages} if rep else {}

    def stage_states(self, stage_ids: list) -> list[str]:
        """Each stage's state (``stage_state``): every stage is a grader error when the grading failed, not
        handed in when nothing could be read; empty while pending."""
        if self.status is Status.PENDING:
            return [""] * len(stage_ids)
        if self.status is Status.ERROR:
            return [str(StageState.GRADER_ERROR)] * len(stage_ids)
        rep = self.graded
        stages = {s.id: s for s in rep.stages} if rep else {}
        return [stage_state(stages.get(sid)) for sid in stage_ids]

    @property
    def final(self) -> FinalScores | None:
        """The grades after the late policy; None without a grade."""
        rep = self.graded
        if rep is None:
            return None
        lt = self.late
        if lt is None:
            core, bonus, per = rep.score, rep.bonus_score, self.scores
        else:
            core, bonus = lt["score_after"], lt.get("bonus_after", 0.0)
            per = {s["id"]: s["score_after"] for s in lt["stages"]}
        return FinalScores(per, core, bonus, min(rep.max_score, core + bonus))


def _utc_iso(when: dt.datetime | None) -> str | None:
    if when is None:
        return None
    if when.tzinfo is None:  # SQLite keeps no time zone: it was UTC
        when = when.replace(tzinfo=dt.timezone.utc)
    return when.isoformat(timespec="seconds")


def current_rows(book, suite: str, jobs: list, reports_dir: Path) -> list[Row]:
    """Each submission of the folder with its latest grading (``pending`` if none). A grading made
    with another version of the tests than ``suite`` (the current one) is ``outdated``: its scores
    stand until the next run grades it again. A report file missing on disk is rewritten from the
    gradebook."""
    latest = book.latest([(j.id, j.sha256) for j in jobs])
    rows = []
    for job in jobs:
        g = latest.get((job.id, job.sha256))
        if g is None:
            rows.append(Row(job, Status.PENDING, error="not graded yet"))
            continue
        rep = g["report"]
        if rep is not None:
            report.validate(rep)  # the gradebook is an edge: what comes back from it is checked
        path = reports_dir / f"{job.slug}.json"
        if rep is not None and not path.exists():
            write_json(str(path), rep)
        status, error = Status(g["status"]), g["error"] or ""
        if g["suite_hash"] != suite and status is Status.GRADED:
            status, error = Status.OUTDATED, "graded with an earlier version of the tests; run the batch again"
        rows.append(Row(job, status, rep, error, _utc_iso(g["graded_at"])))
    return rows
