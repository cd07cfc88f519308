"""Properties over generated inputs (``grader/engine/properties.py``), tried on plain functions standing for a
student's: reproducible from the seed, the smallest failing input in the feedback, a timeout never shrunk,
a failure that depends on earlier calls named as such, and calls in a row that always hold the patterns the
contract's "keep nothing between calls" needs (short then long, long then short, another width)."""
import itertools

import numpy as np
import pytest
from hypothesis import strategies as st

from grader.engine import properties, testing
from grader.engine.errors import StudentError, StudentTimeout
from grader.i18n import render


@pytest.fixture(autouse=True)
def stage_seed():
    testing.use_stage_seed(424242)
    yield
    testing.use_stage_seed(None)


def drawn_values(case, examples=8, seed=None):
    if seed is not None:
        testing.use_stage_seed(seed)
    seen = []

    def prop(draw):
        seen.append(draw(st.integers(0, 10 ** 9), "n"))
    properties.check(prop, case=case, examples=examples, what="f")
    return seen


def failure(fn, *args, **kwargs) -> str:
    with pytest.raises(AssertionError) as info:
        fn(*args, **kwargs)
    return render(info.value.args[0], "en")


def test_the_examples_are_drawn_from_the_stage_seed_and_case():
    first = drawn_values(1)
    assert drawn_values(1) == first                      # the same seed and case: the same examples
    assert drawn_values(2) != first                      # another case
    assert drawn_values(1, seed=7) != first              # another submission's seed
    assert len(first) == 8


def test_a_failure_shows_the_smallest_failing_input_and_keeps_its_message():
    def softmax_like(x):
        return np.where(np.isneginf(x), -1e30, x)         # -inf becomes finite

    def prop(draw):
        x = draw(properties.arrays(properties.shapes(1, 3, 4, 20), properties.floats(5.0, extremes=(-np.inf,))),
                 "x")
        testing.assert_close(softmax_like(x), x, what="f(x)")
    message = failure(properties.check, prop, case=3, examples=30, what="f")
    assert message.startswith("f(x) holds -1e+30")
    assert "smallest failing input found from this submission's seed: x = array([-inf], shape=(1,)" in message
    again = failure(properties.check, prop, case=3, examples=30, what="f")
    assert again == message                              # and the same again: a report reproduces


def test_a_timeout_ends_the_run_at_once_unshrunk():
    calls = []

    def prop(draw):
        calls.append(draw(st.integers(0, 100), "n"))
        raise StudentTimeout("no answer after 5 s")
    with pytest.raises(StudentTimeout):
        properties.check(prop, case=4, examples=20, what="f")
    assert len(calls) == 1


def test_the_students_error_keeps_its_status_and_gains_the_input():
    def prop(draw):
        n = draw(st.integers(0, 50), "n")
        if n > 3:
            raise StudentError({"ok": False, "kind": "error", "type": "IndexError", "message": "index out of range",
                                "mro": ["IndexError", "Exception"]}, "f(n)")
    with pytest.raises(StudentError) as info:
        properties.check(prop, case=5, examples=20, what="f")
    assert info.value.type_name == "IndexError"
    assert "n = 4" in render(info.value.message, "en")


def test_shrinking_stops_after_its_budget_with_the_smallest_input_so_far():
    calls = []

    def prop(draw):
        xs = draw(st.lists(st.integers(0, 1000), min_size=5, max_size=30), "xs")
        calls.append(xs)
        assert sum(xs) < 200, "too large"
    message = failure(properties.check, prop, case=6, examples=10, what="f", shrink_calls=5)
    assert "too large" in message and "xs = " in message
    assert len(calls) <= 10 + 5 + 1


def test_a_failure_that_does_not_repeat_is_named_as_state_kept_between_calls():
    state = {"calls": 0}

    def prop(draw):
        draw(st.integers(0, 5), "n")
        state["calls"] += 1
        assert state["calls"] != 3, "wrong on the third call"
    message = failure(properties.check, prop, case=7, examples=10, what="f")
    assert "wrong on the third call" in message and "depends on earlier calls" in message


def sizes_function(log, cache=None):
    """A Function whose calls are logged; with ``cache``, a table cached at the first call and sliced."""
    def make(s, g):
        return (s["n"], s["d"])

    def call(n, d):
        log.append((n, d))
        if cache is not None:
            if "table" not in cache:
                cache["table"] = np.arange(n * d, dtype=float).reshape(n, d)
            return cache["table"][:n, :d]
        return np.arange(n * d, dtype=float).reshape(n, d)

    def check(got, args):
        n, d = args
        testing.assert_close(got, np.arange(n * d, dtype=float).reshape(n, d), what="table")
    return properties.Function("table", {"n": (1, 6), "d": (1, 4)}, make, call, check, features=("d",))


def test_every_sequence_of_calls_holds_short_then_long_long_then_short_and_another_width():
    log = []
    properties.calls_in_a_row([sizes_function(log)], case=8, examples=3, steps=2, what="table")
    # a run starts with its three initial rules, two calls each, in an order drawn from the seed
    pairs = [(log[i], log[i + 1]) for i in (0, 2, 4)]
    longer = [a[0] <= b[0] and a[1] <= b[1] and a != b for a, b in pairs]
    shorter = [a[0] >= b[0] and a[1] >= b[1] and a != b for a, b in pairs]
    wider = [a[0] == b[0] and a[1] != b[1] for a, b in pairs]
    assert any(longer[i] and shorter[j] and wider[k] for i, j, k in itertools.permutations(range(3))), pairs
    assert len(log) > 6


def test_a_table_cached_at_the_first_call_fails_with_the_sequence_and_the_usual_cause():
    message = failure(properties.calls_in_a_row, [sizes_function([], cache={})], case=9, examples=4, steps=3,
                      what="table")
    assert "smallest failing sequence of calls found from this submission's seed: 1. table(" in message
    assert "kept between calls" in message
