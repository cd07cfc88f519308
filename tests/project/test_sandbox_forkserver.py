"""grader.sandbox.forkserver, the worker side's fork server: its framing and its two requests.

The engine's end (grader.engine.forkservers, with real workers) is test_forkserver.py; here the server
is driven over its socket as the protocol in its docstring says, and a worker whose set-up fails must
exit with SETUP_FAILED and one line, never run.
"""
from __future__ import annotations

import errno
import os
import socket
import struct
import subprocess
import sys
import time

import pytest

from grader.engine import isolation, paths
from grader.sandbox import forkserver
from grader.sandbox.forkserver import MAX_MESSAGE, SETUP_FAILED, receive_message, send_message


@pytest.fixture
def pair():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    yield a, b
    a.close()
    b.close()


def test_a_message_and_its_descriptors_cross_whole(pair, tmp_path):
    a, b = pair
    f = tmp_path / "passed.txt"
    f.write_text("through the socket")
    with open(f) as handle:
        send_message(a, {"op": "wait", "pid": 12, "timeout": 0.5, "text": "é" * 5000}, [handle.fileno()])
    msg, fds = receive_message(b, with_fds=True)
    assert msg == {"op": "wait", "pid": 12, "timeout": 0.5, "text": "é" * 5000}
    assert len(fds) == 1
    with os.fdopen(fds[0]) as received:
        assert received.read() == "through the socket"
    send_message(a, {"pid": 3})
    assert receive_message(b) == {"pid": 3}


def test_a_closed_peer_is_none_and_a_cut_message_an_error(pair):
    a, b = pair
    a.sendall(struct.pack(">I", 10) + b'{"pid"')
    a.shutdown(socket.SHUT_WR)
    with pytest.raises(EOFError):
        receive_message(b)
    assert receive_message(b) is None
    assert receive_message(b, with_fds=True) == (None, [])


def test_an_oversized_message_is_refused_before_it_is_read(pair):
    a, b = pair
    a.sendall(struct.pack(">I", MAX_MESSAGE + 1))
    with pytest.raises(ValueError, match="bytes"):
        receive_message(b)


@pytest.fixture
def server():
    """The fork server as the engine starts it: a fresh ``python -I`` with one end of a socket pair."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    argv, program = forkserver.command(theirs.fileno(), os.getpid())
    proc = subprocess.Popen(argv, pass_fds=(theirs.fileno(),), env=isolation.base_env(1), cwd="/",
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    with proc.stdin:
        proc.stdin.write(program.encode())
    theirs.close()
    ours.settimeout(60)
    send_message(ours, {"op": "preload", "library": "numpy"})
    assert receive_message(ours) == {"ready": True}
    yield ours, proc
    ours.close()
    proc.kill()
    proc.wait()


def test_a_worker_that_cannot_be_set_up_exits_with_setup_failed_and_says_why(server):
    sock, _ = server
    (in_r, in_w), (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe(), os.pipe()
    send_message(sock, {"op": "spawn", "config": {}, "plan": {}}, [in_r, out_w, err_w])
    pid = receive_message(sock)["pid"]
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    send_message(sock, {"op": "wait", "pid": pid, "timeout": 30})
    assert receive_message(sock) == {"returncode": SETUP_FAILED}
    with os.fdopen(err_r, "rb") as err:
        said = err.read().decode()
    assert said.startswith("grader worker set-up: ") and said.count("\n") == 1
    for fd in (in_w, out_r):
        os.close(fd)


def test_waiting_for_a_pid_that_is_not_its_child_says_none_and_the_server_ends_with_the_socket(server):
    sock, proc = server
    send_message(sock, {"op": "wait", "pid": os.getpid(), "timeout": 0})
    assert receive_message(sock) == {"returncode": None}
    sock.shutdown(socket.SHUT_WR)
    assert proc.wait(timeout=30) == 0


def test_the_server_holds_only_its_library_and_the_sandbox():
    """Nothing of the trusted side is in a fork server's memory, so none is in a worker's (a worker cannot
    look: reading sys.modules is a reach around the rules)."""
    code = ("import sys; sys.argv = ['forkserver', 'numpy']; from grader.sandbox import forkserver; "
            "forkserver.preload('numpy'); forkserver.warm_up('numpy'); "
            "print(sorted(m for m in sys.modules if m.startswith('grader') and not m.startswith('grader.sandbox') "
            "or m.split('.')[0] in ('pytest', '_pytest', 'solutions', 'pytest_jsonreport', 'hypothesis') "
            "or m.startswith(('test_', 'conftest'))))")
    done = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(paths.ROOT)!r}); {code}"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['grader']"


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "pidfd-refused"])
def test_wait_answers_as_soon_as_the_child_exits_and_none_while_it_runs(monkeypatch, pidfd):
    """Without ``pidfd_open`` (an older kernel, a container's seccomp profile) the server asks every 5 ms."""
    if not pidfd:
        def refused(pid):
            raise PermissionError(errno.EPERM, "Operation not permitted")
        monkeypatch.setattr(os, "pidfd_open", refused)
    server = forkserver.Server(socket.socket(), "numpy")
    pid = os.fork()
    if pid == 0:
        time.sleep(0.3)
        os._exit(3)
    assert server.wait(pid, timeout=0.05) is None
    started = time.monotonic()
    assert server.wait(pid, timeout=10) == 3
    assert time.monotonic() - started < 1
    assert server.wait(pid, timeout=0) is None  # reaped, and no longer its child


LEAVER = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
made = [libc.shmget(0, 4096, 0o600), libc.semget(0, 1, 0o600), libc.msgget(0, 0o600)]
if os.fork() == 0:  # a process of its own group, as one that escaped the worker's would be
    os.setsid()
    time.sleep(60)
print(" ".join(map(str, made)), flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/python3"), reason="changes uid, as root")
def test_a_sweep_kills_every_process_of_the_uid_and_removes_the_ipc_objects_it_made():
    """Where a worker has a uid of its own but no seccomp filter, what it started or made goes when it ends; a
    process of another uid, and what it made, stay."""
    import psutil
    running = {p.uids().real for p in psutil.process_iter()}
    uid, other = [u for u in range(230_000, 240_000) if u not in running][:2]
    started = {}
    for who in (uid, other):
        proc = subprocess.Popen(["setpriv", f"--reuid={who}", f"--regid={who}", "--clear-groups", "--",
                                 "/usr/bin/python3", "-c", LEAVER], stdout=subprocess.PIPE, text=True, cwd="/")
        started[who] = proc, [int(i) for i in proc.stdout.readline().split()]
    try:
        assert all(i >= 0 for _, made in started.values() for i in made)
        assert len([p for p in psutil.process_iter() if p.uids().real == uid]) == 2
        forkserver.sweep(uid)
        assert started[uid][0].wait(timeout=10) == -9
        assert [p for p in psutil.process_iter() if p.uids().real == uid and p.status() != psutil.STATUS_ZOMBIE] == []
        for kind, mine, theirs in zip(("shm", "sem", "msg"), started[uid][1], started[other][1]):
            assert mine not in forkserver._ipc_created_by(kind, uid) and theirs in forkserver._ipc_created_by(
                kind, other), kind
        assert started[other][0].poll() is None
    finally:
        forkserver.sweep(other)
        for proc, _ in started.values():
            proc.wait()
