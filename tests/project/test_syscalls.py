"""grader.sandbox.syscalls, the seccomp filter: every call that acts on another process, starts one, or makes an
object that outlives the process is refused under it, and works without it.

Each call is made by a child of this test (as this test's uid, so that only the filter can refuse it) on another
child, a ``sleep`` of the same uid; the same calls without the filter are the yardstick. The calls leave the
``sleep`` as it was (its own limits, CPUs, priority, a signal 0), and what they make is removed.
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import platform
import resource
import signal
import socket
import struct
import subprocess

import pytest

from grader.sandbox import syscalls

pytestmark = pytest.mark.skipif(platform.machine() != "x86_64" or not syscalls.version()[0],
                                reason="the calls are made by their x86_64 numbers, under libseccomp")

libc = ctypes.CDLL(None, use_errno=True)
NR = {"ioprio_set": 251, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129, "rt_tgsigqueueinfo": 297,
      "pidfd_getfd": 438, "process_madvise": 440, "process_vm_readv": 310, "process_vm_writev": 311,
      "ptrace": 101, "kcmp": 312, "move_pages": 279, "migrate_pages": 256, "get_robust_list": 274, "clone3": 435,
      "mq_open": 240, "mq_unlink": 241}
PTRACE_SEIZE, KCMP_VM, IPC_PRIVATE, IPC_RMID, MADV_COLD = 0x4206, 1, 0, 0, 20


def _sys(name, *args) -> int:
    return 0 if libc.syscall(NR[name], *args) >= 0 else ctypes.get_errno()


def _os(call) -> int:
    try:
        call()
        return 0
    except OSError as exc:
        return exc.errno


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def _memory_calls(target: int) -> dict:
    """process_vm_readv of one byte of the target's first writable mapping, and process_vm_writev of that same
    byte back."""
    with open(f"/proc/{target}/maps") as f:
        where = next(int(line.split("-")[0], 16) for line in f if line.split()[1].startswith("rw"))
    buf = ctypes.create_string_buffer(1)
    local, remote = _Iovec(ctypes.addressof(buf), 1), _Iovec(where, 1)
    read = _sys("process_vm_readv", target, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    return {"process_vm_readv": read,
            "process_vm_writev": _sys("process_vm_writev", target, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)}


def _siginfo() -> ctypes.Array:
    info = ctypes.create_string_buffer(128)
    struct.pack_into("iii", info, 0, 0, 0, -1)  # si_signo, si_errno, si_code = SI_QUEUE
    return info


def _owner_calls(target: int) -> dict:
    r, w = os.pipe()
    a, b = socket.socketpair()
    owner_ex = struct.pack("ii", 1, target)  # F_OWNER_PID
    try:
        return {"fcntl F_SETOWN": _os(lambda: fcntl.fcntl(r, fcntl.F_SETOWN, target)),
                "fcntl F_SETOWN_EX": _os(lambda: fcntl.fcntl(w, 15, owner_ex)),
                "ioctl FIOSETOWN": _os(lambda: fcntl.ioctl(a, 0x8901, struct.pack("i", target))),
                "ioctl SIOCSPGRP": _os(lambda: fcntl.ioctl(b, 0x8902, struct.pack("i", target)))}
    finally:
        for fd in (r, w):
            os.close(fd)
        a.close()
        b.close()


def _ipc_calls() -> dict:
    """Each object made is removed at once (where the filter lets it be made)."""
    out = {}
    for name, make, remove in (
            ("shmget", lambda: libc.shmget(IPC_PRIVATE, 4096, 0o600), lambda i: libc.shmctl(i, IPC_RMID, None)),
            ("semget", lambda: libc.semget(IPC_PRIVATE, 1, 0o600), lambda i: libc.semctl(i, 0, IPC_RMID)),
            ("msgget", lambda: libc.msgget(IPC_PRIVATE, 0o600), lambda i: libc.msgctl(i, IPC_RMID, None))):
        ident = make()
        out[name] = 0 if ident >= 0 else ctypes.get_errno()
        if ident >= 0:
            remove(ident)
    out["mq_open"] = _sys("mq_open", b"grader-test-syscalls", os.O_CREAT | os.O_RDWR, 0o600, None)
    if out["mq_open"] == 0:
        _sys("mq_unlink", b"grader-test-syscalls")
    return out


def _calls(target: int, pidfd: int) -> dict:
    """name -> 0 (it worked) or its errno, for each call on ``target`` (``pidfd`` opened before any filter)."""
    cpus = os.sched_getaffinity(target)
    head, size, node0 = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_ulong(1)
    return {
        "prlimit64": _os(lambda: resource.prlimit(target, resource.RLIMIT_NOFILE,
                                                  resource.prlimit(0, resource.RLIMIT_NOFILE))),
        "sched_setaffinity": _os(lambda: os.sched_setaffinity(target, cpus)),
        "sched_setscheduler": _os(lambda: os.sched_setscheduler(target, os.SCHED_OTHER, os.sched_param(0))),
        "sched_setparam": _os(lambda: os.sched_setparam(target, os.sched_param(0))),
        "setpriority PRIO_PROCESS": _os(lambda: os.setpriority(os.PRIO_PROCESS, target, 0)),
        "setpriority PRIO_PGRP": _os(lambda: os.setpriority(os.PRIO_PGRP, target, 0)),
        "ioprio_set": _sys("ioprio_set", 1, target, 0),
        "kill": _os(lambda: os.kill(target, 0)),
        "tkill": _sys("tkill", target, 0),
        "tgkill": _sys("tgkill", target, target, 0),
        "rt_sigqueueinfo": _sys("rt_sigqueueinfo", target, 0, _siginfo()),
        "rt_tgsigqueueinfo": _sys("rt_tgsigqueueinfo", target, target, 0, _siginfo()),
        "pidfd_open": _os(lambda: os.close(os.pidfd_open(target))),
        "pidfd_send_signal": _os(lambda: signal.pidfd_send_signal(pidfd, 0)),
        "pidfd_getfd": _sys("pidfd_getfd", pidfd, 0, 0),
        "process_madvise": _sys("process_madvise", pidfd, None, 0, MADV_COLD, 0),
        "ptrace": _sys("ptrace", PTRACE_SEIZE, target, None, None),  # detached when this child exits
        "kcmp": _sys("kcmp", os.getpid(), target, KCMP_VM, 0, 0),
        "move_pages": _sys("move_pages", target, 0, None, None, None, 0),
        "migrate_pages": _sys("migrate_pages", target, 64, ctypes.byref(node0), ctypes.byref(node0)),
        "get_robust_list": _sys("get_robust_list", target, ctypes.byref(head), ctypes.byref(size)),
        "fork": _fork(),
        "subprocess": _os(lambda: subprocess.run(["true"], check=True)),
        **_memory_calls(target), **_owner_calls(target), **_ipc_calls(),
    }


def _fork() -> int:
    try:
        pid = os.fork()
    except OSError as exc:
        return exc.errno
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return 0


def _in_a_child(target: int, filtered: bool) -> dict:
    """:func:`_calls` made by a child of this process, under the filter or not; what it said."""
    pidfd = os.pidfd_open(target)
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.close(r)
            if filtered:
                libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS, as the worker sets it
                syscalls.install()
            answer = {"calls": _calls(target, pidfd), "clone3": _sys("clone3", None, 0),
                      "on itself": {"prlimit": _os(lambda: resource.setrlimit(resource.RLIMIT_NOFILE,
                                                                            resource.getrlimit(resource.RLIMIT_NOFILE))),
                                    "kill": _os(lambda: os.kill(os.getpid(), 0)),
                                    "sched_setaffinity": _os(lambda: os.sched_setaffinity(0, os.sched_getaffinity(0))),
                                    "nice": _os(lambda: os.nice(0))}}
            os.write(w, json.dumps(answer).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        said = json.loads(f.read())
    os.waitpid(child, 0)
    os.close(pidfd)
    return said


@pytest.fixture
def target():
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield sleeper.pid
    sleeper.kill()
    sleeper.wait()


def test_under_the_filter_every_call_on_another_process_is_refused_and_each_works_without_it(target):
    free, filtered = _in_a_child(target, False), _in_a_child(target, True)
    assert set(free["calls"]) == set(filtered["calls"])
    assert {k for k, v in filtered["calls"].items() if v != errno.EPERM} == set(), filtered["calls"]
    assert {k for k, v in free["calls"].items() if v == errno.EPERM} == set(), free["calls"]
    assert filtered["clone3"] == errno.ENOSYS  # so that glibc falls back to clone, whose flags the filter reads
    assert set(filtered["on itself"].values()) == {0}, filtered["on itself"]  # its own limits, signals, CPUs stay
