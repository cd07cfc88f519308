"""How a worker process is confined, and what the report says about it.

The machine decides, not the user id: :func:`probe` (once per process) tries
in throwaway children what :func:`grader.sandbox.jail.confine` would do, strongest
first, and :meth:`Isolation.choose` takes the result.

``strict``   every layer: namespaces, a new root, a separate uid, no network,
             secrets hidden, all limits (root with CAP_SYS_ADMIN; or root in a
             container through a user namespace).
``partial``  namespaces through an unprivileged user namespace, but a layer
             missing (a user without CAP_SETUID: the worker keeps its uid).
``degraded`` no namespaces at all: a separate process with limits and a scrubbed
             environment in a scratch folder; same user, network shared, the
             grader's files readable. ``grade`` and ``batch`` refuse it unless
             told that readable secrets are acceptable.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field

from . import paths

DEFAULT_LIMITS = {"cpu_s": 600, "memory_mb": 6144, "processes": 512, "open_files": 256, "file_mb": 16}
UID_BASE = 200_000  # one uid per trusted process: workers of parallel grades cannot see each other
# glibc's malloc raises its mmap threshold each time a large block is freed (up to 32 MB), so a
# torch process's activations end up in the heap, which fragments and is never returned: a stage-8
# worker grew to 570 MB. A fixed threshold of 4 MB gives large tensors back on free (peak PSS of
# stage 8 alone 1010 -> 884 MB) for no measurable CPU time; 1 MB and below cost ~25% more CPU
# (page faults on every batch). Set for the fork servers (their workers inherit it) and the session.
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(4 * 2**20)}
LAYERS = ("namespaces", "new_root", "separate_uid", "network", "secrets_hidden", "limits")


class IsolationUnavailable(RuntimeError):
    """The confinement asked for (or any, where secrets are at stake) cannot be had: a grader
    error, one line, no report."""


class ConfinementFailed(IsolationUnavailable):
    """A worker could not confine itself along the chosen path."""


class WorkerImportFailed(IsolationUnavailable):
    """A module the grader's own code needs (a probe's, a stand-in's, course-provided code's, or one
    installed for the grader that the submission imports) cannot be imported in a confined worker:
    the grader's environment fails, never the student. A grader error, one line, no report."""


_probed: dict = {}


def probe() -> dict:
    """What this machine allows (:func:`grader.sandbox.jail.probe` in a fresh ``python -I``,
    never a fork of this process, which may hold threads); cached per process."""
    if "result" not in _probed:
        if sys.platform != "linux":
            _probed["result"] = {"path": "none", "separate_uid": False, "why": {"root": f"not Linux ({sys.platform})"}}
        else:
            proc = subprocess.run([sys.executable, "-I", str(paths.SANDBOX / "jail.py"), "--probe",
                                   str(UID_BASE + os.getpid())], capture_output=True, text=True, timeout=60)
            try:
                _probed["result"] = json.loads(proc.stdout)
            except ValueError:
                why = (proc.stderr.strip().splitlines() or [f"status {proc.returncode}"])[-1]
                _probed["result"] = {"path": "none", "separate_uid": False, "why": {"probe": why}}
    return _probed["result"]


def _missing(found: dict) -> dict:
    """layer -> why it is not applied, for a probe result."""
    why = found["why"]
    if found["path"] == "none":
        no_ns = "no namespaces: " + "; ".join(f"{k}: {v}" for k, v in why.items())
        out = {layer: no_ns for layer in ("namespaces", "new_root", "separate_uid", "network", "secrets_hidden")}
        out["limits"] = "cpu, memory and file size only: processes and open files would count the grader's own"
        return out
    if not found["separate_uid"]:
        out = {"separate_uid": "the worker keeps the grader's uid (a uid of its own needs CAP_SETUID: "
                               + "; ".join(f"{k}: {v}" for k, v in why.items()) + ")"}
        if not found.get("nproc_in_userns"):  # Linux before 5.14 counts processes per uid, not per namespace
            out["limits"] = "no processes limit: with the grader's uid it would count the grader's processes"
        return out
    return {}


@dataclass
class Isolation:
    path: str  # how jail.confine confines: "root", "userns" or "none"
    separate_uid: bool = False
    why: dict = field(default_factory=dict)  # layer -> why it is not applied
    limits: dict = field(default_factory=lambda: dict(DEFAULT_LIMITS))
    extra_hidden: list = field(default_factory=list)
    # a processes limit counts only the worker's own processes: a uid of its own, or a user
    # namespace where the kernel counts them per namespace (the probe measures it)
    own_nproc: bool = False

    @property
    def mode(self) -> str:
        if not self.why:
            return "strict"
        return "degraded" if self.path == "none" else "partial"

    def for_stage(self, stage) -> Isolation:
        """A copy with the stage's memory and CPU-seconds limits (CPU: twice its wall-clock budget)."""
        limits = {**self.limits, "memory_mb": stage.memory_mb, "cpu_s": int(max(60, 2 * stage.time_limit_s))}
        return Isolation(self.path, self.separate_uid, dict(self.why), limits, list(self.extra_hidden), self.own_nproc)

    @classmethod
    def choose(cls, requested: str = "auto", extra_hidden=(), *, kind: str = "hidden",
               allow_readable_secrets: bool = False) -> Isolation:
        """``auto``: the strongest the machine allows; ``strict``: every layer or
        IsolationUnavailable; ``degraded``: no namespaces, asked for (itself an opt-in to
        readable secrets). ``auto`` falling to no namespaces with ``kind`` "hidden" refuses
        unless ``allow_readable_secrets``."""
        hidden = [str(p) for p in extra_hidden]
        if requested == "degraded":
            asked = "isolation 'degraded' was asked for"
            why = {layer: asked for layer in LAYERS}
            return cls("none", False, why, extra_hidden=hidden)
        if requested not in ("auto", "strict"):
            raise ValueError(f"unknown isolation {requested!r}")
        found = probe()
        chosen = cls(found["path"], found["separate_uid"], _missing(found), extra_hidden=hidden,
                     own_nproc=found["separate_uid"] or bool(found.get("nproc_in_userns")))
        if requested == "strict" and chosen.why:
            raise IsolationUnavailable(
                "--isolation strict: this machine cannot give every layer (" +
                "; ".join(f"{k}: {v}" for k, v in chosen.why.items()) + "); use --isolation auto, or run as root")
        if chosen.path == "none" and kind == "hidden" and not allow_readable_secrets:
            raise IsolationUnavailable(
                "refusing to grade: the worker could read the hidden tests and solutions here "
                f"({chosen.why['namespaces']}); "
                "run as root or allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1), "
                "or pass --allow-readable-secrets")
        if chosen.path == "none":
            chosen.why["secrets_hidden"] = ("readable secrets accepted (--allow-readable-secrets); "
                                            + chosen.why["secrets_hidden"]) if kind == "hidden" else \
                "public tests only: no secrets at stake; " + chosen.why["secrets_hidden"]
        return chosen

    def to_json(self) -> str:
        return json.dumps({"path": self.path, "separate_uid": self.separate_uid, "why": self.why,
                           "own_nproc": self.own_nproc})

    @classmethod
    def from_json(cls, text: str, extra_hidden=()) -> Isolation:
        d = json.loads(text)
        return cls(d["path"], d["separate_uid"], d["why"], extra_hidden=[str(p) for p in extra_hidden],
                   own_nproc=d.get("own_nproc", d["separate_uid"]))

    @property
    def uid(self):
        return UID_BASE + os.getpid() if self.separate_uid else None

    def applied_limits(self) -> dict:
        """The limits a worker gets: no processes limit where it would count the grader's processes
        (the grader's uid, outside a user namespace that counts its own); without namespaces, no
        open-files limit either (as before)."""
        drop = set() if self.own_nproc else {"processes"}
        if self.path == "none":
            drop.add("open_files")
        return {k: v for k, v in self.limits.items() if k not in drop}

    def describe(self) -> dict:
        """The report's ``isolation`` object."""
        mode, ok = self.mode, (lambda layer: layer not in self.why)
        layers = {layer: {"applied": ok(layer), **({"why": self.why[layer]} if not ok(layer) else {})}
                  for layer in LAYERS}
        limits = self.applied_limits()
        if mode == "strict":
            via = "user, mount and network namespaces" if self.path == "userns" else "mount and network namespaces"
            note = f"worker in fresh {via} as an unprivileged uid; tests, solutions and fixtures unmounted"
        elif mode == "partial":
            note = ("worker in fresh user, mount and network namespaces; tests, solutions and fixtures unmounted; "
                    "missing: " + "; ".join(f"{k}: {v}" for k, v in self.why.items()))
        else:
            note = (f"no confinement ({self.why['namespaces']}): worker is a separate process with limits, "
                    "but same user and network, and it can read the grader's files")
        return {
            "mode": mode,
            "separate_process": True,
            "separate_user": ok("separate_uid"),
            "network": "none" if ok("network") else "shared",
            "secrets_hidden": ok("secrets_hidden"),
            "limits": {k: limits[k] for k in ("cpu_s", "memory_mb", "processes", "open_files", "file_mb")
                       if k in limits},
            "note": note,
            "layers": layers,
        }

    def worker_env(self, home: str, threads: int) -> dict:
        return {**base_env(threads), "HOME": home, "TMPDIR": home,
                "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}

    def plan(self, cwd: str, env: dict, stash: str, hidden: list) -> dict:
        """How :func:`grader.sandbox.jail.confine` confines a worker."""
        plan = {"path": self.path, "uid": self.uid, "limits": self.applied_limits(), "cwd": cwd, "env": env}
        if os.environ.get("GRADER_TEST_WORKER_CONFINE_FAILS") == "1":  # the project's tests only (test_places)
            plan["test_confine_fails"] = True
        if self.path == "none":
            return plan
        return {
            **plan,
            "hide": [p for p in dict.fromkeys([*map(str, paths.SECRET_PATHS), *self.extra_hidden, *hidden])
                     if os.path.exists(p)],
            # the worker exposes its own interpreter and sys.path (jail.exposed_paths), never the course's folder
            "course": str(paths.ROOT),
            "stash": stash,
        }


def one_line(described: dict) -> str:
    """What a worker got, for one line on stderr."""
    got = [k for k, v in described["layers"].items() if v["applied"]]
    lacking = [k for k, v in described["layers"].items() if not v["applied"]]
    return (f"isolation {described['mode']}: " + (", ".join(got) or "no layer")
            + (f"; without {', '.join(lacking)}" if lacking else ""))


def base_env(threads: int) -> dict:
    """What every process on the worker side of the boundary gets: a path, a
    locale, and its BLAS/OpenMP threads."""
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": str(threads),
           "MKL_NUM_THREADS": str(threads), "OPENBLAS_NUM_THREADS": str(threads), **MALLOC_ENV}
    for key in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # some CPUs need these for correct BLAS
        if key in os.environ:
            env[key] = os.environ[key]
    return env
