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

A reply is written by the worker, which the student's code may have rewritten, so the trusted side
reads it within a :class:`Bound` made from the request it answers (:meth:`Bound.answering`): its
bytes, its header's bytes, the values in its header, its blobs, its nesting. Each is checked before
anything of that size is allocated (a blob is read by its ``.npy`` header and must hold exactly the
bytes its shape and dtype say), and the deadline of the read holds through the decoding; a reply
over its bound is a :class:`ProtocolError`, the student's, never the grader's. So whatever a worker
sends, reading it costs the trusted side at most about twice the bound's bytes (the message, and the
arrays made from it).
"""
from __future__ import annotations

import io
import json
import math
import os
import re
import select
import struct
import time
from dataclasses import dataclass
from enum import Enum

import numpy as np

MAX_MESSAGE_BYTES = 1 << 30  # a message larger than this is a protocol error
MAX_DEPTH = 100  # nesting of a header's JSON (a dict is 3 deep: {"__dict__": [[key, value]]}); replies reach ~15
NPY_HEADER_MAX = 16 + 10_000  # magic, version, length and numpy's own cap on an .npy header


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


NOT_ECHOED = ("state_dict",)  # a probe's weights: loaded with ``load_state_dict``, which copies them


def echoed(request: dict) -> dict:
    """The arguments of ``request`` that an ``ok`` reply sends back as the call left them (its ``after``), for
    the trusted side to compare with its own copies: every argument of a ``call``; of a ``probe``, all but
    :data:`NOT_ECHOED` (a probe hands weights to the student's module through ``load_state_dict``, which copies
    them, so no code of the submission holds the request's; sending a pretrained model back would only cost)."""
    kwargs = request.get("kwargs", {})
    if request.get("op") == "probe":
        kwargs = {k: v for k, v in kwargs.items() if k not in NOT_ECHOED}
    return {"args": request.get("args", []), "kwargs": kwargs}


def shape_of(value):
    """What a dry call must return to cost what returning ``value`` did (the request's ``like``): an array's
    ``[shape, dtype]``, a tuple's or list's ``[that of each item]``, else None (the control worker returns
    nothing). Mirrored by :func:`like_value`."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return [list(value.shape), value.dtype.str]
    if isinstance(value, (tuple, list)) and value:
        items = [shape_of(v) for v in value]
        return {"items": items} if all(i is not None for i in items) else None
    return None


def like_value(like):
    """Zeros of the shapes and dtypes :func:`shape_of` gave (a tuple for ``items``), or None."""
    if like is None:
        return None
    if isinstance(like, dict):
        return tuple(like_value(i) for i in like["items"])
    shape, dtype = like
    return np.zeros(tuple(shape), dtype=np.dtype(dtype))


@dataclass(frozen=True)
class Size:
    """What one message holds: its bytes, its header's bytes, the values in its header (at most: counted
    from its separators, strings included, before it is parsed) and its blobs."""
    bytes: int
    header: int
    values: int
    blobs: int

    @classmethod
    def of(cls, payload) -> Size:
        """The size of an encoded message (``payload``: what :func:`encode` returns); ProtocolError if it is cut."""
        view = memoryview(payload)
        if len(view) < 8:
            raise ProtocolError("truncated message")
        (hlen,) = struct.unpack("<I", view[:4])
        header = bytes(view[4:4 + hlen])
        if len(header) < hlen or len(view) < 8 + hlen:
            raise ProtocolError("truncated message")
        (blobs,) = struct.unpack("<I", view[4 + hlen:8 + hlen])
        return cls(len(view), hlen, _values(header), blobs)


def _values(header: bytes) -> int:
    """At most how many JSON values ``header`` holds: one, and one after each ``,`` ``:`` ``[`` ``{``."""
    return 1 + sum(header.count(c) for c in (b",", b":", b"[", b"{"))


@dataclass(frozen=True)
class Bound:
    """The most one reply may hold (:class:`Size`'s measures, and its nesting). :meth:`answering` gives what
    a request may be answered with: a fixed allowance (the largest reply of the reference's whole grading
    held 2 MB, 8 KB of header, 715 values, 90 blobs, nesting 15) and three times the request (a reply
    may carry the call's arguments back besides its result)."""
    bytes: int
    header: int
    values: int
    blobs: int
    depth: int = MAX_DEPTH

    BASE = (64 << 20, 1 << 20, 100_000, 10_000)  # bytes, header bytes, values, blobs
    PER_REQUEST = 3

    @classmethod
    def answering(cls, request: Size | None = None) -> Bound:
        """The bound of the reply to ``request`` (None: a message asked by no request, as "ready")."""
        asked = (request.bytes, request.header, request.values, request.blobs) if request else (0, 0, 0, 0)
        return cls(*(base + cls.PER_REQUEST * n for base, n in zip(cls.BASE, asked)))

    def check(self, what: str, count: int, limit: int) -> None:
        if count > limit:
            raise ProtocolError(f"a reply of {count:,} {what}, more than the {limit:,} this call may send back")


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


# The one header ``np.lib.format.write_array`` gives a C-ordered numeric array (version 1.0), read by a pattern:
# numpy's own reader evaluates it as a Python literal, which cost 0.7 s of a whole grading's 15 (two arrays a
# call since the arguments come back). Any other header is refused.
_NPY_HEADER = re.compile(rb"\x93NUMPY\x01\x00(..)\{'descr': '([<>|][biufc][0-9]{1,2})', 'fortran_order': False, "
                         rb"'shape': \(((?:[0-9]{1,19}, )*(?:[0-9]{1,19},?)?)\), \} *\n", re.DOTALL)


def _array(chunk: memoryview) -> np.ndarray:
    """A blob as an array of its own, read by its ``.npy`` header (never a pickle): a numeric or bool dtype,
    and exactly as many bytes as its shape and dtype take, so what is allocated is what was sent."""
    head = _NPY_HEADER.match(bytes(chunk[:NPY_HEADER_MAX]))
    if head is None or 10 + struct.unpack("<H", head[1])[0] != head.end():
        raise ProtocolError("bad array: not the .npy header of a C-ordered numeric array")
    try:
        dtype = np.dtype(head[2].decode())
    except TypeError as exc:
        raise ProtocolError(f"bad array: {exc}") from None
    shape = tuple(int(n) for n in head[3].split(b",") if n.strip())
    data, count = chunk[head.end():], math.prod(shape)
    if count * dtype.itemsize != len(data):
        raise ProtocolError(f"bad array: {len(data)} bytes for shape {shape} of {dtype}")
    return np.frombuffer(data, dtype=dtype, count=count).reshape(shape).copy()


def _in_time(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise TimeoutError


class _Reader:
    """The bytes of one message, taken in order; past its end, ProtocolError."""

    def __init__(self, data):
        self.view = memoryview(data)
        self.pos = 0

    def take(self, n: int) -> memoryview:
        if self.pos + n > len(self.view):
            raise ProtocolError("truncated message")
        chunk = self.view[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def number(self, fmt: str) -> int:
        """The unsigned length or count at this point (``fmt``: "<I" or "<Q")."""
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]


def _header_and_blobs(data, bound: Bound | None, deadline: float | None) -> tuple:
    """(the header's JSON value, the blobs as arrays) of a message (:func:`encode`), within ``bound`` and
    ``deadline``: the header is counted before it is parsed, the blobs before they are read."""
    reader = _Reader(data)
    hlen = reader.number("<I")
    if bound is not None:
        bound.check("bytes", len(reader.view), bound.bytes)
        bound.check("header bytes", hlen, bound.header)
    raw = bytes(reader.take(hlen))
    if bound is not None:
        bound.check("values", _values(raw), bound.values)
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ProtocolError(f"bad header: {type(exc).__name__}: {exc}") from None
    del raw
    nblobs = reader.number("<I")
    if bound is not None:
        bound.check("arrays", nblobs, bound.blobs)
    blobs = []
    for i in range(nblobs):
        if i % 64 == 0:
            _in_time(deadline)
        blobs.append(_array(reader.take(reader.number("<Q"))))
    return header, blobs


def _values_decoder(blobs: list, torch, deadline: float | None):
    """``dec(value, depth)``: the header's tagged ``value`` made a Python value again, with the message's
    ``blobs`` (each used once) as arrays, or as tensors when ``torch`` is given; nested at most ``MAX_DEPTH``
    deep, within ``deadline``. (Closures: a message may hold a million values, and a method call costs more.)"""
    used, seen = set(), [0]

    def blob(i):
        if not isinstance(i, int) or not 0 <= i < len(blobs) or i in used:
            raise ProtocolError("bad blob reference")
        used.add(i)  # each blob is one value: a reference repeated would multiply its memory
        return blobs[i]

    def dec(v, depth):
        seen[0] += 1
        if seen[0] % 4096 == 0:
            _in_time(deadline)
        if depth > MAX_DEPTH:
            raise ProtocolError(f"a value nested more than {MAX_DEPTH} deep")
        if isinstance(v, list):
            return [dec(x, depth + 1) for x in v]
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
            return torch.from_numpy(a) if torch is not None else a
        if tag == "__tuple__":
            return tuple(dec(y, depth + 2) for y in x)
        if tag == "__dict__":
            return {str(k): dec(y, depth + 3) for k, y in x}
        if tag == "__float__":
            return float(x)
        if tag == "__int__":
            return int(x)
        raise ProtocolError(f"unknown tag {tag!r}")

    return dec


def decode(data, *, want_torch: bool = True, bound: Bound | None = None, deadline: float | None = None):
    """Inverse of :func:`encode`. Tensors come back as torch tensors if torch is imported. Within ``bound``
    (else ProtocolError) and ``deadline`` (a ``time.monotonic()`` value; past it, TimeoutError)."""
    header, blobs = _header_and_blobs(data, bound, deadline)
    dec = _values_decoder(blobs, _torch() if want_torch else None, deadline)
    try:
        return dec(header, 1)
    except (TypeError, ValueError, RecursionError) as exc:  # a tag holding what it cannot hold
        raise ProtocolError(f"bad value: {type(exc).__name__}: {exc}") from None


def write_message(fd: int, value) -> Size:
    """Write one length-prefixed message to a file descriptor; its :class:`Size`."""
    payload = encode(value)
    data = struct.pack("<Q", len(payload)) + payload
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    return Size.of(payload)


def read_exactly(fd: int, n: int, deadline: float | None = None, wait=None) -> bytearray:
    """``n`` bytes from ``fd``, read into one buffer; ``EOFError`` if the peer closes first,
    ``TimeoutError`` if ``deadline`` (a ``time.monotonic()`` value) passes first. ``wait(fd)``, if given,
    is called instead before each read: it returns once ``fd`` can be read or raises (the trusted side's
    clock of a worker's charged time, ``grader.engine.charging``)."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        if wait is not None:
            wait(fd)
        elif deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        k = os.readv(fd, [view[got:got + min(n - got, 1 << 20)]])
        if not k:
            raise EOFError("peer closed the pipe")
        got += k
    return buf


def read_message(fd: int, deadline: float | None = None, bound: Bound | None = None, wait=None,
                 decode_s: float | None = None):
    """Read one message written by :func:`write_message`: blocking, until ``deadline``
    (``time.monotonic()``, then ``TimeoutError``), or as ``wait`` allows (:func:`read_exactly`); within
    ``bound`` (else ProtocolError). Decoding stops at ``deadline`` too, or ``decode_s`` seconds after the
    message is read (where ``wait`` keeps the time of the reading, the decoding is the reader's own)."""
    (length,) = struct.unpack("<Q", read_exactly(fd, 8, deadline, wait))
    if length > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {length} bytes is over the limit")
    if bound is not None:
        bound.check("bytes", length, bound.bytes)
    data = read_exactly(fd, length, deadline, wait)
    if decode_s is not None:
        deadline = time.monotonic() + decode_s
    try:
        return decode(data, bound=bound, deadline=deadline)
    except (ProtocolError, TimeoutError) as exc:  # raised again without the frames that hold the message, which
        failed = type(exc)(*exc.args)               # a test's report keeps with the error it ends in
    del data
    raise failed
