"""Where the submissions of a batch are graded: local processes or a Dask cluster.

Both grade each submission in a grading process of its own (``grading_process.py``), under the
same wall-clock budget (:func:`budget_s`), and time it where it runs.

``LocalExecutor``  N grading processes at a time on this machine.
``DaskExecutor``   one task per submission on a Dask distributed cluster; the task starts the
                   grading process on its worker. The workers must see the submission paths at
                   the same absolute path (a shared filesystem) and hold the same course
                   repository (checked: the workers' test-suite hash must match the batch's).

``run(jobs)`` yields ``(job, Outcome)`` as gradings finish, in any order.
"""
from __future__ import annotations

import concurrent.futures as cf
import os
import shutil
import socket
import threading
import time

from grader.engine import cores, forkservers, run, stages

from .grading_process import DEFAULT_TARGET, GradingProcess, Outcome, outcome_of_exception, scratch_folder
from .rows import Status

SLACK_S = 90  # on top of the stages' time limits and pytest's own slack


def budget_s(chosen) -> float:
    """A submission's wall-clock budget: its stages' time limits, the pytest session's slack and ours."""
    return sum(s.time_limit_s for s in chosen) + run.PYTEST_SLACK_S + SLACK_S


class SuiteMismatch(RuntimeError):
    """The grading side has a different test suite than the batch that asked."""


def _spec(job, stage_ids, hide, target: str, allow_readable_secrets: bool, language: str = "en",
          threads: int = 1) -> dict:
    """What a grading process needs to know about its submission (see ``GradingProcess``)."""
    return {"target": target, "path": job.path, "submission_id": job.id, "stage_ids": list(stage_ids),
            "hide": [str(h) for h in hide], "allow_readable_secrets": allow_readable_secrets, "language": language,
            "threads": threads}


# ---------------------------------------------------------------- local processes

class LocalExecutor:
    """Grade on this machine with ``workers`` grading processes at a time, each with its share of the
    cores as torch threads (``cores.threads_per_grading``: 1 when there are as many workers as cores)."""

    name = "local"

    def __init__(self, workers: int, stage_ids, hide, timeout_s: float, target: str = DEFAULT_TARGET,
                 allow_readable_secrets: bool = False, language: str = "en"):
        self.workers = max(1, int(workers))
        self.threads = cores.threads_per_grading(self.workers)
        self.stage_ids = list(stage_ids)
        self.hide = [str(h) for h in hide]
        self.timeout_s = timeout_s
        self.target = target
        self.allow_readable_secrets = allow_readable_secrets
        self.language = language
        self._live: dict[int, GradingProcess] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._pool: cf.ThreadPoolExecutor | None = None
        self._tmp = scratch_folder()

    def describe(self) -> str:
        return f"local ({self.workers} worker{'s' if self.workers > 1 else ''})"

    def _grade(self, job) -> Outcome:
        if self._stopping.is_set():
            raise cf.CancelledError
        spec = _spec(job, self.stage_ids, self.hide, self.target, self.allow_readable_secrets, self.language,
                     self.threads)
        proc = GradingProcess(spec, job.slug, self._tmp, f"{socket.gethostname()}:local")
        with self._lock:
            self._live[proc.pid] = proc
        try:
            outcome = proc.finish(self.timeout_s)
        finally:
            with self._lock:
                self._live.pop(proc.pid, None)
        if self._stopping.is_set():
            raise cf.CancelledError
        return outcome

    def run(self, jobs):
        self._pool = cf.ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="grade")
        futures = {self._pool.submit(self._grade, job): job for job in jobs}
        for fut in cf.as_completed(futures):
            job = futures[fut]
            try:
                outcome = fut.result()
            except cf.CancelledError:
                continue
            except Exception as exc:  # noqa: BLE001 - a bug of ours still costs only this submission
                outcome = Outcome(Status.ERROR, error=f"the batch failed to grade this submission: {exc!r}")
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
                proc.kill()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=cancel)
        forkservers.close_threads()  # the fork servers the gradings were forked from
        shutil.rmtree(self._tmp, ignore_errors=True)


# ---------------------------------------------------------------- Dask

def grade_on_worker(spec: dict, slug: str, suite_hash: str, timeout_s: float) -> Outcome:
    """The Dask task: refuse to grade with a test suite other than the batch's, then grade in a
    grading process on this worker, within ``timeout_s``."""
    mine = stages.suite_hash(stages.resolve(spec["stage_ids"]))
    if mine != suite_hash:
        raise SuiteMismatch(f"this grader's test suite (hash {mine[:12]}) differs from the batch's "
                            f"({suite_hash[:12]}); install the same course commit on every worker")
    scratch = scratch_folder()
    try:
        return GradingProcess(spec, slug, scratch, "dask").finish(timeout_s)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class DaskExecutor:
    """Grade on a Dask distributed cluster: one task per submission."""

    name = "dask"

    def __init__(self, scheduler: str, stage_ids, hide, suite_hash: str, timeout_s: float,
                 target: str = DEFAULT_TARGET, allow_readable_secrets: bool = False, language: str = "en"):
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
        self.timeout_s = timeout_s
        self.target = target
        self.allow_readable_secrets = allow_readable_secrets
        self.language = language
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
            spec = _spec(job, self.stage_ids, self.hide, self.target, self.allow_readable_secrets, self.language)
            fut = self.client.submit(grade_on_worker, spec, job.slug, self.suite_hash, self.timeout_s,
                                     key=f"grade-{job.slug}-{job.sha256[:12]}-{os.getpid()}-{time.time_ns()}",
                                     pure=False)
            by_key[fut.key] = job
            self._futures.append(fut)
        for fut in as_completed(self._futures):
            job = by_key[fut.key]
            try:
                outcome = fut.result()
            except Exception as exc:  # noqa: BLE001 - a worker lost, another suite, a grader failure
                status, error = outcome_of_exception(exc)
                outcome = Outcome(status, error=error, worker="dask")
            fut.release()
            yield job, outcome

    def close(self, cancel: bool = False) -> None:
        if cancel and self._futures:
            try:
                self.client.cancel(self._futures)
            except Exception:  # noqa: BLE001
                pass
        self.client.close()
