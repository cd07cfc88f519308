"""The fork servers of one grading session: one per library, started once.

Each is a new interpreter running :mod:`grader.sandbox.forkserver` that has
imported numpy (and torch) and forks a confined worker per stage on request.
The session starts the ones its stages need when it starts
(:func:`start`), so torch's import overlaps the numpy stages; :func:`get`
starts one on first use otherwise, which is equally safe: a server is never a
fork of the session, so it holds nothing the session has read.

A grading that runs its session in a process of its own has that session forked by the server of
its heaviest library (:meth:`ForkServer.run_module`), so the session does not import torch again
and shares those pages with the server and the workers. Such a session finds its connection to
the server in its environment, and :func:`get` uses it.
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import tempfile
import threading
from dataclasses import dataclass

from grader.sandbox.forkserver import CONNECTION_ENV, command, receive_message, send_message

from . import isolation

_servers: dict = {}  # (library, threads) -> ForkServer
_early: dict = {}  # threads -> a ForkServer started before the submission was read, no library yet (start_soon)


class ForkServerFailed(RuntimeError):
    pass


@dataclass(frozen=True)
class Forked:
    """A child forked by :meth:`ForkServer.fork_module`."""
    pid: int
    done: int  # read end of a pipe the child holds open until it exits


class ForkServer:
    def __init__(self, library: str | None, env: dict | None = None, connection: socket.socket | None = None,
                 probe: dict | None = None):
        """Start a server for ``library`` with ``env``, or talk to a running one over ``connection``
        (a session forked by it: the server is its parent's, to start and stop). ``library`` None: the
        first :meth:`load` names it; ``probe``: the isolation probe asked runs in the server first
        (:meth:`probed`)."""
        self.library = library
        self.proc = self._stderr = None
        ours = connection is None
        self.ready = not ours
        self._probe_pending = probe is not None
        if ours:
            connection, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            self._stderr = tempfile.TemporaryFile()
            argv, program = command(theirs.fileno(), os.getpid())
            self.proc = subprocess.Popen(argv, pass_fds=(theirs.fileno(),), env=env, cwd="/", stdin=subprocess.PIPE,
                                         stdout=subprocess.DEVNULL, stderr=self._stderr)
            with self.proc.stdin:
                self.proc.stdin.write(program.encode())
            theirs.close()
        self.sock = connection
        self.failed = None  # after one failure (a timeout may leave a late reply behind) every request fails
        self.traits = _traits(self.proc.pid) if ours else None
        if ours and probe is not None:
            self._tell({"op": "probe", "asked": probe})
        if ours and library is not None:
            self.load(library)

    def load(self, library: str) -> None:
        """Tell a server started without its library to import ``library`` and serve it (it answers
        "ready" before the first request is answered)."""
        self.library = library
        self._tell({"op": "preload", "library": library})

    def _tell(self, msg: dict) -> None:
        """Send ``msg``, whose answer comes later (or none)."""
        try:
            send_message(self.sock, msg)
        except OSError as exc:  # it has died already: its first request says why
            self.failed = self._why(exc)

    def probed(self, timeout: float = 60.0) -> str:
        """The answer of the probe this server was started with: the JSON text of ``Probed``; raises
        ``isolation.ProbeFailed`` when the probe failed or the server never answered."""
        try:
            self.sock.settimeout(timeout)
            answer = self._receive()
        except (OSError, EOFError, ValueError) as exc:
            self.failed = self._why(exc)
            raise isolation.ProbeFailed(self.failed) from None
        finally:
            self._probe_pending = False
        if answer.get("probed") is None:
            raise isolation.ProbeFailed(str(answer.get("why") or answer))
        return answer["probed"]

    @property
    def alive(self) -> bool:
        """Still serving: not failed, and (when it is ours) its process still running."""
        return not self.failed and (self.proc is None or self.proc.poll() is None)

    @property
    def unchanged(self) -> bool:
        """Its limits, nice value, scheduling and CPUs are what they were when it started (what a worker
        of its uid could change with one call, were nothing to refuse it; its workers inherit them)."""
        return self.traits is not None and _traits(self.proc.pid) == self.traits

    def _ask(self, msg: dict, fds=(), timeout: float = 60.0) -> dict:
        if self.failed:
            raise ForkServerFailed(self.failed)
        self.sock.settimeout(timeout)
        try:
            if self._probe_pending:  # the probe's answer, which nobody collected, comes first
                self._receive()
                self._probe_pending = False
            if not self.ready:
                self._receive()
                self.ready = True
            send_message(self.sock, msg, fds)
            return self._receive()
        except (OSError, EOFError, ValueError) as exc:
            self.failed = self._why(exc)
            raise ForkServerFailed(self.failed) from None

    def _receive(self) -> dict:
        msg = receive_message(self.sock)
        if msg is None:
            raise EOFError("the fork server exited")
        return msg

    def _why(self, exc) -> str:
        tail = ""
        if self._stderr is not None:
            self._stderr.seek(0)
            tail = self._stderr.read()[-1500:].decode(errors="replace").strip()
        why = f"the grader's {self.library or 'early'} fork server failed ({type(exc).__name__}: {exc})"
        return f"{why}: {tail}" if tail else why

    def spawn(self, config: dict, plan: dict, fds, timeout: float) -> int:
        """Fork a worker that uses ``fds`` (requests in, replies out, stderr); its pid.
        ``timeout`` covers the server's own start-up the first time."""
        return self._ask({"op": "spawn", "config": config, "plan": plan}, fds, timeout)["pid"]

    def wait(self, pid: int, timeout: float = 0.0):
        """The worker's return code (``subprocess`` style), or None if it still runs after ``timeout``."""
        return self._ask({"op": "wait", "pid": pid, "timeout": timeout}, timeout=timeout + 30)["returncode"]

    def fork_module(self, module: str, argv: list, env: dict, cwd: str, path: list, stdout: int,
                    stderr: int) -> Forked:
        """Start ``python -m MODULE ARGV`` (with ``env``, in ``cwd``, ``path`` first on its import path) as a
        fork of the server, its output going to the descriptors ``stdout`` and ``stderr``. The server never
        reads the spec: the child opens it after the fork."""
        spec = {"module": module, "argv": list(argv), "env": env, "cwd": cwd, "path": list(path)}
        with tempfile.TemporaryFile() as spec_file:
            spec_file.write(json.dumps(spec).encode())
            spec_file.seek(0)
            done, done_w = os.pipe()
            try:
                pid = self._ask({"op": "run"}, (spec_file.fileno(), stdout, stderr, done_w))["pid"]
            except ForkServerFailed:
                os.close(done)
                raise
            finally:
                os.close(done_w)
        return Forked(pid, done)

    def finish(self, forked: Forked, timeout: float):
        """The return code of a :meth:`fork_module` child (``subprocess`` style), or None after killing its
        process group when it runs longer than ``timeout``."""
        try:
            ended, _, _ = select.select([forked.done], [], [], timeout)  # readable (EOF) once the child exits
        finally:
            os.close(forked.done)
        if not ended:
            kill_group(forked.pid)
            self.wait(forked.pid, timeout=5)  # the server reaps it
            return None
        return self.wait(forked.pid, timeout=30)

    def run_module(self, module: str, argv: list, env: dict, cwd: str, path: list,
                   timeout: float) -> subprocess.CompletedProcess:
        """:meth:`fork_module` with its output captured, as ``subprocess.run`` would; raises
        ``subprocess.TimeoutExpired`` after killing it when it runs longer than ``timeout``."""
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            code = self.finish(self.fork_module(module, argv, env, cwd, path, out.fileno(), err.fileno()), timeout)
            if code is None:
                raise subprocess.TimeoutExpired([module, *argv], timeout)
            out.seek(0)
            err.seek(0)
            return subprocess.CompletedProcess([module, *argv], code, out.read().decode(errors="replace"),
                                               err.read().decode(errors="replace"))

    def close(self) -> None:
        """Stop the server, or just hang up when it is not ours. It holds nothing worth a clean exit (its
        workers are gone by now), and killing it spares the interpreter's shutdown (~35 ms with numpy)."""
        self.sock.close()
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self._stderr.close()


def _traits(pid: int):
    """What a process's children inherit and another process of its uid could change: its limits
    (/proc/PID/limits), nice value, scheduling policy and parameters, CPUs; None once it is gone."""
    try:
        with open(f"/proc/{pid}/limits") as f:
            limits = f.read()
        return (limits, os.getpriority(os.PRIO_PROCESS, pid), os.sched_getscheduler(pid),
                os.sched_getparam(pid).sched_priority, frozenset(os.sched_getaffinity(pid)))
    except OSError:
        return None


def kill_group(pid: int) -> None:
    """SIGKILL to the process group of ``pid`` (a :meth:`ForkServer.fork_module` child leads its own)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _inherited(library: str) -> socket.socket | None:
    """The connection to a server of ``library`` this process was forked by (``CONNECTION_ENV``), taken once."""
    named = os.environ.get(CONNECTION_ENV, "")
    lib, _, fd = named.partition(":")
    if lib != library or not fd.isdigit():
        return None
    del os.environ[CONNECTION_ENV]
    return socket.socket(fileno=int(fd))


def start_soon(threads: int, probe: bool) -> None:
    """Start a fork server (its workers with ``threads`` threads) before this process knows which
    library it will serve, so that its interpreter starts beside this process's imports of numpy and
    pytest; the first :func:`get` with ``threads`` names the library. With ``probe`` the isolation
    probe runs in it meanwhile (``isolation.probe_soon``), sparing the probe an interpreter of its own."""
    def start(asked: dict):
        server = _early[threads] = ForkServer(None, isolation.base_env(threads), probe=asked)
        return server.probed
    if probe:
        isolation.probe_soon(start)
    if threads not in _early:
        _early[threads] = ForkServer(None, isolation.base_env(threads))


def get(library: str, threads: int) -> ForkServer:
    key = (library, threads)
    if key not in _servers:
        connection = _inherited(library)
        if connection is not None:
            _servers[key] = ForkServer(library, connection=connection)
        elif threads in _early:
            _servers[key] = _early.pop(threads)
            _servers[key].load(library)
        else:
            _servers[key] = ForkServer(library, isolation.base_env(threads))
    return _servers[key]


def heaviest(libraries) -> str:
    """The library whose fork server forks a session: the heaviest one it needs."""
    return "torch" if "torch" in libraries else "numpy"


def start(libraries, threads: int) -> None:
    for library in sorted(libraries):
        get(library, threads)


def close(library: str, threads: int) -> None:
    """Stop the server of ``library`` once no later stage of the session needs it (its
    memory is the session's to give back; a later ``get`` would start a fresh one)."""
    server = _servers.pop((library, threads), None)
    if server is not None:
        server.close()


def close_all() -> None:
    """Stop every server of this process, the early ones no stage took too."""
    while _servers:
        _servers.popitem()[1].close()
    while _early:
        _early.popitem()[1].close()


_per_thread = threading.local()
_threads_servers: list = []
_threads_lock = threading.Lock()


def of_this_thread(library: str, threads: int) -> ForkServer:
    """A server of ``library`` kept by the calling thread for the gradings it starts one after another
    (a batch's or a Dask worker's: each grading process is a fork of it, and so are its workers); a new
    one if the last has failed, or if a worker could have changed it: where workers share the grader's
    uid without seccomp (``isolation.calls_contained``: one call such as ``prlimit`` would reach it and
    every later worker inherit it), or where its limits, priority or CPUs are no longer what they were.
    :func:`close_threads` stops them all."""
    server = getattr(_per_thread, "servers", {}).get((library, threads))
    if server is not None and server.alive and not (server.unchanged and isolation.calls_contained(isolation.probe())):
        server.close()
        with _threads_lock:
            _threads_servers.remove(server)
        server = None
    if server is None or not server.alive:  # (a failed one is stopped with the rest, by close_threads)
        server = ForkServer(library, isolation.base_env(threads))
        _per_thread.servers = {**getattr(_per_thread, "servers", {}), (library, threads): server}
        with _threads_lock:
            _threads_servers.append(server)
    return server


def close_threads() -> None:
    """Stop every server of :func:`of_this_thread`, whichever thread keeps it."""
    with _threads_lock:
        servers = list(_threads_servers)
        _threads_servers.clear()
    for server in servers:
        server.close()
