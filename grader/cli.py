"""Command line: ``python -m grader {check,grade,release,gradescope,classroom,batch,collect,similarity}``.

Exit codes: 0 grading ran (whatever the score); 2 usage error (a bad option, an unknown
stage) or unreadable submission; 1 the grader could not grade: the isolation asked for
(or, on the hidden suites, any at all) is not available, one line on stderr and no
report; or a bug in the grader itself (any other exception, with its trace).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

from grader.engine import paths


def _stage_list(value: str | None):
    return [s for s in (value or "").split(",") if s] or None


def language(args) -> str:
    """The language of what the command says to students (``grader.i18n.languages.for_command``)."""
    from grader.i18n import languages  # start-up: `--help` imports nothing
    return languages.for_command(args.command, args.lang, getattr(args, "course", None))


def _before_numpy(args, threads: int) -> None:
    """What a grading command does before it imports numpy and pytest: numpy's BLAS threads
    (``cores.limit_blas_threads``), and a fork server started, its library named once the submission
    is read, which meanwhile runs the isolation probe (``forkservers.start_soon``): its start-up runs
    beside those imports, which take about as long."""
    from grader.engine import cores, forkservers  # start-up: light (no numpy)
    cores.limit_blas_threads(threads)
    forkservers.start_soon(threads, probe=args.isolation != "degraded")


def cmd_check(args) -> int:
    _before_numpy(args, threads=1)
    from grader.engine import run, table  # start-up: each command imports only what it runs
    stage_ids = [args.stage] if args.stage else None
    rep = run.grade(args.path, kind="public", stage_ids=stage_ids, isolation=args.isolation,
                    submission_id=os.path.basename(os.path.abspath(args.path)), pytest_here=True,
                    validate=False, language=language(args))
    _say_isolation(rep)
    table.print_report(rep)
    if args.github:
        from grader.engine import github_actions  # start-up
        github_actions.publish(rep)
    return 0


def _say_isolation(rep) -> None:
    from grader.engine import isolation  # start-up
    print(isolation.one_line(rep["isolation"]), file=sys.stderr)


def cmd_grade(args) -> int:
    from grader.engine import cores  # start-up: light
    threads = args.threads or cores.available()
    _before_numpy(args, threads)
    from grader.engine import gradescope, run, table  # start-up
    rep = run.grade(args.submission, kind="hidden", stage_ids=_stage_list(args.stages), isolation=args.isolation,
                    submission_id=args.id, threads=threads,
                    allow_readable_secrets=args.allow_readable_secrets, seed=args.seed, language=language(args))
    _say_isolation(rep)
    if args.format == "gradescope":
        payload = gradescope.results_json(rep)
    else:
        payload = rep
    if args.out:
        from grader.engine.atomic import write_json  # start-up
        write_json(args.out, payload)
    if not args.quiet:
        table.print_report(rep)
    if not args.out:
        print(json.dumps(payload, indent=1) if args.json else "", end="\n" if args.json else "")
    return 0


def cmd_release(args) -> int:
    from grader.authoring import release  # start-up; authoring/ is not in the student bundle
    release.build(args.out_dir)
    print(f"student bundle written to {args.out_dir}")
    return 0


def cmd_gradescope(args) -> int:
    from grader.authoring import autograder  # start-up; authoring/ is not in the student bundle
    autograder.build(args.out_zip, language=args.lang)
    print(f"Gradescope autograder written to {args.out_zip}")
    return 0


def cmd_classroom(args) -> int:
    from grader.authoring import github_template  # start-up; authoring/ is not in the student bundle
    try:
        github_template.build(args.out_dir)
    except FileExistsError as exc:
        print(f"error: {exc}: give a new or empty folder", file=sys.stderr)
        return 2
    print(f"template repository written to {args.out_dir}")
    return 0


def cmd_batch(args) -> int:
    from grader.classroom import batch  # start-up; classroom/ is not in the student bundle
    return batch.main(args)


def cmd_similarity(args) -> int:
    from grader.classroom import similarity  # start-up (copydetect imports matplotlib); not in the student bundle
    return similarity.main(args)


def cmd_collect(args) -> int:
    from grader.classroom import collect  # start-up; classroom/ is not in the student bundle
    try:
        return collect.run_collect(args.repos_dir, out=args.out, gradebook_url=args.gradebook, course=args.course,
                                   prefix=args.prefix, pull_first=args.pull)
    except collect.GitUnavailable as exc:  # the grader's machine, not a student: exit 1, one line
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _add_lang(command, default: str) -> None:
    command.add_argument("--lang", choices=["en", "ko", "both"],
                         help=f"the language of the feedback, test names and table ({default}); "
                              "both: Korean with the English beneath")


def _add_check(sub) -> None:
    c = sub.add_parser("check", help="run the public tests on your work (default: starter/)")
    c.add_argument("stage", nargs="?", help="a stage id, e.g. a02_softmax, a02 or 2 (default: all)")
    c.add_argument("path", nargs="?", default=str(paths.STARTER), help="folder, .zip or notebook")
    _add_lang(c, "default: from LANG/LC_ALL, e.g. LANG=ko_KR.UTF-8 for Korean")
    c.add_argument("--isolation", default="auto", choices=["auto", "strict", "degraded"])
    c.add_argument("--github", action="store_true",
                   help="in a GitHub Actions step: each stage's points as a notice, in the step's summary and "
                        "in $RUNNER_TEMP/public-points.tsv (python -m grader.engine.github_actions adds them up)")
    c.set_defaults(func=cmd_check)


def _add_grade(sub) -> None:
    g = sub.add_parser("grade", help="run the hidden suites on one submission (default: solutions/)")
    g.add_argument("submission", nargs="?", default=str(paths.SOLUTIONS))
    g.add_argument("--stages", help="comma-separated stage ids (default: all)")
    g.add_argument("--out", help="write the report here (JSON)")
    g.add_argument("--format", choices=["json", "gradescope"], default="json")
    g.add_argument("--id", help="submission id in the report (default: the file or folder name)")
    g.add_argument("--isolation", default="auto", choices=["auto", "strict", "degraded"])
    g.add_argument("--threads", type=int, default=None,
                   help="torch threads per worker (default: the cores this process may use, cgroup quota included)")
    g.add_argument("--seed", type=int, help="the seed of the hidden suites' random inputs (default: from the "
                                            "course secret and --id); a report's `seed` reproduces it")
    g.add_argument("--allow-readable-secrets", action="store_true",
                   help="grade even where the worker could read the hidden tests and solutions (no namespaces)")
    g.add_argument("--json", action="store_true", help="print the report as JSON")
    g.add_argument("--quiet", action="store_true", help="no table")
    _add_lang(g, "default: course.toml's language")
    g.set_defaults(func=cmd_grade)


def _add_builds(sub) -> None:
    r = sub.add_parser("release", help="build the student bundle")
    r.add_argument("out_dir")
    r.set_defaults(func=cmd_release)

    gs = sub.add_parser("gradescope", help="build a Gradescope autograder zip")
    gs.add_argument("out_zip")
    _add_lang(gs, "default: course.toml's language")
    gs.set_defaults(func=cmd_gradescope)

    gc = sub.add_parser("classroom", help="build a template repository for GitHub (Classroom 50, or an "
                                          "organisation's template): the student bundle and a workflow that "
                                          "shows the public points of every push")
    gc.add_argument("out_dir")
    gc.set_defaults(func=cmd_classroom)


def _add_batch(sub) -> None:
    b = sub.add_parser("batch", help="grade every submission in a folder")
    b.add_argument("submissions_dir")
    b.add_argument("--workers", type=int, default=None,
                   help="gradings at a time (default: the cores this process may use, cgroup quota included)")
    b.add_argument("--gradebook", help="SQLAlchemy URL (default: sqlite file in --out)")
    b.add_argument("--out", default="grading-out")
    b.add_argument("--stages")
    _add_lang(b, "default: course.toml's language (of --course)")
    b.add_argument("--executor", choices=["local", "dask"], default="local")
    b.add_argument("--scheduler", help="Dask scheduler address for --executor dask")
    b.add_argument("--regrade", action="store_true", help="grade again even if already graded")
    b.add_argument("--reveal-after-due", action="store_true",
                   help="show after_due_date tests' feedback on the students' pages")
    b.add_argument("--allow-readable-secrets", action="store_true",
                   help="grade even where the workers could read the hidden tests and solutions (no namespaces)")
    b.add_argument("--course", help="the term's course.toml: deadlines, late days, Canvas (default: the repository's)")
    b.add_argument("--manifest", help="CSV of student,submitted_at: submission times of an LMS export (late policy)")
    b.add_argument("--similarity", action="store_true", help="then compare the submissions stage by stage "
                                                             "(as `grader similarity OUT`)")
    b.add_argument("--reference", action="append", metavar="DIR",
                   help="with --similarity: earlier submissions or public solutions to compare with (repeatable)")
    b.set_defaults(func=cmd_batch)


def _add_similarity(sub) -> None:
    si = sub.add_parser("similarity", help="compare the students' code stage by stage (copydetect); "
                                           "writes OUT_DIR/html/similarity.html and OUT_DIR/similarity.csv")
    si.add_argument("out_dir", help="a batch's output folder")
    si.add_argument("--submissions", help="the folder of submissions (default: the one of the latest batch run "
                                          "in OUT_DIR's gradebook)")
    si.add_argument("--reference", action="append", metavar="DIR",
                    help="earlier submissions or public solutions to compare with (each entry of DIR is one "
                         "author; repeatable)")
    si.add_argument("--stages", help="comma-separated stage ids (default: the latest batch run's, else all)")
    si.add_argument("--gradebook", help="SQLAlchemy URL (default: sqlite file in OUT_DIR)")
    si.set_defaults(func=cmd_similarity)


def _add_collect(sub) -> None:
    co = sub.add_parser("collect", help="record the HEAD of each student's git clone and when its files were first "
                                        "seen; write what counts to OUT/collected/ for batch")
    co.add_argument("repos_dir", help="a folder of clones (Classroom 50: gh teacher download)")
    co.add_argument("--out", default="grading-out", help="the batch's output folder (gradebook, collected/)")
    co.add_argument("--gradebook", help="SQLAlchemy URL (default: sqlite file in --out)")
    co.add_argument("--course", help="the term's course.toml (default: the repository's)")
    co.add_argument("--prefix", help="the part of each clone's name before the student's id "
                                     "(default: [classroom] repo_prefix of course.toml)")
    co.add_argument("--pull", action="store_true", help="git pull --ff-only in each clone first (your credentials)")
    co.set_defaults(func=cmd_collect)


def _say_error(text, args) -> None:
    """``error: TEXT`` on stderr, in the command's language where it has one (``--lang``)."""
    from grader.i18n import render, tr  # start-up: `--help` imports nothing
    lang = language(args) if hasattr(args, "lang") else "en"
    print(render(tr("error: {problem}", problem=text), lang), file=sys.stderr)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m grader", description="Grade Transformer-course submissions.")
    sub = p.add_subparsers(dest="command", required=True)
    for add in (_add_check, _add_grade, _add_builds, _add_batch, _add_similarity, _add_collect):
        add(sub)
    return p


def main(argv=None) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    try:
        return args.func(args)
    except Exception as exc:  # noqa: BLE001 - sorted out by _failed
        return _failed(exc, args)


def _failed(exc: Exception, args) -> int:
    """The exit code of a command that raised ``exc`` (the module's docstring), after one line on stderr, or
    the trace of a bug. Called while ``exc`` is being handled."""
    from grader.engine.isolation import IsolationUnavailable  # start-up: imported when a command fails
    from grader.engine.stages import UnknownStage  # start-up: same
    from grader.engine.submission import UnreadableSubmission  # start-up: same
    if isinstance(exc, IsolationUnavailable):
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if isinstance(exc, (UnreadableSubmission, UnknownStage)):  # what the student or instructor gave: in their language
        _say_error(exc.args[0], args)
        return 2
    traceback.print_exc()  # anything else is our bug
    print("error: this is a bug in the grader; please report it with the trace above", file=sys.stderr)
    return 1
