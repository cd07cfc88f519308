"""One submission graded in a process of its own, under a wall-clock budget.

Both executors grade each submission this way: the local one on this machine, the Dask one on a
cluster worker. The process (``python -m grader.classroom.grading_process SPEC``) runs
:func:`grade_path` (or a test's stand-in, ``target``), its pytest session included, in its own
process group, and writes its outcome as JSON; :class:`GradingProcess` starts it, kills the group
when the budget is spent, and reads the outcome. A submission that hangs, crashes or eats memory
costs only itself.

The process is a fork of a fork server the starting thread keeps for all its gradings
(``forkservers.of_this_thread``, for the heaviest library of the stages): numpy (and torch) are
imported there once, and each grading's workers are forks of the same server, so a grading starts
no interpreter at all. The server never reads the spec (``ForkServer.fork_module``). It dies with
the thread that started it and the grading with it (``PR_SET_PDEATHSIG``, set once in each: the server's
and the forked grading's by ``jail.die_with_parent``), so a killed batch (or Dask worker) leaves nothing
behind grading, and every file it leaves sits in a scratch folder of the batch's that is removed with it.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from grader.engine import cores, forkservers, isolation, paths, run, stages, submission
from grader.engine.atomic import write_json
from grader.engine.options import GradingOptions
from grader.engine.submission import UnreadableSubmission

from .rows import Status

MODULE = "grader.classroom.grading_process"
DEFAULT_TARGET = f"{MODULE}:grade_path"
SCRATCH_PREFIX = "grader-batch-"


@dataclass
class Outcome:
    """What one grading gave: a report, or why there is none."""
    status: Status               # graded | unreadable | error
    report: dict | None = None
    error: str = ""
    worker: str = ""             # where it ran
    seconds: float = 0.0         # the grading's own wall clock, where it ran
    suite_hash: str = ""         # the test suite it really ran with ("" when not known)
    retry: bool = False          # the grader's trouble that may pass (a starved worker, a grading past its budget)


@dataclass(frozen=True)
class Spec:
    """What a grading process grades: the submission at ``path``, named ``submission_id``, graded with
    ``options`` (the batch's, with this grading's share of the cores as ``threads``) by ``target``
    ("module:function", called as ``function(path, submission_id, options)``: :func:`grade_path`, or a
    test's stand-in). JSON only on the process's command line."""
    path: str
    submission_id: str
    options: GradingOptions
    target: str = DEFAULT_TARGET

    def to_json(self) -> dict:
        return {**dataclasses.asdict(self), "options": self.options.to_json()}

    @classmethod
    def from_json(cls, data: dict) -> Spec:
        return cls(**{**data, "options": GradingOptions.from_json(data["options"])})


def grade_path(path: str, submission_id: str, options: GradingOptions) -> dict:
    """Grade the submission at ``path`` as ``options`` say; return its schema-v1 report.

    Runs in a grading process, which grades one submission and exits: its pytest session runs
    right there (``options.pytest_here``). A loose notebook is graded alone (``submission.notebook_alone``)
    and the report names it. Raises ``submission.UnreadableSubmission`` when there is nothing to grade.
    """
    tmp = None
    target = path
    try:
        if os.path.isfile(path) and path.endswith(".ipynb"):
            tmp = tempfile.mkdtemp(prefix="grader-nb-")
            target = submission.notebook_alone(path, tmp)
        rep = run.grade(target, dataclasses.replace(options, pytest_here=True), submission_id=submission_id)
        rep["submission"]["path"] = str(path)
        return rep
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def outcome_of_exception(exc: BaseException) -> tuple[Status, str]:
    if isinstance(exc, UnreadableSubmission):
        return Status.UNREADABLE, str(exc)
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return Status.ERROR, f"the grader failed on this submission: {text[-2000:]}"


# ---------------------------------------------------------------- the grading process itself

def _import_target(spec: str):
    module, _, name = spec.partition(":")
    mod = __import__(module, fromlist=[name])
    return getattr(mod, name)


def _grade(spec: Spec, probed: str | None) -> dict:
    """The outcome of ``spec``'s grading as JSON: status, report or error, and the suite it ran. ``probed``: the
    isolation probe of the process that started this one, adopted instead of probing again."""
    suite = None
    if probed:
        isolation.adopt(probed)
    try:
        if spec.target == DEFAULT_TARGET:
            # Same checkout as the batch: no refusal if the tests were edited since it started; the
            # grading is recorded under the suite it really ran, and the next run catches up.
            suite = stages.suite_hash(stages.resolve(spec.options.stage_ids))
        rep = _import_target(spec.target)(spec.path, spec.submission_id, spec.options)
        result = {"status": Status.GRADED.value, "report": rep}
    except Exception as exc:  # noqa: BLE001 - whatever happened is this submission's row
        status, error = outcome_of_exception(exc)
        result = {"status": status.value, "error": error, "retry": isinstance(exc, isolation.WorkerStarved)}
    result["suite_hash"] = suite
    return result


def child_main(spec_json: str) -> int:
    """``python -m grader.classroom.grading_process SPEC``: grade one submission, write the outcome as JSON.
    It dies with the fork server it was forked by, which set that up at the fork (``jail.die_with_parent``)."""
    given = json.loads(spec_json)
    start = time.monotonic()
    result = _grade(Spec.from_json(given["spec"]), given.get("probed"))
    result["seconds"] = round(time.monotonic() - start, 3)
    write_json(given["result"], result)
    return 0


# ---------------------------------------------------------------- the side that starts it

def _remove_stale_scratch() -> None:
    """Scratch folders of batches (or Dask workers) that were killed (their pid is gone)."""
    root = tempfile.gettempdir()
    for name in os.listdir(root):
        if not name.startswith(SCRATCH_PREFIX):
            continue
        pid = name[len(SCRATCH_PREFIX):].split("-", 1)[0]
        path = os.path.join(root, name)
        try:
            if not pid.isdigit() or os.stat(path).st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


def scratch_folder() -> str:
    """A new scratch folder for grading processes (those of killed batches are removed first).

    Every grading process gets TMPDIR inside it, so that what a killed grading leaves (its intake
    copy of the student's files, the worker's scratch) is removed with it. 0711: the unprivileged
    worker must be able to cross it to reach its own scratch folder."""
    _remove_stale_scratch()
    folder = tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")
    os.chmod(folder, 0o711)
    return folder


class GradingProcess:
    """A grading process, started at once; :meth:`finish` waits for its outcome within a budget.

    ``spec``: what it grades (the grading adopts this process's isolation probe instead of probing
    again); ``scratch``: a :func:`scratch_folder`; ``worker``: where it runs, for the outcome."""

    def __init__(self, spec: Spec, slug: str, scratch: str, worker: str):
        self.worker = worker
        self.start = time.monotonic()
        self.result = os.path.join(scratch, f"{slug}.{threading.get_ident()}.json")
        self.stderr = self.result + ".stderr"
        self.tmp = tempfile.mkdtemp(prefix="tmp-", dir=scratch)
        os.chmod(self.tmp, 0o711)
        env = dict(os.environ)
        env["TMPDIR"] = self.tmp
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(paths.ROOT), env.get("PYTHONPATH", "")]))
        threads = spec.options.threads
        cores.limit_blas_threads(threads, env)  # its share of the cores (the server's numpy has it already)
        libraries = {s.library for s in stages.resolve(spec.options.stage_ids)}
        self.server = forkservers.of_this_thread(forkservers.heaviest(libraries), threads)
        # one probe per batch (or Dask worker) process, not per grading: the same machine, the same course
        given = {"spec": spec.to_json(), "result": self.result, "probed": isolation.probe().to_json()}
        self.forked, self.not_started = None, ""
        with open(self.stderr, "wb") as err, open(os.devnull, "wb") as out:
            try:
                self.forked = self.server.fork_module(MODULE, [json.dumps(given)], env, cwd=str(paths.ROOT),
                                                      path=env["PYTHONPATH"].split(os.pathsep), stdout=out.fileno(),
                                                      stderr=err.fileno())
            except forkservers.ForkServerFailed as exc:
                self.not_started = str(exc)

    @property
    def pid(self) -> int:
        return self.forked.pid if self.forked else -1

    def kill(self) -> None:
        """Kill the process and its group (its pytest session, the fork servers it started); the thread
        that waits in :meth:`finish` sees it end."""
        if self.forked:
            forkservers.kill_group(self.forked.pid)

    def _failed(self, error: str, retry: bool = False) -> Outcome:
        return Outcome(Status.ERROR, error=error, worker=self.worker, seconds=time.monotonic() - self.start,
                       retry=retry)

    def _read(self, code: int) -> Outcome:
        try:
            data = json.loads(Path(self.result).read_text())
        except (OSError, ValueError):
            tail = Path(self.stderr).read_bytes()[-1500:].decode("utf-8", "replace").strip()
            how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
            return self._failed(f"the grading process {how} without a result" + (f": {tail}" if tail else ""))
        return Outcome(Status(data["status"]), report=data.get("report"), error=data.get("error", ""),
                       worker=self.worker, seconds=time.monotonic() - self.start,
                       suite_hash=data.get("suite_hash") or "", retry=bool(data.get("retry")))

    def finish(self, timeout_s: float) -> Outcome:
        """Wait for the outcome; past ``timeout_s`` seconds kill the grading and say so."""
        try:
            if self.forked is None:
                return self._failed(f"the grading process could not be started: {self.not_started}")
            try:
                code = self.server.finish(self.forked, timeout_s)
            except forkservers.ForkServerFailed as exc:
                return self._failed(f"the grading process was lost: {exc}")
            if code is None:  # a hung grading, or one the machine's load starved: graded again later
                return self._failed(f"grading took longer than {timeout_s:.0f} s and was stopped", retry=True)
            return self._read(code)
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
            for p in (self.result, self.stderr):
                try:
                    os.unlink(p)
                except OSError:
                    pass


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1]))
