"""seccomp: the system calls a worker may not make, installed by the worker itself.

A filter needs no privilege (only ``PR_SET_NO_NEW_PRIVS``, which the worker sets) and
works inside Docker's default seccomp profile, which stacks with it. Everything is
allowed but (each refused with EPERM), on every route:

* ``socket`` of any family (``socketpair`` stays): no network, no unix socket either;
* a new process: ``fork``, ``vfork`` and ``clone`` without ``CLONE_THREAD`` (threads stay);
  ``clone3`` answers ENOSYS (as in Docker's profile), so that glibc falls back to ``clone``,
  whose flags a filter can read. Nothing can leave the worker's process group, and the
  CPU clock of the worker's pid (``grader.engine.cputime``) holds all it does;
* whatever outlives the process: System V shared memory, semaphores and message queues,
  POSIX message queues;
* any call that acts on another process, whoever owns it: signals (``kill``, ``tgkill``,
  ``rt_sigqueueinfo`` to another pid; ``tkill``, pidfds), ``SIGIO`` aimed at another pid
  (``F_SETOWN``, ``FIOSETOWN``), its limits (``prlimit64``), its scheduling, CPUs, nice
  value and I/O priority (``sched_set*``, ``setpriority``, ``ioprio_set``), its memory
  (``ptrace``, ``process_vm_readv``/``writev``, ``process_madvise``, ``migrate_pages``,
  ``move_pages``, ``get_robust_list``, ``kcmp``); on itself (pid 0) they stay;
* what could reach beyond the worker: namespaces, mounts, keyrings, BPF, perf events,
  userfaultfd, io_uring, file handles, modules.

Built with libseccomp through pyseccomp (ctypes bindings with the API of libseccomp's
own Python module, which is not on PyPI); the library is loaded before the worker is
confined. A system call of another architecture (32-bit ``int 0x80``) kills the worker.
"""
from __future__ import annotations

import ctypes
import errno
import os

DENIED = ("socket", "fork", "vfork",
          "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "process_mrelease", "kcmp",
          "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "tkill",
          "shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semtimedop", "semctl",
          "msgget", "msgsnd", "msgrcv", "msgctl", "ipc",
          "mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
          "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
          "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
          "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
          "io_uring_setup", "io_uring_enter", "io_uring_register",
          "open_by_handle_at", "name_to_handle_at", "kexec_load", "kexec_file_load",
          "init_module", "finit_module", "delete_module", "swapon", "swapoff", "reboot", "acct", "quotactl")
ON_ITSELF = ("prlimit64", "sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr",
             "migrate_pages", "move_pages", "get_robust_list")  # the first argument a pid: 0 (itself) only
TO_ITSELF = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")  # the first argument its own pid only
WHO_ITSELF = {"setpriority": 0, "ioprio_set": 1}  # (which, who): PRIO_PROCESS / IOPRIO_WHO_PROCESS, who 0 only
F_SETOWN, F_SETOWN_EX, FIOSETOWN, SIOCSPGRP = 8, 15, 0x8901, 0x8902
INT = 0xFFFFFFFF  # a command is an int: the kernel reads the low 32 bits of the register, a filter all 64
CLONE_NEW = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)  # NS CGROUP UTS
CLONE_THREAD = 0x00010000                                                           # IPC USER PID NET
NO_SUCH_CALL = -1  # libseccomp's __NR_SCMP_ERROR


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint), ("minor", ctypes.c_uint), ("micro", ctypes.c_uint)]


def version() -> tuple[str, str]:
    """(libseccomp's version, why ""): ("", why) where pyseccomp or libseccomp cannot be loaded."""
    try:
        import pyseccomp  # fork-safety: the fork server imports it before forking (forkserver.preload)
    except (ImportError, RuntimeError, OSError) as exc:  # RuntimeError: "Unable to find libseccomp"
        return "", f"pyseccomp cannot load libseccomp ({exc})"
    lib = pyseccomp._libseccomp
    lib.seccomp_version.restype = ctypes.POINTER(_Version)
    v = lib.seccomp_version().contents
    return f"{v.major}.{v.minor}.{v.micro}", ""


def install() -> None:
    """Load the filter into this process (and its threads). Raises OSError if refused.

    libseccomp allows one comparison per argument in a rule, so "any pid but 0" is a rule of its
    own: ``arg != 0``; a call on itself by its own pid (rather than 0) is refused too. Every
    comparison that allows compares all 64 bits (a pid with high bits set is not 0 to the filter,
    and is refused), and every one that refuses a command masks it to the 32 bits the kernel reads."""
    import pyseccomp as sc
    pid, deny = os.getpid(), sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(sc.ALLOW)
    for name in DENIED:
        _rule(f, deny, name)
    _rule(f, sc.ERRNO(errno.ENOSYS), "clone3")
    _rule(f, deny, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    for flag in CLONE_NEW:
        _rule(f, deny, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    for name in ON_ITSELF:
        _rule(f, deny, name, sc.Arg(0, sc.NE, 0))
    for name in TO_ITSELF:
        _rule(f, deny, name, sc.Arg(0, sc.NE, pid))
    for name, which in WHO_ITSELF.items():
        _rule(f, deny, name, sc.Arg(0, sc.NE, which))
        _rule(f, deny, name, sc.Arg(1, sc.NE, 0))
    _rule(f, deny, "fcntl", sc.Arg(1, sc.MASKED_EQ, INT, F_SETOWN), sc.Arg(2, sc.NE, pid))
    _rule(f, deny, "fcntl", sc.Arg(1, sc.MASKED_EQ, INT, F_SETOWN_EX))
    for request in (FIOSETOWN, SIOCSPGRP):
        _rule(f, deny, "ioctl", sc.Arg(1, sc.MASKED_EQ, INT, request))
    f.load()


def _rule(f, action, name, *args) -> None:
    """Add a rule, unless libseccomp does not know the call (then nothing can make it)."""
    import pyseccomp as sc
    if sc.resolve_syscall(sc.Arch.NATIVE, name) != NO_SUCH_CALL:
        f.add_rule(action, name, *args)
