"""Public checks of stage 2 - a numerically stable softmax (slide 14).

Run them with `make check` or `python -m grader check a02_softmax`.
Every expected value here can be worked out by hand (or with math.exp).
"""
import math

import numpy as np

from grader.engine.testing import as_array, assert_close, assert_shape
from grader.i18n import tr


def test_softmax_of_1_2_3(student):
    """softmax([1, 2, 3]) is about [0.090, 0.245, 0.665] (slide 14)"""
    total = math.exp(1) + math.exp(2) + math.exp(3)
    expected = [math.exp(1) / total, math.exp(2) / total, math.exp(3) / total]
    assert_close(student.softmax(np.array([1.0, 2.0, 3.0])), expected, what="softmax([1, 2, 3])", atol=1e-12,
                 hint=tr("softmax(x)_i = exp(x_i) / sum_j exp(x_j): positive weights that sum to 1."))


def test_softmax_rows_sum_to_one(student):
    """each row of softmax(x) is positive and sums to 1"""
    x = np.array([[0.5, -1.0, 2.0, 0.0], [3.0, 3.0, 3.0, 3.0]])
    w = assert_shape(student.softmax(x), (2, 4), what="softmax(x (2, 4))")
    assert np.allclose(w.sum(axis=-1), 1.0, atol=1e-12), tr("rows sum to {sums}, not 1",
                                                            sums=w.sum(axis=-1))
    assert (w > 0).all(), tr("every weight should be positive")
    assert_close(w[1], [0.25, 0.25, 0.25, 0.25], what=tr("softmax of four equal scores"), atol=1e-12,
                 hint=tr("Equal scores get equal weights."))


def test_softmax_axis_argument(student):
    """softmax(x, axis=0) normalises each column"""
    x = np.array([[1.0, 0.0], [1.0, math.log(3.0)]])
    w = student.softmax(x, axis=0)
    assert_close(w, [[0.5, 0.25], [0.5, 0.75]], what="softmax(x, axis=0)", atol=1e-12,
                 hint=tr("With axis=0 each column sums to 1; column 1 is softmax([0, log 3]) = [1/4, 3/4]."))


def test_softmax_large_scores(student):
    """softmax([1000, 1000]) is [0.5, 0.5] and softmax([1e4, 0]) is [1, 0]: no overflow"""
    assert_close(student.softmax(np.array([1000.0, 1000.0])), [0.5, 0.5], what="softmax([1000, 1000])", atol=1e-12,
                 hint=tr("np.exp(1000) overflows to inf; subtract the max before np.exp (softmax(x) == softmax(x "
                         "- c))."))
    assert_close(student.softmax(np.array([1e4, 0.0])), [1.0, 0.0], what="softmax([1e4, 0])", atol=1e-12,
                 hint=tr("Subtract the max before np.exp."))


def test_softmax_masked_entries(student):
    """-inf entries get weight 0; a row of only -inf gives zeros, not NaN"""
    x = np.array([[0.0, -np.inf, 0.0], [-np.inf, -np.inf, -np.inf]])
    w = as_array(student.softmax(x), what=tr("softmax with -inf entries"))
    assert not np.isnan(w).any(), (
        tr("NaN in the output. For a row of only -inf the max is -inf and x - max is NaN; shift such a row by 0 "
           "instead, so its weights come out as 0."))
    assert_close(w, [[0.5, 0.0, 0.5], [0.0, 0.0, 0.0]], what=tr("softmax with -inf entries"), atol=1e-12)


def test_log_softmax_small_example(student):
    """log_softmax([0, 0]) is [-log 2, -log 2] and log_softmax([0, -1000]) is [0, -1000]"""
    assert_close(student.log_softmax(np.array([0.0, 0.0])), [-math.log(2), -math.log(2)],
                 what="log_softmax([0, 0])", atol=1e-12)
    assert_close(student.log_softmax(np.array([0.0, -1000.0])), [0.0, -1000.0], what="log_softmax([0, -1000])",
                 atol=1e-9, hint=tr("exp(-1000) underflows to 0, so log(softmax(x)) gives -inf; compute x - max "
                                    "- log(sum(exp(x - max))) instead."))
