"""Where the submissions of a batch are graded: local processes or a Dask cluster.

Both grade each submission in a grading process of its own (``grading_process.py``), under the
same wall-clock budget (:func:`budget_s`), and time it where it runs.

``LocalExecutor``  N grading processes at a time on this machine.
``DaskExecutor``   one task per submission on a Dask distributed cluster; the task carries the
                   submission's files (``parcel.py``: only this side reads the class folder and
                   writes the outputs) and starts the grading process on its worker, which
                   unpacks them into a scratch folder of its own. The workers need only the same
                   course repository (checked: the workers' test-suite hash must match the batch's).

``run(jobs)`` yields ``(job, Outcome)`` as gradings finish, in any order.
"""
from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import os
import shutil
import socket
import threading
import time

from grader.engine import cores, forkservers, run, stages
from grader.engine.options import GradingOptions
from grader.engine.submission import UnreadableSubmission

from . import parcel as parcels
from .grading_process import DEFAULT_TARGET, GradingProcess, Outcome, Spec, outcome_of_exception, scratch_folder
from .rows import Status

SLACK_S = 90  # on top of the stages' time limits and pytest's own slack
LOAD_FACTOR = 3  # the stages' limits count a worker's own time: on the wall clock, a loaded machine takes longer


def budget_s(chosen) -> float:
    """A submission's wall-clock budget, a backstop for a grading that hangs: its stages' time limits, as a
    machine that gives it a third of a core takes them (the limits count a worker's own time, not the wall
    clock: ``charging``), the pytest session's slack and ours. A grading stopped there may have been starved:
    the batch grades it again later (``Outcome.retry``)."""
    return LOAD_FACTOR * sum(s.time_limit_s for s in chosen) + run.PYTEST_SLACK_S + SLACK_S


class SuiteMismatch(RuntimeError):
    """The grading side has a different test suite than the batch that asked."""


# ---------------------------------------------------------------- local processes

class LocalExecutor:
    """Grade on this machine with ``workers`` grading processes at a time, each with ``options`` and its share
    of the cores as torch threads (``cores.threads_per_grading``: 1 when there are as many workers as cores)."""

    name = "local"

    def __init__(self, workers: int, options: GradingOptions, timeout_s: float, target: str = DEFAULT_TARGET):
        self.workers = max(1, int(workers))
        self.options = dataclasses.replace(options, threads=cores.threads_per_grading(self.workers))
        self.timeout_s = timeout_s
        self.target = target
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
        proc = GradingProcess(Spec(job.path, job.id, self.options, self.target), job.slug, self._tmp,
                              f"{socket.gethostname()}:local")
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
        """Grade ``jobs``; may be called again (the batch's retry queue) on the same threads and fork servers."""
        if self._pool is None:
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

def grade_on_worker(spec: Spec, parcel: parcels.Parcel, slug: str, suite_hash: str, timeout_s: float) -> Outcome:
    """The Dask task: refuse to grade with a test suite other than the batch's; else unpack the submission the
    task carries (``parcel``) into a scratch folder of this worker's and grade it there in a grading process,
    within ``timeout_s``, hiding that folder (the batch's folders are not here). The report names the submission
    where the batch found it (``spec.path``)."""
    mine = stages.suite_hash(stages.resolve(spec.options.stage_ids))
    if mine != suite_hash:
        raise SuiteMismatch(f"this grader's test suite (hash {mine[:12]}) differs from the batch's "
                            f"({suite_hash[:12]}); install the same course commit on every worker")
    scratch = scratch_folder()
    try:
        path = parcels.unpack(parcel, os.path.join(scratch, "submission"))
        here = dataclasses.replace(spec, path=path,
                                   options=dataclasses.replace(spec.options, hide=(os.path.dirname(path),)))
        outcome = GradingProcess(here, slug, scratch, f"{socket.gethostname()}:dask").finish(timeout_s)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if outcome.report is not None:
        outcome.report["submission"]["path"] = spec.path
    return outcome


class DaskExecutor:
    """Grade on a Dask distributed cluster: one task per submission, carrying the submission's files
    (``parcel.py``), so that the workers need no view of the class folder. At most ``IN_FLIGHT`` tasks per
    worker thread are on the cluster at a time: a class's files are read as the cluster takes them."""

    name = "dask"
    IN_FLIGHT = 2

    def __init__(self, scheduler: str, options: GradingOptions, suite_hash: str, timeout_s: float,
                 target: str = DEFAULT_TARGET):
        try:
            from distributed import Client
        except ImportError as exc:  # pragma: no cover - dask is in requirements-dev.txt
            raise RuntimeError("--executor dask needs `pip install 'dask[distributed]'`") from exc
        if not scheduler:
            raise ValueError("--executor dask needs --scheduler ADDRESS (e.g. tcp://10.0.0.5:8786)")
        self.client = Client(scheduler, timeout="30s")
        self.options = options
        self.suite_hash = suite_hash
        self.timeout_s = timeout_s
        self.target = target
        self._flying: dict = {}  # task key -> (future, job)

    def describe(self) -> str:
        try:
            n = len(self.client.scheduler_info().get("workers", {}))
        except Exception:  # noqa: BLE001
            n = "?"
        return f"dask ({self.client.scheduler.address}, {n} workers)"

    def _submit(self, job, tasks):
        """Pack ``job``'s submission and send it to the cluster (``UnreadableSubmission`` when it cannot be packed)."""
        parcel = parcels.pack(job.path, job.format)
        spec = Spec(job.path, job.id, self.options, self.target)
        fut = self.client.submit(grade_on_worker, spec, parcel, job.slug, self.suite_hash, self.timeout_s,
                                 key=f"grade-{job.slug}-{job.sha256[:12]}-{os.getpid()}-{time.time_ns()}",
                                 pure=False)
        self._flying[fut.key] = (fut, job)
        tasks.add(fut)

    def run(self, jobs):
        """Grade ``jobs``; may be called again (the batch's retry queue)."""
        from distributed import as_completed  # start-up: distributed is imported only by a Dask batch
        queue = list(jobs)[::-1]
        room = self.IN_FLIGHT * max(1, sum(self.client.nthreads().values()))
        tasks = as_completed()
        while queue or self._flying:
            while queue and len(self._flying) < room:
                job = queue.pop()
                try:
                    self._submit(job, tasks)
                except UnreadableSubmission as exc:
                    yield job, Outcome(Status.UNREADABLE, error=str(exc), worker="client")
            if not self._flying:
                continue
            fut = next(tasks)
            job = self._flying.pop(fut.key)[1]
            try:
                outcome = fut.result()
            except Exception as exc:  # noqa: BLE001 - a worker lost, another suite, a grader failure
                status, error = outcome_of_exception(exc)
                outcome = Outcome(status, error=error, worker="dask")
            fut.release()
            yield job, outcome

    def close(self, cancel: bool = False) -> None:
        if cancel and self._flying:
            try:
                self.client.cancel([fut for fut, _ in self._flying.values()])
            except Exception:  # noqa: BLE001
                pass
        self.client.close()
