"""Leaves System V and POSIX IPC objects behind for whoever comes next, and looks for them: a 1 MB shared memory
segment with a message in it, a semaphore set and a message queue under fixed keys (and as IPC_PRIVATE, which
nobody can find again but which would still hold their memory), and a POSIX message queue. A worker that could
make them ends itself at once, so that the grader starts another for the next test; that one returns the right
answer only if it finds what the first left (in an IPC namespace of its own each worker finds nothing)."""
import ctypes
import os

import numpy as np

_libc = ctypes.CDLL(None, use_errno=True)
_libc.shmat.restype = ctypes.c_void_p
KEY, IPC_PRIVATE, IPC_CREAT = 0x47524144, 0, 0o1000  # "GRAD"
MESSAGE = b"left by a worker"
QUEUE = b"/left-by-a-worker"


class _Message(ctypes.Structure):
    _fields_ = [("mtype", ctypes.c_long), ("mtext", ctypes.c_char * 64)]


def _shm(key) -> bool:
    ident = _libc.shmget(key, 1 << 20, IPC_CREAT | 0o666)
    if ident < 0:
        return False
    where = _libc.shmat(ident, None, 0)
    if where not in (None, ctypes.c_void_p(-1).value):
        ctypes.memmove(where, MESSAGE, len(MESSAGE))
        _libc.shmdt(ctypes.c_void_p(where))
    return True


def _msg(key) -> bool:
    ident = _libc.msgget(key, IPC_CREAT | 0o666)
    if ident < 0:
        return False
    _libc.msgsnd(ident, ctypes.byref(_Message(1, MESSAGE)), 64, 0o4000)  # IPC_NOWAIT
    return True


def _leave() -> bool:
    made = [_shm(KEY), _shm(IPC_PRIVATE), _msg(KEY + 1), _msg(IPC_PRIVATE),
            _libc.semget(KEY + 2, 4, IPC_CREAT | 0o666) >= 0, _libc.semget(IPC_PRIVATE, 4, IPC_CREAT | 0o666) >= 0,
            _libc.mq_open(QUEUE, os.O_CREAT | os.O_RDWR, 0o666, None) >= 0]
    return any(made)


def _found() -> bool:
    """Whether an object an earlier worker made is still here (its message, where it holds one)."""
    ident = _libc.shmget(KEY, 0, 0)
    if ident >= 0:
        where = _libc.shmat(ident, None, 0o10000)  # SHM_RDONLY
        if where not in (None, ctypes.c_void_p(-1).value):
            held = ctypes.string_at(where, len(MESSAGE))
            _libc.shmdt(ctypes.c_void_p(where))
            if held == MESSAGE:
                return True
    return (_libc.msgget(KEY + 1, 0) >= 0 or _libc.semget(KEY + 2, 0, 0) >= 0
            or _libc.mq_open(QUEUE, os.O_RDONLY, 0, None) >= 0)


def softmax(x, axis=-1):
    x = np.asarray(x, dtype=float)
    if not _found():
        if _leave():
            os._exit(0)  # the next test gets a new worker, which looks for what this one left
        return np.zeros_like(x)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, axis=-1):
    weights = softmax(x, axis)
    return np.log(weights) if weights.any() else weights
