"""How many cores this process may really use, and how to share them among gradings.

``os.cpu_count()`` counts the machine's cores; a grading may get fewer: its CPU affinity
(``taskset``, a container's cpuset) and its cgroup's CPU quota (``docker --cpus 1``, Kubernetes
limits, Gradescope's 1 CPU) both cap it. Torch threads beyond that only fight each other.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")


def _own_cgroup() -> str:
    """This process's cgroup v2 path ("/" when there is none)."""
    try:
        entries = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        entries = []
    return next((e.split(":", 2)[2] for e in entries if e.startswith("0::")), "/")


def quota(cgroup_root: Path = CGROUP, own: str | None = None) -> float | None:
    """The CPU quota in cores of the cgroup ``own`` (default: this process's), or None: the smallest ``cpu.max``
    of it and the cgroups above it (cgroup v2), else cgroup v1's CFS quota."""
    own = _own_cgroup() if own is None else own
    folder, quotas = cgroup_root / own.lstrip("/"), []
    for level in (folder, *folder.parents):
        try:
            limit, period = (level / "cpu.max").read_text().split()[:2]
            if limit != "max":
                quotas.append(int(limit) / int(period))
        except (OSError, ValueError):
            pass
        if level == cgroup_root:
            break
    if quotas:
        return min(quotas)
    try:
        limit = int((cgroup_root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((cgroup_root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return limit / period if limit > 0 else None


def available() -> int:
    """The cores this process may use: its affinity, capped by its cgroup's quota (rounded up), at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    cap = quota()
    if cap is not None:
        cores = min(cores, math.ceil(cap))
    return max(1, cores)


def threads_per_grading(workers: int, cores: int | None = None) -> int:
    """Torch threads for each of ``workers`` gradings running side by side: the cores shared out, at least 1."""
    return max(1, (available() if cores is None else cores) // max(1, workers))


BLAS_THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def blas_env(threads: int) -> dict:
    """The BLAS/OpenMP thread counts of a process that grades with ``threads`` threads."""
    return {name: str(threads) for name in BLAS_THREADS}


def limit_blas_threads(threads: int, env=os.environ) -> None:
    """Give this (trusted) process's numpy ``threads`` BLAS threads, unless the user chose a number.
    Call it before numpy is imported, or pass the ``env`` of a process about to start. Otherwise OpenBLAS
    starts a thread per core at import, which spins about 0.07 CPU-s for nothing (the trusted side
    multiplies small arrays): once per ``check``, and once per submission in a batch, where the other
    cores belong to the other gradings."""
    for name, value in blas_env(threads).items():
        env.setdefault(name, value)
