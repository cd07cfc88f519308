"""The time a student is charged for: what their worker used, not what the machine's load took from it.

A stage's limits (``time_limit_s`` for the stage, ``call_timeout_s`` for one call) count, for each request
a worker serves (starting, importing the module, a call, a probe), the larger of

- the worker's CPU time, every thread (``cputime.process_cpu_seconds``, read from outside the worker), divided
  by the threads it was given (``--threads``: torch's threads each count a core of their own; a thread that
  spins at a barrier while its sibling waits for a CPU is not the student's), and
- its wall time less the time it waited for a CPU: the run-queue wait (``run_delay``) that the kernel keeps
  per thread in ``/proc/PID/task/TID/schedstat``, of the thread that waited longest, with the wait under way
  (the kernel adds a wait when it ends: a thread of low priority may wait seconds).

A worker that computes, loops or sleeps is so charged what it would be on an idle machine; one that waits
behind other processes is not charged the wait. Between requests the worker idles and the trusted side
works: neither is charged.

A wall-clock *backstop* (``BACKSTOP_FACTOR`` times the request's limit, plus ``BACKSTOP_SLACK_S``) still
ends a request that was charged less than its limit. Then, by the two measures above, the worker must have
spent the difference waiting for a CPU; the wait is its own doing when it started processes of its own
(its session holds others) or lowered its own priority (a higher nice value than the grader's, or the
SCHED_BATCH or SCHED_IDLE policy), and the request is over its limit like any other; otherwise the
machine starved it: :class:`Starved`, which the grader reports as its own error, never as the student's
timeout (``isolation.WorkerStarved``; a batch grades the submission again later).
"""
from __future__ import annotations

import os
import select
import time
from dataclasses import dataclass

from .cputime import process_cpu_seconds

# A request's wall clock may reach this many times its limit, plus the slack, before the grader looks at why it
# is not done: a worker given at least a tenth of a CPU reaches its limit first (on this 2-core machine, at a
# load of 9, a busy loop got a fifth: at 4 times, its timeout was once taken for starvation).
BACKSTOP_FACTOR = 10
BACKSTOP_SLACK_S = 5.0
MIN_POLL_S, MAX_POLL_S = 0.05, 0.5  # how often the charge is read while a request runs: at most, at least
SCHED_BATCH, SCHED_IDLE = 3, 5  # include/uapi/linux/sched.h


class OverLimit(TimeoutError):
    """The worker was charged its limit (or the backstop fired on a wait of its own making)."""


class Starved(Exception):
    """The backstop fired on a worker that waited for a CPU it was not given: the machine's load."""


@dataclass(frozen=True)
class Thread:
    """One thread of a worker, from ``/proc/PID/task/TID/schedstat`` and ``stat``."""
    ran: float          # seconds on a CPU so far
    waited: float       # seconds in a run queue so far, counted by the kernel when a wait ends (the thread runs)
    runnable: bool      # running or waiting to run (state R)


@dataclass(frozen=True)
class Reading:
    """What the kernel says of a worker at one moment."""
    wall: float                 # time.monotonic()
    cpu: float                  # CPU seconds of every thread
    threads: dict               # thread id -> Thread


def _text(path: str) -> str:
    """A small ``/proc`` file (read raw: ``open()`` would cost several times the kernel's work, at every request)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 4096).decode()
    finally:
        os.close(fd)


def _thread(task: str) -> Thread | None:
    try:
        ran, waited = _text(f"{task}/schedstat").split()[:2]
        stat = _text(f"{task}/stat")
    except (OSError, ValueError):
        return None
    return Thread(int(ran) / 1e9, int(waited) / 1e9, stat[stat.rfind(")") + 2:].startswith("R"))


def threads_of(pid: int) -> dict:
    """Thread id -> :class:`Thread` of each thread of process ``pid`` (empty when unknown)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    found = {tid: _thread(f"/proc/{pid}/task/{tid}") for tid in tids}
    return {tid: t for tid, t in found.items() if t is not None}


def read(pid: int) -> Reading:
    """The worker ``pid`` now; ``ProcessLookupError`` once it is gone."""
    return Reading(time.monotonic(), process_cpu_seconds(pid), threads_of(pid))


def backstop_s(limit_s: float) -> float:
    """The wall-clock time after which a request charged less than ``limit_s`` is looked at."""
    return BACKSTOP_FACTOR * max(0.0, limit_s) + BACKSTOP_SLACK_S


class Window:
    """One request of a worker, from its sending until its reply is read: what it is charged.

    ``wait`` is given to ``protocol.read_message``: it returns once the reply can be read, raises
    :class:`OverLimit` when the charge reaches ``limit_s``, and :class:`Starved` when the backstop fires on a
    worker the machine kept waiting. ``charged``, ``waited`` and ``wall`` are the latest figures."""

    def __init__(self, pid: int, limit_s: float, threads: int = 1, backstop: float | None = None):
        self.pid = pid
        self.limit_s = limit_s
        self.threads = max(1, threads)
        self.backstop = backstop_s(limit_s) if backstop is None else backstop
        self.charged = self.waited = self.wall = 0.0
        try:
            self.start = read(pid)
        except ProcessLookupError:  # already gone: its reply (or its end) is in the pipe
            self.start = Reading(time.monotonic(), 0.0, {})
        self._queued = {tid: (self.start.wall, t.ran) for tid, t in self.start.threads.items() if t.runnable}
        self._rate = max(1, (os.cpu_count() or 1) / self.threads)  # how fast the charge can grow, at most

    def _waited(self, now: Reading) -> float:
        """The longest wait for a CPU of a thread since the window opened: what the kernel counted, and the wait
        under way, which it counts only once the thread runs. A thread seen runnable that has not run since
        cannot have gone to sleep (it would have had to run): it has waited all that time."""
        longest = 0.0
        for tid, t in now.threads.items():
            before = self.start.threads.get(tid)
            counted = t.waited - (before.waited if before else 0.0)
            since, ran = self._queued.get(tid, (None, None))
            under_way = now.wall - since if since is not None and ran == t.ran else 0.0
            if not t.runnable:
                self._queued.pop(tid, None)
            elif under_way == 0.0:
                self._queued[tid] = (now.wall, t.ran)
            longest = max(longest, counted + under_way)
        return longest

    def measure(self) -> None:
        """Update ``charged``, ``waited`` and ``wall`` from the kernel (the last figures stay if the worker
        is gone, ``wall`` aside)."""
        try:
            now = read(self.pid)
        except ProcessLookupError:
            self.wall = time.monotonic() - self.start.wall
            return
        self.wall = now.wall - self.start.wall
        self.waited = self._waited(now)
        self.charged = max((now.cpu - self.start.cpu) / self.threads, self.wall - self.waited)

    def wait(self, fd: int) -> None:
        """Return once ``fd`` can be read; see the class."""
        while True:
            left = min(max(MIN_POLL_S, (self.limit_s - self.charged) / self._rate), MAX_POLL_S,
                       max(0.0, self.backstop - (time.monotonic() - self.start.wall)))
            if select.select([fd], [], [], left)[0]:
                return
            self.measure()
            if select.select([fd], [], [], 0)[0]:  # the reply came while we measured
                return
            if self.charged >= self.limit_s:
                raise OverLimit
            if self.wall >= self.backstop:
                if self.own_doing():
                    raise OverLimit
                raise Starved(f"after {self.wall:.0f} s of wall time it had been charged {self.charged:.1f} s of "
                              f"its {self.limit_s:.0f} s and had waited {self.waited:.0f} s for a CPU")

    def own_doing(self) -> bool:
        """Whether the worker made its own wait: processes of its own beside it (its session), or a priority
        it lowered (a nice value above the grader's on a thread or on its session's autogroup, or SCHED_BATCH /
        SCHED_IDLE on a thread)."""
        mine = os.getpriority(os.PRIO_PROCESS, 0)
        for stat in _stats(f"/proc/{self.pid}/task"):
            if stat[16] > mine or stat[38] in (SCHED_BATCH, SCHED_IDLE):  # nice, policy
                return True
        if _autogroup_nice(str(self.pid)) > _autogroup_nice("self"):
            return True
        return any(stat[3] == self.pid for pid, stat in _pids_and_stats() if pid != self.pid)  # session


def _autogroup_nice(pid: str) -> int:
    """The nice value of process ``pid``'s autogroup (its session's share of the CPU; 0 when there is none)."""
    try:
        return int(_text(f"/proc/{pid}/autogroup").split()[-1])
    except (OSError, ValueError, IndexError):
        return 0


def _stat_fields(path: str) -> list | None:
    """The fields of a ``stat`` file after the command name, as ints where they are numbers (field 3, the
    state, is index 0), or None when it cannot be read."""
    try:
        text = _text(path)
    except OSError:
        return None
    return [int(x) if x.lstrip("-").isdigit() else x for x in text[text.rfind(")") + 2:].split()]


def _stats(task_dir: str) -> list:
    """The ``stat`` fields of every thread in ``task_dir`` (``/proc/PID/task``)."""
    try:
        tids = os.listdir(task_dir)
    except OSError:
        return []
    return [s for s in (_stat_fields(f"{task_dir}/{t}/stat") for t in tids) if s is not None]


def _pids_and_stats():
    """(pid, stat fields) of every process this one can see."""
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = _stat_fields(f"/proc/{name}/stat")
            if stat is not None:
                yield int(name), stat


class StageClock:
    """A stage's charged time: the sum of its requests' charges, against its ``limit_s``."""

    def __init__(self, limit_s: float):
        self.limit_s = limit_s
        self.used_s = 0.0

    def remaining(self) -> float:
        return self.limit_s - self.used_s

    def spent(self) -> bool:
        return self.remaining() <= 0.01

    def add(self, window: Window) -> None:
        self.used_s += window.charged
