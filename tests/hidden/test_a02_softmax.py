"""Hidden suite of stage 2 - a numerically stable softmax (slide 14).

Expected values come from the reference solution, imported here in the trusted
process; the student's module runs in the worker behind `student`.

Tolerances: softmax atol 1e-12, rtol 1e-9. Weights lie in [0, 1]; any exact
stable method (max-shift, logsumexp, exp then divide or multiply by the
reciprocal) agrees with the reference to ~1e-15, while every mistake we look
for (wrong axis, overflow, uniform weights on masked rows) is off by > 1e-3.
log_softmax atol 1e-9, rtol 1e-9: its values reach -1e4 and rounding there is
~1e-12 absolute, still far below any real mistake (an -inf from underflow, a
wrong axis).
"""
import numpy as np
import pytest
from hypothesis import strategies as st

from grader.engine import properties, testing
from grader.engine.testing import (
    Axis,
    as_array,
    assert_close,
    assert_matches,
    assert_shape,
    check_function_sizes,
    reference,
    which_mistake,
)
from grader.i18n import tr

ref = reference("a02_softmax")
SOFTMAX_TOL = dict(atol=1e-12, rtol=1e-9)
LOG_TOL = dict(atol=1e-9, rtol=1e-9)


def rng(case):
    """The inputs of case ``case``: drawn from this submission's stage seed (course secret,
    submission id, stage), so no two students, and no two terms, see the same numbers."""
    return testing.rng(2000 + case)


def _slice_sums(arr, axis):
    with np.errstate(all="ignore"):
        return np.sum(arr, axis=axis)


def _softmax_diagnosis(got, x, axis):
    """The known mistakes behind a wrong softmax output, and the hint when none of them is it:
    keyword arguments for assert_matches (and which_mistake)."""
    try:
        arr = np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        return {}
    other_axes = [a for a in range(-x.ndim, 0) if a != (axis if axis < 0 else axis - x.ndim)]
    mistakes = {tr("softmax seems to run over axis {other_axis} instead of axis={axis}: normalise along the `axis` "
                   "argument.", other_axis=a, axis=axis):
                (lambda a=a: ref.softmax(x, axis=a)) for a in other_axes}

    def no_keepdims():
        e = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e / np.sum(e, axis=axis)
    mistakes.update({
        tr("The sum along `axis` seems taken without keepdims=True, so it broadcasts onto the wrong entries."):
        no_keepdims,
        tr("A fully masked slice (all -inf) got uniform weights: -inf seems replaced by a large negative number. "
           "Blocked entries must keep weight 0, and an all -inf slice gives all zeros."):
        lambda: ref.softmax(np.where(np.isneginf(x), -1e9, x), axis=axis),
    })
    default = tr("softmax(x)_i = exp(x_i - max) / sum_j exp(x_j - max) along `axis` (slide 14).")
    if arr.shape == x.shape:
        live = ~np.isneginf(x).all(axis=axis)
        sums = _slice_sums(arr, axis)
        if np.isnan(arr).any():
            nan_slices = np.isnan(arr).any(axis=axis)
            if (nan_slices <= ~live).all():
                default = (tr("NaN on a slice that is all -inf: its max is -inf and x - max = -inf - (-inf) = "
                              "NaN. Give such a slice all-zero weights (shift it by 0, or skip the division "
                              "where the sum is 0)."))
            else:
                default = (tr("NaN from overflow: exp of a large score is inf and inf / inf = NaN. Subtract the "
                              "max along `axis` before np.exp (slide 14)."))
        elif x.size > x.shape[axis] and abs(float(np.sum(arr)) - 1.0) < 1e-9:
            default = (tr("All the weights together sum to 1, but each slice along `axis` must sum to 1: the sum "
                          "seems taken over the whole array (np.sum without axis)."))
        elif live.any() and not np.allclose(sums[live], 1.0, atol=1e-9):
            default = (tr("The slices along axis={axis} sum to {sums}..., not 1: divide "
                          "exp(x - max) by its own sum along `axis` (keepdims=True).",
                          axis=axis, sums=np.round(sums[live].ravel()[:4], 4)))
    return dict(mistakes=mistakes, hint=default)


def call(fn, *args, **kwargs):
    """Call the student; explain a broadcasting crash, the usual sign of a missing keepdims=True."""
    from grader.engine.errors import StudentError
    try:
        return fn(*args, **kwargs)
    except StudentError as exc:
        if "broadcast" in exc.message:
            raise AssertionError(
                tr("{function} raised {exception}: {message}. The sum (or max) along `axis` loses that "
                   "axis; use keepdims=True so it broadcasts back onto its slice.",
                   function=fn.__name__, exception=exc.type_name, message=exc.message)) from None
        raise


# ---------------------------------------------------------------- softmax

@pytest.mark.parametrize("shape", [(1,), (7,), (4, 5), (2, 3, 6)])
def test_softmax_values(student, shape):
    """softmax matches the reference on random scores along the last axis"""
    x = rng(len(shape)).normal(size=shape) * 3
    got = call(student.softmax, x)
    assert_matches(got, ref.softmax(x), what=f"softmax(x {shape})", **SOFTMAX_TOL, **_softmax_diagnosis(got, x, -1))


@pytest.mark.parametrize("shape,axis", [((4, 5), 0), ((3, 4, 5), 1), ((3, 4, 5), 0), ((3, 4, 5), -2)])
def test_softmax_respects_axis(student, shape, axis):
    """softmax normalises along the given axis, not always the last one"""
    x = rng(axis + 10).normal(size=shape) * 2
    got = call(student.softmax, x, axis=axis)
    assert_matches(got, ref.softmax(x, axis=axis), what=f"softmax(x {shape}, axis={axis})", **SOFTMAX_TOL,
                   **_softmax_diagnosis(got, x, axis))


def test_softmax_lecture_example(student):
    """softmax([1, 2, 3]) is [0.0900, 0.2447, 0.6652]: positive, sums to 1, larger score larger weight (slide 14)"""
    x = np.array([1.0, 2.0, 3.0])
    got = call(student.softmax, x)
    assert_matches(got, np.exp(x) / np.exp(x).sum(), what="softmax([1, 2, 3])", **SOFTMAX_TOL,
                   **_softmax_diagnosis(got, x, -1))


@pytest.mark.parametrize("scale", [1e2, 1e4])
def test_softmax_large_inputs_no_overflow(student, scale):
    """softmax of scores around +-1e4 gives finite weights (no overflow, no NaN)"""
    x = rng(3).normal(size=(6, 9)) * scale
    x[0] = [1e4, 1e4 - 1, 1e4 - 2, -1e4, 0, 5e3, 1e4, -5e3, 2.0]
    got = call(student.softmax, x)
    diagnosis = _softmax_diagnosis(got, x, -1)
    arr = as_array(got, what=tr("softmax of scores of magnitude {scale}", scale=f"{scale:g}"))
    if arr.shape == x.shape and not np.isfinite(arr).all():
        diagnosis = dict(hint=tr("Overflow: np.exp of a large score is inf (and inf / inf is NaN). Subtract the "
                                 "max along `axis` before np.exp; softmax(x) == softmax(x - max) (slide 14)."))
    assert_matches(got, ref.softmax(x), what=tr("softmax of scores of magnitude {scale}", scale=f"{scale:g}"),
                   **SOFTMAX_TOL, **diagnosis)


def test_softmax_properties_rows_sum_to_one(student):
    """every softmax slice is non-negative and sums to 1, and adding a constant changes nothing"""
    x = rng(4).normal(size=(5, 8)) * 10
    w = assert_shape(call(student.softmax, x), x.shape, what="softmax(x (5, 8))")
    sums = w.sum(axis=-1)
    assert (w >= 0).all(), tr("softmax gave negative weights (min {smallest}); exp is never negative.",
                              smallest=f"{w.min():.3g}")
    assert np.allclose(sums, 1.0, atol=1e-12), (
        tr("softmax rows sum to {sums} instead of 1: divide exp(x - max) by its sum along `axis` "
           "(keepdims=True so it broadcasts back onto the slice).", sums=np.round(sums, 4)))
    shifted = as_array(call(student.softmax, x + 1000.0), what="softmax(x + 1000)")
    assert_close(shifted, w, what="softmax(x + 1000)", atol=1e-12, rtol=1e-9,
                 hint=tr("Softmax is unchanged by adding a constant to every score; large scores must not "
                         "overflow (subtract the max first)."))


def test_softmax_neg_inf_gets_zero_weight(student):
    """softmax gives weight exactly 0 to -inf entries and renormalises the others"""
    x = rng(5).normal(size=(4, 6)) * 5
    x[0, [1, 4]] = -np.inf
    x[2, :5] = -np.inf
    x[3, ::2] = -np.inf
    got = call(student.softmax, x)
    w = assert_shape(got, x.shape, what=tr("softmax with -inf entries"))
    assert not np.isnan(w).any(), (
        # i18n: {diagnosis} is a sentence (its own message) naming the likely mistake, or empty.
        tr("softmax with -inf entries returned NaN. {diagnosis}",
           diagnosis=which_mistake(got, **_softmax_diagnosis(got, x, -1))))
    assert np.all(w[np.isneginf(x)] == 0.0), (
        tr("A -inf entry got a non-zero weight: -inf must stay -inf through the max shift and become exp(-inf) = "
           "0."))
    assert_matches(got, ref.softmax(x), what=tr("softmax with -inf entries"), **SOFTMAX_TOL,
                   **_softmax_diagnosis(got, x, -1))


@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_fully_masked_slice_is_zero(student, axis):
    """a slice that is all -inf gives all-zero weights, not NaN, and leaves the other slices intact"""
    x = rng(6).normal(size=(4, 4))
    if axis == -1:
        x[1, :] = -np.inf
    else:
        x[:, 2] = -np.inf
    x[3, 0] = -np.inf
    got = call(student.softmax, x, axis=axis)
    assert_matches(got, ref.softmax(x, axis=axis), what=tr("softmax(x, axis={axis}) with an all -inf slice",
                                                           axis=axis),
                   **SOFTMAX_TOL, **_softmax_diagnosis(got, x, axis))


# ---------------------------------------------------------------- log_softmax

def _log_softmax_diagnosis(got, x, axis):
    """The known mistakes behind a wrong log_softmax output, and the hint when none of them is it."""
    try:
        arr = np.asarray(got, dtype=np.float64)
    except (TypeError, ValueError):
        return {}
    other_axes = [a for a in range(-x.ndim, 0) if a != (axis if axis < 0 else axis - x.ndim)]
    mistakes = {tr("log_softmax seems to run over axis {other_axis} instead of axis={axis}.", other_axis=a, axis=axis):
                (lambda a=a: ref.log_softmax(x, axis=a)) for a in other_axes}
    mistakes[tr("Overflow: log(sum(exp(x))) without subtracting the max first is log(inf). Compute x - max - "
                "log(sum(exp(x - max))).")] = lambda: x - np.log(np.sum(np.exp(x), axis=axis, keepdims=True))
    mistakes[tr("It looks like log(softmax(x)): exp of a very negative shifted score underflows to 0 and its log "
                "is -inf. Compute x - max - log(sum(exp(x - max))) instead.")] = \
        lambda: np.log(ref.softmax(x, axis=axis))
    default = tr("log_softmax(x) = (x - max) - log(sum(exp(x - max))) along `axis`.")
    if arr.shape == x.shape:
        finite_expected = np.isfinite(ref.log_softmax(x, axis=axis))
        if np.isneginf(arr[finite_expected]).all() or np.isnan(arr[finite_expected]).all():
            default = (tr("Overflow: every entry came out -inf/NaN; subtract the max along `axis` before np.exp."))
        elif np.isneginf(arr[finite_expected]).any():
            default = (tr("Underflow: an entry whose log-probability is finite came out -inf. That happens with "
                          "log(softmax(x)); compute x - max - log(sum(exp(x - max))) instead."))
        elif np.isnan(arr).any() or np.isposinf(arr).any():
            default = (tr("NaN/inf from overflow: subtract the max along `axis` before np.exp, exactly as in "
                          "softmax. An all -inf slice stays all -inf."))
    return dict(mistakes=mistakes, hint=default)


@pytest.mark.parametrize("shape,axis", [((7,), -1), ((4, 5), -1), ((4, 5), 0), ((2, 3, 4), 1)])
def test_log_softmax_values(student, shape, axis):
    """log_softmax matches the reference on random scores along the given axis"""
    x = rng(20 + len(shape)).normal(size=shape) * 3
    got = call(student.log_softmax, x, axis=axis)
    assert_matches(got, ref.log_softmax(x, axis=axis), what=f"log_softmax(x {shape}, axis={axis})", **LOG_TOL,
                   **_log_softmax_diagnosis(got, x, axis))


def test_log_softmax_large_inputs_no_overflow(student):
    """log_softmax of scores around +-1e4 is finite and exact (no overflow)"""
    x = rng(21).normal(size=(5, 7)) * 1e4
    got = call(student.log_softmax, x)
    assert_matches(got, ref.log_softmax(x), what=tr("log_softmax of scores of magnitude 1e4"), **LOG_TOL,
                   **_log_softmax_diagnosis(got, x, -1))


def test_log_softmax_tiny_probabilities_do_not_underflow(student):
    """log_softmax([0, -800, -1e4]) is about [0, -800, -1e4], not -inf (no log of an underflowed 0)"""
    x = np.array([[0.0, -800.0, -1e4], [5.0, 5.0 - 750.0, 3.0]])
    got = call(student.log_softmax, x)
    assert_matches(got, ref.log_softmax(x), what="log_softmax([[0, -800, -1e4], [5, -745, 3]])", **LOG_TOL,
                   **_log_softmax_diagnosis(got, x, -1))


def test_log_softmax_neg_inf_stays_neg_inf(student):
    """log_softmax keeps -inf entries at -inf (an all -inf slice stays all -inf) and the rest finite"""
    x = rng(22).normal(size=(3, 5))
    x[0, [0, 3]] = -np.inf
    x[2, :] = -np.inf
    got = call(student.log_softmax, x)
    arr = assert_shape(got, x.shape, what=tr("log_softmax with -inf entries"))
    assert not np.isnan(arr).any(), (
        tr("log_softmax with -inf entries returned NaN. With an all -inf slice the max is -inf and x - max is "
           "NaN: shift such a slice by 0, and keep every -inf entry at -inf (log of a zero weight)."))
    assert_matches(got, ref.log_softmax(x), what=tr("log_softmax with -inf entries"), **LOG_TOL,
                   **_log_softmax_diagnosis(got, x, -1))


def test_log_softmax_agrees_with_softmax(student):
    """exp(log_softmax(x)) equals softmax(x) for the student's own two functions"""
    x = rng(23).normal(size=(4, 6)) * 4
    w = as_array(call(student.softmax, x, axis=0), what="softmax(x, axis=0)")
    lw = as_array(call(student.log_softmax, x, axis=0), what="log_softmax(x, axis=0)")
    assert_close(np.exp(lw), w, what=tr("exp(log_softmax(x, axis=0)) compared with softmax(x, axis=0)"),
                 atol=1e-12, rtol=1e-9, hint=tr("Both must normalise along the same `axis`."))


# ---------------------------------------------------------------- every size, calls in a row

@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_sizes_of_one_and_calls_in_a_row(student, name):
    """softmax and log_softmax work on one slice, on slices of one entry, and on calls in a row with other sizes"""
    g = rng(30 if name == "softmax" else 31)
    axes = [Axis("rows", 3, 7, tr("one slice")), Axis("n", 4, 9, tr("a slice of one score"))]
    check_function_sizes(getattr(student, name), getattr(ref, name), axes,
                         lambda s: (g.normal(size=(s["rows"], s["n"])) * 3,), what=name,
                         **(SOFTMAX_TOL if name == "softmax" else LOG_TOL))


# ---------------------------------------------------------------- properties over generated inputs (issue 35)
# Inputs drawn by Hypothesis from this submission's seed (grader/engine/properties.py): any shape with any
# axis of size 1, any axis or the default one, scores up to +-1e4 (the contract's range) and -inf entries,
# whole -inf slices among them. The oracle is the definition in extended precision, not the reference.

SCORES = properties.arrays(properties.shapes(1, 4, 5, 60),
                           properties.floats(30.0, extremes=(-np.inf, -np.inf, 1e4, -1e4, 0.0)))


def _oracle_log_softmax(x, axis):
    """log_softmax from its definition, in long double: x - log(sum(exp(x))) along ``axis``, shifted by the
    slice's max; -inf stays -inf, an all -inf slice stays all -inf."""
    xl = x.astype(np.longdouble)
    m = np.max(xl, axis=axis, keepdims=True)
    with np.errstate(all="ignore"):
        shifted = xl - np.where(np.isfinite(m), m, 0)
        out = shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
    return np.where(np.isneginf(x), -np.inf, out).astype(np.float64)


def _draw_axis(draw, x):
    """An axis of ``x``, negative or not, or None: the call leaves ``axis`` to its default (-1)."""
    return draw(st.one_of(st.none(), st.integers(-x.ndim, x.ndim - 1)), "axis")


def _call_with_axis(fn, x, axis):
    """``fn(x)`` when ``axis`` is None (the default), else ``fn(x, axis=axis)``; an error about the axis on a
    call without one means the default is not -1, the axis every array has."""
    from grader.engine.errors import StudentError
    if axis is not None:
        return call(fn, x, axis=axis)
    try:
        return call(fn, x)
    except StudentError as exc:
        if exc.kind != "error" or "axis" not in exc.message.lower():
            raise
        raise AssertionError(tr("{function} raised {type}: {message} when called without `axis` on an array of shape "
                                "{shape}: the default axis must be -1 (the last axis, which every array has).",
                                function=fn.__name__, type=exc.type_name, message=exc.message, shape=x.shape)) from None


def test_softmax_properties_on_generated_scores(student):
    """softmax holds its contract on generated scores: any shape and axis (or the default), ±1e4, -inf entries and slices"""  # noqa: E501 (the report's test name)
    def prop(draw):
        x = draw(SCORES, "x")
        axis = _draw_axis(draw, x)
        a = -1 if axis is None else axis
        got = _call_with_axis(student.softmax, x, axis)
        what = f"softmax(x {x.shape}{'' if axis is None else f', axis={axis}'})"
        w = assert_matches(got, np.exp(_oracle_log_softmax(x, a)), what=what, **SOFTMAX_TOL,
                           **_softmax_diagnosis(got, x, a))
        if (w[np.isneginf(x)] != 0).any():
            raise AssertionError(tr("{what}: a -inf entry got weight {weight}, not exactly 0.", what=what,
                                    weight=f"{w[np.isneginf(x)].max():.3g}"))
    properties.check(prop, case=2040, examples=12, what="softmax")


def test_log_softmax_properties_on_generated_scores(student):
    """log_softmax holds its contract on generated scores: -inf stays -inf, any shape and axis (or the default), ±1e4"""  # noqa: E501 (the report's test name)
    def prop(draw):
        x = draw(SCORES, "x")
        axis = _draw_axis(draw, x)
        a = -1 if axis is None else axis
        got = _call_with_axis(student.log_softmax, x, axis)
        expected = _oracle_log_softmax(x, a)
        diagnosis = _log_softmax_diagnosis(got, x, a)
        arr = np.asarray(got, dtype=np.float64) if np.shape(got) == x.shape else None
        if arr is not None and (np.isfinite(arr) & np.isneginf(expected)).any():
            diagnosis["hint"] = tr("-inf must stay -inf (the log of a zero weight): a finite number came out where "
                                   "the score was -inf. Do not replace -inf by a large negative number, and keep "
                                   "-inf entries at -inf after the shift.")
        assert_matches(got, expected, what=f"log_softmax(x {x.shape}{'' if axis is None else f', axis={axis}'})",
                       **LOG_TOL, **diagnosis)
    properties.check(prop, case=2041, examples=12, what="log_softmax")


def _check_against(oracle, tol):
    def check(got, args):
        x, = args
        assert_close(got, oracle(x), what=tr("the result"), **tol)
    return check


def test_calls_in_a_row_in_orders_drawn_from_the_seed(student):
    """softmax and log_softmax stay right on calls in a row with other sizes, in orders drawn from your seed (short then long, long then short)"""  # noqa: E501 (the report's test name)
    axes = {"rows": (1, 6), "n": (1, 9)}

    def make(sizes, g):
        x = g.normal(size=(sizes["rows"], sizes["n"])) * 4
        x[g.random(x.shape) < 0.15] = -np.inf
        return (x,)
    functions = [
        properties.Function("softmax", axes, make, student.softmax,
                            _check_against(lambda x: np.exp(_oracle_log_softmax(x, -1)), SOFTMAX_TOL)),
        properties.Function("log_softmax", axes, make, student.log_softmax,
                            _check_against(lambda x: _oracle_log_softmax(x, -1), LOG_TOL)),
    ]
    properties.calls_in_a_row(functions, case=2042, examples=2, steps=4, what="softmax, log_softmax")
