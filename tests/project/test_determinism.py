"""Grading is deterministic and no test depends on the order tests run in."""
import pytest
from conftest import grade_cached

from grader.engine import paths

pytestmark = pytest.mark.xdist_group("reference")  # reuses test_course's graded reference


def per_test(report):
    return {t["id"]: (t["status"], t["score"]) for s in report["stages"] for t in s["tests"]}


def test_reference_graded_three_times_in_two_orders_gives_identical_scores():
    """The whole hidden suite once (shared with test_course); then twice more, in
    reverse order and with two torch threads, without the end-to-end training
    tests, which are seeded and compared by outcome (time is the reason)."""
    first = grade_cached(paths.SOLUTIONS)
    second = grade_cached(paths.SOLUTIONS, reverse_order=True, fast_only=True)
    third = grade_cached(paths.SOLUTIONS, threads=2, fast_only=True)
    fast = per_test(second)
    assert fast and {k: v for k, v in per_test(first).items() if k in fast} == fast == per_test(third)
    assert first["score"] == pytest.approx(first["max_score"])


def test_a_wrong_submission_scores_the_same_in_either_order(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "a02_softmax.py").write_text(
        "import numpy as np\n"
        "def softmax(x, axis=-1):\n    e = np.exp(x)\n    return e / e.sum(axis=axis, keepdims=True)\n"
        "def log_softmax(x, axis=-1):\n    return np.log(softmax(x, axis))\n")
    a = grade_cached(sub, stages=["a02_softmax"])
    b = grade_cached(sub, stages=["a02_softmax"], reverse_order=True)
    assert per_test(a) == per_test(b)
    assert 0 < a["stages"][0]["score"] < a["stages"][0]["max_score"]
