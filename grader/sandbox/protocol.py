"""Wire format between the trusted grader and the worker: JSON + .npy blobs.

A message is ``[u32 header length][header JSON][u32 n blobs]([u64 length][.npy bytes])*``.
Values are encoded recursively; arrays and tensors become references to blobs
written with ``numpy.lib.format`` and read back with ``allow_pickle=False``,
so decoding a message can never run code. Nothing here uses pickle.

Encodable: None, bool, int, float (incl. inf/nan), str, list, tuple, dict with
str keys, numpy arrays and scalars of numeric/bool dtype, torch tensors
(any numeric dtype numpy can hold; bfloat16 is widened to float32).

Replies of the worker (:mod:`grader.sandbox.runtime`) are ``{"ok": True, "value": ...}`` or a
:func:`failure`, ``{"ok": False, "kind": <ReplyKind>, "message": ...}``; both sides name the kinds
through :class:`ReplyKind`, never as bare strings.
"""
from __future__ import annotations

import io
import json
import math
import os
import select
import struct
import time
from enum import Enum

import numpy as np

MAX_MESSAGE_BYTES = 1 << 30  # a message larger than this is a protocol error


class ProtocolError(Exception):
    """A malformed or oversized message."""


class ReplyKind(str, Enum):
    """Why a worker's reply is not ``ok``. The trusted side turns each into a test status
    (:mod:`grader.engine.errors`); only ``GRADER`` is the grader's own fault."""
    ERROR = "error"              # the student's code raised
    MISSING = "missing"          # the module, or the name asked for, is not in the submission
    LOAD_ERROR = "load_error"    # importing the student's module failed
    BAD_RETURN = "bad_return"    # the value returned cannot be sent back (not an array, tensor, number ...)
    FORBIDDEN = "forbidden"      # the code called something the stage forbids
    GRADER = "grader"            # the grader asked for something the worker does not have (a bug of ours)


def failure(kind: ReplyKind, message: str, **details) -> dict:
    """A reply that is not ``ok``: its kind, a message, and any details (``type``, ``where``, ...)."""
    return {"ok": False, "kind": kind.value, "message": message, **details}


def reply_kind(reply: dict) -> ReplyKind | None:
    """The kind of a failed reply (None for an ``ok`` one); an unknown kind counts as ``ERROR``."""
    if reply.get("ok"):
        return None
    try:
        return ReplyKind(reply.get("kind"))
    except ValueError:
        return ReplyKind.ERROR


def _torch():
    import sys
    return sys.modules.get("torch")


def _npy_bytes(array: np.ndarray) -> bytes:
    if array.dtype.hasobject or array.dtype.kind not in "biufc":
        raise TypeError(f"cannot send an array of dtype {array.dtype}")
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.require(array, requirements="C"), allow_pickle=False)
    return buf.getvalue()


def encode(value) -> bytes:
    """Serialise ``value`` into one message."""
    blobs: list[bytes] = []

    def enc(v):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int):
            return {"__int__": str(v)} if abs(v) >= 2**53 else v
        if isinstance(v, float):
            return v if math.isfinite(v) else {"__float__": repr(v)}
        if isinstance(v, np.generic):
            blobs.append(_npy_bytes(np.asarray(v)))
            return {"__npscalar__": len(blobs) - 1}
        if isinstance(v, np.ndarray):
            blobs.append(_npy_bytes(v))
            return {"__ndarray__": len(blobs) - 1}
        torch = _torch()
        if torch is not None and isinstance(v, torch.Tensor):
            t = v.detach().cpu()
            if t.dtype == torch.bfloat16:
                t = t.float()
            blobs.append(_npy_bytes(t.resolve_conj().resolve_neg().numpy()))
            return {"__tensor__": len(blobs) - 1}
        if isinstance(v, tuple):
            return {"__tuple__": [enc(x) for x in v]}
        if isinstance(v, list):
            return [enc(x) for x in v]
        if isinstance(v, dict):
            if not all(isinstance(k, str) for k in v):
                raise TypeError("only dicts with str keys can be sent")
            return {"__dict__": [[k, enc(x)] for k, x in v.items()]}
        raise TypeError(f"cannot send a value of type {type(v).__name__}")

    header = json.dumps(enc(value), allow_nan=False).encode()
    parts = [struct.pack("<I", len(header)), header, struct.pack("<I", len(blobs))]
    for blob in blobs:
        parts += [struct.pack("<Q", len(blob)), blob]
    return b"".join(parts)


def decode(data: bytes, *, want_torch: bool = True):
    """Inverse of :func:`encode`. Tensors come back as torch tensors if torch is imported."""
    view = memoryview(data)
    pos = 0

    def take(n):
        nonlocal pos
        if pos + n > len(view):
            raise ProtocolError("truncated message")
        chunk = view[pos:pos + n]
        pos += n
        return chunk

    (hlen,) = struct.unpack("<I", take(4))
    try:
        header = json.loads(bytes(take(hlen)))
    except ValueError as exc:
        raise ProtocolError(f"bad header: {exc}") from None
    (nblobs,) = struct.unpack("<I", take(4))
    blobs = []
    for _ in range(nblobs):
        (blen,) = struct.unpack("<Q", take(8))
        try:
            blobs.append(np.lib.format.read_array(io.BytesIO(take(blen)), allow_pickle=False))
        except ValueError as exc:
            raise ProtocolError(f"bad array: {exc}") from None
    torch = _torch() if want_torch else None

    def blob(i):
        if not isinstance(i, int) or not 0 <= i < len(blobs):
            raise ProtocolError("bad blob reference")
        return blobs[i]

    def dec(v):
        if isinstance(v, list):
            return [dec(x) for x in v]
        if not isinstance(v, dict):
            return v
        if len(v) != 1:
            raise ProtocolError("bad tagged value")
        (tag, x), = v.items()
        if tag == "__ndarray__":
            return blob(x)
        if tag == "__npscalar__":
            return blob(x)[()]
        if tag == "__tensor__":
            a = blob(x)
            return torch.from_numpy(a.copy()) if torch is not None else a
        if tag == "__tuple__":
            return tuple(dec(y) for y in x)
        if tag == "__dict__":
            return {str(k): dec(y) for k, y in x}
        if tag == "__float__":
            return float(x)
        if tag == "__int__":
            return int(x)
        raise ProtocolError(f"unknown tag {tag!r}")

    return dec(header)


def write_message(fd: int, value) -> None:
    """Write one length-prefixed message to a file descriptor."""
    payload = encode(value)
    data = struct.pack("<Q", len(payload)) + payload
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def read_exactly(fd: int, n: int, deadline: float | None = None) -> bytes:
    """``n`` bytes from ``fd``; ``EOFError`` if the peer closes first, ``TimeoutError`` if
    ``deadline`` (a ``time.monotonic()`` value) passes first."""
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("peer closed the pipe")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_message(fd: int, deadline: float | None = None):
    """Read one message written by :func:`write_message`: blocking, or until ``deadline``
    (``time.monotonic()``), then ``TimeoutError``."""
    (length,) = struct.unpack("<Q", read_exactly(fd, 8, deadline))
    if length > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {length} bytes is over the limit")
    return decode(read_exactly(fd, length, deadline))
