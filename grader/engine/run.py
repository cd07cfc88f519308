"""Grading one submission: intake, one trusted pytest session, the report."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time

from ..i18n import join, localize, tr
from . import earlier, forkservers, paths, report, seeds, session, stages, submission
from . import isolation as iso

PYTEST_SLACK_S = 120
RECORDED = earlier.Recorded()  # verdicts of verdict-only suites run by this process (the catalogue grades many)


def grade(path: str, *, kind: str = "hidden", stage_ids=None, isolation: str = "auto",
          submission_id: str | None = None, threads: int = 1, hide=(), fast_only: bool = False,
          reverse_order: bool = False, pytest_here: bool = False, validate: bool = True,
          allow_readable_secrets: bool = False, seed: int | None = None, language: str | None = "en") -> dict:
    """Grade the submission at ``path`` and return the schema-v1 report.

    ``fast_only`` leaves out tests marked ``slow`` (end-to-end training); the
    mutant catalogue uses it, since a mistake caught by a subset of the tests is
    caught by all of them. Students are always graded on every test.
    ``pytest_here`` runs the pytest session in this process instead of a new one:
    for a process that grades one submission and exits (``check``, a batch's
    per-submission process); the student's code still runs in confined workers.
    ``validate=False`` skips the schema check of the report (``check`` only prints it).
    ``seed``: the submission's seed, which the hidden suites draw their random inputs from
    (``grader/engine/seeds.py``); by default derived from the course secret and the
    submission's id, so a regrade of the same id draws the same inputs. The report records
    it, and ``seed=`` the recorded value reproduces the report.
    ``language``: what the student-facing text of the report is in ("en", "ko", "both"; the report records
    it); None leaves each text a ``grader.i18n.Message``, to be rendered later in any language
    (``grader.i18n.localize``). Grading itself does not depend on it.
    Raises ``submission.UnreadableSubmission`` when nothing can be graded, and
    ``isolation.IsolationUnavailable`` when the workers cannot be confined as chosen
    (``isolation`` "strict" without every layer; no namespaces at all on the hidden
    suites unless ``allow_readable_secrets``; a worker that failed to confine itself;
    ``isolation.WorkerImportFailed``: a module the grader's code needs cannot be imported
    in a worker).
    """
    start = time.monotonic()
    chosen = stages.resolve(stage_ids)
    work = tempfile.mkdtemp(prefix="grader-")
    os.chmod(work, 0o711)
    private = os.path.join(work, "private")
    os.makedirs(private, mode=0o700)
    try:
        intake = submission.intake(path, os.path.join(private, "intake"), submission_id)
        if seed is None and kind == "hidden":
            seed = seeds.submission_seed(intake.id)
        handed_in = {s.id for s in stages.all_stages() if os.path.exists(os.path.join(intake.folder, s.module_file))}
        runnable = [s for s in chosen if s.id in handed_in and s.suite(kind).exists()]
        prior, recorded = _earlier_verdicts(runnable, handed_in, intake.folder, kind, fast_only, seed)
        libraries = {s.library for s in runnable + [s for s, _ in prior]}
        if runnable:
            _start_up_beside_the_probe(libraries, threads, pytest_here)
        iso_choice = iso.Isolation.choose(isolation, hide, kind=kind, allow_readable_secrets=allow_readable_secrets)
        json_tests, events = [], {}
        if runnable:
            json_tests, events = _run_pytest(intake.folder, runnable, kind, iso_choice, work, threads, hide,
                                             fast_only, reverse_order, pytest_here, intake.id, seed,
                                             verdict_only=[s for s, _ in prior], recorded=recorded)
            for s, key in prior:
                RECORDED.put(key, events.get(s.id, {}).get("verdict"))
        entries = [report.stage_results(s, kind, json_tests, events, intake.notes_about(s.id), partial=fast_only)
                   if s.id in handed_in else _missing_stage(s, kind, intake.notes_about(s.id))
                   for s in chosen if s.suite(kind).exists()]
        widest = max(chosen, key=lambda s: (s.memory_mb, s.time_limit_s))
        return _rendered(report.assemble(intake, kind, entries, iso_choice.for_stage(widest).describe(),
                                         time.monotonic() - start, seed=seed, language=language or "en"),
                         language, validate)
    finally:
        forkservers.close_all()
        shutil.rmtree(work, ignore_errors=True)


def _start_up_beside_the_probe(libraries, threads: int, pytest_here: bool) -> None:
    """Start-ups side by side with the probe (``isolation.probe_soon``): the fork servers import numpy
    (and torch; the first takes the server started early, ``forkservers.start_soon``) and this process
    imports pytest; or, when the session will be a fork of a server (:func:`_forked_session`), only that
    server, the rest being the session's to start."""
    if pytest_here:
        forkservers.start(libraries, threads)
        import pytest  # noqa: F401
    else:
        forkservers.get(forkservers.heaviest(libraries), threads)


def _rendered(result: report.Report, language: str | None, validate: bool) -> dict:
    """The report as JSON, its texts in ``language``; None leaves them Messages (and skips the schema check)."""
    data = result.to_json()
    if language is None:
        return data
    data = localize(data, language)
    if validate:
        report.validate(data)
    return data


def _earlier_verdicts(runnable, handed_in, folder, kind, fast_only, seed):
    """The earlier stages the ``runnable`` ones import, as (stages to grade first, only to decide whether
    they are used as written, each with its key in RECORDED; verdicts this process already has of the
    same files with the same suites and inputs, by stage id)."""
    prior, recorded = [], {}
    for s in earlier.verdict_only(runnable, handed_in):
        if s.suite(kind).exists():
            key = RECORDED.key(s, folder, kind, fast_only, seed)
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


def _run_pytest(folder, runnable, kind, isolation, work, threads, hide, fast_only=False, reverse_order=False,
                pytest_here=False, submission_id="submission", seed=None, verdict_only=(), recorded=None):
    """Run the suites of ``runnable`` (and of the ``verdict_only`` stages, whose results only decide
    how later stages import them; ``recorded``: the verdicts of earlier stages taken from earlier gradings)
    in one pytest session, in course order."""
    order = {s.id: i for i, s in enumerate(stages.all_stages())}
    suites = sorted([*runnable, *verdict_only], key=lambda s: order[s.id])
    private = os.path.join(work, "private")
    json_path = os.path.join(private, "pytest.json")
    # Only the plugins grading needs: the ones installed packages register by entry point
    # (anyio, platformdirs, pytest-metadata) cost a large share of the session's start-up, and
    # pytest's own that grading never uses another ~45 ms (unraisableexception runs gc.collect at
    # the end; fixtures such as tmp_path stay).
    unused = ["cacheprovider", "doctest", "junitxml", "pastebin", "stepwise", "setuponly", "setupplan",
              "faulthandler", "debugging", "nose", "unittest", "unraisableexception", "threadexception"]
    # --assert=plain: a failed assert's message reaches the plugin as the test wrote it (grader.i18n.Message)
    args = [*[f"-pno:{name}" for name in unused],
            "--assert=plain", "-q", "--no-header", "-rN", "--tb=no",
            f"--rootdir={paths.ROOT}", "-c", str(paths.ROOT / "tests" / "grading.ini"),
            "--json-report", f"--json-report-file={json_path}", "--json-report-omit", "log", "keywords",
            f"--submission={folder}", f"--isolation-plan={isolation.to_json()}", f"--grader-work={work}",
            f"--threads={threads}", *[f"--hide={h}" for h in hide], *(["-m", "not slow"] if fast_only else []),
            *(["--reverse-order"] if reverse_order else []),
            f"--submission-id={submission_id}", *([f"--seed={seed}"] if seed is not None else []),
            *[f"--verdict-only={s.id}" for s in verdict_only], f"--recorded-verdicts={json.dumps(recorded or {})}",
            *[str(s.suite(kind)) for s in suites]]
    if pytest_here:
        proc = _pytest_here(args)
    else:
        budget = sum(s.time_limit_s for s in suites) + PYTEST_SLACK_S
        proc = _forked_session(forkservers.heaviest({s.library for s in suites}), threads, args, budget)
    fatal = _read_json(os.path.join(private, "fatal.json"))
    if fatal is not None:
        raise iso.grader_error_from_json(fatal)
    if not os.path.exists(json_path):
        raise RuntimeError(f"the grading session failed to run:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    data = _read_json(json_path)
    for collector in data.get("collectors", []):
        if collector.get("outcome") == "failed":
            raise RuntimeError(f"a test file failed to load: {collector.get('longrepr', '')[-2000:]}")
    if data.get("exitcode") not in (0, 1, 5):  # 5: every test deselected (fast_only)
        raise RuntimeError(f"pytest exited with {data.get('exitcode')}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return data.get("tests", []), _read_json(os.path.join(private, "stages.json")) or {}


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
