"""Confines a worker before any student code exists in it.

:func:`confine` runs in the worker itself, a fresh single-threaded fork of the
fork server (:mod:`forkserver`), as root in strict isolation:

1. new mount and network namespaces (the network namespace has no interface
   up, so every connection fails at once);
2. a new, empty root file system (a tmpfs) into which only what the worker
   needs is bind-mounted read-only: the system directories (/usr, /lib, /etc,
   /dev, /proc, ...), the Python installation and its virtual environment, the
   grader's worker library; and read-write, its scratch folder. Nothing else
   exists there: not the course repository (solutions, hidden tests, .git),
   not other submissions, not the grader's private files, not another copy of
   the course elsewhere on the machine. Paths in ``plan["hide"]`` that lie inside
   what is exposed (e.g. a labelled corpus in site-packages) are covered by
   empty mounts;
3. ``chroot`` into it;
4. resource limits (CPU seconds, address space, processes, open files, file
   size, no core dumps);
5. groups, gid and uid dropped to ``plan["uid"]``; no way back;
6. the scratch directory as the working directory.

Without root (degraded isolation) only the limits (4) and the working directory
(6) apply. Any failure raises OSError: the worker then exits with status 97 and
the trusted side reports it as crashed instead of running it unconfined.
"""
from __future__ import annotations

import ctypes
import os
import resource

CLONE_NEWNS, CLONE_NEWNET = 0x00020000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 8192, 16384, 1 << 18

libc = ctypes.CDLL(None, use_errno=True)


def _check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source, target, fstype, flags, data=None):
    _check(libc.mount(source and source.encode(), target.encode(), fstype and fstype.encode(),
                      ctypes.c_ulong(flags), data and data.encode()), f"mount {target}")


SYSTEM = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/dev", "/proc"]
MS_RDONLY, MS_REMOUNT = 1, 32


def hide(path: str) -> None:
    """Cover ``path`` with an empty tmpfs nobody can enter."""
    if os.path.isdir(path):
        mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=000")
    elif os.path.exists(path):
        mount("/dev/null", path, None, MS_BIND)


def expose(new_root: str, path: str, writable: bool = False) -> None:
    """Make ``path`` appear at the same place under ``new_root`` (a symlink stays a symlink)."""
    target = new_root + path
    if os.path.islink(path):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.lexists(target):
            os.symlink(os.readlink(path), target)
        return
    if not os.path.isdir(path):
        return
    os.makedirs(target, exist_ok=True)
    mount(path, target, None, MS_BIND | MS_REC)
    if not writable:
        mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID)


def build_root(plan: dict) -> str:
    """An empty tmpfs with only what the worker needs mounted into it."""
    new_root = os.path.join(plan["stash"], "root")
    os.makedirs(new_root, exist_ok=True)
    mount("tmpfs", new_root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    exposed = []
    for path in sorted(dict.fromkeys(SYSTEM + plan["expose"]), key=len):
        real = path if path in SYSTEM else os.path.realpath(path)
        if not any(real == e or real.startswith(e.rstrip("/") + "/") for e in exposed):
            expose(new_root, real)
            exposed.append(real)
    expose(new_root, plan["cwd"], writable=True)
    os.makedirs(new_root + "/tmp", mode=0o1777, exist_ok=True)
    os.chmod(new_root + "/tmp", 0o1777)
    for path in plan["hide"]:
        if os.path.lexists(new_root + path):
            hide(new_root + path)
    return new_root


def limit(limits: dict) -> None:
    """The limits named in ``limits`` (a degraded worker leaves out processes and
    open files: as the grader's own user, those would count the grader's too)."""
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_s"], limits["cpu_s"] + 5))
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_mb"] << 20,) * 2)
    if "processes" in limits:
        resource.setrlimit(resource.RLIMIT_NPROC, (limits["processes"],) * 2)
    if "open_files" in limits:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"],) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_mb"] << 20,) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def confine(plan: dict) -> None:
    if plan["namespaces"]:
        _check(libc.unshare(CLONE_NEWNS | CLONE_NEWNET), "unshare")
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        os.chroot(build_root(plan))
    limit(plan["limits"])
    uid = plan.get("uid")
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
        if os.getuid() != uid or os.geteuid() != uid:
            raise OSError("could not drop privileges")
    os.chdir(plan["cwd"])
