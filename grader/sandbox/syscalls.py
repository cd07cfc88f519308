"""seccomp: the system calls a worker may not make, installed by the worker itself.

A filter needs no privilege (only ``PR_SET_NO_NEW_PRIVS``, which the worker sets) and
works inside Docker's default seccomp profile, which stacks with it. Everything is
allowed but (each refused with EPERM):

* ``socket`` of any family (``socketpair`` stays): no network, no unix socket either;
* reading or writing another process (``ptrace``, ``process_vm_readv``/``writev``,
  ``pidfd_getfd``) and what could reach beyond the worker: namespaces, mounts,
  keyrings, BPF, perf events, userfaultfd, io_uring, file handles, modules;
* ``clone`` with any namespace flag; ``clone3`` answers ENOSYS (as in Docker's profile),
  so that glibc falls back to ``clone``, whose flags a filter can read;
* where the worker keeps the grader's uid (``shared_uid``): signals to any process but
  itself (``kill``, ``tgkill``, ``rt_sigqueueinfo`` to another pid; ``tkill``,
  ``pidfd_send_signal``);
* where no processes limit can count the worker's processes alone (``new_processes``
  False): ``fork``, ``vfork`` and ``clone`` without ``CLONE_THREAD`` (threads stay).

Built with libseccomp through pyseccomp (ctypes bindings with the API of libseccomp's
own Python module, which is not on PyPI); the library is loaded before the worker is
confined. A system call of another architecture (32-bit ``int 0x80``) kills the worker.
"""
from __future__ import annotations

import ctypes
import errno
import os

DENIED = ("socket", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
          "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
          "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
          "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
          "io_uring_setup", "io_uring_enter", "io_uring_register",
          "open_by_handle_at", "name_to_handle_at", "kexec_load", "kexec_file_load",
          "init_module", "finit_module", "delete_module", "swapon", "swapoff", "reboot", "acct", "quotactl")
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


def install(shared_uid: bool, new_processes: bool) -> None:
    """Load the filter into this process (and what it starts). Raises OSError if refused."""
    import pyseccomp as sc
    pid, deny = os.getpid(), sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(sc.ALLOW)
    for name in DENIED:
        _rule(f, deny, name)
    _rule(f, sc.ERRNO(errno.ENOSYS), "clone3")
    for flag in CLONE_NEW:
        _rule(f, deny, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    if shared_uid:
        for name in ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
            _rule(f, deny, name, sc.Arg(0, sc.NE, pid))
        _rule(f, deny, "tkill")
        _rule(f, deny, "pidfd_send_signal")
    if not new_processes:
        _rule(f, deny, "fork")
        _rule(f, deny, "vfork")
        _rule(f, deny, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    f.load()


def _rule(f, action, name, *args) -> None:
    """Add a rule, unless libseccomp does not know the call (then nothing can make it)."""
    import pyseccomp as sc
    if sc.resolve_syscall(sc.Arch.NATIVE, name) != NO_SUCH_CALL:
        f.add_rule(action, name, *args)
