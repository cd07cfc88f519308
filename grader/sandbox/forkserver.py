"""The fork server: forks one confined worker per stage from a process that has
already imported numpy (and torch).

A fresh interpreter per worker paid numpy's import every stage, and torch,
``torch._dynamo`` (imported by the first optimizer) and sympy (by
``torch.broadcast_shapes``) about 3 CPU-seconds per torch stage. Instead the
trusted grading session starts one fork server per library it needs
(:mod:`grader.engine.forkservers`), as a **new interpreter**
(``python -I - FD PARENT_PID``, :func:`command`: the few lines that import this module come on
its standard input, so its command line, which its forks keep and any process may read in
/proc, names no path of the course): never a fork of the session,
so no hidden test, reference solution or fixture the session has read can be in
a worker's memory. The server imports only this public package and the library
it is told to serve, then waits. For each worker it forks a child that

1. takes its three descriptors (requests in, replies out, stderr) and closes
   every other one, and replaces its environment with the worker's;
2. prepares the stage (course-provided stand-ins and probes, :meth:`Worker.prepare`);
3. confines itself (:func:`jail.confine`: namespaces, a new root, limits, an
   unprivileged uid); if any of 1-3 fails it exits with status 97 and one line
   on stderr, never running unconfined;
4. serves the stage (:func:`runtime.serve`) and exits, never returning here.

Where a worker has a uid of its own but no seccomp filter (which would refuse a new process and
System V IPC), the server, once it has reaped that worker, kills every process of its uid and
removes the System V IPC objects it created (:func:`sweep`): nothing it started or made outlives it.

Messages on a Unix stream socket pair (:func:`send_message`, :func:`receive_message`:
a 4-byte length, then JSON; descriptors ride along), one request at a time (the
session is single-threaded). A server starts before its grading knows which library it
needs, so its interpreter starts beside the grading's own imports; asked first to probe (the
request of :func:`jail.probe_as_asked`) it runs the isolation probe, before any library is
imported, and says what it found:

  {"op": "probe", "asked": ASKED}             -> {"probed": PROBED_JSON} or {"probed": null, "why": "..."}
                                                 (optional, first)
  {"op": "preload", "library": "numpy"}       -> {"ready": true}   (once, before any other)
  {"op": "spawn", "config": RUNTIME_CONFIG, "plan": JAIL_PLAN} + 3 descriptors -> {"pid": N}
  {"op": "run"} + 4 descriptors (spec, stdout, stderr, done)             -> {"pid": N}
  {"op": "wait", "pid": N, "timeout": S}  -> {"returncode": C or null (still running)}

``returncode`` follows ``subprocess``: the exit status, or minus the signal.

**The trusted session is a fork too** (``run``): the grading process asks the server of the heaviest
library it needs to fork a child that runs ``python -m grader.engine.session ...`` (:func:`_run_child`),
so the session finds numpy and torch imported and shares their pages with the server and its workers (a
whole grading's peak memory and one torch import less). The direction is what keeps it safe: the session
is forked from the server, never the reverse, and the server never reads what it is asked to run
(module, arguments, environment): they come in a file the child opens after the fork (``spec``). The
child gets a connection of its own to the server, named in its environment (``CONNECTION_ENV``:
``LIBRARY:FD``), and asks for its workers through it; ``done`` stays open in the child until it exits,
so its parent can wait for it without asking the server.
"""
from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import struct
import sys
import time
import traceback

MAX_MESSAGE = 1 << 20
SETUP_FAILED = 97
CONNECTION_ENV = "GRADER_FORKSERVER"
MAX_FDS = 4  # descriptors riding along one message
SESSION_NAME = "grader-session"  # a forked session's process name (``ps``, /proc/PID/comm)
SERVER_NAME = "grader-{library}"  # a server's, once it serves a library (its workers keep it)
EARLY_NAME = "grader-server"  # a server's before it is told its library
IPC_RMID = 0


def send_message(sock: socket.socket, msg: dict, fds=()) -> None:
    data = json.dumps(msg).encode()
    data = struct.pack(">I", len(data)) + data
    sent = socket.send_fds(sock, [data], list(fds))
    if sent < len(data):  # (sending nothing more to a peer that has read all and left would fail: EPIPE)
        sock.sendall(data[sent:])


def receive_message(sock: socket.socket, with_fds: bool = False):
    """The next message (and the descriptors sent with it); None when the peer closed."""
    head, fds, _, _ = socket.recv_fds(sock, 4, MAX_FDS) if with_fds else (sock.recv(4), [], 0, None)
    while head and len(head) < 4:
        more = sock.recv(4 - len(head))
        if not more:
            break
        head += more
    if len(head) < 4:
        return (None, fds) if with_fds else None
    (length,) = struct.unpack(">I", head)
    if length > MAX_MESSAGE:
        raise ValueError(f"a message of {length} bytes")
    body = b""
    while len(body) < length:
        more = sock.recv(length - len(body))
        if not more:
            raise EOFError("the peer closed in the middle of a message")
        body += more
    msg = json.loads(body)
    return (msg, fds) if with_fds else msg


def preload(library: str) -> None:
    """Import what every worker (and the session) of ``library`` would otherwise import itself. Linux
    only: elsewhere (macOS) a fork of a process that loaded the system's numerical frameworks is
    not safe, so each worker imports them after the fork, as a fresh interpreter would."""
    if sys.platform != "linux":
        return
    import numpy  # noqa: F401

    from . import forbid, jail, landlock, protocol, runtime, syscalls  # noqa: F401  fork-safety: see the docstring
    landlock.abi()  # loads landlockpy, as syscalls.version() loads libseccomp: before any fork
    syscalls.version()
    if library == "torch":
        import torch  # noqa: F401
        import torch.nn.functional  # noqa: F401
    gc.freeze()  # the forks' collections skip the libraries (and do not write to their shared pages)


def warm_up(library: str) -> None:
    """What only workers use, imported once the server is idle: a session waiting to be forked
    does not wait for it (it is ~1.2 s of a torch server's start)."""
    if sys.platform == "linux" and library == "torch":
        import torch._dynamo  # noqa: F401  (the first torch.optim optimizer imports it)
        import torch.fx.experimental.symbolic_shapes  # noqa: F401  (torch.broadcast_shapes: sympy)
        gc.freeze()


class Server:
    def __init__(self, sock: socket.socket, library: str):
        self.library = library
        self.connections = [sock]  # the grading process's; a forked session adds its own
        self.warm = False
        self.finished: dict[int, int] = {}  # pid -> returncode, reaped before anyone asked
        self.sweep_after: dict[int, int] = {}  # worker pid -> its uid, swept once it is reaped (see sweep)

    def serve(self) -> None:
        send_message(self.connections[0], {"ready": True})
        while self.connections:  # until every peer has closed its end
            ready, _, _ = select.select(self.connections, [], [], None if self.warm else 0)
            if not ready:
                warm_up(self.library)
                self.warm = True
            for conn in ready:
                self.answer(conn)

    def answer(self, conn: socket.socket) -> None:
        try:
            req, fds = receive_message(conn, with_fds=True)
        except (ConnectionError, EOFError):
            req, fds = None, []
        if req is None:  # this peer closed its end
            self.connections.remove(conn)
            conn.close()
            return
        self.reap()
        try:
            if req["op"] == "spawn":
                send_message(conn, {"pid": self.spawn(req, fds)})
            elif req["op"] == "run":
                send_message(conn, {"pid": self.run(fds)})
            elif req["op"] == "wait":
                send_message(conn, {"returncode": self.wait(req["pid"], req.get("timeout", 0))})
        except (BrokenPipeError, ConnectionError):  # the peer left without its answer: it alone is gone
            self.connections.remove(conn)
            conn.close()
        finally:
            for fd in fds:
                os.close(fd)

    def spawn(self, req: dict, fds: list) -> int:
        pid = os.fork()
        if pid == 0:
            try:
                _child(req["config"], req["plan"], *fds)  # never returns
            finally:
                os._exit(SETUP_FAILED)  # not even with a malformed request
        plan = req.get("plan") or {}
        if isinstance(plan.get("uid"), int) and not plan.get("seccomp"):
            self.sweep_after[pid] = plan["uid"]
        return pid

    def run(self, fds: list) -> int:
        """Fork the trusted session (see the module's docstring), with a connection of its own."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        server = os.getpid()
        pid = os.fork()
        if pid == 0:
            try:
                _run_child(self.library, server, theirs.fileno(), *fds)  # never returns
            finally:
                os._exit(SETUP_FAILED)  # not even with a malformed request
        theirs.close()
        self.connections.append(ours)
        return pid

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.finished[pid] = os.waitstatus_to_exitcode(status)
            if pid in self.sweep_after:
                sweep(self.sweep_after.pop(pid))

    def wait(self, pid: int, timeout: float):
        """The return code of the child ``pid`` once it has exited, or None if it still runs after
        ``timeout`` seconds (or is not a child of this server)."""
        if pid not in self.finished and not _exited(pid):
            _until_exit(pid, timeout)
        self.reap()
        return self.finished.pop(pid, None)


def sweep(uid: int) -> None:
    """Kill every process of ``uid`` and remove the System V IPC objects it created, as that uid, in a
    child of this server (``kill(-1)`` reaches exactly the processes a uid may signal: its own)."""
    from .jail import libc  # fork-safety: see preload
    pid = os.fork()
    if pid == 0:
        try:
            os.setresuid(uid, uid, uid)
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:  # none left
                pass
            remove = {"shm": lambda i: libc.shmctl(i, IPC_RMID, None), "msg": lambda i: libc.msgctl(i, IPC_RMID, None),
                      "sem": lambda i: libc.semctl(i, 0, IPC_RMID)}
            for kind in remove:
                for ident in _ipc_created_by(kind, uid):
                    remove[kind](ident)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _ipc_created_by(kind: str, uid: int) -> list:
    """The ids of the System V IPC objects of ``kind`` (shm, msg, sem) whose creator is ``uid`` (an owner can
    be changed, a creator cannot): /proc/sysvipc/KIND, a header line naming the columns."""
    try:
        with open(f"/proc/sysvipc/{kind}") as f:
            header, *rows = [line.split() for line in f]
    except (OSError, ValueError):
        return []
    ident, cuid = header.index({"shm": "shmid", "msg": "msqid", "sem": "semid"}[kind]), header.index("cuid")
    return [int(row[ident]) for row in rows if int(row[cuid]) == uid]


def _until_exit(pid: int, timeout: float) -> None:
    """Return once the child ``pid`` has exited (not reaping it), or after ``timeout`` seconds: woken
    by its pidfd (Linux 5.3+), else by asking every 5 ms (a kernel or seccomp profile without
    ``pidfd_open``; not Linux)."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not _exited(pid):
            time.sleep(0.005)
        return
    try:
        select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)


def _exited(pid: int) -> bool:
    """Whether the child ``pid`` has exited (or is no child of this process), leaving it to be reaped."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _child(config: dict, plan: dict, in_fd: int, out_fd: int, err_fd: int) -> None:
    """The worker, from fork to exit."""
    from . import jail, runtime  # fork-safety: numpy only after the fork outside Linux (see preload)
    from .plan import Plan  # fork-safety: same
    code = 0
    try:
        os.setsid()  # its own process group: the session kills the group
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(err_fd, 2)
        _keep_only({in_fd, out_fd})
        plan = Plan.from_json(plan)
        os.environ.clear()
        os.environ.update(plan.env)
        import tempfile
        tempfile.tempdir = None  # so TMPDIR (the scratch folder) is read again
        sys.path[:] = [p for p in sys.path if p != jail.ROOT]
        sys.dont_write_bytecode = True  # no __pycache__ beside the submission
        worker = runtime.Worker(config)
        worker.prepare()
        jail.confine(plan)
    except BaseException as exc:  # noqa: BLE001 - never run a worker that is not set up and confined
        os.write(2, f"grader worker set-up: {type(exc).__name__}: {exc}\n".encode(errors="replace"))
        os._exit(SETUP_FAILED)
    try:
        runtime.serve(worker, in_fd, out_fd, config)
    except BaseException:  # noqa: BLE001 - whatever happens, never return into the server loop
        code = 1
        try:
            os.write(2, traceback.format_exc()[-4000:].encode(errors="replace"))
        except OSError:
            pass
    os._exit(code)


def _keep_only(fds) -> None:
    """Close every descriptor but 0, 1, 2 and ``fds`` (all else the server had open)."""
    keep = sorted({0, 1, 2, *fds})
    for low, high in zip(keep, keep[1:] + [os.sysconf("SC_OPEN_MAX")]):
        os.closerange(low + 1, high)


def _run_child(library: str, server: int, conn_fd: int, spec_fd: int, out_fd: int, err_fd: int,
               done_fd: int) -> None:
    """The forked session, from fork to exit: ``python -m MODULE ARGV`` with the spec's environment,
    folder and import path, its output in ``out_fd``/``err_fd``; it dies with the ``server``."""
    import runpy

    from . import jail  # fork-safety: see preload
    code = 1
    try:
        os.setsid()  # its own process group: its parent kills the group on a timeout
        jail.die_with_parent(server)  # the server dies with the process that started it: so does its session
        jail.name_process(SESSION_NAME)
        with os.fdopen(spec_fd) as f:
            spec = json.load(f)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        _keep_only({conn_fd, done_fd})
        os.environ.clear()
        os.environ.update(spec["env"])
        os.environ[CONNECTION_ENV] = f"{library}:{conn_fd}"
        if "tempfile" in sys.modules:
            sys.modules["tempfile"].tempdir = None  # so TMPDIR is read again
        os.chdir(spec["cwd"])
        sys.path[:0] = spec["path"]
        sys.argv = [spec["module"], *spec["argv"]]
        runpy.run_module(spec["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - whatever happens, never return into the server loop
        os.write(2, traceback.format_exc()[-4000:].encode(errors="replace"))
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def command(fd: int, parent: int) -> tuple[list, str]:
    """How to start a server: (its command line, what to write on its standard input). ``FD`` is its end
    of the socket pair, ``PARENT_PID`` the process it dies with; the program comes on standard input."""
    from .jail import ROOT  # fork-safety: see preload (the trusted side, which calls this, has it already)
    return ([sys.executable, "-I", "-", str(fd), str(parent)],
            f"import sys\nsys.path.insert(0, {ROOT!r})\nfrom grader.sandbox.forkserver import main\nmain()\n")


def probe(asked: dict) -> dict:
    """The isolation probe asked for (:func:`jail.probe_as_asked`), run before any library is imported
    and before any thread starts (it forks throwaway children): the message that says what it found."""
    from . import jail  # fork-safety: see preload
    try:
        return {"probed": jail.probe_as_asked(asked).to_json()}
    except Exception as exc:  # noqa: BLE001 - what failed is the answer; the server serves on
        return {"probed": None, "why": f"{type(exc).__name__}: {exc}"}


def main() -> None:
    """The server, started by :func:`command`."""
    from . import jail  # fork-safety: see preload
    fd, parent = int(sys.argv[1]), int(sys.argv[2])
    jail.die_with_parent(parent)  # and its forked sessions with it (theirs die with them)
    jail.undumpable()  # a worker that shares its uid may not read its memory
    jail.name_process(EARLY_NAME)
    sock = socket.socket(fileno=fd)
    first = receive_message(sock)
    if first is not None and first.get("op") == "probe":
        send_message(sock, probe(first["asked"]))
        first = receive_message(sock)
    if first is None:  # the grading needed no worker of this server
        return
    if first.get("op") != "preload":
        raise ValueError(f"the first request must name the library: {first}")
    library = first["library"]
    jail.name_process(SERVER_NAME.format(library=library))
    preload(library)
    Server(sock, library).serve()

