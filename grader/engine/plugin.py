"""The pytest plugin the grader runs hidden and public suites with (``-p grader.engine.plugin``).

It gives tests the ``student`` fixture (the stage module behind the worker
boundary), turns each outcome into a report status and feedback line, and
records per-stage events for the report.
"""
from __future__ import annotations

import json
import os
import tempfile

import pytest

from ..i18n import Message, message, tr
from . import earlier, forkservers, paths, seeds, stages, testing
from . import isolation as iso
from .errors import StudentProblem
from .worker_client import StageWorker, StudentModule

FEEDBACK_CHARS = 1200
_workers: dict = {}
_fatal: list = []  # why the session stopped as a grader error (private/fatal.json: isolation.grader_error_to_json)


def pytest_addoption(parser):
    group = parser.getgroup("grader")
    group.addoption("--submission", default=str(paths.SOLUTIONS), help="folder holding the stage modules")
    group.addoption("--isolation", default="auto", choices=["auto", "strict", "degraded"])
    group.addoption("--isolation-plan", default=None,
                    help="the isolation run.grade chose (JSON of Isolation.to_json); else --isolation is chosen here")
    group.addoption("--grader-work", default=None, help="private folder for worker files and stage events")
    group.addoption("--threads", type=int, default=1, help="torch threads in each worker")
    group.addoption("--hide", action="append", default=[], help="another path the worker must not read")
    group.addoption("--submission-id", default="submission",
                    help="the report's submission id (the seed's default is derived from it)")
    group.addoption("--seed", type=int, default=None,
                    help="the submission's seed for random inputs (default: from the course secret and "
                         "--submission-id, grader/engine/seeds.py)")
    group.addoption("--reverse-order", action="store_true",
                    help="run each suite's tests in reverse (proves no test depends on the order)")
    group.addoption("--verdict-only", action="append", default=[],
                    help="a stage whose suite runs only to decide whether later stages import it as written "
                         "(grader/engine/earlier.py); run.grade leaves it out of the report")
    group.addoption("--recorded-verdicts", default="{}",
                    help="JSON {stage: [verdict, detail]}: earlier stages whose verdict an earlier grading of the same "
                         "files with the same suites and inputs gave (grader/engine/earlier.py, Recorded)")


def pytest_configure(config):
    config.addinivalue_line("markers",
                            "slow: end-to-end training (left out only by the mutant catalogue's fast grading)")


def pytest_collection_modifyitems(config, items):
    """Stages run in course order, so that a later stage knows its earlier stages' verdicts
    (grader/engine/earlier.py); ``--reverse-order`` reverses the tests within each stage."""
    order = {s.id: i for i, s in enumerate(stages.all_stages())}
    by_stage: dict = {}
    for item in items:
        by_stage.setdefault(stage_of(item.module), []).append(item)
    reverse = config.getoption("--reverse-order")
    items[:] = [item for stage_id in sorted(by_stage, key=order.__getitem__)
                for item in (reversed(by_stage[stage_id]) if reverse else by_stage[stage_id])]
    config._grader_statuses = {}  # stage -> the statuses of its tests so far (pytest_runtest_makereport)
    # the last stage (in running order) of each library: its fork server stops when that stage ends
    config._grader_last_of_library = {}
    for item in items:
        stage = stages.of_suite(item.module.__file__)
        config._grader_last_of_library[stage.library] = stage.id


def pytest_collection_finish(session):
    """How many tests of each stage will run (after ``-m`` deselected some): a later stage decides how to
    import an earlier one only once all of them have run."""
    counts: dict = {}
    for item in session.items:
        counts[stage_of(item.module)] = counts.get(stage_of(item.module), 0) + 1
    session.config._grader_collected = counts


def stage_of(module) -> str:
    return stages.suite_stage_id(module.__file__)


def submission_seed(config) -> int:
    """``--seed``, else the seed derived from the course secret and ``--submission-id``
    (derived only when a test draws: public suites run without the secret)."""
    if getattr(config, "_grader_seed", None) is None:
        given = config.getoption("--seed")
        config._grader_seed = given if given is not None else seeds.submission_seed(
            config.getoption("--submission-id"))
    return config._grader_seed


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before the test's fixtures: the stage seed its random inputs are drawn from."""
    testing.use_stage_seed(None)
    if item.module is not None and stage_of(item.module) in {s.id for s in stages.all_stages()}:
        try:
            testing.use_stage_seed(seeds.stage_seed(submission_seed(item.config), stage_of(item.module)))
        except seeds.NoSecret:
            pass  # a suite that draws nothing needs no secret; one that draws says so (testing.case_seed)


@pytest.fixture
def stage_seed(request) -> int:
    """The seed of this test's stage for this submission (``testing.rng(case)`` mixes in a case)."""
    return seeds.stage_seed(submission_seed(request.config), stage_of(request.module))


def pytest_sessionstart(session):
    """Start the fork servers the suites given will need, so that torch's import
    runs while the numpy stages are graded."""
    config = session.config
    iso.shield()
    _fatal.clear()
    _workers.clear()
    ids = {stages.suite_stage_id(arg) for arg in config.args}
    forkservers.start({s.library for s in stages.all_stages() if s.id in ids}, config.getoption("--threads"))


def _work_dir(config) -> str:
    if getattr(config, "_grader_work", None) is None:
        given = config.getoption("--grader-work")
        work = given or tempfile.mkdtemp(prefix="grader-")
        os.makedirs(work, exist_ok=True)
        os.chmod(work, 0o711)  # the worker may cross it to its lib/scratch, not list it
        private = os.path.join(work, "private")
        os.makedirs(private, exist_ok=True)
        os.chmod(private, 0o700)
        config._grader_work = work
    return config._grader_work


@pytest.fixture(scope="module")
def student(request):
    config = request.config
    stage = stages.of_suite(request.module.__file__)
    chosen = config.getoption("--isolation-plan")
    if chosen:
        isolation = iso.Isolation.from_json(chosen, extra_hidden=config.getoption("--hide"))
    else:
        isolation = iso.Isolation.choose(config.getoption("--isolation"), extra_hidden=config.getoption("--hide"))
    isolation = isolation.for_stage(stage)
    submission = os.path.abspath(config.getoption("--submission"))
    work = os.path.join(_work_dir(config), stage.id)
    os.makedirs(work)
    os.chmod(work, 0o711)
    isolation.extra_hidden.append(os.path.join(_work_dir(config), "private"))
    threads = config.getoption("--threads")
    uses = [_earlier_module(config, stage.id, name, submission) for name in stage.standins]
    worker = StageWorker(stage, submission, isolation, forkservers.get(stage.library, threads), work,
                         budget_s=stage.time_limit_s, threads=threads, earlier=uses)
    _workers[stage.id] = (worker, isolation)
    try:
        yield StudentModule(worker)
    finally:
        worker.close()  # the stage's worker ends with its stage
        if getattr(config, "_grader_last_of_library", {}).get(stage.library) == stage.id:
            forkservers.close(stage.library, threads)


def _ran(config, stage_id: str) -> dict:
    """What the decisions about ``stage_id`` rest on: the statuses of its tests that ran in this session,
    how many were selected, and its worker's reply to importing it."""
    worker = _workers.get(stage_id)
    return {"statuses": getattr(config, "_grader_statuses", {}).get(stage_id),
            "expected": getattr(config, "_grader_collected", {}).get(stage_id, 0),
            "load": worker[0].load_reply if worker else None}


def _earlier_module(config, later: str, name: str, submission: str) -> earlier.EarlierModule:
    """How ``later`` imports the earlier stage ``name``: decided from that stage's test results in this
    session (it ran first: stages run in course order), or from a recorded verdict."""
    return earlier.decide(later, name, present=os.path.exists(os.path.join(submission, f"{name}.py")),
                          verdict_only=name in config.getoption("--verdict-only"),
                          recorded=json.loads(config.getoption("--recorded-verdicts")).get(name),
                          **_ran(config, name))


def classify(excinfo) -> tuple[str, str | Message]:
    """(status, feedback) of a finished test. Feedback the test marked (``tr``) stays a Message, to be
    rendered in the report's language; the grading session runs with ``--assert=plain``, so that the
    message of an ``assert`` reaches here as the test wrote it."""
    if excinfo is None:
        return "passed", ""
    exc = excinfo.value
    if isinstance(exc, StudentProblem):
        return exc.status, exc.feedback
    if isinstance(exc, AssertionError):
        given = exc.args[0] if exc.args else ""
        if isinstance(given, Message):
            return "failed", given
        return "failed", str(given).strip() or tr("an assertion failed")
    if excinfo.typename in ("Skipped", "XFailed"):
        return "skipped", str(exc)
    return "failed", tr("the result could not be checked ({error})", error=f"{type(exc).__name__}: {exc}")


def test_name(item) -> Message:
    """The test's name for students: the first line of its docstring (the catalogue translates it), else
    its function's name."""
    doc = (item.function.__doc__ or "").strip().splitlines()
    return message.escaped(doc[0].strip()) if doc else message.escaped(item.name)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and isinstance(call.excinfo.value, iso.IsolationUnavailable):
        # a grader error: stop; run.grade raises it (of the same class), no report
        _fatal.append(iso.grader_error_to_json(call.excinfo.value))
        item.session.shouldstop = "grader error"
    if call.when == "call" or (call.when == "setup" and report.failed):
        status, feedback = classify(call.excinfo)
        item._grader_result = {"status": status, "feedback": message.to_json(message.shortened(feedback,
                                                                                               FEEDBACK_CHARS))}
        if item.module is not None and hasattr(item.config, "_grader_statuses"):  # later stages' decisions
            item.config._grader_statuses.setdefault(stage_of(item.module), []).append(status)


def pytest_json_runtest_metadata(item, call):
    if call.when != "teardown":
        return {}
    result = getattr(item, "_grader_result", {"status": "error", "feedback": tr("the test did not run").to_json()})
    return {"grader": {**result, "name": test_name(item).to_json()}}


def pytest_sessionfinish(session):
    forkservers.close_all()
    work = getattr(session.config, "_grader_work", None)
    if work is None:
        return
    summary = {}
    for stage_id, (worker, isolation) in _workers.items():
        load = worker.load_reply or {}
        # what a later stage would decide about this one: run.grade records it (earlier.Recorded)
        own = earlier.decide("", stage_id, present=True, verdict_only=False, **_ran(session.config, stage_id))
        summary[stage_id] = {
            "timed_out": worker.timed_out, "crashes": worker.crashes,
            "events": [message.to_json(e) for e in worker.events],
            "load": {k: load.get(k) for k in ("ok", "kind", "type", "message", "where")},
            "isolation": isolation.describe(),
            "earlier": [e.to_json() for e in worker.earlier],
            "verdict": {"verdict": own.verdict.value, "detail": own.detail},
        }
    with open(os.path.join(work, "private", "stages.json"), "w") as f:
        json.dump(summary, f)
    if _fatal:
        with open(os.path.join(work, "private", "fatal.json"), "w") as f:
            json.dump(_fatal[0], f)
