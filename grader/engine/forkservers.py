"""The fork servers of one grading session: one per library, started once.

Each is a new interpreter running :mod:`grader.sandbox.forkserver` that has
imported numpy (and torch) and forks a confined worker per stage on request.
The session starts the ones its stages need when it starts
(:func:`start`), so torch's import overlaps the numpy stages; :func:`get`
starts one on first use otherwise, which is equally safe: a server is never a
fork of the session, so it holds nothing the session has read.
"""
from __future__ import annotations

import socket
import subprocess
import sys
import tempfile

from grader.sandbox.forkserver import receive_message, send_message

from . import isolation, paths

_servers: dict = {}


class ForkServerFailed(RuntimeError):
    pass


class ForkServer:
    def __init__(self, library: str, env: dict):
        self.library = library
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-I", str(paths.SANDBOX / "forkserver.py"), library, str(theirs.fileno())],
            pass_fds=(theirs.fileno(),), env=env, cwd="/", stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=self._stderr)
        theirs.close()
        self.sock = ours
        self.ready = False
        self.failed = None  # after one failure (a timeout may leave a late reply behind) every request fails

    def _ask(self, msg: dict, fds=(), timeout: float = 60.0) -> dict:
        if self.failed:
            raise ForkServerFailed(self.failed)
        self.sock.settimeout(timeout)
        try:
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
        self._stderr.seek(0)
        tail = self._stderr.read()[-1500:].decode(errors="replace").strip()
        why = f"the grader's {self.library} fork server failed ({type(exc).__name__}: {exc})"
        return f"{why}: {tail}" if tail else why

    def spawn(self, config: dict, plan: dict, fds, timeout: float) -> int:
        """Fork a worker that uses ``fds`` (requests in, replies out, stderr); its pid.
        ``timeout`` covers the server's own start-up the first time."""
        return self._ask({"op": "spawn", "config": config, "plan": plan}, fds, timeout)["pid"]

    def wait(self, pid: int, timeout: float = 0.0):
        """The worker's return code (``subprocess`` style), or None if it still runs after ``timeout``."""
        return self._ask({"op": "wait", "pid": pid, "timeout": timeout}, timeout=timeout + 30)["returncode"]

    def close(self) -> None:
        """Stop the server. It holds nothing worth a clean exit (its workers are gone by
        now), and killing it spares the interpreter's shutdown (~35 ms with numpy)."""
        self.sock.close()
        self.proc.kill()
        self.proc.wait()
        self._stderr.close()


def get(library: str, threads: int) -> ForkServer:
    key = (library, threads)
    if key not in _servers:
        _servers[key] = ForkServer(library, isolation.base_env(threads))
    return _servers[key]


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
    while _servers:
        _servers.popitem()[1].close()
