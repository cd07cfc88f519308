"""The batch's grading step: the executor's outcomes, each stored as it comes, under a progress bar.

A grading the grader could not finish for a reason that may pass (``Outcome.retry``: a worker the machine's
load starved, ``charging``; a grading past its wall-clock budget) is not stored: it goes into a retry queue,
graded again after the others, up to ``RETRIES`` more times; its last outcome is stored as an error row,
never as a score.

Each outcome is stored whole or not at all: its report file (written atomically) and its
gradebook transaction. Ctrl-C or SIGTERM stop the gradings in flight, except while an outcome is
being stored: then the interrupt waits until both are done (``Deferred``). What was stored stays;
the next run grades the rest.
"""
from __future__ import annotations

import signal
import time
from collections import Counter
from dataclasses import dataclass

from grader.engine import isolation, report
from grader.engine.atomic import write_json
from grader.i18n import Message, join, render, tr

from . import summary
from .discovery import Job
from .grading_process import Outcome
from .outputs import Outputs
from .rows import STATUS_WORDS, Status

RETRIES = 2


@dataclass
class Counts:
    """What a run did, for its gradebook row and its last line."""
    found: int
    skipped: int                 # already graded under the current suite
    graded: int = 0
    unreadable: int = 0
    errors: int = 0
    pending: int = 0             # not graded yet once the run ended (an interrupted run)
    retried: int = 0             # gradings sent to the retry queue (a starved worker)
    seconds: float = 0.0         # the grading step's wall clock

    def add(self, status: Status) -> None:
        if status is Status.GRADED:
            self.graded += 1
        elif status is Status.UNREADABLE:
            self.unreadable += 1
        else:
            self.errors += 1

    def line(self) -> Message:
        """The run's last line (a marked text: the console renders it in the batch's language)."""
        parts = [tr("found {found}, graded now {graded}, already graded {skipped}, unreadable {unreadable}, "
                    "errors {errors}", found=self.found, graded=self.graded, skipped=self.skipped,
                    unreadable=self.unreadable, errors=self.errors)]
        if self.pending:
            parts.append(tr("not graded yet {count}", count=self.pending))
        if self.retried:
            parts.append(tr("retried {count}", count=self.retried))
        line = join(parts, ", ")
        if self.graded and self.seconds > 0:
            rate = f"{self.graded / self.seconds * 60:.1f}"
            line = join([line, tr("{rate} submissions/min over {seconds} s", rate=rate, seconds=f"{self.seconds:.0f}")])
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


def _progress(console, language: str):
    from rich.markup import escape  # start-up: rich is imported only by a batch that grades
    from rich.progress import (  # start-up: same
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    language = "ko" if language == "both" else language  # a progress bar is one line: no English beneath
    return Progress(SpinnerColumn(), TextColumn(summary.line("bold", tr("grading"), "", language, sep="")), BarColumn(),
                    MofNCompleteColumn(), TextColumn("{task.fields[last]}"), TimeElapsedColumn(),
                    TextColumn(escape(render(tr("ETA"), language))), TimeRemainingColumn(), console=console,
                    transient=False)


def _said(job: Job, outcome: Outcome, language: str) -> str:
    """A graded (or failed) submission's progress line, in ``language``."""
    if outcome.status is Status.GRADED:
        rep = outcome.report
        return summary.line("green", STATUS_WORDS["graded"], tr(
            "{student}: {score}/{max_score} ({seconds} s)", student=job.id, score=f"{rep['score']:g}",
            max_score=f"{rep['max_score']:g}", seconds=f"{outcome.seconds:.1f}"), language)
    return summary.line("red", STATUS_WORDS[outcome.status.value], f"{job.id}: {outcome.error}", language)


def final_outcomes(todo: list[Job], executor, counts: Counts, console, language: str = "en"):
    """(job, outcome) of each job of ``todo`` once it is final: an unreadable job's at once, the others' as the
    executor grades them, through the retry queue (the module's docstring), which ``console`` tells of (in
    ``language``)."""
    for job in todo:
        if job.unreadable:
            yield job, Outcome(Status.UNREADABLE, error=job.unreadable)
    queue, tries = [j for j in todo if not j.unreadable], Counter()
    while queue:
        again = []
        for job, outcome in executor.run(queue):
            if outcome.retry and tries[job.slug] < RETRIES:
                tries[job.slug] += 1
                counts.retried += 1
                again.append(job)
                console.print(summary.line("yellow", tr("retry {count}/{most}", count=tries[job.slug], most=RETRIES),
                                           tr("{student}, after the others: {error}", student=job.id,
                                              error=outcome.error), language), highlight=False)
            else:
                yield job, outcome
        queue = again


def grade(todo: list[Job], executor, record: Recorder, guard: Deferred, console, language: str = "en") -> str:
    """Grade ``todo`` (an unreadable job is stored as such at once); "finished" or "interrupted". The console
    is told of each submission in ``language``."""
    status, start = "finished", time.monotonic()
    progress = _progress(console, language)
    try:
        with progress:
            task = progress.add_task("grading", total=len(todo), last="")
            for job, outcome in final_outcomes(todo, executor, record.counts, progress.console, language):
                guard.store(record, job, outcome)
                progress.console.print(_said(job, outcome, language), highlight=False)
                progress.update(task, advance=1, last=job.id)
    except KeyboardInterrupt:
        status = "interrupted"
        console.print(summary.line("yellow", tr("interrupted"), tr(
            "stopping the gradings in flight; what was recorded stays. Run the same command again to finish."),
            language, sep=": "), highlight=False)
    finally:
        executor.close(cancel=status != "finished")
    record.counts.seconds = time.monotonic() - start
    return status
