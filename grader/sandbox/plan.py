"""How a worker is confined: the trusted side's plan for one worker, and what the probe found.

Both cross a process boundary as JSON (the fork server's ``spawn`` message carries a
:class:`Plan`; a fresh interpreter running ``jail.probe_program`` prints a :class:`Probed`), so the format is
stated here once and both directions are mirrored by ``to_json``/``from_json``.

A worker leaves the grader's reach along a :class:`Route`, the strongest the machine
allows, and then adds every other mechanism it has, each on its own:

``Route``     ``root``   new mount, network and IPC namespaces directly (CAP_SYS_ADMIN), a new
                         root, then a uid of its own;
              ``userns`` the same through a user namespace (root without CAP_SYS_ADMIN, or
                         any user where the kernel allows it), with a uid of its own where
                         the grader may map one (CAP_SETUID);
              ``setuid`` no namespaces, but a uid of its own (CAP_SETUID: root in a
                         default Docker container, under its seccomp profile);
              ``none``   no namespaces, the grader's own uid (capabilities dropped).
``landlock``  a filesystem allow-list (only the Python installation, the system folders,
              its own entry of /proc and the scratch folder), TCP refused (ABI 4), signals
              and abstract unix sockets kept inside the worker's own domain (ABI 6); the
              Landlock ABI used.
``seccomp``   a syscall filter (libseccomp): no socket, no new process, no System V or
              POSIX IPC, no call that acts on another process (signals, limits,
              scheduling, tracing, memory), no namespaces, mounts, keyrings, BPF or io_uring.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import Enum


class Route(str, Enum):
    ROOT = "root"
    USERNS = "userns"
    SETUID = "setuid"
    NONE = "none"

    @property
    def namespaces(self) -> bool:
        return self in (Route.ROOT, Route.USERNS)


@dataclass
class Plan:
    """One worker's confinement (:func:`grader.sandbox.jail.confine`)."""
    route: Route
    cwd: str                      # the scratch folder: the only place the worker may write
    env: dict
    limits: dict                  # rlimits: cpu_s, memory_mb, file_mb, open_files[, processes]
    uid: int | None = None        # a uid of its own (None: the grader's)
    landlock: int = 0             # the Landlock ABI to restrict with (0: none)
    seccomp: bool = False
    hide: list = field(default_factory=list)    # never reachable, even inside what is exposed
    course: str | None = None     # the course folder: not exposed, but a venv inside it may be
    stash: str | None = None      # where a new root is built (namespaces only)
    expose: list = field(default_factory=list)  # more paths to expose read-only (the probe's own)

    def to_json(self) -> dict:
        return {**asdict(self), "route": self.route.value}

    @classmethod
    def from_json(cls, d: dict) -> Plan:
        return cls(**{**d, "route": Route(d["route"])})


@dataclass
class Probed:
    """What this machine allows, tried for real in throwaway children (:func:`grader.sandbox.jail.probe`)."""
    route: Route
    separate_uid: bool
    why: dict = field(default_factory=dict)   # each stronger attempt that failed -> why
    nproc_in_userns: bool = False             # RLIMIT_NPROC counts per user namespace (Linux >= 5.14)
    landlock: int = 0                         # the Landlock ABI that worked (0: none)
    landlock_why: str = ""
    seccomp: str = ""                         # libseccomp's version where a filter loaded ("": none)
    seccomp_why: str = ""
    readable: list = field(default_factory=list)  # secrets a child confined this way could still read
    sees_grader: bool = True                  # that child could read its parent's command line in /proc

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "route": self.route.value})

    @classmethod
    def from_json(cls, text: str) -> Probed:
        d = json.loads(text)
        return cls(**{**d, "route": Route(d["route"])})
