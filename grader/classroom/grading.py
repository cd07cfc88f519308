"""The batch's grading step: the executor's outcomes, each stored as it comes, under a progress bar.

Each outcome is stored whole or not at all: its report file (written atomically) and its
gradebook transaction. Ctrl-C or SIGTERM stop the gradings in flight, except while an outcome is
being stored: then the interrupt waits until both are done (``Deferred``). What was stored stays;
the next run grades the rest.
"""
from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from itertools import chain

from grader.engine import isolation, report
from grader.engine.atomic import write_json

from .discovery import Job
from .grading_process import Outcome
from .outputs import Outputs
from .rows import Status


@dataclass
class Counts:
    """What a run did, for its gradebook row and its last line."""
    found: int
    skipped: int                 # already graded under the current suite
    graded: int = 0
    unreadable: int = 0
    errors: int = 0
    pending: int = 0             # not graded yet once the run ended (an interrupted run)
    seconds: float = 0.0         # the grading step's wall clock

    def add(self, status: Status) -> None:
        if status is Status.GRADED:
            self.graded += 1
        elif status is Status.UNREADABLE:
            self.unreadable += 1
        else:
            self.errors += 1

    def line(self) -> str:
        line = (f"found {self.found}, graded now {self.graded}, already graded {self.skipped}, "
                f"unreadable {self.unreadable}, errors {self.errors}")
        if self.pending:
            line += f", not graded yet {self.pending}"
        if self.graded and self.seconds > 0:
            line += f"; {self.graded / self.seconds * 60:.1f} submissions/min over {self.seconds:.0f} s"
        return line


def not_graded_report(job: Job, chosen, error: str) -> dict:
    """The schema-v1 report of a submission that could not be graded: every stage at zero, the reason."""
    sub = {"id": job.id, "path": job.path, "sha256": job.sha256, "format": job.format.value}
    rep = report.not_graded(sub, "hidden", chosen, error,
                            isolation.Isolation.choose("auto", allow_readable_secrets=True).describe()).to_json()
    report.validate(rep)
    return rep


class Deferred:
    """SIGINT / SIGTERM raise KeyboardInterrupt, except while a result is being stored: then the
    interrupt waits until the report file and the database transaction are both done."""

    def __init__(self):
        self.critical = False
        self.pending = False
        self.old = {}

    def handler(self, signum, frame):
        if self.critical:
            self.pending = True
            return
        raise KeyboardInterrupt

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self.old[sig] = signal.getsignal(sig)
            signal.signal(sig, self.handler)
        return self

    def __exit__(self, *exc):
        for sig, old in self.old.items():
            signal.signal(sig, old)
        return False

    def store(self, fn, *args, **kw):
        self.critical = True
        try:
            fn(*args, **kw)
        finally:
            self.critical = False
        if self.pending:
            raise KeyboardInterrupt


@dataclass
class Recorder:
    """Stores one outcome: its report file and its gradebook row (a report stands in for none)."""
    book: object
    run_id: int
    suite: str
    chosen: list
    outputs: Outputs
    counts: Counts

    def __call__(self, job: Job, outcome: Outcome) -> None:
        rep = outcome.report
        if rep is None:
            rep = not_graded_report(job, self.chosen, outcome.error)
        elif rep["submission"]["sha256"] != job.sha256:  # changed between fingerprint and grading
            job.sha256 = rep["submission"]["sha256"]
        write_json(str(self.outputs.report_of(job)), rep)
        # a grading says which suite it really ran (the tests may be edited during a long batch)
        self.book.record(self.run_id, student=job.id, path=job.path, fmt=job.format.value, sha256=job.sha256,
                         suite=outcome.suite_hash or self.suite, status=outcome.status.value, error=outcome.error,
                         report=rep if outcome.status is Status.GRADED else None,
                         worker=outcome.worker, duration_s=outcome.seconds)
        self.counts.add(outcome.status)


def _progress(console):
    from rich.progress import (  # start-up: rich is imported only by a batch that grades
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    return Progress(SpinnerColumn(), TextColumn("[bold]grading[/]"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[last]}"), TimeElapsedColumn(), TextColumn("ETA"),
                    TimeRemainingColumn(), console=console, transient=False)


def _said(job: Job, outcome: Outcome) -> str:
    if outcome.status is Status.GRADED:
        rep = outcome.report
        return f"[green]graded[/] {job.id}: {rep['score']:g}/{rep['max_score']:g} ({outcome.seconds:.1f} s)"
    return f"[red]{outcome.status}[/] {job.id}: {outcome.error}"


def grade(todo: list[Job], executor, record: Recorder, guard: Deferred, console) -> str:
    """Grade ``todo`` (an unreadable job is stored as such at once); "finished" or "interrupted"."""
    status, start = "finished", time.monotonic()
    unreadable = ((job, Outcome(Status.UNREADABLE, error=job.unreadable)) for job in todo if job.unreadable)
    progress = _progress(console)
    try:
        with progress:
            task = progress.add_task("grading", total=len(todo), last="")
            outcomes = chain(unreadable, executor.run([j for j in todo if not j.unreadable]))
            for job, outcome in outcomes:
                guard.store(record, job, outcome)
                progress.console.print(_said(job, outcome), highlight=False)
                progress.update(task, advance=1, last=job.id)
    except KeyboardInterrupt:
        status = "interrupted"
        console.print("[yellow]interrupted[/]: stopping the gradings in flight; what was recorded stays. "
                      "Run the same command again to finish.", highlight=False)
    finally:
        executor.close(cancel=status != "finished")
    record.counts.seconds = time.monotonic() - start
    return status
