"""Prints megabytes at import and on every call, to stdout, stderr and the raw descriptors."""
import os
import sys

import numpy as np

print("x" * (8 << 20))
os.write(1, b"y" * (1 << 20))
os.write(2, b"z" * (1 << 20))


def softmax(x, axis=-1):
    sys.stdout.write("spam\n" * 500000)
    sys.stderr.write("eggs\n" * 500000)
    return np.zeros_like(np.asarray(x, dtype=float))


def log_softmax(x, axis=-1):
    return softmax(x, axis)
