"""Confines a worker before any student code exists in it, then execs the runtime.

Run as root by the trusted grader (``python -I -B jail.py PLAN_JSON``), in a
fresh single-threaded process:

1. new mount and network namespaces (the network namespace has no interface
   up, so every connection fails at once);
2. the paths in ``plan["hide"]`` (hidden tests, solutions, fixtures, the
   submissions folder, the output folder, .git) are covered by empty,
   unreadable tmpfs mounts, so even a root-equivalent path walk finds nothing;
3. directories the unprivileged user must cross to reach the Python
   installation (e.g. /root on pyenv machines) are made traversable inside
   the namespace only;
4. resource limits (CPU seconds, address space, processes, open files, file
   size, no core dumps);
5. groups, gid and uid dropped to ``plan["uid"]``; no way back;
6. exec of ``plan["argv"]`` (the runtime) in the scratch directory.

Any failure exits with status 97 and one line on stderr: the trusted side
then reports the worker as crashed instead of running it unconfined.
"""
from __future__ import annotations

import ctypes
import json
import os
import resource
import stat
import sys

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


def hide(path: str) -> None:
    """Cover ``path`` with an empty tmpfs nobody can enter."""
    if os.path.isdir(path):
        mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=000")
    elif os.path.exists(path):
        mount("/dev/null", path, None, MS_BIND)


def make_traversable(needed: list[str], stash_root: str) -> None:
    """Inside this namespace, let others cross closed directories on the way
    to each path in ``needed`` (their content stays as it was)."""
    for target in needed:
        parts = os.path.realpath(target).split(os.sep)[1:]
        for depth in range(1, len(parts)):
            closed = os.sep + os.path.join(*parts[:depth])
            if os.stat(closed).st_mode & stat.S_IXOTH:
                continue
            child = os.path.join(closed, parts[depth])
            stash = os.path.join(stash_root, f"stash{abs(hash(child))}")
            os.makedirs(stash, exist_ok=True)
            mount(child, stash, None, MS_BIND | MS_REC)
            mount("tmpfs", closed, "tmpfs", MS_NOSUID | MS_NODEV, "size=4k,mode=711")
            os.makedirs(child, exist_ok=True)
            mount(stash, child, None, MS_MOVE)
            break


def limit(plan: dict) -> None:
    limits = plan["limits"]
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_s"], limits["cpu_s"] + 5))
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_mb"] << 20,) * 2)
    resource.setrlimit(resource.RLIMIT_NPROC, (limits["processes"],) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"],) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_mb"] << 20,) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def main() -> None:
    plan = json.loads(sys.argv[1])
    try:
        if plan["namespaces"]:
            _check(libc.unshare(CLONE_NEWNS | CLONE_NEWNET), "unshare")
            mount(None, "/", None, MS_REC | MS_PRIVATE)
            make_traversable(plan["expose"], plan["stash"])
            for path in plan["hide"]:
                hide(path)
        limit(plan)
        uid = plan.get("uid")
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            if os.getuid() != uid or os.geteuid() != uid:
                raise OSError("could not drop privileges")
        os.chdir(plan["cwd"])
        os.execve(plan["argv"][0], plan["argv"], plan["env"])
    except OSError as exc:
        print(f"grader jail: {exc}", file=sys.stderr)
        os._exit(97)


if __name__ == "__main__":
    main()
