"""Landlock: what a worker may touch on the filesystem, and TCP, signals and abstract sockets.

Landlock (Linux 5.13+) lets a process restrict itself, unprivileged and without
namespaces, and it works under Docker's default seccomp profile (which lists its
three calls since Docker 23). :func:`restrict` allows, beneath each folder:

* read and execute: the system folders and the Python installation the worker imports
  from (:func:`grader.sandbox.jail.exposed_paths`); of ``/proc``, only what describes the
  machine and the worker's own entry (:func:`own_proc`), so no other process is seen;
* everything: the scratch folder; write: ``/dev/null``;

and nothing else: not the course (solutions, hidden tests, .git, stand-ins), not the
grader's private folder, not other submissions, not ``/tmp``. A secret that lies inside
an allowed folder (the labelled tweets inside site-packages; a course under ``/usr``)
is left out by allowing that folder's other entries instead (:func:`beneath_except`).
With ABI 4 TCP bind and connect are refused; with ABI 6 the worker may signal, and
connect to abstract unix sockets of, only processes of its own domain. Landlock also
keeps a worker from tracing or reading the memory of any process outside its domain.

The rules come from landlockpy (0BSD, no dependencies, every ABI from 1 to 11 with
best-effort degradation: the older ``landlock`` package knows the filesystem only).
"""
from __future__ import annotations

import errno
import os

READ = ("READ_FILE", "READ_DIR", "EXECUTE")
FILE_RIGHTS = ("READ_FILE", "WRITE_FILE", "EXECUTE", "TRUNCATE", "IOCTL_DEV")


def abi() -> tuple[int, str]:
    """(the kernel's Landlock ABI, why 0): 0 where the kernel lacks it or a filter refuses the calls."""
    try:
        import landlockpy  # fork-safety: the fork server imports it before forking (forkserver.preload)
    except ImportError as exc:
        return 0, f"landlockpy is not installed ({exc})"
    try:
        version = landlockpy.abi_version()
    except OSError as exc:  # landlockpy.LandlockError
        return 0, f"landlock_create_ruleset: {os.strerror(exc.errno) if exc.errno else exc}"
    if not version:
        return 0, "landlock_create_ruleset: " + os.strerror(errno.ENOSYS) + " (no Landlock in this kernel, " \
                  "or a seccomp profile refuses its calls)"
    return version, ""


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def beneath_except(path: str, avoid) -> tuple[list, list]:
    """(paths, folders) that together give everything beneath ``path`` except what lies in ``avoid``:
    ``path`` itself when nothing to avoid is inside it, else its entries, recursively, less the avoided
    ones; ``folders`` are the ones split so, which may still be listed (Python finds a module only in
    a folder it can list), though nothing avoided in them can be read. Symbolic links are left out
    (Landlock checks the file they lead to, wherever it is)."""
    inside = [a for a in avoid if _within(a, path) and a != path]
    if not inside:
        return [path], []
    paths, folders = [], [path]
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.path in inside or entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                more, split = beneath_except(entry.path, inside)
                paths, folders = paths + more, folders + split
            else:
                paths.append(entry.path)
    return paths, folders


def own_proc(pid: int, proc: str = "/proc") -> list:
    """What of ``proc`` a worker may read: its entries that are not processes (cpuinfo, meminfo, sys,
    ...) and the folder of process ``pid``, the worker's own (``/proc/self`` leads there); no other
    process's command line, status or folder. Symbolic links are left out (Landlock checks what
    they lead to). Nothing where there is no ``proc``."""
    if not os.path.isdir(f"{proc}/{pid}"):
        return []
    with os.scandir(proc) as entries:
        return [e.path for e in entries if not e.name.isdigit() and not e.is_symlink()] + [f"{proc}/{pid}"]


def _covered(path: str, others: set, avoid) -> bool:
    """Whether another of ``others`` holds ``path`` with nothing of ``avoid`` between the two: the rules of
    that tree (everything beneath it but what is avoided) already give ``path`` the same rights. Only the
    nearest such folder is asked: what is avoided between it and ``path`` is between any higher one too."""
    child, parent = path, os.path.dirname(path)
    while parent != child:
        if parent in others:
            return not any(_within(path, a) and _within(a, parent) for a in avoid)
        child, parent = parent, os.path.dirname(parent)
    return False


def rules(readable, writable, hide, course=None) -> list:
    """``(path, rights)`` for :func:`restrict`: ``readable`` folders and files read-only and
    ``writable`` ones fully, less ``hide`` (never, even inside them) and ``course`` (left out of
    what contains it; a folder the worker needs inside it, such as its venv, stays allowed).
    One rule per tree: a path inside another of the same rights (site-packages inside the venv)
    gets none of its own, so a folder split around a secret is split once."""
    hide = [os.path.realpath(h) for h in hide]
    avoid = hide + ([os.path.realpath(course)] if course else [])
    out = []
    for paths, rights in ((readable, READ), (writable, None)):
        real = dict.fromkeys(os.path.realpath(p) for p in paths if os.path.exists(p))
        for path in real:
            if any(_within(path, h) for h in hide) or _covered(path, real.keys(), avoid):
                continue
            allowed, listed = beneath_except(path, avoid)
            out += [(p, rights) for p in allowed] + [(p, ("READ_DIR",)) for p in listed]
    return out


def restrict(readable, writable, hide, course=None, version: int = 0) -> None:
    """Restrict this process (and what it starts) to :func:`rules`, with Landlock ABI ``version``'s
    rights; TCP and scopes where the ABI has them. Raises OSError if the kernel refuses."""
    from landlockpy import AccessFS, AccessNet, Ruleset, Scope, fs_for_abi, net_for_abi, scope_for_abi
    handled = fs_for_abi(version)
    files = _flags(AccessFS, FILE_RIGHTS)
    tcp, scopes = AccessNet.BIND_TCP | AccessNet.CONNECT_TCP, Scope.SIGNAL | Scope.ABSTRACT_UNIX_SOCKET
    ruleset = Ruleset(handled_fs=handled, handled_net=net_for_abi(version) & tcp,
                      scoped=scope_for_abi(version) & scopes)
    rights_of: dict = {}  # (names, a folder?) -> rights: a few kinds for hundreds of rules (enum flags are slow)
    with ruleset:
        for path, names in rules(readable, writable, hide, course):
            kind = (names, os.path.isdir(path))
            if kind not in rights_of:
                rights = handled if names is None else _flags(AccessFS, names)
                rights_of[kind] = rights if kind[1] else rights & files
            ruleset.allow_path(path, rights_of[kind])
        if os.path.exists("/dev/null"):
            ruleset.allow_path("/dev/null", (AccessFS.READ_FILE | AccessFS.WRITE_FILE | AccessFS.TRUNCATE
                                             | AccessFS.IOCTL_DEV) & handled)
        ruleset.restrict()


def _flags(enum, names):
    value = enum(0)
    for name in names:
        value |= getattr(enum, name)
    return value
