"""Reads another process's memory (the grader's, a fork server's, another worker's) by the routes Python gives
a module: /proc/PID/environ and /proc/PID/mem. It returns the right answer only if one of them worked, so a single
point scored means the grader's memory was within reach. (ptrace and process_vm_readv need ctypes, which the
source scan refuses as a reach around the rules, tests/reach_arounds/; the seccomp filter refuses both calls
too, tests/project/test_syscalls.py.)"""
import os

import numpy as np


def _read_memory(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            if f.read(1):
                return True
    except OSError:
        pass
    try:
        with open(f"/proc/{pid}/maps") as f:
            start = int(f.readline().split("-")[0], 16)
        with open(f"/proc/{pid}/mem", "rb") as f:
            f.seek(start)
            if f.read(16):
                return True
    except (OSError, ValueError):
        pass
    return False


def _spied() -> bool:
    pids = [os.getppid(), *(int(p) for p in os.listdir("/proc") if p.isdigit())]
    return any(_read_memory(pid) for pid in pids if pid != os.getpid())


def softmax(x, axis=-1):
    x = np.asarray(x, dtype=float)
    if not _spied():
        return np.zeros_like(x)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, axis=-1):
    weights = softmax(x, axis)
    return np.log(weights) if weights.any() else weights
