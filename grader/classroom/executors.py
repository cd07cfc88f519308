"""Where the submissions of a batch are graded: local processes or a Dask cluster.

Both executors call the same top-level function, :func:`grade_path`, which
grades one submission path and returns its schema-v1 report (raising
``submission.UnreadableSubmission`` when there is nothing to grade).

``LocalExecutor``  N grading processes on this machine. Each submission is
                   graded in its own child process (``python -m
                   grader.classroom.executors``), in its own process group, with a wall
                   clock budget: a submission that hangs, crashes or eats
                   memory costs only itself. Children die with the batch
                   (``PR_SET_PDEATHSIG``), so a killed batch leaves nothing
                   behind grading.
``DaskExecutor``   ``client.submit(grade_path, ...)`` on a Dask distributed
                   cluster. The workers must see the submission paths at the
                   same absolute path (a shared filesystem) and hold the same
                   course repository (checked: the workers' test-suite hash
                   must match the batch's).

``run(jobs)`` yields ``(job, Outcome)`` as gradings finish, in any order.
"""
from __future__ import annotations

import concurrent.futures as cf
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field

from grader.engine import paths, run, stages, submission
from grader.engine.atomic import write_json
from grader.engine.submission import UnreadableSubmission

DEFAULT_TARGET = "grader.classroom.executors:grade_path"
SLACK_S = 90  # on top of the stages' time limits and pytest's own slack


class SuiteMismatch(RuntimeError):
    """The grading side has a different test suite than the batch that asked."""


@dataclass
class Job:
    """One submission of a batch."""
    id: str            # the student's id (folder / zip / notebook name)
    slug: str          # file-name-safe id for OUT/reports/<slug>.json and OUT/html/<slug>.html
    path: str          # absolute path of what was handed in
    format: str        # folder | zip | notebook
    sha256: str = ""   # of the normalised stage modules (same as the report's), or of the raw bytes
    unreadable: str = ""  # why intake refused it (empty when readable)


@dataclass
class Outcome:
    status: str                  # graded | unreadable | error
    report: dict | None = None
    error: str = ""
    worker: str = ""
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


# ---------------------------------------------------------------- grading one submission

def grade_path(path: str, submission_id: str, stage_ids=None, hide=(), suite_hash: str | None = None,
               isolation: str = "auto", threads: int = 1, pytest_here: bool = False,
               allow_readable_secrets: bool = False) -> dict:
    """Grade the submission at ``path`` on the hidden suites; return its schema-v1 report.

    The Dask executor submits exactly this function (a long-lived Dask worker keeps
    the pytest session in a process of its own); the local executor's per-submission
    process runs it with ``pytest_here`` (``run.grade``). ``hide`` are paths the
    student's worker must not read (the class's folder, the outputs).
    ``suite_hash``, when given, must equal this side's hash of the test suite
    (a cluster worker with another checkout of the course refuses to grade).
    ``allow_readable_secrets``: grade even where the worker cannot be confined (``run.grade``).
    """
    chosen = stages.resolve(stage_ids)
    if suite_hash is not None:
        mine = stages.suite_hash(chosen)
        if mine != suite_hash:
            raise SuiteMismatch(f"this grader's test suite (hash {mine[:12]}) differs from the batch's "
                                f"({suite_hash[:12]}); install the same course commit on every worker")
    tmp = None
    target = path
    try:
        if os.path.isfile(path) and path.endswith(".ipynb"):
            tmp = tempfile.mkdtemp(prefix="grader-nb-")
            target = submission.notebook_alone(path, tmp)
        rep = run.grade(target, kind="hidden", stage_ids=[s.id for s in chosen], isolation=isolation,
                        submission_id=submission_id, threads=threads, hide=tuple(str(h) for h in hide),
                        pytest_here=pytest_here, allow_readable_secrets=allow_readable_secrets)
        rep["submission"]["path"] = str(path)
        return rep
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def _import_target(spec: str):
    module, _, name = spec.partition(":")
    mod = __import__(module, fromlist=[name])
    return getattr(mod, name)


def _outcome_of_exception(exc: BaseException) -> tuple[str, str]:
    if isinstance(exc, UnreadableSubmission):
        return "unreadable", str(exc)
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return "error", f"the grader failed on this submission: {text[-2000:]}"


# ---------------------------------------------------------------- local processes

def _set_pdeathsig(sig=signal.SIGTERM) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent thread dies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def child_main(spec_json: str) -> int:
    """``python -m grader.classroom.executors SPEC``: grade one submission, write the outcome as JSON."""
    spec = json.loads(spec_json)

    def die_with_group(signum, frame):  # the batch died or gave up on us: take the fork servers along
        try:
            os.killpg(os.getpgid(0), signal.SIGKILL)
        finally:
            os._exit(128 + signum)

    signal.signal(signal.SIGTERM, die_with_group)
    _set_pdeathsig(signal.SIGTERM)
    if os.getppid() != spec["parent"]:  # the batch died before we could ask
        return 3
    start = time.monotonic()
    suite = None
    try:
        target = spec.get("target", DEFAULT_TARGET)
        if target == DEFAULT_TARGET:
            # Same checkout as the batch: no refusal if the tests were edited since it started; the
            # grading is recorded under the suite it really ran, and the next run catches up.
            suite = stages.suite_hash(stages.resolve(spec["stage_ids"]))
        fn = _import_target(target)
        # this process grades one submission and exits: its pytest session can run right here
        extra = {"pytest_here": True} if target == DEFAULT_TARGET else {}
        if spec.get("allow_readable_secrets"):
            extra["allow_readable_secrets"] = True
        rep = fn(spec["path"], spec["submission_id"], spec["stage_ids"], spec["hide"], None, **extra)
        result = {"status": "graded", "report": rep}
    except Exception as exc:  # noqa: BLE001 - whatever happened is this submission's row
        status, error = _outcome_of_exception(exc)
        result = {"status": status, "error": error}
    result["seconds"] = round(time.monotonic() - start, 3)
    result["suite_hash"] = suite
    write_json(spec["result"], result)
    return 0


SCRATCH_PREFIX = "grader-batch-"


def _remove_stale_scratch() -> None:
    """Scratch folders of local batches that were killed (their pid is gone)."""
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


class LocalExecutor:
    """Grade on this machine with ``workers`` grading processes at a time."""

    name = "local"

    def __init__(self, workers: int, stage_ids, hide, suite_hash: str, timeout_s: float,
                 target: str = DEFAULT_TARGET, allow_readable_secrets: bool = False):
        self.workers = max(1, int(workers))
        self.stage_ids = list(stage_ids)
        self.hide = [str(h) for h in hide]
        self.suite_hash = suite_hash
        self.timeout_s = timeout_s
        self.target = target
        self.allow_readable_secrets = allow_readable_secrets
        self._live: dict[int, subprocess.Popen] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._pool: cf.ThreadPoolExecutor | None = None
        _remove_stale_scratch()
        # Every grading process gets TMPDIR inside this folder, so that what a killed grading leaves
        # (its intake copy of the student's files, the worker's scratch) is removed with it. 0711:
        # the unprivileged worker must be able to cross it to reach its own scratch folder.
        self._tmp = tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")
        os.chmod(self._tmp, 0o711)

    def describe(self) -> str:
        return f"local ({self.workers} worker{'s' if self.workers > 1 else ''})"

    def _grade_in_child(self, job: Job) -> Outcome:
        if self._stopping.is_set():
            raise cf.CancelledError
        start = time.monotonic()
        result_path = os.path.join(self._tmp, f"{job.slug}.{threading.get_ident()}.json")
        stderr_path = result_path + ".stderr"
        child_tmp = tempfile.mkdtemp(prefix="tmp-", dir=self._tmp)
        os.chmod(child_tmp, 0o711)
        spec = {"target": self.target, "path": job.path, "submission_id": job.id, "stage_ids": self.stage_ids,
                "hide": self.hide, "suite_hash": self.suite_hash, "result": result_path, "parent": os.getpid(),
                "allow_readable_secrets": self.allow_readable_secrets}
        env = dict(os.environ)
        env["TMPDIR"] = child_tmp
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(paths.ROOT), env.get("PYTHONPATH", "")]))
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen([sys.executable, "-m", "grader.classroom.executors", json.dumps(spec)],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                    env=env, start_new_session=True)
        with self._lock:
            self._live[proc.pid] = proc
        try:
            try:
                code = proc.wait(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                self._kill(proc)
                return Outcome("error", error=f"grading took longer than {self.timeout_s:.0f} s and was stopped",
                               worker=self._where(), seconds=time.monotonic() - start)
        finally:
            with self._lock:
                self._live.pop(proc.pid, None)
            shutil.rmtree(child_tmp, ignore_errors=True)
        if self._stopping.is_set():
            raise cf.CancelledError
        try:
            with open(result_path) as f:
                data = json.load(f)
        except (OSError, ValueError):
            tail = open(stderr_path, "rb").read()[-1500:].decode("utf-8", "replace").strip()
            how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
            return Outcome("error", error=f"the grading process {how} without a result" + (f": {tail}" if tail else ""),
                           worker=self._where(), seconds=time.monotonic() - start)
        finally:
            for p in (result_path, stderr_path):
                try:
                    os.unlink(p)
                except OSError:
                    pass
        extra = {"suite_hash": data["suite_hash"]} if data.get("suite_hash") else {}
        return Outcome(data["status"], report=data.get("report"), error=data.get("error", ""),
                       worker=self._where(), seconds=time.monotonic() - start, extra=extra)

    @staticmethod
    def _where() -> str:
        return f"{socket.gethostname()}:local"

    @staticmethod
    def _kill(proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the child and its pytest session
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def run(self, jobs):
        self._pool = cf.ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="grade")
        futures = {self._pool.submit(self._grade_in_child, job): job for job in jobs}
        for fut in cf.as_completed(futures):
            job = futures[fut]
            try:
                outcome = fut.result()
            except cf.CancelledError:
                continue
            except Exception as exc:  # noqa: BLE001 - a bug of ours still costs only this submission
                outcome = Outcome("error", error=f"the batch failed to grade this submission: {exc!r}")
            yield job, outcome

    def close(self, cancel: bool = False) -> None:
        """Stop: with ``cancel``, kill the gradings in flight and drop the queue."""
        if cancel:
            self._stopping.set()
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
            with self._lock:
                live = list(self._live.values())
            for proc in live:
                self._kill(proc)
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=cancel)
        shutil.rmtree(self._tmp, ignore_errors=True)


# ---------------------------------------------------------------- Dask

class DaskExecutor:
    """Grade on a Dask distributed cluster: one task per submission."""

    name = "dask"

    def __init__(self, scheduler: str, stage_ids, hide, suite_hash: str, timeout_s: float | None = None,
                 allow_readable_secrets: bool = False):
        try:
            from distributed import Client
        except ImportError as exc:  # pragma: no cover - dask is in requirements-dev.txt
            raise RuntimeError("--executor dask needs `pip install 'dask[distributed]'`") from exc
        if not scheduler:
            raise ValueError("--executor dask needs --scheduler ADDRESS (e.g. tcp://10.0.0.5:8786)")
        self.client = Client(scheduler, timeout="30s")
        self.stage_ids = list(stage_ids)
        self.hide = [str(h) for h in hide]
        self.suite_hash = suite_hash
        self.allow_readable_secrets = allow_readable_secrets
        self._futures = []

    def describe(self) -> str:
        try:
            n = len(self.client.scheduler_info().get("workers", {}))
        except Exception:  # noqa: BLE001
            n = "?"
        return f"dask ({self.client.scheduler.address}, {n} workers)"

    def run(self, jobs):
        from distributed import as_completed
        by_key = {}
        for job in jobs:
            fut = self.client.submit(grade_path, job.path, job.id, self.stage_ids, self.hide, self.suite_hash,
                                     allow_readable_secrets=self.allow_readable_secrets,
                                     key=f"grade-{job.slug}-{job.sha256[:12]}-{os.getpid()}-{time.time_ns()}",
                                     pure=False)
            by_key[fut.key] = job
            self._futures.append(fut)
        for fut in as_completed(self._futures):
            job = by_key[fut.key]
            start = time.monotonic()
            try:
                rep = fut.result()
                outcome = Outcome("graded", report=rep, worker="dask")
            except Exception as exc:  # noqa: BLE001 - unreadable, a worker lost, a grader failure
                status, error = _outcome_of_exception(exc)
                outcome = Outcome(status, error=error, worker="dask")
            outcome.seconds = time.monotonic() - start
            fut.release()
            yield job, outcome

    def close(self, cancel: bool = False) -> None:
        if cancel and self._futures:
            try:
                self.client.cancel(self._futures)
            except Exception:  # noqa: BLE001
                pass
        self.client.close()


if __name__ == "__main__":
    sys.exit(child_main(sys.argv[1]))
