"""How a worker process is confined, and what the report says about it.

``strict``  (root): namespaces, an unprivileged uid, secrets hidden, limits.
``degraded`` (not root): a separate process with limits and a scrubbed
             environment in a scratch folder; same user, network shared.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from . import paths

DEFAULT_LIMITS = {"cpu_s": 600, "memory_mb": 6144, "processes": 512, "open_files": 256, "file_mb": 16}
UID_BASE = 200_000  # one uid per trusted process: workers of parallel grades cannot see each other


@dataclass
class Isolation:
    mode: str
    limits: dict = field(default_factory=lambda: dict(DEFAULT_LIMITS))
    extra_hidden: list = field(default_factory=list)

    def for_stage(self, stage) -> Isolation:
        """A copy with the stage's memory and CPU-seconds limits (CPU: twice its wall-clock budget)."""
        limits = {**self.limits, "memory_mb": stage.memory_mb, "cpu_s": int(max(60, 2 * stage.time_limit_s))}
        return Isolation(self.mode, limits, list(self.extra_hidden))

    @classmethod
    def choose(cls, requested: str = "auto", extra_hidden=()) -> Isolation:
        if requested == "auto":
            requested = "strict" if os.geteuid() == 0 and sys.platform == "linux" else "degraded"
        if requested not in ("strict", "degraded"):
            raise ValueError(f"unknown isolation {requested!r}")
        return cls(requested, extra_hidden=[str(p) for p in extra_hidden])

    @property
    def uid(self):
        return UID_BASE + os.getpid() if self.mode == "strict" else None

    def describe(self) -> dict:
        """The report's ``isolation`` object."""
        strict = self.mode == "strict"
        return {
            "mode": self.mode,
            "separate_process": True,
            "separate_user": strict,
            "network": "none" if strict else "shared",
            "secrets_hidden": strict,
            "limits": {"cpu_s": self.limits["cpu_s"], "memory_mb": self.limits["memory_mb"],
                       "processes": self.limits["processes"], "open_files": self.limits["open_files"],
                       "file_mb": self.limits["file_mb"]},
            "note": {
                "strict": "worker in fresh mount+network namespaces as an unprivileged uid; "
                          "tests, solutions and fixtures unmounted",
                "degraded": "not running as root: worker is a separate process with limits, but same user and network",
            }[self.mode],
        }

    def worker_env(self, home: str, threads: int) -> dict:
        return {**base_env(threads), "HOME": home, "TMPDIR": home,
                "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}

    def plan(self, cwd: str, env: dict, stash: str, hidden: list) -> dict:
        """How :func:`grader.sandbox.jail.confine` confines a worker."""
        if self.mode != "strict":  # limits only; as the grader's own user, processes and files would count its own
            limits = {k: v for k, v in self.limits.items() if k not in ("processes", "open_files")}
            return {"namespaces": False, "uid": None, "limits": limits, "cwd": cwd, "env": env}
        return {
            "namespaces": True,
            "uid": self.uid,
            "limits": self.limits,
            "hide": [p for p in dict.fromkeys([*map(str, paths.SECRET_PATHS), *self.extra_hidden, *hidden])
                     if os.path.exists(p)],
            "expose": [sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))],
            "stash": stash,
            "cwd": cwd,
            "env": env,
        }


def base_env(threads: int) -> dict:
    """What every process on the worker side of the boundary gets: a path, a
    locale, and its BLAS/OpenMP threads."""
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": str(threads),
           "MKL_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads)}
    for key in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # some CPUs need these for correct BLAS
        if key in os.environ:
            env[key] = os.environ[key]
    return env
