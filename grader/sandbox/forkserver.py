"""The fork server: forks one confined worker per stage from a process that has
already imported numpy (and torch).

A fresh interpreter per worker paid numpy's import every stage, and torch,
``torch._dynamo`` (imported by the first optimizer) and sympy (by
``torch.broadcast_shapes``) about 3 CPU-seconds per torch stage. Instead the
trusted grading session starts one fork server per library it needs
(:mod:`grader.forkservers`), as a **new interpreter**
(``python -I forkserver.py LIBRARY FD``): never a fork of the session,
so no hidden test, reference solution or fixture the session has read can be in
a worker's memory. The server imports only this public package and the library,
then waits. For each worker it forks a child that

1. takes its three descriptors (requests in, replies out, stderr) and closes
   every other one, and replaces its environment with the worker's;
2. prepares the stage (course-provided stand-ins and probes, :meth:`Worker.prepare`);
3. confines itself (:func:`jail.confine`: namespaces, a new root, limits, an
   unprivileged uid); on failure it exits with status 97 and one line on stderr;
4. serves the stage (:func:`runtime.serve`) and exits, never returning here.

Messages on a Unix ``SOCK_SEQPACKET`` socket pair, one JSON object per packet,
one request at a time (the session is single-threaded):

  {"op": "spawn", "config": RUNTIME_CONFIG, "plan": JAIL_PLAN} + 3 descriptors -> {"pid": N}
  {"op": "wait", "pid": N, "timeout": S}  -> {"returncode": C or null (still running)}

``returncode`` follows ``subprocess``: the exit status, or minus the signal.
"""
from __future__ import annotations

import json
import os
import socket
import sys
import time
import traceback

MAX_PACKET = 1 << 20
JAIL_FAILED = 97


def preload(library: str) -> None:
    """Import what every worker of ``library`` would otherwise import itself."""
    import numpy  # noqa: F401

    from . import forbid, jail, protocol, runtime  # noqa: F401
    if library == "torch":
        import torch  # noqa: F401
        import torch._dynamo  # noqa: F401  (the first torch.optim optimizer imports it: ~1.2 s)
        import torch.fx.experimental.symbolic_shapes  # noqa: F401  (torch.broadcast_shapes: sympy)
        import torch.nn.functional  # noqa: F401


class Server:
    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.finished: dict[int, int] = {}  # pid -> returncode, reaped before anyone asked

    def serve(self) -> None:
        self.send({"ready": True})
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self.sock, MAX_PACKET, 3)
            except ConnectionError:
                return
            if not data:  # the session closed its end
                return
            req = json.loads(data)
            self.reap()
            if req["op"] == "spawn":
                self.send({"pid": self.spawn(req, fds)})
            elif req["op"] == "wait":
                self.send({"returncode": self.wait(req["pid"], req.get("timeout", 0))})
            for fd in fds:
                os.close(fd)

    def send(self, msg: dict) -> None:
        self.sock.send(json.dumps(msg).encode())

    def spawn(self, req: dict, fds: list) -> int:
        pid = os.fork()
        if pid == 0:
            _child(req["config"], req["plan"], *fds)  # never returns
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

    def wait(self, pid: int, timeout: float):
        deadline = time.monotonic() + timeout
        while pid not in self.finished:
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                return None
            if done:
                return os.waitstatus_to_exitcode(status)
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.005)
        return self.finished.pop(pid)


def _child(config: dict, plan: dict, in_fd: int, out_fd: int, err_fd: int) -> None:
    """The worker, from fork to exit."""
    from . import jail, runtime
    code = 0
    try:
        os.setsid()  # its own process group: the session kills the group
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(err_fd, 2)
        keep = {0, 1, 2, in_fd, out_fd}
        for fd in map(int, os.listdir("/proc/self/fd")):
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        os.environ.clear()
        os.environ.update(plan["env"])
        import tempfile
        tempfile.tempdir = None  # so TMPDIR (the scratch folder) is read again
        sys.path[:] = [p for p in sys.path if p != _ROOT]
        sys.dont_write_bytecode = True  # no __pycache__ beside the submission
        worker = runtime.Worker(config)
        worker.prepare()
        jail.confine(plan)
    except OSError as exc:
        os.write(2, f"grader jail: {exc}\n".encode(errors="replace"))
        os._exit(JAIL_FAILED)
    try:
        runtime.serve(worker, in_fd, out_fd, config)
    except BaseException:  # noqa: BLE001 - whatever happens, never return into the server loop
        code = 1
        try:
            os.write(2, traceback.format_exc()[-4000:].encode(errors="replace"))
        except OSError:
            pass
    os._exit(code)


_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    library, fd = sys.argv[1], int(sys.argv[2])
    preload(library)
    Server(socket.socket(fileno=fd)).serve()


if __name__ == "__main__":
    sys.path.insert(0, _ROOT)
    from grader.sandbox.forkserver import main as _main
    _main()
