"""How a worker process is confined, and what the report says about it.

``strict``  (root): namespaces, an unprivileged uid, secrets hidden, limits.
``degraded`` (not root): a separate process with limits and a scrubbed
             environment in a scratch folder; same user, network shared.
``inprocess``: no boundary at all (benchmarks and debugging only; never for grading students).
"""
from __future__ import annotations

import os
import shutil
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

    def for_stage(self, stage) -> "Isolation":
        """A copy with the stage's memory and CPU-seconds limits (CPU: twice its wall-clock budget)."""
        limits = {**self.limits, "memory_mb": stage.memory_mb, "cpu_s": int(max(60, 2 * stage.time_limit_s))}
        return Isolation(self.mode, limits, list(self.extra_hidden))

    @classmethod
    def choose(cls, requested: str = "auto", extra_hidden=()) -> "Isolation":
        if requested == "auto":
            requested = "strict" if os.geteuid() == 0 and sys.platform == "linux" else "degraded"
        if requested not in ("strict", "degraded", "inprocess"):
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
            "separate_process": self.mode != "inprocess",
            "separate_user": strict,
            "network": "none" if strict else "shared",
            "secrets_hidden": strict,
            "limits": {"cpu_s": self.limits["cpu_s"], "memory_mb": self.limits["memory_mb"],
                       "processes": self.limits["processes"], "open_files": self.limits["open_files"],
                       "file_mb": self.limits["file_mb"]} if self.mode != "inprocess" else {},
            "note": {
                "strict": "worker in fresh mount+network namespaces as an unprivileged uid; tests, solutions and fixtures unmounted",
                "degraded": "not running as root: worker is a separate process with limits, but same user and network",
                "inprocess": "no boundary: for benchmarks only",
            }[self.mode],
        }

    def worker_env(self, home: str, threads: int) -> dict:
        env = {"PATH": "/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
               "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1",
               "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
               "OPENBLAS_NUM_THREADS": str(threads)}
        for key in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # some CPUs need these for correct BLAS
            if key in os.environ:
                env[key] = os.environ[key]
        return env

    def command(self, runtime_argv: list, cwd: str, env: dict, stash: str, hidden: list, lib: str) -> list:
        """The argv that starts a confined worker running ``runtime_argv`` (which lives in ``lib``)."""
        if self.mode != "strict":
            return runtime_argv
        import json
        plan = {
            "namespaces": True,
            "uid": self.uid,
            "limits": self.limits,
            "hide": [p for p in dict.fromkeys([*map(str, paths.SECRET_PATHS), *self.extra_hidden, *hidden])
                     if os.path.exists(p)],
            "expose": [sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable)), lib],
            "stash": stash,
            "cwd": cwd,
            "env": env,
            "argv": runtime_argv,
        }
        return [sys.executable, "-I", "-S", "-B", str(paths.SANDBOX / "jail.py"), json.dumps(plan)]

    def preexec(self):
        """Limits for a degraded worker (strict ones are set by the jail)."""
        if self.mode != "degraded":
            return None
        limits = self.limits

        def apply():
            import resource
            resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_s"], limits["cpu_s"] + 5))
            resource.setrlimit(resource.RLIMIT_AS, (limits["memory_mb"] << 20,) * 2)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_mb"] << 20,) * 2)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        return apply


def prepare_lib(dest: str) -> str:
    """Copy the sandbox package and the starter modules where the worker can read them."""
    lib = os.path.join(dest, "lib")
    shutil.copytree(paths.SANDBOX, os.path.join(lib, "grader_sandbox"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    if paths.STARTER.is_dir():
        shutil.copytree(paths.STARTER, os.path.join(lib, "starters"),
                        ignore=shutil.ignore_patterns("__pycache__"))
    for root, dirs, files in os.walk(lib):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    return lib
