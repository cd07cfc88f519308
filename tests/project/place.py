"""Run a command the way a place would: under a real seccomp filter, installed from outside the grader.

    python tests/project/place.py host|docker|apparmor [--no-landlock] [--no-seccomp] [--refuse-processes-limit] \
                                  -- COMMAND...

``host``: nothing refused but what the options say. ``docker``: Docker's default seccomp profile as it
answers a container without CAP_SYS_ADMIN where namespaces are concerned: ``unshare`` and ``setns`` give
EPERM, ``clone`` with any ``CLONE_NEW*`` flag EPERM, ``clone3`` ENOSYS (so that glibc falls back to
``clone``, whose flags the filter can read).
``apparmor``: Ubuntu's AppArmor restriction of unprivileged user namespaces (23.10 and later): a new
user namespace may be made, but it holds no capability, so mount, network, pid (and every other)
namespace and ``mount`` itself give EPERM. ``--no-landlock``: the three ``landlock_*`` calls give ENOSYS,
as on a kernel before 5.13 or under a profile that does not list them. ``--no-seccomp``: no later
seccomp filter loads (``seccomp`` and ``prctl(PR_SET_SECCOMP)`` give EINVAL), as where the kernel has no
seccomp filters or the machine no libseccomp for the grader's pyseccomp. ``--refuse-processes-limit``:
setting RLIMIT_NPROC gives EPERM, a limit the grader's probe never sets but a worker with a uid of
its own does: the probe says every layer is there, then every worker fails to confine itself.

The filter is loaded here, then COMMAND is executed with it: every process COMMAND starts (the grader,
its fork servers, its workers) inherits it, as in a container. Dropping capabilities or the uid is
COMMAND's part (``setpriv``). Loaded as root, no ``no_new_privs`` is set (Docker sets none either); any
other user needs it to load a filter.
"""
import argparse
import errno
import os

import pyseccomp as sc

CLONE_NEWUSER = 0x10000000
CLONE_NEW = {"NEWNS": 0x00020000, "NEWCGROUP": 0x02000000, "NEWUTS": 0x04000000, "NEWIPC": 0x08000000,
             "NEWUSER": CLONE_NEWUSER, "NEWPID": 0x20000000, "NEWNET": 0x40000000}


RLIMIT_NPROC = 6
PR_SET_SECCOMP = 22


def place_filter(place: str, landlock: bool, processes_limit: bool = True, seccomp: bool = True) -> sc.SyscallFilter:
    f = sc.SyscallFilter(sc.ALLOW)
    # libseccomp sets no_new_privs when it loads a filter; root needs none (Docker sets none either)
    f.set_attr(sc.Attr.CTL_NNP, 0 if os.geteuid() == 0 else 1)
    eperm = sc.ERRNO(errno.EPERM)
    if not processes_limit:  # prlimit64(pid, RLIMIT_NPROC, new != NULL, old), setrlimit(RLIMIT_NPROC, ...)
        f.add_rule(eperm, "prlimit64", sc.Arg(1, sc.EQ, RLIMIT_NPROC), sc.Arg(2, sc.NE, 0))
        f.add_rule(eperm, "setrlimit", sc.Arg(0, sc.EQ, RLIMIT_NPROC))
    if not seccomp:
        f.add_rule(sc.ERRNO(errno.EINVAL), "seccomp")
        f.add_rule(sc.ERRNO(errno.EINVAL), "prctl", sc.Arg(0, sc.EQ, PR_SET_SECCOMP))
    if place == "host":
        return _landlock_rules(f, landlock)
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    refused = [flag for name, flag in CLONE_NEW.items() if place == "docker" or name != "NEWUSER"]
    for flag in refused:
        f.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
        if place == "apparmor":
            f.add_rule(eperm, "unshare", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    if place == "docker":
        f.add_rule(eperm, "unshare")
        f.add_rule(eperm, "setns")
    else:
        f.add_rule(eperm, "setns")
        f.add_rule(eperm, "mount")
    return _landlock_rules(f, landlock)


def _landlock_rules(f: sc.SyscallFilter, landlock: bool) -> sc.SyscallFilter:
    if not landlock:
        for name in ("landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"):
            f.add_rule(sc.ERRNO(errno.ENOSYS), name)
    return f


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("place", choices=("host", "docker", "apparmor"))
    parser.add_argument("--no-landlock", action="store_true")
    parser.add_argument("--no-seccomp", action="store_true")
    parser.add_argument("--refuse-processes-limit", action="store_true")
    parser.add_argument("command", nargs="+")
    args = parser.parse_args()
    place_filter(args.place, not args.no_landlock, not args.refuse_processes_limit, not args.no_seccomp).load()
    os.execvp(args.command[0], args.command)


if __name__ == "__main__":
    main()
