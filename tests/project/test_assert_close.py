"""The hidden suites' comparison (``grader/engine/testing.py``): ``assert_close`` and its relatives
``assert_matches``, ``matches``, ``which_mistake`` and ``check_function_sizes``.

Every hidden test rests on them, so a wrong verdict here is a wrong verdict everywhere. In particular an
infinity must match exactly, same sign and same place: the bound ``atol + rtol * |expected|`` is infinite
where the expected value is, and used alone it would accept +inf, 0 or 5 for -inf (issue 35: three
log_softmax mutants scored 8/8 that way). This file is also the mutation target's suite for these
functions (``make mutation``).
"""
import numpy as np
import pytest

from grader.engine import testing
from grader.engine.testing import Axis, assert_close, assert_matches, assert_shape, matches, which_mistake
from grader.i18n import render

INF = np.inf


def fails(fn, *args, **kwargs) -> str:
    """The English message of the AssertionError ``fn`` must raise."""
    with pytest.raises(AssertionError) as info:
        fn(*args, **kwargs)
    return render(info.value.args[0], "en")


# ---------------------------------------------------------------- infinities

@pytest.mark.parametrize("got", [INF, 0.0, 5.0, -1e308, 1.0])
def test_neg_inf_expected_accepts_only_neg_inf(got):
    expected = np.array([0.5, -INF, 2.0])
    message = fails(assert_close, np.array([0.5, got, 2.0]), expected, what="log_softmax(x)")
    assert "index (1,)" in message and "-inf" in message and "log_softmax(x)" in message
    assert "1 of 3" in message


@pytest.mark.parametrize("got", [-INF, 0.0, 1e308])
def test_pos_inf_expected_accepts_only_pos_inf(got):
    fails(assert_close, np.array([got]), np.array([INF]))


@pytest.mark.parametrize("got", [INF, -INF])
def test_an_infinity_where_a_finite_value_is_expected_fails(got):
    message = fails(assert_close, np.array([[1.0, 2.0], [3.0, got]]), np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert "index (1, 1)" in message


def test_matching_infinities_pass_and_the_rest_is_still_compared():
    expected = np.array([[-INF, 1.0, INF], [-INF, -INF, -INF]])
    assert_close(expected.copy(), expected)
    assert_close(expected + np.array([[0.0, 1e-9, 0.0], [0.0, 0.0, 0.0]]), expected, atol=1e-8)
    fails(assert_close, expected + np.array([[0.0, 1e-3, 0.0], [0.0, 0.0, 0.0]]), expected)


def test_infinities_count_every_misplaced_entry():
    message = fails(assert_close, np.array([0.0, 0.0, -INF, 1.0]), np.array([-INF, -INF, 0.0, 1.0]))
    assert "index (0,)" in message and "3 of 4" in message


def test_scalars_and_zero_dimensional_values():
    assert_close(-INF, -INF)
    assert_close(np.float64(-INF), np.array(-INF))
    fails(assert_close, 0.0, -INF)
    fails(assert_close, np.array(-INF), 1.0)
    assert_close(2.0, 2.0 + 1e-12)


def test_nan_rules_are_unchanged():
    assert_close(np.array([np.nan, 1.0]), np.array([np.nan, 1.0]))
    assert "NaN" in fails(assert_close, np.array([np.nan, 1.0]), np.array([0.0, 1.0]))
    fails(assert_close, np.array([0.0, 1.0]), np.array([np.nan, 1.0]))
    fails(assert_close, np.array([INF, 1.0]), np.array([np.nan, 1.0]))
    fails(assert_close, np.array([np.nan]), np.array([-INF]))


# ---------------------------------------------------------------- the bound

def test_the_bound_is_atol_plus_rtol_times_the_expected_value():
    assert_close(np.array([1.0 + 0.9e-3]), np.array([1.0]), atol=1e-3, rtol=0.0)
    fails(assert_close, np.array([1.0 + 1.1e-3]), np.array([1.0]), atol=1e-3, rtol=0.0)
    assert_close(np.array([100.0 + 0.9]), np.array([100.0]), atol=0.0, rtol=1e-2)
    fails(assert_close, np.array([100.0 + 1.1]), np.array([100.0]), atol=0.0, rtol=1e-2)
    # relative to the expected value, not to the result
    fails(assert_close, np.array([200.0]), np.array([100.0]), atol=0.0, rtol=0.6)
    assert_close(np.array([0.0]), np.array([0.0]), atol=0.0, rtol=0.0)


def test_the_message_names_the_worst_entry():
    message = fails(assert_close, np.array([1.0, 2.5, 3.1]), np.array([1.0, 2.0, 3.0]), what="softmax(x)",
                    hint="Look at the axis.")
    assert "index (1,)" in message and "got 2.5" in message and "expected 2" in message
    assert "2 of 3" in message and message.startswith("softmax(x)") and message.endswith("Look at the axis.")


def test_shapes_must_agree_exactly():
    assert "shape (3,)" in fails(assert_close, np.ones(3), np.ones((3, 1)))
    fails(assert_close, np.ones((1, 3)), np.ones(3))
    assert "None" in fails(assert_close, None, np.ones(3))
    assert "not numbers" in fails(assert_close, np.array(["a", "b"]), np.ones(2))
    assert_shape(np.ones((2, 3)), (2, 3))


def test_booleans_compare_as_numbers():
    assert_close(np.array([True, False]), np.array([True, False]))
    fails(assert_close, np.array([True, True]), np.array([True, False]))
    assert_close(np.array([1, 0]), np.array([True, False]))


# ---------------------------------------------------------------- relatives

def test_matches_treats_infinities_exactly():
    assert matches(np.array([-INF, 1.0]), np.array([-INF, 1.0]))
    assert not matches(np.array([INF, 1.0]), np.array([-INF, 1.0]))
    assert not matches(np.array([0.0, 1.0]), np.array([-INF, 1.0]))
    assert matches(np.array([np.nan]), np.array([np.nan]))
    assert not matches(np.ones(2), np.ones(3))
    assert not matches("text", np.ones(1))


def test_assert_matches_fails_on_a_wrong_infinity_and_names_the_mistake():
    x = np.array([0.0, -INF, 1.0])
    wrong = np.array([0.0, -1e9, 1.0])
    message = fails(assert_matches, wrong, x, what="log_softmax(x)",
                    mistakes={"-inf was replaced by a large negative number.": lambda: wrong}, hint="the formula")
    assert message.endswith("-inf was replaced by a large negative number.")
    assert fails(assert_matches, np.array([0.0, 5.0, 1.0]), x, mistakes={"no": lambda: wrong},
                 hint="the formula").endswith("the formula")


def test_assert_matches_finite_refuses_inf_and_nan():
    message = fails(assert_matches, np.array([1.0, INF]), np.array([1.0, 2.0]), finite=True)
    assert "1 of 2" in message and "finite" in message
    assert "NaN" in fails(assert_matches, np.array([np.nan, 2.0]), np.array([1.0, 2.0]), finite=True)


def test_which_mistake_order_and_fraction():
    got = np.array([1.0, 2.0])
    assert which_mistake(got, {"a": np.array([1.0, 2.0]), "b": np.array([1.0, 2.0])}, "h") == "a"
    assert which_mistake(got, [("a", lambda: 1 / 0), ("b", got)], "h") == "b"
    assert which_mistake(got, {"a": np.array([5.0, 5.0])}, "h") == "h"
    assert which_mistake(np.array([1.0, INF]), {"a": np.array([1.0, INF])}, "h", finite=True) == "h"
    assert which_mistake(np.array([1.0, INF]), {"a": np.array([1.0, INF])}, "h") == "a"
    # within a fraction of the miss: named only when much closer to the mistake than to the expected value
    assert which_mistake(np.array([1.1]), {"a": np.array([1.12])}, "h", expected=np.array([2.1]),
                         match_fraction=0.2) == "a"
    assert which_mistake(np.array([1.1]), {"a": np.array([1.5])}, "h", expected=np.array([2.1]),
                         match_fraction=0.2) == "h"


def test_check_function_sizes_compares_infinities_exactly():
    def reference_fn(x):
        return np.where(x < 0, -INF, x)

    def student(x):
        return np.where(x < 0, -1e30, x)

    axes = [Axis("n", 3, 5, "one entry")]
    make = lambda s: (np.arange(s["n"], dtype=float) - 1.0,)  # noqa: E731 - one entry is negative
    testing.check_function_sizes(reference_fn, reference_fn, axes, make, what="f")
    message = fails(testing.check_function_sizes, student, reference_fn, axes, make, what="f")
    assert "-inf" in message and "n=3" in message


# ---------------------------------------------------------------- the defaults the suites rely on

def test_the_default_tolerances():
    assert_close(np.array([0.0]), np.array([0.9e-8]))                 # atol 1e-8
    fails(assert_close, np.array([0.0]), np.array([1.1e-8]))
    assert_close(np.array([1e3 + 0.9e-3]), np.array([1e3]))           # rtol 1e-6
    fails(assert_close, np.array([1e3 + 1.1e-3]), np.array([1e3]))
    assert_matches(np.array([0.0]), np.array([0.9e-8]))
    fails(assert_matches, np.array([0.0]), np.array([1.1e-8]))
    assert_matches(np.array([1e3 + 0.9e-3]), np.array([1e3]))
    fails(assert_matches, np.array([1e3 + 1.1e-3]), np.array([1e3]))
    assert matches(np.array([0.0]), np.array([0.9e-7])) and not matches(np.array([0.0]), np.array([1.1e-7]))
    assert matches(np.array([1e3 + 0.9e-3]), np.array([1e3])) and not matches(np.array([1e3 + 1.1e-3]), np.array([1e3]))


def test_a_mistake_is_named_within_the_default_match_tolerances_only():
    expected, got = np.array([1.0, 2.0]), np.array([1.0, 0.0])
    near = {"the mistake.": got + np.array([0.0, 0.9e-7])}
    far = {"the mistake.": got + np.array([0.0, 1.1e-7])}
    assert fails(assert_matches, got, expected, mistakes=near, hint="h").endswith("the mistake.")
    assert fails(assert_matches, got, expected, mistakes=far, hint="h").endswith("h")
    big = np.array([1e3, 3e3])
    assert fails(assert_matches, big, expected, mistakes={"m.": big + np.array([0.0, 2.9e-3])},
                 hint="h").endswith("m.")                                    # match_rtol 1e-6
    assert fails(assert_matches, big, expected, mistakes={"m.": big + np.array([0.0, 3.1e-3])},
                 hint="h").endswith("h")


def test_infinite_results_are_compared_unless_finite_is_asked():
    assert_matches(np.array([1.0, np.inf]), np.array([1.0, np.inf]))        # finite=False by default
    message = fails(assert_matches, np.array([1.0, np.inf, 2.0, np.inf]), np.array([1.0, 2.0, 2.0, 3.0]),
                    finite=True)
    assert "at index (1,)" in message and "2 of 4" in message               # the first one, and how many


def test_the_first_nan_and_the_worst_entry_are_the_ones_named():
    message = fails(assert_close, np.array([0.0, np.nan, np.nan]), np.array([0.0, 1.0, 2.0]))
    assert "index (1,)" in message and "1 was expected" in message
    message = fails(assert_close, np.array([1.5, 0.0, 7.0, 0.0]), np.array([1.0, 0.0, 2.0, -1.0]))
    assert "index (2,)" in message and "off by 5" in message


def test_which_mistake_needs_the_shapes_to_agree():
    got = np.array([1.0, 2.0])
    assert which_mistake(got, {"a": np.array([1.0, 2.0, 3.0])}, "h") == "h"
    assert which_mistake(got, {"a": got}, "h", expected=np.array([1.0]), match_fraction=0.2) == "h"
    assert which_mistake(got, {"a": got}, "h", expected=np.array([1.0, 2.0, 3.0]), match_fraction=0.2) == "h"
    assert which_mistake(got, {"a": got}, "h", expected=None, match_fraction=0.2) == "h"
    assert which_mistake(np.array([[1.0, 2.0]]), {"a": got}, "h") == "h"


def test_scalars_show_as_numbers_and_arrays_as_arrays():
    assert "got 2.5, expected 2 " in fails(assert_close, 2.5, 2.0)
    message = fails(assert_close, np.array([[1.23456789, 2.0]]), np.array([[1.0, 2.0]]))
    assert "got 1.2346" in message or "got 1.23457" in message


def test_shapes_must_agree_in_every_order():
    fails(assert_close, np.ones((3, 1)), np.ones(3))             # (3, 1) would broadcast against (3,)
    fails(assert_shape, np.ones(4), (3,))
    fails(assert_shape, np.ones((2, 3)), (2,))
    assert not matches(np.ones((2, 3)), np.ones(3)) and not matches(np.ones(3), np.ones((2, 3)))


def test_what_cannot_be_an_array_is_said_in_words():
    class Refuses:
        def __array__(self, dtype=None, copy=None):
            raise TypeError("no array here")
    assert "not an array" in fails(assert_close, [[1.0, 2.0], [3.0]], np.ones(2))   # ragged: numpy's ValueError
    assert "not an array" in fails(assert_close, Refuses(), np.ones(2))             # numpy's TypeError


def test_a_non_finite_result_says_which_kind():
    assert "contains NaN at index (1,)" in fails(assert_matches, np.array([1.0, np.nan]), np.array([1.0, 2.0]),
                                                 finite=True)
    assert "contains inf at index (1,)" in fails(assert_matches, np.array([1.0, np.inf]), np.array([1.0, 2.0]),
                                                 finite=True)


def test_the_match_fraction_scales_with_the_miss():
    # miss = |3 - 1| = 2, match_fraction 0.2: a mistake is named within 0.2 * 2 = 0.4 of the result
    got, expected = np.array([3.0]), np.array([1.0])
    assert which_mistake(got, {"a": got + 0.3}, "h", expected=expected, match_fraction=0.2) == "a"
    assert which_mistake(got, {"a": got + 0.5}, "h", expected=expected, match_fraction=0.2) == "h"
    # a miss below 1 is not rounded up: |1.1 - 1.3| = 0.2, named within 0.04 only
    got, expected = np.array([1.1]), np.array([1.3])
    assert which_mistake(got, {"a": got + 0.03}, "h", expected=expected, match_fraction=0.2) == "a"
    assert which_mistake(got, {"a": got + 0.1}, "h", expected=expected, match_fraction=0.2) == "h"
