"""Grading a whole class: ``python -m grader batch SUBMISSIONS_DIR``.

Every sub-folder (a folder of notebooks counts as a folder), ``.zip`` file and loose notebook in
SUBMISSIONS_DIR is one student's submission (``discovery.py``). They are graded in parallel on the
hidden suites; the outputs go to ``--out`` (default ``grading-out/``; ``outputs.py`` lists them).

A run is a pipeline of steps that each do one thing:

1. open the gradebook (``gradebook.py``; ``--gradebook URL``, else a SQLite file in OUT);
2. plan: find the submissions, fingerprint each, leave out what the gradebook already graded
   under the current test suite;
3. grade with an executor (``grading.py``, ``executors.py``), storing each outcome as it comes;
4. then, over the class's rows (``rows.py``), the post-steps: the late policy (``lateness.py``),
   ``grades.csv`` (``grades_csv.py``), ``grades-canvas.csv`` (``canvas.py``), the HTML pages
   (``html_report.py``), the console summary (``summary.py``); and, with ``--similarity`` on a
   run that finished, the similarity report (``similarity.py``).

Resumable: a submission is graded again only when what was handed in changed (its sha256), the
test suite changed (its hash: each stage's stage.toml, hidden tests, reference solution, probes,
stand-ins and hidden data, plus the engine's testing.py, plugin.py, report.py and seeds.py, the
course secret and tests/grading.ini: ``stages.suite_hash``), or ``--regrade`` is given. Each
grading records the suite hash it really ran with; a grade made with an earlier suite is shown as
``outdated`` (scores kept) until a run grades it again. Kill the batch at any point (Ctrl-C,
SIGTERM, SIGKILL) and run the same command again: what was recorded stays, the rest is graded.
Every report file is written atomically and every grading is one database transaction (an
interrupt waits for both), so nothing is half-written or recorded twice; the CSV and HTML pages
are rebuilt from the gradebook at the end of every run, interrupted or not. Grading processes die
with the batch (``PR_SET_PDEATHSIG``), so a killed batch leaves none behind.

A submission that cannot be read gets a row with an error (exit code still 0); one that hangs,
crashes or eats memory costs only itself.
"""
from __future__ import annotations

import fcntl
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from grader.engine import cores, isolation, paths, stages
from grader.engine.options import GradingOptions
from grader.i18n import join, languages, render, tr

from . import canvas, executors, grades_csv, grading, html_report, late, lateness, summary, term
from .discovery import discover, fingerprint
from .gradebook import Gradebook, default_url, redact
from .grading import Counts, Deferred, Recorder
from .grading_process import DEFAULT_TARGET
from .outputs import Outputs, readable_outputs
from .rows import Status, current_rows

INTERRUPTED = 130


def grader_version() -> str:
    """The course repository's git commit (read from .git, no git command), or 'unknown'."""
    git = paths.ROOT / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head[:40]
        ref = head.split(None, 1)[1]
        if (git / ref).is_file():
            return (git / ref).read_text().strip()[:40]
        packed = git / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                if line.endswith(" " + ref):
                    return line.split()[0][:40]
    except OSError:
        pass
    return "unknown"


@dataclass
class Request:
    """What the instructor asked for: the command line's options, checked."""
    subs: Path
    outputs: Outputs
    chosen: list
    settings: term.Term
    manifest: dict                   # student -> late.Seen (an LMS export's submission times)
    workers: int = 1
    gradebook_url: str | None = None
    executor: str = "local"
    scheduler: str | None = None
    regrade: bool = False
    target: str | None = None        # "module:function" instead of grading_process.grade_path (tests)
    timeout_s: float | None = None   # per submission (default: executors.budget_s)
    reveal_after_due: bool = False
    allow_readable_secrets: bool = False
    similarity: bool = False
    references: tuple = ()
    language: str = "en"             # of the reports and the students' pages (grader.i18n)


@dataclass
class Plan:
    """What this run grades."""
    suite: str      # the test suite's hash as the run starts
    jobs: list      # every submission of the folder, fingerprinted
    todo: list      # those the gradebook has no final grading of under ``suite`` (all with --regrade)


@dataclass
class BatchRun:
    """One run under way: what was asked, its gradebook and run id, its plan and its counts."""
    req: Request
    book: Gradebook
    plan: Plan
    run_id: int
    counts: Counts
    console: object
    warnings: list = field(default_factory=list)   # said once, when the run ends (_warnings)


# ---------------------------------------------------------------- the command

def main(args) -> int:
    """Entry point of ``python -m grader batch`` (``args`` from grader.cli)."""
    # Refuse at once, not once per submission, where workers cannot be confined: without namespaces
    # every submission could read the hidden tests, unless the instructor accepts that (each report says so).
    isolation.Isolation.choose("auto", allow_readable_secrets=args.allow_readable_secrets)
    return run_batch(args.submissions_dir, out=args.out, workers=args.workers or cores.available(),
                     gradebook_url=args.gradebook, stage_ids=[s for s in (args.stages or "").split(",") if s] or None,
                     executor=args.executor,
                     scheduler=args.scheduler, regrade=args.regrade, reveal_after_due=args.reveal_after_due,
                     allow_readable_secrets=args.allow_readable_secrets, course=args.course, manifest=args.manifest,
                     similarity=args.similarity, references=tuple(args.reference or ()),
                     language=languages.for_command("batch", args.lang, args.course))


def _console():
    from rich.console import Console  # start-up: rich is imported only by a batch that runs
    console = Console()
    return console if console.is_terminal else Console(width=160)  # a log file or CI: wide lines, no wrapping


def _contains(parent: Path, child: str) -> bool:
    try:
        Path(os.path.realpath(child)).relative_to(os.path.realpath(parent))
        return True
    except ValueError:
        return False


def _folders_problem(given, subs: Path, out_dir: Path) -> str | None:
    """Why the submissions folder or the output folder cannot be used, or None."""
    if not subs.is_dir():
        return f"{given} is not a folder of submissions"
    for name, folder in (("the submissions folder", subs), ("the output folder", out_dir)):
        if _contains(folder, tempfile.gettempdir()) or _contains(folder, str(paths.ROOT)):
            return (f"{name} {folder} contains {tempfile.gettempdir()} or the grader; the student's "
                    "worker could not run with it hidden. Use dedicated folders.")
    return None


def _lock(out: Path):
    f = open(out / ".batch.lock", "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return None
    return f


def run_batch(submissions_dir, *, out="grading-out", course=None, manifest=None, stage_ids=None, console=None,
              **options) -> int:
    """Grade the class in ``submissions_dir``; return the exit code (0 ran, 2 usage error, 130 interrupted;
    with ``similarity``, the similarity report's when it fails).

    ``options`` are :class:`Request`'s: ``workers``, ``gradebook_url``, ``executor``, ``scheduler``,
    ``regrade``; ``target`` ("module:function") replaces the grading function and ``timeout_s`` the
    per-submission wall-clock budget (tests use both); ``reveal_after_due`` publishes the feedback of
    ``after_due_date`` tests on the students' pages; ``allow_readable_secrets`` lets the workers grade
    where they cannot be confined (each report's ``isolation`` then says the secrets were readable);
    ``similarity`` and ``references``: then compare the submissions (as ``grader similarity``).
    ``course``: the term's course.toml (default: the repository's); ``manifest``: a CSV of
    ``student,submitted_at`` (an LMS export's submission times) for the late policy. ``console`` is a
    rich Console.
    """
    subs, out_dir = Path(submissions_dir).resolve(), Path(out).resolve()
    problem = _folders_problem(submissions_dir, subs, out_dir)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    chosen = stages.resolve(stage_ids)
    try:
        settings = term.load(course)
        times = late.read_manifest(manifest, term.zone_of(settings)) if manifest else {}
    except term.TermError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    req = Request(subs, Outputs(out_dir), chosen, settings, times, **options)
    out_dir.mkdir(parents=True, exist_ok=True)
    lock = _lock(out_dir)
    if lock is None:
        print(f"error: another batch is writing to {out_dir}; wait for it or stop it", file=sys.stderr)
        return 2
    try:
        return _run_locked(req, console or _console())
    except KeyboardInterrupt:
        print("interrupted before grading started; nothing was recorded", file=sys.stderr)
        return INTERRUPTED
    finally:
        lock.close()


# ---------------------------------------------------------------- the pipeline

def _run_locked(req: Request, console) -> int:
    book = _open_book(req)
    if book is None:
        return 2
    plan = _plan(book, req, console)
    executor = _start_executor(req, plan)
    if executor is None:
        book.close()
        return 2
    run = _start_run(book, req, plan, executor, console)
    status = _grade_and_write(run, executor)
    if status == "interrupted":
        return INTERRUPTED
    if req.similarity:
        from . import similarity  # start-up and requirements: copydetect (dev) is needed only with --similarity
        return similarity.compare_folder(req.outputs.folder, req.subs, req.chosen, req.references, req.language)
    return 0


def _open_book(req: Request) -> Gradebook | None:
    """Step 1: the gradebook; None (and one line) when it cannot be opened."""
    from sqlalchemy.exc import ArgumentError, OperationalError  # start-up: SQLAlchemy loads with the book
    url = req.gradebook_url or default_url(str(req.outputs.folder))
    try:
        return Gradebook(url)
    except (ArgumentError, OperationalError, ImportError) as exc:
        print(f"error: cannot open the gradebook {redact(url) if '://' in url else url}: "
              f"{str(exc).splitlines()[0]}", file=sys.stderr)
        return None


def _plan(book: Gradebook, req: Request, console) -> Plan:
    """Step 2: the class's submissions, fingerprinted, and those to grade."""
    suite = stages.suite_hash(req.chosen)
    jobs, ignored = discover(req.subs, exclude=[req.outputs.folder])
    for name in ignored:
        console.print(summary.line("yellow", tr("ignored"), tr("{name}: not a folder, a .zip or a notebook", name=name),
                                   req.language), highlight=False)
    for name in sorted(set(req.manifest) - {j.id for j in jobs}):
        console.print(summary.line("yellow", tr("manifest"), tr("{name} has a submission time but no submission here",
                                                                name=name), req.language, sep=": "), highlight=False)
    for job in jobs:
        fingerprint(job)
    final = set() if req.regrade else book.final_keys(suite)
    return Plan(suite, jobs, [j for j in jobs if (j.id, j.sha256) not in final])


def _start_executor(req: Request, plan: Plan):
    """Where the gradings run, each with the class's grading options (the hidden suites of the chosen stages, the
    class folder and the outputs hidden from the workers); None (and one line) when it cannot start."""
    options = GradingOptions(stage_ids=[s.id for s in req.chosen], hide=[str(req.subs), str(req.outputs.folder)],
                             allow_readable_secrets=req.allow_readable_secrets, language=req.language)
    budget = req.timeout_s or executors.budget_s(req.chosen)
    target = req.target or DEFAULT_TARGET
    try:
        if req.executor == "dask":
            return executors.DaskExecutor(req.scheduler, options, plan.suite, budget, target=target)
        return executors.LocalExecutor(req.workers, options, budget, target=target)
    except (OSError, TimeoutError, ValueError) as exc:
        print(f"error: cannot start the {req.executor} executor: {exc}", file=sys.stderr)
        return None


def _start_run(book: Gradebook, req: Request, plan: Plan, executor, console) -> BatchRun:
    """The run's row in the gradebook (runs killed earlier are marked abandoned), and a line saying so."""
    abandoned = book.mark_abandoned()
    jobs, todo = plan.jobs, plan.todo
    run_id = book.start_run(grader_version=grader_version(), suite_hash=plan.suite,
                            stages=",".join(s.id for s in req.chosen), submissions_dir=str(req.subs),
                            out_dir=str(req.outputs.folder), executor=executor.describe(),
                            workers=req.workers if req.executor == "local" else None,
                            regrade=bool(req.regrade), n_found=len(jobs), n_todo=len(todo))
    said = tr("batch run {run}: {count} submissions in {folder}, {todo} to grade ({done} already graded under "
              "suite {suite}), stages {stages}; {executor}; gradebook {gradebook}", run=run_id, count=len(jobs),
              folder=req.subs, todo=len(todo), done=len(jobs) - len(todo), suite=plan.suite[:12],
              stages=", ".join(s.id for s in req.chosen), executor=executor.describe(), gradebook=redact(book.url))
    if abandoned:
        said = join([said, tr("{count} killed run(s) marked abandoned", count=abandoned)])
    console.print(render(said, req.language), highlight=False)
    return BatchRun(req, book, plan, run_id, Counts(found=len(jobs), skipped=len(jobs) - len(todo)), console)


def _grade_and_write(run: BatchRun, executor) -> str:
    """Step 3, then the post-steps over the rows, whatever the grading's end ("finished" or
    "interrupted"); the gradebook is told how the run ended and closed."""
    req, book = run.req, run.book
    record = Recorder(book, run.run_id, run.plan.suite, req.chosen, req.outputs, run.counts)
    with Deferred() as guard:
        status = grading.grade(run.plan.todo, executor, record, guard, run.console, req.language)
        guard.critical = True  # a second Ctrl-C no longer interrupts writing the outputs
        try:
            rows = current_rows(book, stages.suite_hash(req.chosen), run.plan.jobs, req.outputs.reports)
            run.counts.pending = sum(r.status is Status.PENDING for r in rows)
            for step in POST_STEPS:
                step(run, rows)
        finally:
            readable_outputs(req.outputs.folder)
            book.finish_run(run.run_id, status, n_graded=run.counts.graded, n_skipped=run.counts.skipped,
                            n_errors=run.counts.errors + run.counts.unreadable)
            book.close()
    return status


# ---------------------------------------------------------------- the post-steps, over the rows

def _late_policy(run: BatchRun, rows: list) -> None:
    policy = run.req.settings.late
    if policy is not None:
        lateness.apply(rows, run.req.chosen, policy, run.book, run.req.manifest, run.req.outputs)


def _grades_csv(run: BatchRun, rows: list) -> None:
    grades_csv.write(run.req.outputs.grades_csv, rows, run.req.chosen)


def _canvas(run: BatchRun, rows: list) -> None:
    warning = canvas.write(run.req.outputs.canvas_csv, rows, run.req.chosen, run.req.settings.canvas)
    if warning:
        run.warnings.append(warning)


def _html(run: BatchRun, rows: list) -> None:
    html_report.write_all(run.req.outputs.html, rows, run.req.chosen, suite=run.plan.suite, run_id=run.run_id,
                          reveal_after_due=run.req.reveal_after_due, lang=run.req.language)


def _summary(run: BatchRun, rows: list) -> None:
    out = run.req.outputs
    summary.print_summary(run.console, rows, run.req.chosen, run.counts, run.req.language)
    run.console.print(render(tr("outputs: {files}", files=f"{out.grades_csv}, {out.canvas_csv}, {out.reports}/, "
                                                          f"{out.html / 'class.html'}"), run.req.language),
                      highlight=False)


def _warnings(run: BatchRun, rows: list) -> None:
    """What the instructor must act on, last, where it is read (once per run)."""
    for warning in run.warnings:  # one line, whatever the console's width: a log is searched by line
        run.console.print(summary.line("yellow", tr("warning"), warning, run.req.language, sep=": "),
                          highlight=False, soft_wrap=True)


POST_STEPS = (_late_policy, _grades_csv, _canvas, _html, _summary, _warnings)
