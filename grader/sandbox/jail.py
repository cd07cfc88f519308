"""Confines a worker before any student code exists in it.

:func:`confine` runs in the worker itself, a fresh single-threaded fork of the
fork server (:mod:`forkserver`), along the :class:`~grader.sandbox.plan.Plan` the
trusted side made from :func:`probe`'s answer (the routes: :mod:`grader.sandbox.plan`).

With namespaces (``root``: directly; ``userns``: through a user namespace,
:func:`enter_userns`):

1. the network namespace has no interface up, so every connection fails at once;
   an IPC namespace of its own holds whatever System V or POSIX IPC object it makes,
   and goes with it;
2. a new, empty root file system (a tmpfs) into which only what the worker
   needs is bind-mounted read-only: the system directories (/usr, /lib, /etc,
   /dev, ...), a /proc of its own that shows only the processes it could trace
   (``hidepid``: none of the grader's; where it may mount one, else the host's),
   the Python installation, its virtual environment and every
   folder on the worker's ``sys.path``, each at its real path and, through the
   symbolic links recreated inside, at every path the worker reaches it by (a
   venv that is a symlink to a shared or cached one; :func:`exposed_paths`);
   and read-write, its scratch folder. Nothing else
   exists there: not the course repository (solutions, hidden tests, .git),
   not other submissions, not the grader's private files, not another copy of
   the course elsewhere on the machine. Paths in ``plan.hide`` that lie inside
   what is exposed (e.g. a labelled corpus in site-packages) are covered by
   empty mounts;
3. ``chroot`` into it.

Then, on every route:

4. resource limits (CPU seconds, address space, open files, file size, no core
   dumps, no POSIX message queue; processes where the limit counts the worker's own alone);
5. groups, gid and uid dropped to ``plan.uid`` (``setuid``: without namespaces;
   with none, the grader's own uid) and every capability dropped; no way back
   (no new privileges), and its memory unreadable to other processes of its uid;
6. the scratch directory as the working directory;
7. Landlock (:mod:`grader.sandbox.landlock`: of /proc only its own entry, so no other
   process is seen) and a seccomp filter (:mod:`grader.sandbox.syscalls`), where
   ``plan.landlock`` and ``plan.seccomp`` say so.

Any failure raises OSError: the worker then exits with status 97 and the
trusted side stops grading with a grader error instead of running it unconfined.
"""
from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import sys

from . import landlock, syscalls
from .plan import Plan, Probed, Route

CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWUSER, CLONE_NEWIPC = 0x00020000, 0x40000000, 0x10000000, 0x08000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 8192, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_STRICTATIME = 1024, 2048, 1 << 24

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
_pinned = []  # descriptors held for the worker's life (own_proc_pinned)


def hide(path: str) -> None:
    """Cover ``path`` with an empty tmpfs nobody can enter."""
    if os.path.isdir(path):
        mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=000")
    elif os.path.exists(path):
        mount("/dev/null", path, None, MS_BIND)


def expose(new_root: str, path: str, writable: bool = False) -> None:
    """Make ``path`` appear at the same place under ``new_root`` (a symlink stays a symlink; a
    file is bind-mounted onto an empty file)."""
    target = new_root + path
    if os.path.islink(path):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.lexists(target):
            os.symlink(os.readlink(path), target)
        return
    if os.path.isdir(path):
        os.makedirs(target, exist_ok=True)
    elif os.path.isfile(path):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.lexists(target):
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT, 0o644))
    else:
        return
    mount(path, target, None, MS_BIND | MS_REC)
    if not writable:
        mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | kept_flags(path))


def resolve(path: str, links: list, root: str = "", _depth: int = 0) -> str:
    """The real path of the absolute ``path`` as seen from ``root`` ("" for this process's own
    root; a new root for what a chrooted worker will see: an absolute link then means a path
    under ``root``), like :func:`os.path.realpath`; every symbolic link met on the way is
    appended to ``links`` as ``(where, text)``, ``where`` with real folders only."""
    if _depth > 40:
        raise OSError(f"too many levels of symbolic links resolving {path}")
    cur = "/"
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            cur = os.path.dirname(cur)
            continue
        nxt = os.path.join(cur, part)
        if os.path.islink(root + nxt):
            text = os.readlink(root + nxt)
            links.append((nxt, text))
            cur = resolve(os.path.join(cur, text), links, root, _depth + 1)
        else:
            cur = nxt
    return cur


def interpreter_paths() -> tuple[list, list]:
    """What this interpreter imports from, as it names them: (its prefixes and executable; every
    existing ``sys.path`` entry: the stdlib, site-packages, folders added by .pth files). A worker
    asks at confinement time, so a venv reached through a symlink or a bind mount, or living
    outside the project, is named as the worker will look for it."""
    own = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, sys.executable,
           os.path.dirname(sys.executable)]
    on_path = [p for p in sys.path if p and os.path.isabs(p)]
    keep = lambda paths: [p for p in dict.fromkeys(paths) if p and os.path.exists(p)]  # noqa: E731
    return keep(own), keep(on_path)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def exposed_paths(plan: Plan) -> tuple[list, list]:
    """(real paths to bind-mount, symbolic links ``(where, text)`` to recreate) so that the
    worker finds the interpreter and every folder on its ``sys.path`` both at its real path and
    at every path it is reached by. A ``sys.path`` entry inside the course (``plan.course``,
    e.g. a .pth naming the project) or above it is left out unless it lies in the interpreter's
    own prefixes (a ``.venv`` inside the project is the venv, not the course)."""
    own, on_path = interpreter_paths()
    links, reals = [], []
    own_real = []
    for path in [*plan.expose, *own]:
        found = []
        real = resolve(os.path.abspath(path), found)
        own_real.append(real)
        reals.append(real)
        links += found
    course = plan.course and os.path.realpath(plan.course)
    for path in on_path:
        found = []
        real = resolve(os.path.abspath(path), found)
        if course and not any(_within(real, p) for p in own_real) and (_within(real, course) or
                                                                      _within(course, real)):
            continue
        reals.append(real)
        links += found
    return list(dict.fromkeys(reals)), list(dict.fromkeys(links))


def kept_flags(path: str) -> int:
    """The flags of the mount holding ``path`` that a read-only remount must repeat: inside a user
    namespace the outer mount's nodev/noexec/atime flags are locked, and leaving one out is EPERM."""
    f = os.statvfs(path).f_flag
    flags = f & (MS_NOSUID | MS_NODEV | MS_NOEXEC)  # ST_NOSUID, ST_NODEV, ST_NOEXEC have the same values
    if f & os.ST_NOATIME:
        flags |= MS_NOATIME
    if f & os.ST_NODIRATIME:
        flags |= MS_NODIRATIME
    if not f & (os.ST_RELATIME | os.ST_NOATIME):
        flags |= MS_STRICTATIME
    return flags


def build_root(plan: Plan, reals: list, links: list) -> str:
    """An empty tmpfs with only what the worker needs mounted into it: the system folders, the
    interpreter and every folder on its ``sys.path`` (``reals``, at their real paths, with the
    symbolic ``links`` that lead there recreated: :func:`exposed_paths`), the scratch folder;
    ``plan.hide`` covered wherever the worker would reach it."""
    new_root = os.path.join(plan.stash, "root")
    os.makedirs(new_root, exist_ok=True)
    mount("tmpfs", new_root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")
    exposed = []
    for path in sorted(dict.fromkeys(SYSTEM + reals), key=len):  # a folder before what it holds
        if path == "/proc":
            mount_proc(new_root)
        elif not any(_within(path, e) for e in exposed):
            expose(new_root, path)  # a SYSTEM entry may be a symlink (/bin -> usr/bin): it stays one
            exposed.append(path)
    for where, text in links:  # ``where`` has real folders only: nothing below leads outside new_root
        if not os.path.lexists(new_root + where):  # else it is inside a mounted folder already
            os.makedirs(new_root + os.path.dirname(where), exist_ok=True)
            os.symlink(text, new_root + where)
    expose(new_root, plan.cwd, writable=True)
    os.makedirs(new_root + "/tmp", mode=0o1777, exist_ok=True)
    os.chmod(new_root + "/tmp", 0o1777)
    for path in plan.hide:
        # resolved inside the new root: a symlink there (a venv reached through one) must not lead
        # this mount outside it, and the secret is covered whichever path the worker takes to it
        inside = resolve(os.path.abspath(path), [], root=new_root)
        if os.path.lexists(new_root + inside):
            hide(new_root + inside)
    return new_root


def mount_proc(new_root: str) -> None:
    """A /proc of the worker's own under ``new_root``, read-only, that lists only the processes it
    could trace (``hidepid=invisible``, Linux 5.8+, which gives each mount its own options): none
    of the grader's, all of another uid or not dumpable. Where it may not mount one (a user
    namespace does not own the host's processes; an older kernel refuses the option), the
    host's, read-only; Landlock then hides the rest (:func:`grader.sandbox.landlock.own_proc`)."""
    os.makedirs(new_root + "/proc", exist_ok=True)
    try:
        mount("proc", new_root + "/proc", "proc", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible")
    except OSError:
        expose(new_root, "/proc")


def own_proc_pinned() -> list:
    """:func:`grader.sandbox.landlock.own_proc` for this process, its folder held open for the
    worker's life: Landlock allows an inode, and procfs makes a new one for a folder whose dentry
    the kernel has dropped (closing the descriptor would cost the worker only its own /proc)."""
    own = landlock.own_proc(os.getpid())
    if own:
        _pinned.append(os.open(own[-1], os.O_PATH | os.O_DIRECTORY))
    return own


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
    resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))  # a POSIX message queue outlives its process


def _unshare(flags: int) -> None:
    _check(libc.unshare(flags), "unshare")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def enter_userns(uid) -> None:
    """New user, mount, network and IPC namespaces without CAP_SYS_ADMIN outside.

    With ``uid`` (the grader has CAP_SETUID/CAP_SETGID, e.g. root in a container), a helper forked
    before the unshare, still outside, maps inside 0 to our own uid (for building the root) and
    ``uid`` to itself, so the worker can then become a uid of its own. Without, we map only our
    own uid (all an unprivileged process may map) and the worker stays the grader's user.
    """
    outer_uid, outer_gid = os.geteuid(), os.getegid()
    if uid is None:
        _unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC)
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{outer_uid} {outer_uid} 1\n")
        _write("/proc/self/gid_map", f"{outer_gid} {outer_gid} 1\n")
        return
    go_r, go_w = os.pipe()
    why_r, why_w = os.pipe()
    helper = os.fork()
    if helper == 0:
        os.close(go_w)
        os.close(why_r)
        code = 1
        try:
            if os.read(go_r, 1) == b"1":
                worker = os.getppid()
                _write(f"/proc/{worker}/uid_map", f"0 {outer_uid} 1\n{uid} {uid} 1\n")
                _write(f"/proc/{worker}/gid_map", f"0 {outer_gid} 1\n{uid} {uid} 1\n")
                code = 0
        except OSError as exc:
            os.write(why_w, f"mapping a separate uid: {exc.strerror or exc}".encode())
        os._exit(code)
    os.close(go_r)
    os.close(why_w)
    try:
        _unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC)
        os.write(go_w, b"1")
    finally:
        os.close(go_w)
        _, status = os.waitpid(helper, 0)
        why = os.read(why_r, 500).decode(errors="replace")
        os.close(why_r)
    if status != 0:
        raise OSError(why or "the uid-map helper failed")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


PR_SET_PDEATHSIG, PR_SET_NAME, PR_SET_DUMPABLE, PR_SET_SECUREBITS, PR_SET_NO_NEW_PRIVS = 1, 15, 4, 28, 38
SECBIT_NOROOT, SECBIT_NOROOT_LOCKED = 1, 2


def drop_capabilities() -> None:
    """No capability left (in a user namespace a uid change alone may keep them; root without
    namespaces keeps its uid), none regained by executing anything (not as uid 0, not through
    set-uid files)."""
    if os.geteuid() == 0:  # best effort (it needs CAP_SETPCAP): no_new_privs alone keeps an exec from gaining any
        libc.prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED, 0, 0, 0)
    hdr, data = _CapHeader(0x20080522, 0), (_CapData * 2)()  # _LINUX_CAPABILITY_VERSION_3
    _check(libc.capset(ctypes.byref(hdr), data), "capset")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl no_new_privs")
    with open("/proc/self/status") as f:
        caps = {k: int(v, 16) for k, v in (line.split(":") for line in f if line.startswith("Cap"))}
    if caps.get("CapEff") or caps.get("CapPrm") or caps.get("CapAmb"):
        raise OSError(f"capabilities left: {caps}")


def undumpable() -> None:
    """Other processes of this uid may not read or write this process's memory, environment or
    descriptors (``/proc/PID/mem`` and the like need ptrace access, which a non-dumpable process
    refuses to them). Every grader process calls it, and every worker after its last uid change
    (which resets it)."""
    _check(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl dumpable")


def name_process(name: str) -> None:
    """What ``ps`` and ``/proc/PID/comm`` call this process (at most 15 bytes): a fork keeps its
    parent's command line, so the name is what tells a forked session from a worker."""
    _check(libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0), "prctl name")


def die_with_parent(parent: int) -> None:
    """SIGKILL this process when the thread that started it (pid ``parent``) ends; at once if it already has."""
    _check(libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl pdeathsig")
    if os.getppid() != parent:
        os._exit(1)


def become(uid, gid) -> None:
    try:
        os.setgroups([])
    except PermissionError:  # a user namespace with setgroups denied keeps the grader's groups
        pass
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise OSError("could not drop privileges")


def confine(plan: Plan) -> None:
    """Confine this process along ``plan`` (the module's docstring, in order)."""
    route, uid = plan.route, plan.uid
    reals, links = exposed_paths(plan)  # before any uid change: a path this uid cannot reach would be dropped
    if route is Route.USERNS:
        gid = uid
        if uid is None:
            uid, gid = os.geteuid(), os.getegid()
        # it writes its own /proc/self/uid_map: a non-dumpable process (the fork server's child) may not
        _check(libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl dumpable")
        enter_userns(plan.uid)
        _check(libc.prctl(PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED, 0, 0, 0), "prctl securebits")
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        os.chroot(build_root(plan, reals, links))
        limit(plan.limits)
        become(uid, gid)
    elif route is Route.ROOT:
        _unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC)
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        os.chroot(build_root(plan, reals, links))
        limit(plan.limits)
        become(uid, uid)
    elif route is Route.SETUID:
        limit(plan.limits)
        become(uid, uid)
    else:
        limit(plan.limits)
    drop_capabilities()
    undumpable()
    os.chdir(plan.cwd)
    if plan.landlock:
        readable = [p for p in SYSTEM if p != "/proc"] + own_proc_pinned() + reals
        landlock.restrict(readable, [plan.cwd], plan.hide, plan.course, plan.landlock)
    if plan.seccomp:
        syscalls.install()


def _attempt(plan: Plan, then=None):
    """Confine a throwaway child with ``plan`` (None: not at all), then call ``then`` in it: (what
    ``then`` returned, a JSON value, and None) if it worked, else (None, why not)."""
    why_r, why_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(why_r)
        try:
            if plan is not None:
                confine(plan)
            os.write(why_w, json.dumps(then() if then is not None else None).encode())
            os._exit(0)
        except BaseException as exc:  # noqa: BLE001 - report any failure, never return
            os.write(why_w, (str(exc) or type(exc).__name__).encode())
            os._exit(1)
    os.close(why_w)
    chunks = []
    while chunk := os.read(why_r, 1 << 16):
        chunks.append(chunk)
    os.close(why_r)
    text = b"".join(chunks).decode(errors="replace")
    _, status = os.waitpid(pid, 0)
    return (json.loads(text), None) if status == 0 else (None, text or f"status {status}")


def _nproc_counts_this_namespace() -> None:
    """Raise unless RLIMIT_NPROC counts only the processes of this user namespace (Linux 5.14 and
    later count it per namespace): with a limit of 2, one fork fits in a fresh namespace, never
    where the grader's own processes (at least the grader, the probe and this child) count too."""
    resource.setrlimit(resource.RLIMIT_NPROC, (2, 2))
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def _usable(needed, secrets) -> dict:
    """In a confined child: raise unless every path ``needed`` (what the worker imports from, named
    before confinement) can be read (a uid of its own may not read a Python installation under
    /root); the ``secrets`` it can read, and whether it sees the command line of its parent (a
    grader process, as a worker's is)."""
    for path in needed:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            os.close(os.open(path, os.O_RDONLY))
    return {"readable": [path for path in secrets if _can_read(path)],
            "sees_grader": _can_read(f"/proc/{os.getppid()}/cmdline")}


def _can_read(path: str, files: int = 50) -> bool:
    """Whether a file, or one of the first ``files`` files beneath a folder, opens for reading (a
    folder that may be listed but none of whose files may be read holds nothing readable)."""
    if not os.path.isdir(path):
        try:
            os.close(os.open(path, os.O_RDONLY))
            return True
        except OSError:
            return False
    for folder, _, names in os.walk(path):
        for name in names[:files]:
            if _can_read(os.path.join(folder, name)):
                return True
            files -= 1
        if files <= 0:
            break
    return False


def _mechanism(install) -> str:
    """Why a throwaway child could not ``install`` a mechanism ("" if it could)."""
    def then():
        _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl no_new_privs")
        install()
    _, why = _attempt(None, then)
    return why or ""


ATTEMPTS = ((Route.ROOT, "root", True), (Route.USERNS, "userns_uid", True), (Route.USERNS, "userns", False),
            (Route.SETUID, "setuid", True), (Route.NONE, "none", False))


def probe(uid: int, secrets=(), course=None) -> Probed:
    """What this machine allows, tried for real in throwaway children: Landlock and seccomp each
    on their own, then each route strongest first, with every mechanism that worked, until one
    confines a child that can still read what a worker imports. ``readable``: which of
    ``secrets`` that child could still read."""
    import shutil  # start-up: only the probe needs it, never a worker
    import tempfile  # start-up: same
    tmp = tempfile.mkdtemp(prefix="grader-probe-")
    os.chmod(tmp, 0o711)
    version, landlock_why = landlock.abi()
    if version:
        landlock_why = _mechanism(lambda: landlock.restrict([], [], [], version=version))
        version = 0 if landlock_why else version
    seccomp, seccomp_why = syscalls.version()
    if seccomp:
        seccomp_why = _mechanism(syscalls.install)
        seccomp = "" if seccomp_why else seccomp
    whys, needed = {}, None
    try:
        for n, (route, name, with_uid) in enumerate(ATTEMPTS):
            cwd = os.path.join(tmp, f"cwd{n}")
            os.makedirs(cwd)
            plan = Plan(route, cwd, {}, {"cpu_s": 60, "memory_mb": 8192, "file_mb": 16, "open_files": 256},
                        uid=uid if with_uid else None, landlock=version, seccomp=bool(seccomp),
                        hide=list(secrets), course=course, stash=os.path.join(tmp, f"stash{n}"))
            needed = needed or exposed_paths(plan)[0]
            seen = None
            try:
                if with_uid:
                    os.chown(cwd, uid, uid)
                seen, whys[name] = _attempt(plan, then=lambda needed=needed: _usable(needed, secrets))
            except OSError as exc:
                whys[name] = f"{exc.strerror or exc}"
            if whys[name] is None:
                del whys[name]
                found = Probed(route, with_uid, whys, landlock=version, landlock_why=landlock_why, seccomp=seccomp,
                               seccomp_why=seccomp_why, readable=seen["readable"], sees_grader=seen["sees_grader"])
                if route is Route.USERNS and not with_uid:  # (seccomp would refuse the fork: what counts where it
                    os.makedirs(cwd + "-nproc")                # cannot be had is what the limit counts)
                    plan.cwd, plan.seccomp = cwd + "-nproc", False
                    found.nproc_in_userns = _attempt(plan, then=_nproc_counts_this_namespace)[1] is None
                return found
        raise OSError("no route confined a child: " + "; ".join(f"{k}: {v}" for k, v in whys.items()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def probe_as_asked(asked: dict) -> Probed:
    """:func:`probe` as the trusted side asks for it (``grader.engine.isolation``): ``{"uid": UID,
    "secrets": [PATH, ...], "course": PATH}``, in a fresh interpreter (:func:`probe_program`) or in a
    fork server before it imports its library (``forkserver.probe``)."""
    return probe(asked["uid"], asked.get("secrets", ()), asked.get("course"))


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the folder holding grader/


def probe_program(asked: dict, root: str = ROOT) -> str:
    """A program that prints :func:`probe_as_asked`'s answer to ``asked`` as JSON, for ``python -I -`` to
    read on its standard input: neither the request (the secrets' paths) nor the course folder (``root``,
    which holds grader/) is in that process's command line, which any process may read in /proc."""
    return (f"import json, sys\nsys.path.insert(0, {root!r})\nfrom grader.sandbox.jail import probe_as_asked\n"
            f"print(probe_as_asked(json.loads({json.dumps(asked)!r})).to_json())\n")
