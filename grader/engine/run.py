"""Grading one submission: intake, one trusted pytest session, the report."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
import time

from ..i18n import join, localize, tr
from . import earlier, forkservers, paths, report, seeds, session, stages, submission
from . import isolation as iso
from .options import GradingOptions

PYTEST_SLACK_S = 120
RECORDED = earlier.Recorded()  # verdicts of verdict-only suites run by this process (the catalogue grades many)
# Only the plugins grading needs: the ones installed packages register by entry point (anyio, platformdirs,
# pytest-metadata) cost a large share of the session's start-up, and pytest's own that grading never uses another
# ~45 ms (unraisableexception runs gc.collect at the end; fixtures such as tmp_path stay), and logging ~0.3 s a
# whole grading (it swaps handlers around each of the ~1,700 phases of tests; the report omits logs anyway).
UNUSED_PLUGINS = ("cacheprovider", "doctest", "junitxml", "pastebin", "stepwise", "setuponly", "setupplan",
                  "faulthandler", "debugging", "nose", "unittest", "unraisableexception", "threadexception", "logging")


def grade(path: str, options: GradingOptions | None = None, submission_id: str | None = None) -> dict:
    """Grade the submission at ``path`` as ``options`` say (:class:`grader.engine.options.GradingOptions`; None:
    the defaults, the hidden suites of every stage) and return the schema-v1 report. ``submission_id`` names
    the submission in the report (default: its file or folder name) and, unless ``options.seed`` is given,
    draws its seed.

    Raises ``submission.UnreadableSubmission`` when nothing can be graded, and
    ``isolation.IsolationUnavailable`` when the workers cannot be confined as chosen
    (``options.isolation`` "strict" without every layer; no namespaces at all on the hidden
    suites unless ``options.allow_readable_secrets``; a worker that failed to confine itself;
    ``isolation.WorkerImportFailed``: a module the grader's code needs cannot be imported
    in a worker).
    """
    options = options or GradingOptions()
    start = time.monotonic()
    chosen = stages.resolve(options.stage_ids)
    work = tempfile.mkdtemp(prefix="grader-")
    os.chmod(work, 0o711)
    os.makedirs(os.path.join(work, "private"), mode=0o700)
    try:
        intake = submission.intake(path, os.path.join(work, "private", "intake"), submission_id)
        if options.seed is None and options.kind == "hidden":
            options = dataclasses.replace(options, seed=seeds.submission_seed(intake.id))
        handed_in = {s.id for s in stages.all_stages() if os.path.exists(os.path.join(intake.folder, s.module_file))}
        confined, json_tests, events = _session(intake, chosen, handed_in, options, work)
        entries = [report.stage_results(s, options.kind, json_tests, events, intake.notes_about(s.id),
                                        partial=options.fast_only)
                   if s.id in handed_in else _missing_stage(s, options.kind, intake.notes_about(s.id))
                   for s in chosen if s.suite(options.kind).exists()]
        widest = max(chosen, key=lambda s: (s.memory_mb, s.time_limit_s))
        return _rendered(report.assemble(intake, options.kind, entries, confined.for_stage(widest).describe(),
                                         time.monotonic() - start, seed=options.seed,
                                         language=options.language or "en"), options)
    finally:
        forkservers.close_all()
        shutil.rmtree(work, ignore_errors=True)


def _session(intake: submission.Intake, chosen, handed_in: set, options: GradingOptions, work: str):
    """The grading session of the handed-in stages of ``chosen`` (none when none is): (the isolation its workers
    were confined with, its tests as pytest-json-report lists them, the plugin's events by stage id). The earlier
    stages they import are graded first when no verdict of them is recorded (``_earlier_verdicts``)."""
    runnable = [s for s in chosen if s.id in handed_in and s.suite(options.kind).exists()]
    prior, recorded = _earlier_verdicts(runnable, handed_in, intake.folder, options)
    if runnable:
        _start_up_beside_the_probe({s.library for s in runnable + [s for s, _ in prior]}, options)
    confined = iso.Isolation.choose(options.isolation, options.hide, kind=options.kind,
                                    allow_readable_secrets=options.allow_readable_secrets)
    if not runnable:
        return confined, [], {}
    json_tests, events = _run_pytest(intake, runnable, options, confined, work,
                                     verdict_only=[s for s, _ in prior], recorded=recorded)
    for s, key in prior:
        RECORDED.put(key, events.get(s.id, {}).get("verdict"))
    return confined, json_tests, events


def _start_up_beside_the_probe(libraries, options: GradingOptions) -> None:
    """Start-ups side by side with the probe (``isolation.probe_soon``): the fork servers import numpy
    (and torch; the first takes the server started early, ``forkservers.start_soon``) and this process
    imports pytest; or, when the session will be a fork of a server (:func:`_forked_session`), only that
    server, the rest being the session's to start."""
    if options.pytest_here:
        forkservers.start(libraries, options.threads)
        import pytest  # noqa: F401
    else:
        forkservers.get(forkservers.heaviest(libraries), options.threads)


def _rendered(result: report.Report, options: GradingOptions) -> dict:
    """The report as JSON, its texts in ``options.language``; None leaves them Messages (and skips the schema
    check, as ``options.validate`` False does)."""
    data = result.to_json()
    if options.language is None:
        return data
    data = localize(data, options.language)
    if options.validate:
        report.validate(data)
    return data


def _earlier_verdicts(runnable, handed_in, folder, options: GradingOptions):
    """The earlier stages the ``runnable`` ones import, as (stages to grade first, only to decide whether
    they are used as written, each with its key in RECORDED; verdicts this process already has of the
    same files with the same suites and inputs, by stage id)."""
    prior, recorded = [], {}
    for s in earlier.verdict_only(runnable, handed_in):
        if s.suite(options.kind).exists():
            key = RECORDED.key(s, folder, options.kind, options.fast_only, options.seed)
            if RECORDED.get(key):
                recorded[s.id] = RECORDED.get(key)
            else:
                prior.append((s, key))
    return prior, recorded


def _missing_stage(stage, kind, notes: list):
    """Every test of a stage whose module was not handed in: status missing, zero.
    A notebook that could not be read says why here (``notes``: the intake's lines about the stage)."""
    return report.zero_stage(stage, kind, tr("{module} was not handed in", module=stage.module_file),
                             join([tr("{module} is not in the submission", module=stage.module_file), *notes]))


def _run_pytest(intake: submission.Intake, runnable, options: GradingOptions, isolation: iso.Isolation, work: str,
                verdict_only=(), recorded=None):
    """Run the suites of ``runnable`` (and of the ``verdict_only`` stages, whose results only decide
    how later stages import them; ``recorded``: the verdicts of earlier stages taken from earlier gradings)
    in one pytest session, in course order: (its tests as pytest-json-report lists them, the plugin's events)."""
    order = {s.id: i for i, s in enumerate(stages.all_stages())}
    suites = sorted([*runnable, *verdict_only], key=lambda s: order[s.id])
    private = os.path.join(work, "private")
    json_path = os.path.join(private, "pytest.json")
    args = [*_session_args(intake, options, isolation, work, json_path, verdict_only, recorded),
            *[str(s.suite(options.kind)) for s in suites]]
    if options.pytest_here:
        proc = _pytest_here(args)
    else:
        budget = sum(s.time_limit_s for s in suites) + PYTEST_SLACK_S
        proc = _forked_session(forkservers.heaviest({s.library for s in suites}), options.threads, args, budget)
    fatal = _read_json(os.path.join(private, "fatal.json"))
    if fatal is not None:
        raise iso.grader_error_from_json(fatal)
    return _session_tests(json_path, proc), _read_json(os.path.join(private, "stages.json")) or {}


def _session_args(intake: submission.Intake, options: GradingOptions, isolation: iso.Isolation, work: str,
                  json_path: str, verdict_only, recorded) -> list:
    """The session's options (the suites' files follow them): pytest's, and the grader's plugin's."""
    # --assert=plain: a failed assert's message reaches the plugin as the test wrote it (grader.i18n.Message)
    return [*[f"-pno:{name}" for name in UNUSED_PLUGINS],
            "--assert=plain", "-q", "--no-header", "-rN", "--tb=no",
            f"--rootdir={paths.ROOT}", "-c", str(paths.ROOT / "tests" / "grading.ini"),
            "--json-report", f"--json-report-file={json_path}", "--json-report-omit", "log", "keywords",
            f"--submission={intake.folder}", f"--isolation-plan={isolation.to_json()}", f"--grader-work={work}",
            f"--threads={options.threads}", *[f"--hide={h}" for h in options.hide],
            *(["-m", "not slow"] if options.fast_only else []), *(["--reverse-order"] if options.reverse_order else []),
            f"--submission-id={intake.id}", *([f"--seed={options.seed}"] if options.seed is not None else []),
            *[f"--verdict-only={s.id}" for s in verdict_only], f"--recorded-verdicts={json.dumps(recorded or {})}"]


def _session_tests(json_path: str, proc: subprocess.CompletedProcess) -> list:
    """The tests of the session's JSON report; RuntimeError (the grader's trouble) when there is none, a test
    file failed to load or pytest failed."""
    if not os.path.exists(json_path):
        raise RuntimeError(f"the grading session failed to run:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    data = _read_json(json_path)
    for collector in data.get("collectors", []):
        if collector.get("outcome") == "failed":
            raise RuntimeError(f"a test file failed to load: {collector.get('longrepr', '')[-2000:]}")
    if data.get("exitcode") not in (0, 1, 5):  # 5: every test deselected (fast_only)
        raise RuntimeError(f"pytest exited with {data.get('exitcode')}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return data.get("tests", [])


def _read_json(path: str):
    """The JSON value in the file at ``path``, or None if there is no such file."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def _forked_session(library: str, threads: int, args, budget: float) -> subprocess.CompletedProcess:
    """``python -m grader.engine.session ARGS`` forked by the fork server of ``library``
    (:meth:`forkservers.ForkServer.run_module`): numpy and torch are imported there already, and their
    pages are shared with the server and the workers."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = str(paths.ROOT)  # for what the session starts as a new interpreter
    return forkservers.get(library, threads).run_module("grader.engine.session", args, env, cwd=str(paths.ROOT),
                                                        path=[str(paths.ROOT)], timeout=budget)


def _pytest_here(args) -> subprocess.CompletedProcess:
    """The session (``session.main``) in this process, its output kept like a subprocess's."""
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = session.main(args)
    return subprocess.CompletedProcess(args, code, out.getvalue(), "")
