"""The wire format between trusted grader and worker: faithful, and never runs code."""
import io
import pickle
import struct

import numpy as np
import pytest
import torch

from grader.sandbox import protocol


@pytest.mark.parametrize("value", [
    None, True, 3, -2**60, 1.5, float("inf"), float("-inf"), "héllo",
    [1, [2, 3]], (1, "a"), {"a": 1, "b": (2.0, None)},
    np.arange(6, dtype=np.float64).reshape(2, 3), np.array([True, False]), np.float32(2.5),
    np.zeros((0, 4)), np.array([1 + 2j]),
])
def test_round_trip_keeps_values_and_types(value):
    back = protocol.decode(protocol.encode(value))
    if isinstance(value, np.ndarray):
        assert back.dtype == value.dtype and np.array_equal(back, value)
    elif isinstance(value, np.generic):
        assert type(back) is type(value) and back == value
    else:
        assert back == value and type(back) is type(value)


def test_nan_round_trips():
    assert np.isnan(protocol.decode(protocol.encode(float("nan"))))


def test_tensors_come_back_as_tensors_without_grad():
    t = torch.randn(3, 4, requires_grad=True)
    back = protocol.decode(protocol.encode({"t": t, "ids": torch.arange(5)}))
    assert isinstance(back["t"], torch.Tensor) and torch.equal(back["t"], t.detach())
    assert back["ids"].dtype == torch.int64 and not back["t"].requires_grad


@pytest.mark.parametrize("bad", [object(), {1: 2}, np.array(["a"], dtype=object), lambda: 0])
def test_values_that_could_carry_code_are_refused(bad):
    with pytest.raises(TypeError):
        protocol.encode(bad)


def test_a_pickled_array_is_refused_on_decode():
    """A forged blob holding a pickle (object dtype) must not be loaded."""
    buf = io.BytesIO()
    np.save(buf, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    blob = buf.getvalue()
    header = b'{"__ndarray__": 0}'
    message = struct.pack("<I", len(header)) + header + struct.pack("<I", 1) + struct.pack("<Q", len(blob)) + blob
    with pytest.raises(protocol.ProtocolError):
        protocol.decode(message)


def test_a_raw_pickle_is_not_a_message():
    with pytest.raises((protocol.ProtocolError, struct.error)):
        protocol.decode(pickle.dumps({"ok": True}))


def test_read_message_waits_until_its_deadline_then_times_out():
    import os
    import time
    r, w = os.pipe()
    try:
        protocol.write_message(w, {"ok": True, "value": 1})
        assert protocol.read_message(r, deadline=time.monotonic() + 5) == {"ok": True, "value": 1}
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            protocol.read_message(r, deadline=start + 0.2)
        assert 0.15 < time.monotonic() - start < 5
        os.write(w, struct.pack("<Q", 100) + b"half")  # a message cut short by a worker that hangs
        with pytest.raises(TimeoutError):
            protocol.read_message(r, deadline=time.monotonic() + 0.2)
    finally:
        os.close(r)
        os.close(w)


def test_read_message_says_eof_when_the_peer_is_gone():
    import os
    r, w = os.pipe()
    os.close(w)
    with pytest.raises(EOFError):
        protocol.read_message(r, deadline=None)
    os.close(r)


def test_reply_kinds_round_trip_and_unknown_kinds_are_errors():
    for kind in protocol.ReplyKind:
        reply = protocol.decode(protocol.encode(protocol.failure(kind, "why", type="ValueError")))
        assert protocol.reply_kind(reply) is kind and reply["message"] == "why" and reply["type"] == "ValueError"
    assert protocol.reply_kind({"ok": True, "value": 3}) is None
    assert protocol.reply_kind({"ok": False, "kind": "something else"}) is protocol.ReplyKind.ERROR


def test_every_reply_kind_the_worker_sends_is_named_in_the_protocol():
    """runtime.py builds its failures only through protocol.failure with a ReplyKind, never a bare string."""
    import ast
    import inspect

    from grader.sandbox import runtime
    tree = ast.parse(inspect.getsource(runtime))
    bare = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Dict)
            and any(isinstance(k, ast.Constant) and k.value == "kind" for k in node.keys)]
    assert bare == [], f"runtime.py builds replies by hand at lines {bare}"


# ---------------------------------------------------------------- what reading a reply may cost (protocol.Bound)

def _frame(header: bytes, blobs=()) -> bytes:
    parts = [struct.pack("<I", len(header)), header, struct.pack("<I", len(blobs))]
    for blob in blobs:
        parts += [struct.pack("<Q", len(blob)), blob]
    return b"".join(parts)


def _npy(array) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array)
    return buf.getvalue()


BOUND = protocol.Bound.answering()


def _over(measure: str) -> bytes:
    """A legally framed message one step over ``measure`` of BOUND, and nothing else over."""
    if measure == "bytes":
        return _frame(b'{"__ndarray__": 0}', [_npy(np.zeros(BOUND.bytes // 8))])
    if measure == "header":
        return _frame(b'"' + b"x" * BOUND.header + b'"')
    if measure == "values":
        return _frame(b"[" + b"0," * BOUND.values + b"0]")
    if measure == "blobs":
        return _frame(b"0", [_npy(np.zeros(0))] * (BOUND.blobs + 1))
    if measure == "depth":
        return _frame(b"[" * (protocol.MAX_DEPTH + 1) + b"]" * (protocol.MAX_DEPTH + 1))
    if measure == "deep json":  # deeper than the JSON parser recurses: never a RecursionError out of decode
        return _frame(b"[" * 100_000 + b"]" * 100_000)
    raise ValueError(measure)


@pytest.mark.parametrize("measure", ["bytes", "header", "values", "blobs", "depth", "deep json"])
def test_a_reply_over_its_bound_is_a_protocol_error_before_it_costs_anything(measure):
    import tracemalloc
    message = _over(measure)
    tracemalloc.start()
    try:
        with pytest.raises(protocol.ProtocolError):
            protocol.decode(message, bound=BOUND)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"refusing a reply over its {measure} bound cost {peak / 2**20:.1f} MB"


AT_BOUND = {  # the costliest replies each measure allows: (message, most it may cost to decode)
    "one big array": (lambda: _frame(b'{"__tensor__": 0}', [_npy(np.zeros((BOUND.bytes - 4096) // 8))]),
                      BOUND.bytes * 1.05),
    "empty lists": (lambda: _frame(b"[" + b"[]," * ((BOUND.values - 3) // 2) + b"[]]"), 16 << 20),
    "empty arrays": (lambda: _frame(b"[" + b",".join(b'{"__ndarray__": %d}' % i for i in range(BOUND.blobs)) + b"]",
                                    [_npy(np.zeros(0))] * BOUND.blobs), 16 << 20),
    "one long string": (lambda: _frame(b'"' + b"x" * (BOUND.header - 2) + b'"'), 4 * BOUND.header),
}


@pytest.mark.parametrize("case", AT_BOUND)
def test_the_costliest_reply_a_bound_allows_costs_about_its_bytes_once_more(case):
    """Decoding allocates what the message says and no more (the message itself is already read): arrays of
    exactly their blobs' bytes, a blob used once, values counted before they are made."""
    import tracemalloc
    make, most = AT_BOUND[case]
    message = make()
    tracemalloc.start()
    try:
        value = protocol.decode(message, bound=BOUND)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert value is not None and peak <= most, f"{case}: {peak / 2**20:.1f} MB"


@pytest.mark.parametrize("blob", [
    _npy(np.zeros(3))[:-1],                                                   # fewer bytes than its shape
    _npy(np.zeros(3)) + b"\0" * 8,                                            # more
    _npy(np.zeros(2, dtype=[("a", "<f8")])),                                  # a structured dtype
    _npy(np.array(["ab"])),                                                   # a string
    _npy(np.zeros(4)).replace(b"(4,)", b"(1000000000000,)").replace(b"'descr': '<f8'", b"'descr': '|V0'"),
])
def test_a_blob_is_exactly_a_numeric_array_of_its_bytes(blob):
    with pytest.raises(protocol.ProtocolError):
        protocol.decode(_frame(b'{"__ndarray__": 0}', [blob]), bound=BOUND)


def test_a_blob_is_used_once_and_a_tag_holds_what_it_should():
    big = _npy(np.zeros(1 << 17))
    with pytest.raises(protocol.ProtocolError, match="blob reference"):  # each use would be a copy in a tensor
        protocol.decode(_frame(b"[" + b",".join([b'{"__tensor__": 0}'] * 1000) + b"]", [big]), bound=BOUND)
    for header in (b'{"__int__": "' + b"9" * 5000 + b'"}', b'{"__tuple__": 5}', b'{"__dict__": [[1]]}',
                   b'{"__float__": [1]}', b'{"a": 1, "b": 2}'):
        with pytest.raises(protocol.ProtocolError):
            protocol.decode(_frame(header), bound=BOUND)


def test_a_fortran_ordered_array_and_a_big_endian_one_come_back_whole():
    for array in (np.asfortranarray(np.arange(12.0).reshape(3, 4)), np.arange(5, dtype=">i4"), np.bool_(True),
                  np.zeros((2, 0, 3), np.complex64), np.arange(6.0).reshape(2, 3)[:, ::2]):
        back = protocol.decode(protocol.encode(array), bound=BOUND)
        assert back.dtype == np.asarray(array).dtype and np.array_equal(back, array)


@pytest.mark.parametrize("header", [
    "{'descr': '<f8', 'fortran_order': True, 'shape': (3, 4), }",      # what the encoder never sends
    "{'descr': '<f8', 'shape': (3, 4), 'fortran_order': False, }",     # keys in another order
    "{'descr': '<f3', 'fortran_order': False, 'shape': (3, 4), }",     # no such dtype
    "{'descr': '|O', 'fortran_order': False, 'shape': (3, 4), }",      # objects
    "{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (3,), }",  # fields
    "{'descr': '<f8', 'fortran_order': False, 'shape': (3, -4), }",    # a negative size
    "{'descr': '<f8', 'fortran_order': False, 'shape': __import__('os'), }",
])
def test_any_other_array_header_is_refused(header):
    raw = header.encode() + b" " * (127 - 10 - len(header)) + b"\n"
    blob = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(raw)) + raw + bytes(96)
    with pytest.raises(protocol.ProtocolError, match="bad array"):
        protocol.decode(_frame(b'{"__ndarray__": 0}', [blob]), bound=BOUND)


def test_decoding_stops_at_the_deadline_of_the_read(tmp_path, monkeypatch):
    """A reply read in time may still take long to decode: the read's deadline holds through the decoding
    (here on a clock that ticks a millisecond each time it is read, from a file that is read at once)."""
    import itertools
    import os
    import time
    many = _frame(b"[" + b",".join(b'{"__ndarray__": %d}' % i for i in range(BOUND.blobs)) + b"]",
                  [_npy(np.zeros(0))] * BOUND.blobs)
    with pytest.raises(TimeoutError):
        protocol.decode(many, bound=BOUND, deadline=time.monotonic() - 1)
    reply = tmp_path / "reply"
    reply.write_bytes(struct.pack("<Q", len(many)) + many)
    fd = os.open(reply, os.O_RDONLY)
    ticks = itertools.count()
    monkeypatch.setattr(protocol.time, "monotonic", lambda: next(ticks) / 1000)
    try:
        with pytest.raises(TimeoutError) as raised:
            protocol.read_message(fd, deadline=0.05, bound=BOUND)
    finally:
        os.close(fd)
    # the read was done (a timeout there would end in read_exactly): it is the decoding's, raised again by read_message
    assert raised.traceback[-1].name == "read_message"


def test_a_reply_may_carry_its_requests_arrays_back_twice_besides_a_result_of_their_size():
    x = np.random.default_rng(0).standard_normal((512, 512, 40))  # 80 MB: more than the fixed allowance
    request = protocol.encode({"op": "call", "name": "f", "args": [x], "kwargs": {}})
    bound = protocol.Bound.answering(protocol.Size.of(request))
    reply = protocol.encode({"ok": True, "value": x, "changed": [{"after": x}, {"after": x}]})
    assert len(reply) > BOUND.bytes
    back = protocol.decode(reply, bound=bound)
    assert np.array_equal(back["value"], x)
    with pytest.raises(protocol.ProtocolError):
        protocol.decode(reply, bound=BOUND)


def test_a_refused_reply_is_not_kept_alive_by_its_error(tmp_path):
    """A test that fails with the error keeps it, and its traceback, in its report: the frames that held the
    message must not be among them."""
    import os
    import tracemalloc
    message = _frame(b'"' + b"x" * BOUND.header + b'"', [_npy(np.zeros(4 << 20))])  # 33 MB, its header over
    reply = tmp_path / "reply"
    reply.write_bytes(struct.pack("<Q", len(message)) + message)
    del message
    fd = os.open(reply, os.O_RDONLY)
    tracemalloc.start()
    try:
        try:
            protocol.read_message(fd, bound=BOUND)
        except protocol.ProtocolError as exc:
            kept = exc
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
        os.close(fd)
    assert "header bytes" in str(kept) and held < 1 << 20, f"{held / 2**20:.1f} MB held"


def test_a_call_sends_back_all_its_arguments_and_a_probe_all_but_its_weights():
    """``echoed``: what both sides compare after a call. A probe's ``state_dict`` is loaded through
    ``load_state_dict`` (a copy), so it is neither sent back nor compared; everything else is."""
    x, weights = np.ones(3), {"w": torch.ones(2)}
    call = {"op": "call", "name": "softmax", "args": [x], "kwargs": {"axis": -1, "state_dict": weights}}
    assert protocol.echoed(call) == {"args": [x], "kwargs": {"axis": -1, "state_dict": weights}}
    probe = {"op": "probe", "name": "run", "kwargs": {"init": {"d": 4}, "state_dict": weights, "x": x}}
    assert protocol.echoed(probe) == {"args": [], "kwargs": {"init": {"d": 4}, "x": x}}


def test_a_dry_call_returns_zeros_of_the_shapes_and_dtypes_the_call_returned():
    """The control worker's baseline returns what the student's call returned, as zeros, so both requests
    carry the same bytes back; anything that is not arrays is returned as nothing."""
    value = (np.ones((3, 2), dtype=np.float32), np.arange(4))
    like = protocol.decode(protocol.encode(protocol.shape_of(value)))  # it travels in the request
    back = protocol.like_value(like)
    assert [(b.shape, b.dtype, b.any()) for b in back] == [((3, 2), np.float32, False),
                                                           ((4,), np.arange(4).dtype, False)]
    assert protocol.like_value(protocol.shape_of(np.zeros((0, 5)))).shape == (0, 5)
    assert protocol.shape_of(3.0) is None and protocol.shape_of((np.ones(2), "x")) is None
