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
