"""The batch's late-policy step: each graded row, and its report file, gets the ``late`` object.

The rules are ``late.py``'s; this step finds when each stage was first seen: the manifest's
(``student,submitted_at``, an LMS export) for the student, else when ``grader collect`` first saw
the file that was graded (a folder of ``collected/``); neither: no time, on time.
"""
from __future__ import annotations

from pathlib import Path

from grader.engine import report
from grader.engine.atomic import write_json
from grader.engine.submission import Format

from . import collect, late
from .outputs import Outputs
from .rows import Row
from .term import LatePolicy


def _times(row: Row, policy: LatePolicy, book, manifest: dict, stage_ids: list) -> tuple[dict, dict]:
    """(stage id -> Seen of the graded version, stage id -> Seen of work left out for the cut-off)."""
    job = row.job
    if job.id in manifest:
        return {s["id"]: manifest[job.id] for s in row.report["stages"] if s["status"] != "missing"}, {}
    if job.format is Format.FOLDER:
        return collect.times_for(book, job.id, Path(job.path), policy, stage_ids)
    return {}, {}


def apply(rows: list[Row], chosen, policy: LatePolicy, book, manifest: dict, outputs: Outputs) -> None:
    """Give each graded row its ``late`` object and rewrite its report file with it."""
    stage_ids = [s.id for s in chosen]
    for r in rows:
        if not r.has_grade:
            continue
        seen, cut = _times(r, policy, book, manifest, stage_ids)
        r.late = late.assess(policy, r.job.id, r.report, seen, cut)
        r.report = {**r.report, "late": r.late}
        report.validate(r.report)
        write_json(str(outputs.report_of(r.job)), r.report)
