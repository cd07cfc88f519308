"""The gradebook: every grading run, every submission graded, every stage and test result.

SQLAlchemy Core, so any database SQLAlchemy speaks: SQLite by default
(``OUT/gradebook.sqlite``), PostgreSQL with ``postgresql+psycopg://user@host/db``.

Tables
------
``runs``           one row per ``grader batch`` invocation: when, which grader (git hash), which
                   test suite (hash), which stages, executor, counts, and how it ended
                   (``running``, ``finished``, ``interrupted``, ``abandoned``).
``submissions``    one row per distinct (student, sha256): what was handed in and where.
``gradings``       one row per grading of a submission by a run: status (``graded``,
                   ``unreadable``, ``error``), score, the suite hash it was graded with, and the
                   full schema-v1 report as JSON. Never updated nor deleted: regrading adds a row,
                   so the history of every grade is kept.
``stage_results``  per grading and stage: status, score, max, message.
``test_results``   per grading and test: status, score, max, visibility, feedback, duration.
``collections``    one row per ``grader collect`` of a student's stage: the repository's HEAD commit,
                   the stage file's path and git blob id there (empty when the file was gone), and
                   when that blob was first seen by the course (never the commit's own date).
``collected_files`` each collected stage file once, by blob id: what ``collect`` puts in the snapshot.

A grading and its stage and test rows are written in one transaction: a batch
killed at any point leaves either all of them or none.

Handy queries::

    -- the latest grade of each student under the current suite
    SELECT student, score, max_score, status, graded_at FROM gradings g
    WHERE id = (SELECT max(id) FROM gradings WHERE student = g.student);
    -- how often each test fails
    SELECT test, count(*) FILTER (WHERE status <> 'passed') * 1.0 / count(*) FROM test_results GROUP BY test;
"""
from __future__ import annotations

import datetime as dt
import json
import os
import socket

from sqlalchemy import (
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from grader.engine.report import Report

SCHEMA_VERSION = 1
FINAL_STATUSES = ("graded", "unreadable")   # a grading with these is not redone for the same sha256 + suite
metadata = MetaData()

meta = Table(
    "gradebook_meta", metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

runs = Table(
    "runs", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True)),
    Column("status", String(16), nullable=False),
    Column("grader_version", String(80)),
    Column("suite_hash", String(64), nullable=False),
    Column("stages", Text, nullable=False),
    Column("submissions_dir", Text),
    Column("out_dir", Text),
    Column("executor", String(120)),
    Column("workers", Integer),
    Column("regrade", Boolean, nullable=False, default=False),
    Column("host", String(255)),
    Column("pid", Integer),
    Column("n_found", Integer),
    Column("n_todo", Integer),
    Column("n_graded", Integer),
    Column("n_skipped", Integer),
    Column("n_errors", Integer),
)

submissions = Table(
    "submissions", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("student", String(255), nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("path", Text, nullable=False),
    Column("format", String(16)),
    Column("first_seen", DateTime(timezone=True), nullable=False),
    UniqueConstraint("student", "sha256", name="uq_submissions_student_sha256"),
)

gradings = Table(
    "gradings", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", Integer, ForeignKey("runs.id"), nullable=False),
    Column("submission_id", Integer, ForeignKey("submissions.id"), nullable=False),
    Column("student", String(255), nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("suite_hash", String(64), nullable=False),
    Column("graded_at", DateTime(timezone=True), nullable=False),
    Column("status", String(16), nullable=False),
    Column("error", Text),
    Column("score", Float),
    Column("max_score", Float),
    Column("bonus_score", Float),
    Column("bonus_max_score", Float),
    Column("duration_s", Float),
    Column("worker", String(255)),
    Column("report", Text),
)
Index("ix_gradings_key", gradings.c.student, gradings.c.sha256, gradings.c.suite_hash)

stage_results = Table(
    "stage_results", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("grading_id", Integer, ForeignKey("gradings.id"), nullable=False, index=True),
    Column("stage", String(64), nullable=False),
    Column("title", Text),
    Column("status", String(16), nullable=False),
    Column("score", Float, nullable=False),
    Column("max_score", Float, nullable=False),
    Column("bonus", Boolean, nullable=False, default=False),
    Column("message", Text),
)

test_results = Table(
    "test_results", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("grading_id", Integer, ForeignKey("gradings.id"), nullable=False, index=True),
    Column("stage", String(64), nullable=False),
    Column("test", String(255), nullable=False),
    Column("name", Text),
    Column("status", String(16), nullable=False),
    Column("score", Float, nullable=False),
    Column("max_score", Float, nullable=False),
    Column("visibility", String(16)),
    Column("feedback", Text),
    Column("duration_s", Float),
)


collections = Table(
    "collections", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("collected_at", DateTime(timezone=True), nullable=False),
    Column("student", String(255), nullable=False),
    Column("stage", String(64), nullable=False),
    Column("repo", Text),
    Column("commit_id", String(64), nullable=False),
    Column("path", Text, nullable=False),
    Column("blob", String(64), nullable=False),         # "" : the file was not in the repository
    Column("first_seen", DateTime(timezone=True)),      # of this blob, for this student and stage
    Column("seen_via", String(16)),                     # collect | reflog
)
Index("ix_collections_key", collections.c.student, collections.c.stage)

collected_files = Table(
    "collected_files", metadata,
    Column("blob", String(64), primary_key=True),
    Column("content", LargeBinary, nullable=False),
)


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def default_url(out_dir: str) -> str:
    return f"sqlite:///{os.path.abspath(os.path.join(out_dir, 'gradebook.sqlite'))}"


def redact(url: str) -> str:
    """The URL without its password, for printing."""
    from sqlalchemy.engine import make_url
    return make_url(url).render_as_string(hide_password=True)


class Gradebook:
    def __init__(self, url: str):
        self.url = url
        kwargs = {}
        if url.startswith("sqlite"):
            kwargs["connect_args"] = {"timeout": 60}
        self.engine = create_engine(url, **kwargs)
        if self.engine.dialect.name == "sqlite":
            @event.listens_for(self.engine, "connect")
            def _sqlite_pragmas(dbapi_conn, _record):
                cur = dbapi_conn.cursor()
                cur.execute("PRAGMA journal_mode=WAL")      # readers (a report, a test) never block the batch
                cur.execute("PRAGMA synchronous=FULL")
                cur.execute("PRAGMA foreign_keys=ON")
                cur.close()
        metadata.create_all(self.engine)
        with self.engine.begin() as conn:
            row = conn.execute(select(meta.c.value).where(meta.c.key == "schema_version")).first()
            if row is None:
                try:
                    with conn.begin_nested():
                        conn.execute(insert(meta).values(key="schema_version", value=str(SCHEMA_VERSION)))
                except IntegrityError:
                    pass
            elif int(row[0]) != SCHEMA_VERSION:
                raise RuntimeError(f"the gradebook {redact(url)} has schema version {row[0]}, "
                                   f"this grader writes version {SCHEMA_VERSION}")

    def close(self) -> None:
        self.engine.dispose()

    # -- runs ---------------------------------------------------------------
    def start_run(self, **info) -> int:
        values = {"started_at": now(), "status": "running", "host": socket.gethostname(), "pid": os.getpid(),
                  **info}
        with self.engine.begin() as conn:
            return conn.execute(insert(runs).values(**values)).inserted_primary_key[0]

    def finish_run(self, run_id: int, status: str, **counts) -> None:
        with self.engine.begin() as conn:
            conn.execute(update(runs).where(runs.c.id == run_id)
                         .values(status=status, finished_at=now(), **counts))

    def mark_abandoned(self) -> int:
        """Runs of this host still marked ``running`` whose process is gone (killed with SIGKILL)."""
        host, n = socket.gethostname(), 0
        with self.engine.begin() as conn:
            rows = conn.execute(select(runs.c.id, runs.c.pid).where(runs.c.status == "running",
                                                                    runs.c.host == host)).all()
            for run_id, pid in rows:
                if pid == os.getpid() or _alive(pid):
                    continue
                conn.execute(update(runs).where(runs.c.id == run_id).values(status="abandoned"))
                n += 1
        return n

    def runs(self) -> list:
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(select(runs).order_by(runs.c.id))]

    # -- gradings -----------------------------------------------------------
    def final_keys(self, suite: str) -> set:
        """(student, sha256) pairs already graded (or found unreadable) under test suite ``suite``."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(gradings.c.student, gradings.c.sha256)
                                .where(gradings.c.suite_hash == suite,
                                       gradings.c.status.in_(FINAL_STATUSES)).distinct())
            return {(r[0], r[1]) for r in rows}

    def latest(self, keys, suite: str | None = None) -> dict:
        """(student, sha256) -> the latest grading row (a dict, report parsed), under ``suite`` if given."""
        wanted = set(keys)
        students = sorted({k[0] for k in wanted})
        found: dict = {}
        with self.engine.connect() as conn:
            for i in range(0, len(students), 500):
                q = select(gradings).where(gradings.c.student.in_(students[i:i + 500]))
                if suite is not None:
                    q = q.where(gradings.c.suite_hash == suite)
                for r in conn.execute(q.order_by(gradings.c.id)):
                    key = (r.student, r.sha256)
                    if key in wanted:
                        found[key] = dict(r._mapping)  # later rows win: the latest grading
        for row in found.values():
            row["report"] = json.loads(row["report"]) if row.get("report") else None
        return found

    def history(self, student: str) -> list:
        with self.engine.connect() as conn:
            rows = conn.execute(select(gradings.c.id, gradings.c.run_id, gradings.c.sha256, gradings.c.suite_hash,
                                       gradings.c.graded_at, gradings.c.status, gradings.c.score)
                                .where(gradings.c.student == student).order_by(gradings.c.id))
            return [dict(r._mapping) for r in rows]

    def record(self, run_id: int, *, student: str, path: str, fmt: str, sha256: str, suite: str, status: str,
               error: str = "", report: dict | None = None, worker: str = "", duration_s: float | None = None) -> int:
        """Store one grading with its stage and test results, in one transaction; return its id."""
        with self.engine.begin() as conn:
            sub_id = self._submission_id(conn, student, sha256, path, fmt)
            values = {"run_id": run_id, "submission_id": sub_id, "student": student, "sha256": sha256,
                      "suite_hash": suite, "graded_at": now(), "status": status, "error": error or None,
                      "worker": worker or None, "duration_s": duration_s,
                      "report": json.dumps(report, sort_keys=True) if report is not None else None}
            graded = Report.from_json(report) if report is not None and status == "graded" else None
            if graded is not None:
                data = graded.to_json()
                values.update(score=graded.score, max_score=graded.max_score, bonus_score=data.get("bonus_score"),
                              bonus_max_score=data.get("bonus_max_score"), duration_s=graded.duration_s)
            gid = conn.execute(insert(gradings).values(**values)).inserted_primary_key[0]
            if graded is not None and graded.stages:
                conn.execute(insert(stage_results), [
                    {"grading_id": gid, "stage": s.id, "title": s.title, "status": s.status.value, "score": s.score,
                     "max_score": s.max_score, "bonus": s.bonus, "message": s.message or None}
                    for s in graded.stages])
                tests = [{"grading_id": gid, "stage": s.id, "test": t.id, "name": t.name, "status": t.status.value,
                          "score": t.score, "max_score": t.max_score, "visibility": t.visibility,
                          "feedback": t.feedback, "duration_s": t.duration_s}
                         for s in graded.stages for t in s.tests]
                if tests:
                    conn.execute(insert(test_results), tests)
            return gid

    def _submission_id(self, conn, student, sha256, path, fmt) -> int:
        q = select(submissions.c.id, submissions.c.path).where(submissions.c.student == student,
                                                                submissions.c.sha256 == sha256)
        row = conn.execute(q).first()
        if row is None:
            try:
                with conn.begin_nested():
                    return conn.execute(insert(submissions).values(
                        student=student, sha256=sha256, path=path, format=fmt, first_seen=now())
                    ).inserted_primary_key[0]
            except IntegrityError:  # another batch on the same database inserted it just now
                row = conn.execute(q).first()
        if row.path != path:
            conn.execute(update(submissions).where(submissions.c.id == row.id).values(path=path))
        return row.id

    # -- collections (grader collect) -----------------------------------------
    def record_collection(self, rows: list, files: dict) -> None:
        """Store one repository's observations (``rows``: dicts of the ``collections`` columns) and the
        contents of blobs not stored yet (``files``: blob id -> bytes), in one transaction."""
        with self.engine.begin() as conn:
            known = {r[0] for r in conn.execute(select(collected_files.c.blob)
                                                .where(collected_files.c.blob.in_(list(files))))} if files else set()
            new = [{"blob": b, "content": data} for b, data in files.items() if b not in known]
            if new:
                conn.execute(insert(collected_files), new)
            if rows:
                conn.execute(insert(collections), rows)

    def observations(self, student: str) -> dict:
        """stage -> the student's collections of it, oldest first (dicts; times in UTC)."""
        out: dict = {}
        with self.engine.connect() as conn:
            for r in conn.execute(select(collections).where(collections.c.student == student)
                                  .order_by(collections.c.id)):
                row = dict(r._mapping)
                for key in ("collected_at", "first_seen"):
                    row[key] = _utc(row[key])
                out.setdefault(row["stage"], []).append(row)
        return out

    def collected_file(self, blob: str) -> bytes | None:
        with self.engine.connect() as conn:
            return conn.execute(select(collected_files.c.content).where(collected_files.c.blob == blob)).scalar()

    def counts(self) -> dict:
        from sqlalchemy import func
        with self.engine.connect() as conn:
            return {t.name: conn.execute(select(func.count()).select_from(t)).scalar_one()
                    for t in (runs, submissions, gradings, stage_results, test_results, collections)}


def _utc(when):
    """SQLite keeps no time zone: what it returns naive was stored in UTC."""
    if when is not None and when.tzinfo is None:
        return when.replace(tzinfo=dt.timezone.utc)
    return when


def _alive(pid) -> bool:
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie counts as dead
    try:
        with open(f"/proc/{int(pid)}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True
