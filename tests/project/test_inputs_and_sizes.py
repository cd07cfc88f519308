"""The two course-wide checks every suite gets: inputs left unchanged (the worker sends the arguments back as the
call left them; the trusted side compares them with what it sent and words the difference) and sizes of one
and calls in a row (one helper). End to end, the catalogue proves them: in-place, squeeze and cached-state
mistakes in tests/mutants/ are caught and named."""
import numpy as np
import pytest
import torch

from grader.engine import testing
from grader.engine.errors import StudentError


def _change(before, after, names=("x",)):
    """The message when the call left the positional arguments ``before`` as ``after`` ("" if unchanged)."""
    try:
        testing.assert_inputs_unchanged("f", {"args": before, "kwargs": {}}, {"args": after, "kwargs": {}},
                                        list(names))
    except AssertionError as exc:
        return str(exc)
    return ""


def test_the_trusted_side_sees_values_dtype_shape_and_container_changes_and_nothing_else():
    x = np.arange(6.0).reshape(2, 3)
    assert _change([x], [x.copy()]) == ""
    nan = np.array([1.0, np.nan])
    assert _change([nan], [nan.copy()]) == ""  # NaN equals NaN: no change
    y = x.copy()
    y[1, 2] = -1.0
    assert "x in place: at index [1, 2] it held 5 before the call and holds -1 after" in _change([x], [y])
    assert "dtype" in _change([x], [x.astype(np.float32)]) and "shape" in _change([x], [x.reshape(3, 2)])
    t = torch.ones(2, 3)
    assert _change([t], [t.clone()]) == ""
    assert "shape" in _change([t], [t.unsqueeze(0)]) and "dtype" in _change([t], [t.long()])
    assert "item 0" not in _change([[3, 1, 2]], [[3, 1, 2]]) == ""
    assert "x[0] in place: it was 3 before the call and is 1 after" in _change([[3, 1, 2]], [[1, 2, 3]])
    assert "it held 2 items before the call and holds 3 after" in _change([[1, 2]], [[1, 2, 3]])
    assert "keys" in _change([{"a": 1}], [{"a": 1, "b": 2}]) and "x['a']" in _change([{"a": 1}], [{"a": 2}])
    assert _change([("a", 1.5, None)], [("a", 1.5, None)]) == ""
    assert "no longer a tuple" in _change([("a",)], [["a"]])
    assert _change([testing.tr("A short one.")], ["A short one."]) == ""  # a marked text is a str
    nested = {"calls": [{"args": [t]}]}
    with pytest.raises(AssertionError, match="argument 1 of forward call 1 in place"):
        testing.assert_inputs_unchanged("g", {"args": [], "kwargs": nested},
                                        {"args": [], "kwargs": {"calls": [{"args": [t * 2]}]}})


def test_the_message_names_the_function_the_input_and_the_first_difference():
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    after = x.copy()
    after[0, 1] = 0.0
    with pytest.raises(AssertionError) as err:
        testing.assert_inputs_unchanged("softmax", {"args": [x], "kwargs": {}}, {"args": [after], "kwargs": {}},
                                        ["x"])
    text = str(err.value)
    assert text.startswith("softmax changed its input x in place: at index [0, 1] it held 2 before the call")
    assert "1 of 4 entries changed" in text and "x -= m" in text
    with pytest.raises(AssertionError, match=r"its shape was \(2, 3\) before the call and is \(1, 2, 3\).*_ "):
        testing.assert_inputs_unchanged("your MultiHeadAttention, in the run check,",
                                        {"args": [], "kwargs": {"mask": torch.ones(2, 3)}},
                                        {"args": [], "kwargs": {"mask": torch.ones(1, 2, 3)}})


def test_arguments_that_do_not_come_back_as_sent_fail_the_call():
    """A worker that leaves the arguments out of its reply, or sends other ones, cannot pass the check: the
    comparison is the trusted side's, and it needs every argument back."""
    x = np.ones(3)
    for after in (None, {}, {"args": [], "kwargs": {}}, {"args": [x], "kwargs": {"y": 1}}, {"args": [x]}):
        with pytest.raises(AssertionError, match="did not come back"):
            testing.assert_inputs_unchanged("f", {"args": [x], "kwargs": {}}, after)
    with pytest.raises(AssertionError, match="cannot be sent back"):
        testing.assert_inputs_unchanged("f", {"args": [[x]], "kwargs": {}}, {"unsendable": "TypeError: a lambda"})


def test_size_calls_are_three_in_a_row_then_each_axis_at_one():
    axes = [testing.Axis("m", 2, 5, "one query"), testing.Axis("d", 3, 4)]
    calls = testing.size_calls(axes)
    assert [c.sizes for c in calls] == [{"m": 2, "d": 3}, {"m": 5, "d": 4}, {"m": 2, "d": 3}, {"m": 1, "d": 3}]
    assert "right after one with m=2, d=3" in calls[1].label and "right after one with m=5, d=4" in calls[2].label
    assert calls[3].label.startswith("with m=1 (one query") and "squeeze" in calls[3].cause
    assert "kept between calls" in calls[0].cause


def test_check_sizes_says_which_call_went_wrong_and_why():
    axes = [testing.Axis("n", 2, 4, "one key")]
    seen = []

    def run(batch):
        seen.extend(batch)
        return [s["n"] for s in batch]

    def check(result, sizes):
        if sizes["n"] == 1:
            raise AssertionError("the result has shape (), expected (1,)")

    with pytest.raises(AssertionError, match=r"^f with n=1 \(one key; n=1\): the result has shape \(\), expected "
                                             r"\(1,\)\. Right for other sizes but wrong when an axis has size 1"):
        testing.check_sizes(axes, run, check, what="f")
    assert seen == [{"n": 2}, {"n": 4}, {"n": 2}, {"n": 1}]  # one call at a time, in order

    def crash(batch):
        raise StudentError({"kind": "error", "type": "IndexError", "mro": ["IndexError"], "message": "boom"}, "f")

    with pytest.raises(StudentError, match=r"IndexError: boom \(f on a call with n=2\. If this function passes the "
                                           r"other tests, the usual cause is something kept between calls"):
        testing.check_sizes(axes, crash, check, what="f")  # still the student's error (status error), located
    testing.check_sizes(axes, run, lambda result, sizes: None, what="f")  # nothing wrong: nothing raised


def test_in_groups_keeps_calls_in_a_row_on_one_instance_where_the_sizes_allow():
    batch = [{"h": 2, "n": 3}, {"h": 2, "n": 5}, {"h": 2, "n": 3}, {"h": 1, "n": 3}, {"h": 2, "n": 1}]
    groups = []
    out = testing.in_groups(batch, lambda s: s["h"], lambda g: groups.append(g) or [s["n"] for s in g])
    assert out == [3, 5, 3, 3, 1]
    assert [[s["n"] for s in g] for g in groups] == [[3, 5, 3], [3], [1]]
