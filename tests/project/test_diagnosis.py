"""A diagnosis is shown only when the evidence supports it (grader.engine.testing.which_mistake).

A catalogued mistake is named when the student's result reproduces its value. A NaN reproduces any other NaN,
so a mistake whose value differs from the right answer only where NaN falls would be named for a result that
got its NaN another way: a softmax whose fully masked slice is NaN (-inf - (-inf)) was told that "the sum
along axis seems taken without keepdims=True", on the case where keepdims makes no difference.
"""
from __future__ import annotations

import numpy as np
import pytest

from grader.authoring import mutants
from grader.engine import run, testing
from grader.engine.options import GradingOptions

NO_KEEPDIMS = "the sum seems taken without keepdims=True"


def _masked(axis):
    x = np.random.default_rng(6).normal(size=(4, 4))
    if axis == -1:
        x[1, :] = -np.inf
    else:
        x[:, 2] = -np.inf
    x[3, 0] = -np.inf
    return x


def _softmax(x, axis, keepdims=True):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    with np.errstate(invalid="ignore"):
        return e / np.sum(e, axis=axis, keepdims=keepdims)


@pytest.mark.parametrize("axis", [-1, 0])
def test_a_nan_alone_names_no_mistake(axis):
    """The textbook softmax without the masked-slice guard: its NaN is also what the no-keepdims mistake gives
    on this case (for axis=0 a sum without keepdims broadcasts back correctly), so the hint is said instead."""
    x = _masked(axis)
    with np.errstate(invalid="ignore"):
        got = _softmax(x, axis)
    expected = np.nan_to_num(got, nan=0.0)
    assert np.isnan(got).any()
    said = testing.which_mistake(got, {NO_KEEPDIMS: lambda: _softmax(x, axis, keepdims=False)}, "HINT",
                                 expected=expected)
    assert said == "HINT"


def test_a_mistake_reproduced_in_numbers_is_named():
    """The same mistake, where it changes numbers (a square matrix along the last axis), is named."""
    x = np.random.default_rng(1).normal(size=(3, 3))
    got = _softmax(x, -1, keepdims=False)
    said = testing.which_mistake(got, {NO_KEEPDIMS: lambda: _softmax(x, -1, keepdims=False)}, "HINT",
                                 expected=_softmax(x, -1))
    assert said == NO_KEEPDIMS
    assert testing.which_mistake(got, {NO_KEEPDIMS: lambda: _softmax(x, -1, keepdims=False)}, "HINT") == NO_KEEPDIMS


def test_the_graded_mistake_gets_no_advice_about_a_mistake_it_did_not_make(tmp_path):
    """The catalogued mistake of the issue, graded by the hidden suite: told about the all -inf slice, never
    about keepdims."""
    mistake = next(m for m in mutants.load("a02_softmax") if m.id == "softmax_nan_on_fully_masked_slice")
    sub = mutants.build_submission(mistake, tmp_path / "sub")
    rep = run.grade(str(sub), GradingOptions(kind="hidden", stage_ids=["a02_softmax"], isolation="auto",
                                        allow_readable_secrets=True, language="en"))
    feedback = " ".join(t["feedback"] for t in rep["stages"][0]["tests"] if t["status"] != "passed")
    assert "all -inf" in feedback and "keepdims" not in feedback, feedback
