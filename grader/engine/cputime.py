"""The CPU time of another process, read from the kernel's clock for it (never from the process itself).

Linux keeps a CPU clock per process: every thread's time on a CPU, alive or exited, in nanoseconds. Any
process may read another's with ``clock_gettime`` (clock id ``(~pid << 3) | CPUCLOCK_SCHED``; no permission
is checked, as for ``/proc/PID/stat``), so the trusted side measures a worker's time without asking it.
Wherever a seccomp filter loads, a worker starts no processes of its own (``grader.sandbox.syscalls``), so its
clock holds all its work; where none loads, the report says what it lacks (docs/TRUST.md).
"""
from __future__ import annotations

import time

_CPUCLOCK_SCHED = 2  # include/linux/posix-timers.h: the scheduler's run time, all threads of the process


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds used so far by every thread of process ``pid``; ``ProcessLookupError`` once it is gone."""
    try:
        return time.clock_gettime(((~pid) << 3) | _CPUCLOCK_SCHED)
    except OSError as exc:  # EINVAL: no such process (any more)
        raise ProcessLookupError(pid) from exc


def own_cpu_seconds() -> float:
    """CPU seconds of the calling thread: the same clock for the reference, measured here."""
    return time.thread_time()
