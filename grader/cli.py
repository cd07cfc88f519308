"""Command line: ``python -m grader {check,grade,release,gradescope,classroom,batch,collect,similarity}``.

Exit codes: 0 grading ran (whatever the score); 2 usage error (a bad option, an unknown
stage) or unreadable submission; 1 the grader could not grade: the isolation asked for
(or, on the hidden suites, any at all) is not available, or the Python running it lacks a
package it needs (one line on stderr naming it and the command to use, no report); or a bug
in the grader itself (any other exception, with its trace).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

from grader.engine import paths

ALL_STAGES = "all"  # `check all [PATH]`: every stage, so that a folder can follow (the Makefiles' `check`)


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
    from grader.engine.options import GradingOptions  # start-up
    stage_ids = [args.stage] if args.stage and args.stage != ALL_STAGES else None
    options = GradingOptions(kind="public", stage_ids=stage_ids, isolation=args.isolation, pytest_here=True,
                             validate=False, language=language(args))
    rep = run.grade(args.path, options, submission_id=os.path.basename(os.path.abspath(args.path)))
    table.print_report(rep)  # how the work was confined: one plain line when it was less than strict
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
    from grader.engine.options import GradingOptions  # start-up
    options = GradingOptions(kind="hidden", stage_ids=_stage_list(args.stages), isolation=args.isolation,
                             threads=threads, allow_readable_secrets=args.allow_readable_secrets, seed=args.seed,
                             language=language(args))
    rep = run.grade(args.submission, options, submission_id=args.id)
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
    try:
        release.build(args.out_dir)
    except FileExistsError as exc:
        print(f"error: {exc}: give a new or empty folder", file=sys.stderr)
        return 2
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
        github_template.build(args.out_dir, language=language(args))
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


def _add_lang(command, default: str, what: str = "the feedback, test names and table") -> None:
    command.add_argument("--lang", choices=["en", "ko", "both"],
                         help=f"the language of {what} ({default}); both: Korean with the English beneath")


def _add_isolation(command) -> None:
    command.add_argument("--isolation", default="auto", choices=["auto", "strict", "degraded"],
                         help="how the student's code is confined: auto, the strongest this machine allows "
                              "(default); strict, refuse to run with less than every guarantee (exit 1); "
                              "degraded, no confinement at all (to look into the grader itself)")


def _add_check(sub) -> None:
    c = sub.add_parser("check", help="run the public tests on your work (default: starter/)")
    c.add_argument("stage", nargs="?", help="a stage id, e.g. a02_softmax, a02 or 2, or all (default: all)")
    c.add_argument("path", nargs="?", default=str(paths.STARTER),
                   help="your work: a folder, a .zip of it or a notebook (default: starter/)")
    _add_lang(c, "default: from LANG/LC_ALL, e.g. LANG=ko_KR.UTF-8 for Korean")
    _add_isolation(c)
    c.add_argument("--github", action="store_true",
                   help="in a GitHub Actions step: each stage's points as a notice, in the step's summary and "
                        "in $RUNNER_TEMP/public-points.tsv (python -m grader.engine.github_actions adds them up)")
    c.set_defaults(func=cmd_check)


def _add_grade(sub) -> None:
    g = sub.add_parser("grade", help="run the hidden suites on one submission (default: solutions/)")
    g.add_argument("submission", nargs="?", default=str(paths.SOLUTIONS))
    g.add_argument("--stages", help="comma-separated stage ids (default: all)")
    g.add_argument("--out", help="write the report here (JSON)")
    g.add_argument("--format", choices=["json", "gradescope"], default="json",
                   help="what --out holds: the schema-v1 report (json, the default) or Gradescope's results.json")
    g.add_argument("--id", help="submission id in the report (default: the file or folder name)")
    _add_isolation(g)
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
    _add_lang(gc, "default: course.toml's language", "the template's README.md (en: README.ko.md beside it; "
                                                      "ko: README.en.md beside it)")
    gc.set_defaults(func=cmd_classroom)


def _add_batch(sub) -> None:
    b = sub.add_parser("batch", help="grade every submission in a folder")
    b.add_argument("submissions_dir")
    b.add_argument("--workers", type=int, default=None,
                   help="gradings at a time (default: the cores this process may use, cgroup quota included)")
    b.add_argument("--gradebook", help="SQLAlchemy URL (default: sqlite file in --out)")
    b.add_argument("--out", default="grading-out",
                   help="the output folder: grades.csv, grades-canvas.csv, reports/, html/, the gradebook "
                        "(default: grading-out)")
    b.add_argument("--stages", help="comma-separated stage ids (default: all)")
    _add_lang(b, "default: course.toml's language (of --course)",
              "the reports, the students' pages, the class page and what the batch prints")
    b.add_argument("--executor", choices=["local", "dask"], default="local",
                   help="where gradings run: local processes (default), or a Dask cluster (--scheduler)")
    b.add_argument("--scheduler", help="Dask scheduler address for --executor dask")
    b.add_argument("--regrade", action="store_true", help="grade again even if already graded")
    b.add_argument("--reveal-after-due", action="store_true",
                   help="show the feedback of tests whose visibility is after_due_date (stage.toml) on the "
                        "students' pages: give it once the due date has passed")
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
    _add_lang(si, "default: course.toml's language", "the page and what the command prints")
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
    except ModuleNotFoundError as exc:  # before _failed, which imports what may be missing too
        if not (exc.name or "").startswith("grader"):
            return _not_installed(exc.name or "?", args, argv)
        if exc.name in ("grader.authoring", "grader.classroom"):  # the student bundle ships neither
            print(f"error: `{args.command}` needs the course repository; this copy of the grader (the student "
                  "bundle) has only `check`", file=sys.stderr)
            return 2
        return _failed(exc, args)
    except Exception as exc:  # noqa: BLE001 - sorted out by _failed
        return _failed(exc, args)


# The packages whose import name is not the name pip installs them by.
DISTRIBUTIONS = {"pytest_jsonreport": "pytest-json-report", "yaml": "pyyaml", "sklearn": "scikit-learn"}


def _not_installed(module: str, args, argv) -> int:
    """A Python that lacks a package the grader needs (not a bug): one line, in the command's language, saying
    which package and the command to use instead; exit 1 (the grader could not run)."""
    from grader.i18n import render, tr  # start-up: the standard library only
    venv_python = os.path.relpath(paths.ROOT / ".venv" / "bin" / "python")
    words = sys.argv[1:] if argv is None else list(argv)
    again = " ".join([venv_python, "-m", "grader", *words])
    first = "make check" if args.command == "check" else "make setup"
    package = DISTRIBUTIONS.get(module.split(".")[0], module.split(".")[0])
    try:
        lang = language(args) if hasattr(args, "lang") else "en"
    except ImportError:  # course.toml's language, read with a parser this Python may lack too (tomli on 3.10)
        lang = "en"
    print(render(tr("error: this Python ({python}) has no {package}, which the grader needs. Run `{first}` (it sets "
                    "up the course's .venv the first time), then use that Python: {again}",
                    python=sys.executable, package=package, first=first, again=again), lang), file=sys.stderr)
    return 1


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
