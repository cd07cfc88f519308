"""Grading a whole class: ``python -m grader batch SUBMISSIONS_DIR``.

Every sub-folder (a folder of notebooks counts as a folder), ``.zip`` file and
loose notebook in SUBMISSIONS_DIR is one student's submission, named after it
(``alice/``, ``alice.zip`` -> ``alice``). They are graded in parallel on the
hidden suites; the outputs go to ``--out`` (default ``grading-out/``)::

    OUT/gradebook.sqlite      every run, submission, stage and test result (or --gradebook URL)
    OUT/reports/<id>.json     one schema-v1 report per submission
    OUT/grades.csv            one row per student: each stage, total, bonus, lateness, final total (exports.py)
    OUT/grades-canvas.csv     the same final grades in the layout Canvas's gradebook import reads
    OUT/html/<id>.html        a feedback page per submission
    OUT/html/class.html       the class report (instructors only: it shows hidden tests' feedback)

Resumable: a submission is graded again only when what was handed in changed
(its sha256), the test suite changed (its hash: each stage's stage.toml,
hidden tests, reference solution, probes, stand-ins and hidden data, plus
grader/testing.py, plugin.py, report.py and tests/grading.ini), or
``--regrade`` is given. Each grading records the suite hash it really ran
with; a grade made with an earlier suite is shown as ``outdated`` (scores
kept) until a run grades it again. Kill the batch at any point (Ctrl-C,
SIGTERM, SIGKILL) and run the same command again: what was recorded stays, the
rest is graded. Every report file is written atomically and every grading is
one database transaction (an interrupt waits for both), so nothing is
half-written or recorded twice; the CSV and HTML pages are rebuilt from the
gradebook at the end of every run, interrupted or not. Grading processes die
with the batch (``PR_SET_PDEATHSIG``), so a killed batch leaves none behind.

A submission that cannot be read gets a row with an error (exit code still 0);
one that hangs, crashes or eats memory costs only itself.
"""
from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import os
import platform
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from grader.engine import isolation, paths, report, run, stages, submission
from grader.engine.atomic import write_json

from . import collect, exports, html_report, late, term
from .executors import DEFAULT_TARGET, DaskExecutor, Job, LocalExecutor, Outcome
from .exports import HAS_GRADE
from .gradebook import Gradebook, default_url, redact

SKIP_NAMES = {"__MACOSX", "__pycache__", ".ipynb_checkpoints"}
INTERRUPTED = 130


# ---------------------------------------------------------------- what is graded, with what

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


# ---------------------------------------------------------------- finding submissions

def _slug(sid: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", sid).lstrip(".") or "_"


def discover(folder: Path, exclude=()) -> tuple[list, list]:
    """The submissions in ``folder`` (sorted, unique ids) and the names ignored."""
    excluded = {os.path.realpath(p) for p in exclude}
    found, ignored = [], []
    order = {"folder": 0, "zip": 1, "notebook": 2}
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        name = entry.name
        if name.startswith(".") or name in SKIP_NAMES or os.path.realpath(entry) in excluded:
            continue
        if entry.is_dir():
            found.append((name, "folder", entry))
        elif entry.is_file() and name.endswith(".zip"):
            found.append((name[:-4], "zip", entry))
        elif entry.is_file() and name.endswith(".ipynb"):
            found.append((name[:-6], "notebook", entry))
        else:
            ignored.append(name)
    found.sort(key=lambda t: (t[0], order[t[1]]))
    jobs, ids, slugs = [], set(), set()
    for stem, fmt, entry in found:
        sid = stem if stem not in ids else entry.name
        slug = _slug(sid)
        if slug in slugs:
            slug = f"{slug}-{hashlib.sha256(sid.encode()).hexdigest()[:8]}"
        ids.add(sid)
        slugs.add(slug)
        jobs.append(Job(id=sid, slug=slug, path=str(entry.resolve()), format=fmt))
    return jobs, ignored


def _raw_hash(path: Path) -> str:
    digest = hashlib.sha256(b"raw\0")
    if path.is_file():
        digest.update(path.read_bytes())
    elif path.is_dir():
        for p in sorted(path.rglob("*")):
            if p.is_file() and not p.is_symlink():
                digest.update(str(p.relative_to(path)).encode() + b"\0" + p.read_bytes()[:1 << 24] + b"\0")
    return digest.hexdigest()


def fingerprint(job) -> None:
    """Fill ``job.sha256`` the way the report will (normalised stage modules) or, when the
    submission cannot be read, with a hash of its raw bytes and ``job.unreadable``."""
    tmp = tempfile.mkdtemp(prefix="grader-intake-")
    try:
        target = job.path
        if job.format == "notebook":
            target = submission.notebook_alone(job.path, tmp)
        intake = submission.intake(target, os.path.join(tmp, "intake"), job.id)
        job.sha256 = intake.sha256
    except submission.UnreadableSubmission as exc:
        job.sha256, job.unreadable = _raw_hash(Path(job.path)), str(exc)
    except OSError as exc:
        job.sha256, job.unreadable = _raw_hash(Path(job.path)), f"cannot be read: {exc}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def not_graded_report(job, chosen, error: str) -> dict:
    """A schema-v1 report for a submission that could not be graded: every stage at zero, the reason."""
    entries = [report.zero_stage(s, "hidden", f"not graded: {error}", f"not graded: {error}") for s in chosen]
    core = [e for e in entries if not e.get("bonus")]
    bonus = [e for e in entries if e.get("bonus")]
    rep = {"schema_version": 1, "kind": "hidden",
           "submission": {"id": job.id, "path": job.path, "sha256": job.sha256,
                          "format": {"notebook": "notebooks"}.get(job.format, job.format)},
           "score": 0.0, "max_score": report.exact_sum(e["max_score"] for e in core), "stages": entries,
           "errors": [error], "isolation": isolation.Isolation.choose("auto", allow_readable_secrets=True).describe(),
           "environment": {"python": platform.python_version(), "platform": platform.platform()},  # no torch import
           "duration_s": 0.0}
    if bonus:
        rep["bonus_score"] = 0.0
        rep["bonus_max_score"] = report.exact_sum(e["max_score"] for e in bonus)
    report.validate(rep)
    return rep


# ---------------------------------------------------------------- outputs

def print_summary(console, rows, chosen, stats: dict) -> None:
    from rich.table import Table
    graded = [r for r in rows if r["status"] in HAS_GRADE and r["report"]]
    table = Table(title=f"class summary: {len(graded)} graded of {len(rows)} submissions")
    table.add_column("stage", no_wrap=True)
    for col, just in (("max", "right"), ("mean", "right"), ("median", "right"),
                      ("min", "right"), ("max seen", "right"), ("full marks", "right"), ("missing", "right")):
        table.add_column(col, justify=just)

    def add(label, maximum, values, missing):
        if values:
            table.add_row(label, f"{maximum:g}", f"{statistics.fmean(values):.2f}", f"{statistics.median(values):.2f}",
                          f"{min(values):.2f}", f"{max(values):.2f}",
                          f"{sum(abs(v - maximum) < 1e-9 for v in values)}", str(missing))
        else:
            table.add_row(label, f"{maximum:g}", "-", "-", "-", "-", "-", str(missing))

    for s in chosen:
        vals, missing = [], 0
        for r in graded:
            st = next((x for x in r["report"]["stages"] if x["id"] == s.id), None)
            if st is None:
                continue
            vals.append(st["score"])
            missing += st["status"] == "missing"
        add(s.id + (" (bonus)" if s.bonus else ""), s.points, vals, missing)
    table.add_section()
    add("total", sum(s.points for s in chosen if not s.bonus), [r["report"]["score"] for r in graded], 0)
    console.print(table)
    bad = [r for r in rows if r["status"] not in ("graded", "outdated", "pending")]
    for r in bad:
        console.print(f"[red]{r['status']:>10}[/] {r['job'].id}: {r['error']}", highlight=False, markup=True)
    outdated = [r["job"].id for r in rows if r["status"] == "outdated"]
    if outdated:
        more = ", …" if len(outdated) > 5 else ""
        console.print(f"[yellow]outdated[/]: {len(outdated)} grade(s) were made with an earlier version of the "
                      f"tests ({', '.join(outdated[:5])}{more}); run the batch again to grade them with the "
                      "current tests", highlight=False)
    line = (f"found {stats['found']}, graded now {stats['graded']}, already graded {stats['skipped']}, "
            f"unreadable {stats['unreadable']}, errors {stats['errors']}")
    if stats.get("pending"):
        line += f", not graded yet {stats['pending']}"
    if stats["graded"] and stats["seconds"] > 0:
        line += f"; {stats['graded'] / stats['seconds'] * 60:.1f} submissions/min over {stats['seconds']:.0f} s"
    console.print(line, highlight=False)


# ---------------------------------------------------------------- the batch

class _Interrupted(Exception):
    pass


def _lock(out: Path):
    f = open(out / ".batch.lock", "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        return None
    return f


def _contains(parent: Path, child: str) -> bool:
    try:
        Path(os.path.realpath(child)).relative_to(os.path.realpath(parent))
        return True
    except ValueError:
        return False


def main(args) -> int:
    """Entry point of ``python -m grader batch`` (``args`` from grader.cli)."""
    stage_list = [s for s in (args.stages or "").split(",") if s] or None
    allow = getattr(args, "allow_readable_secrets", False)
    # Refuse at once, not once per submission, where workers cannot be confined: without namespaces
    # every submission could read the hidden tests, unless the instructor accepts that (each report says so).
    isolation.Isolation.choose("auto", allow_readable_secrets=allow)
    return run_batch(args.submissions_dir, out=args.out, workers=args.workers, gradebook_url=args.gradebook,
                     stage_ids=stage_list, executor=args.executor, scheduler=args.scheduler,
                     regrade=args.regrade, reveal_after_due=getattr(args, "reveal_after_due", False),
                     allow_readable_secrets=allow, course=args.course, manifest=args.manifest)


def run_batch(submissions_dir, *, out="grading-out", workers=1, gradebook_url=None, stage_ids=None,
              executor="local", scheduler=None, regrade=False, console=None, target=None,
              timeout_s=None, reveal_after_due=False, allow_readable_secrets=False, course=None,
              manifest=None) -> int:
    """Grade the class in ``submissions_dir``; return the exit code (0 ran, 2 usage error, 130 interrupted).

    ``target`` ("module:function") replaces the grading function of the local executor and
    ``timeout_s`` its per-submission wall-clock budget (tests use both); ``console`` is a rich Console;
    ``reveal_after_due`` publishes the feedback of ``after_due_date`` tests on the students' pages.
    ``allow_readable_secrets`` lets the workers grade where they cannot be confined (no namespaces: they
    could read the hidden tests); each report's ``isolation`` then says the secrets were readable.
    ``course``: the term's course.toml (default: the repository's); ``manifest``: a CSV of
    ``student,submitted_at`` (an LMS export's submission times) for the late policy.
    """
    from rich.console import Console


    if console is None:
        console = Console()
        if not console.is_terminal:  # a log file or CI: wide lines, no wrapping of ids and messages
            console = Console(width=160)
    subs = Path(submissions_dir).resolve()
    if not subs.is_dir():
        print(f"error: {submissions_dir} is not a folder of submissions", file=sys.stderr)
        return 2
    out_dir = Path(out).resolve()
    for name, folder in (("the submissions folder", subs), ("the output folder", out_dir)):
        if _contains(folder, tempfile.gettempdir()) or _contains(folder, str(paths.ROOT)):
            print(f"error: {name} {folder} contains {tempfile.gettempdir()} or the grader; the student's "
                  "worker could not run with it hidden. Use dedicated folders.", file=sys.stderr)
            return 2
    chosen = stages.resolve(stage_ids)
    try:
        settings = term.load(course)
        times = late.read_manifest(manifest, term.zone_of(settings)) if manifest else {}
    except term.TermError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out_dir.mkdir(parents=True, exist_ok=True)
    lock = _lock(out_dir)
    if lock is None:
        print(f"error: another batch is writing to {out_dir}; wait for it or stop it", file=sys.stderr)
        return 2
    try:
        return _run_locked(subs, out_dir, chosen, workers=workers, gradebook_url=gradebook_url, executor=executor,
                           scheduler=scheduler, regrade=regrade, console=console, target=target, timeout_s=timeout_s,
                           reveal_after_due=reveal_after_due, allow_readable_secrets=allow_readable_secrets,
                           settings=settings, manifest=times)
    except KeyboardInterrupt:
        print("interrupted before grading started; nothing was recorded", file=sys.stderr)
        return INTERRUPTED
    finally:
        lock.close()


class _Deferred:
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


def _run_locked(subs: Path, out_dir: Path, chosen, *, workers, gradebook_url, executor, scheduler, regrade,
                console, target, timeout_s, reveal_after_due=False, allow_readable_secrets=False,
                settings: term.Term, manifest: dict) -> int:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from sqlalchemy.exc import ArgumentError, OperationalError


    url = gradebook_url or default_url(str(out_dir))
    try:
        book = Gradebook(url)
    except (ArgumentError, OperationalError, ImportError) as exc:
        print(f"error: cannot open the gradebook {redact(url) if '://' in url else url}: "
              f"{str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    suite = stages.suite_hash(chosen)
    abandoned = book.mark_abandoned()
    jobs, ignored = discover(subs, exclude=[out_dir])
    for name in ignored:
        console.print(f"[yellow]ignored[/] {name}: not a folder, a .zip or a notebook", highlight=False)
    for name in sorted(set(manifest) - {j.id for j in jobs}):
        console.print(f"[yellow]manifest[/]: {name} has a submission time but no submission here", highlight=False)
    for job in jobs:
        fingerprint(job)
    final = set() if regrade else book.final_keys(suite)
    todo = [j for j in jobs if (j.id, j.sha256) not in final]
    gradable = [j for j in todo if not j.unreadable]
    hide = [str(subs), str(out_dir)]
    budget = timeout_s or (sum(s.time_limit_s for s in chosen) + run.PYTEST_SLACK_S + 90)
    try:
        if executor == "dask":
            ex = DaskExecutor(scheduler, [s.id for s in chosen], hide, suite,
                              allow_readable_secrets=allow_readable_secrets)
        else:
            ex = LocalExecutor(workers, [s.id for s in chosen], hide, suite, budget, target=target or DEFAULT_TARGET,
                               allow_readable_secrets=allow_readable_secrets)
    except (OSError, TimeoutError, ValueError) as exc:
        print(f"error: cannot start the {executor} executor: {exc}", file=sys.stderr)
        book.close()
        return 2
    run_id = book.start_run(grader_version=grader_version(), suite_hash=suite,
                            stages=",".join(s.id for s in chosen), submissions_dir=str(subs), out_dir=str(out_dir),
                            executor=ex.describe(), workers=workers if executor == "local" else None,
                            regrade=bool(regrade), n_found=len(jobs), n_todo=len(todo))
    console.print(f"batch run {run_id}: {len(jobs)} submissions in {subs}, {len(todo)} to grade "
                  f"({len(jobs) - len(todo)} already graded under suite {suite[:12]}), stages "
                  f"{', '.join(s.id for s in chosen)}; {ex.describe()}; gradebook {redact(url)}"
                  + (f"; {abandoned} killed run(s) marked abandoned" if abandoned else ""), highlight=False)
    reports_dir, stats = out_dir / "reports", {"found": len(jobs), "graded": 0, "unreadable": 0, "errors": 0,
                                               "skipped": len(jobs) - len(todo)}

    def store(job, outcome):
        rep = outcome.report
        if rep is None:
            rep = not_graded_report(job, chosen, outcome.error)
        elif rep["submission"]["sha256"] != job.sha256:  # changed between fingerprint and grading
            job.sha256 = rep["submission"]["sha256"]
        write_json(str(reports_dir / f"{job.slug}.json"), rep)
        # a local grading says which suite it really ran (the tests may be edited during a long batch)
        graded_with = outcome.extra.get("suite_hash") or suite
        book.record(run_id, student=job.id, path=job.path, fmt=job.format, sha256=job.sha256, suite=graded_with,
                    status=outcome.status, error=outcome.error,
                    report=rep if outcome.status == "graded" else None,
                    worker=outcome.worker, duration_s=outcome.seconds)
        stats[{"graded": "graded", "unreadable": "unreadable"}.get(outcome.status, "errors")] += 1

    status, start = "finished", time.monotonic()
    progress = Progress(SpinnerColumn(), TextColumn("[bold]grading[/]"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[last]}"), TimeElapsedColumn(), TextColumn("ETA"),
                        TimeRemainingColumn(), console=console, transient=False)
    with _Deferred() as guard:
        try:
            with progress:
                task = progress.add_task("grading", total=len(todo), last="")
                for job in todo:
                    if job.unreadable:
                        guard.store(store, job, Outcome("unreadable", error=job.unreadable))
                        progress.console.print(f"[red]unreadable[/] {job.id}: {job.unreadable}", highlight=False)
                        progress.update(task, advance=1, last=job.id)
                for job, outcome in ex.run(gradable):
                    guard.store(store, job, outcome)
                    if outcome.status == "graded":
                        rep = outcome.report
                        progress.console.print(f"[green]graded[/] {job.id}: {rep['score']:g}/{rep['max_score']:g} "
                                               f"({outcome.seconds:.1f} s)", highlight=False)
                    else:
                        progress.console.print(f"[red]{outcome.status}[/] {job.id}: {outcome.error}",
                                               highlight=False)
                    progress.update(task, advance=1, last=job.id)
        except KeyboardInterrupt:
            status = "interrupted"
            console.print("[yellow]interrupted[/]: stopping the gradings in flight; what was recorded stays. "
                          "Run the same command again to finish.", highlight=False)
        finally:
            ex.close(cancel=status != "finished")
        stats["seconds"] = time.monotonic() - start
        guard.critical = True  # a second Ctrl-C no longer interrupts writing the outputs
        try:
            rows = _current_rows(book, stages.suite_hash(chosen), jobs, reports_dir)
            stats["pending"] = sum(r["status"] == "pending" for r in rows)
            if settings.late is not None:
                _assess_lateness(rows, chosen, settings.late, book, manifest, reports_dir)
            exports.write_grades(out_dir / "grades.csv", rows, chosen)
            for warning in exports.write_canvas(out_dir / "grades-canvas.csv", rows, chosen, settings.canvas):
                console.print(f"[yellow]canvas[/]: {warning}", highlight=False)
            html_report.write_all(out_dir / "html", rows, chosen, suite=suite, run_id=run_id,
                                  reveal_after_due=reveal_after_due)
            print_summary(console, rows, chosen, stats)
            console.print(f"outputs: {out_dir / 'grades.csv'}, {out_dir / 'grades-canvas.csv'}, {reports_dir}/, "
                          f"{out_dir / 'html' / 'class.html'}", highlight=False)
        finally:
            readable_outputs(out_dir)
            book.finish_run(run_id, status, n_graded=stats["graded"], n_skipped=stats["skipped"],
                            n_errors=stats["errors"] + stats["unreadable"])
            book.close()
    return INTERRUPTED if status == "interrupted" else 0


def _assess_lateness(rows, chosen, policy, book, manifest: dict, reports_dir: Path) -> None:
    """Give each graded row, and its report file, the ``late`` object of the term's policy. A stage's time is
    the manifest's (student,submitted_at) for the student, else when ``grader collect`` first saw the file
    that was graded; neither: no time, on time."""
    stage_ids = [s.id for s in chosen]
    for r in rows:
        rep = r["report"]
        if r["status"] not in HAS_GRADE or not rep:
            continue
        job = r["job"]
        if job.id in manifest:
            seen, cut = {s["id"]: manifest[job.id] for s in rep["stages"] if s["status"] != "missing"}, {}
        elif job.format == "folder":
            seen, cut = collect.times_for(book, job.id, Path(job.path), policy, stage_ids)
        else:
            seen, cut = {}, {}
        r["late"] = late.assess(policy, job.id, rep, seen, cut)
        r["report"] = {**rep, "late": r["late"]}
        report.validate(r["report"])
        write_json(str(reports_dir / f"{job.slug}.json"), r["report"])


def readable_outputs(out_dir: Path) -> None:
    """Atomic writes create files readable by their owner only; give the outputs the usual mode
    (0666 less the umask), so that a web server or a TA's account can read them."""
    mask = os.umask(0)
    os.umask(mask)
    mode = 0o666 & ~mask
    tables = [out_dir / name for name in ("grades.csv", "grades-canvas.csv", "similarity.csv", "similarity-pairs.csv")]
    for p in [*tables, *(out_dir / "reports").glob("*.json"), *(out_dir / "html").glob("*.html")]:
        try:
            if p.is_file() and (p.stat().st_mode & 0o777) != mode:
                os.chmod(p, mode)
        except OSError:
            pass


def _current_rows(book, suite, jobs, reports_dir: Path) -> list:
    """Each submission of the folder with its latest grading (``pending`` if none). A grading made
    with another version of the tests than ``suite`` (the current one) is ``outdated``: its scores
    stand until the next run grades it again. A report file missing on disk is rewritten from the
    gradebook."""
    latest = book.latest([(j.id, j.sha256) for j in jobs])
    rows = []
    for job in jobs:
        g = latest.get((job.id, job.sha256))
        if g is None:
            rows.append({"job": job, "status": "pending", "report": None, "error": "not graded yet",
                         "graded_at": None})
            continue
        rep = g["report"]
        path = reports_dir / f"{job.slug}.json"
        if rep is not None and not path.exists():
            write_json(str(path), rep)
        graded_at = g["graded_at"]
        if graded_at is not None and graded_at.tzinfo is None:  # SQLite keeps no time zone: it was UTC
            graded_at = graded_at.replace(tzinfo=dt.timezone.utc)
        status, error = g["status"], g["error"] or ""
        if g["suite_hash"] != suite and status == "graded":
            status, error = "outdated", "graded with an earlier version of the tests; run the batch again"
        rows.append({"job": job, "status": status, "report": rep, "error": error,
                     "graded_at": graded_at.isoformat(timespec="seconds") if graded_at else None})
    return rows
