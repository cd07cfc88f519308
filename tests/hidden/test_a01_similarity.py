"""Hidden suite of stage 1 - similarity (slides 11-13, 38, 68).

Expected values come from the reference solution, imported here in the trusted
process; the student's module runs in the worker behind `student`.

Tolerance: atol = rtol = 1e-9. Inputs are O(1) and d <= 64, so any exact way of
summing the products (BLAS matmul, einsum, a Python loop, np.sum of a
broadcast product) lands within ~1e-14 of the reference; every real mistake
(a missing term, a transposed or normalised score) is off by more than 1e-2.
"""
import numpy as np
import pytest

from grader.engine import testing
from grader.engine.errors import StudentError
from grader.engine.testing import (
    Axis,
    as_array,
    assert_close,
    assert_matches,
    check_function_sizes,
    matches,
    raises_student,
    reference,
    reference_time,
)
from grader.i18n import tr

ref = reference("a01_similarity")
TOL = dict(atol=1e-9, rtol=1e-9)
# A Python loop over Q's rows measures 80-100x the reference; a correct broadcast-multiply-and-sum
# 15-24x (the more so on a busy machine): the limit sits between them.
SLOWDOWN_LIMIT = 40.0


def rng(case):
    """The inputs of case ``case``: drawn from this submission's stage seed (course secret,
    submission id, stage), so no two students, and no two terms, see the same numbers."""
    return testing.rng(1000 + case)


def _cos_rows(query, keys):
    return keys @ query / (np.linalg.norm(keys, axis=1) * np.linalg.norm(query))


# ---------------------------------------------------------------- dot_product

@pytest.mark.parametrize("d", [1, 3, 8, 64])
def test_dot_product_values(student, d):
    """dot_product multiplies matching components and adds them up"""
    u, v = rng(d).normal(size=d), rng(d + 1).normal(size=d)
    got = student.dot_product(u, v)
    arr = as_array(got, what=tr("dot_product of two ({d},) vectors", d=d))
    if arr.ndim != 0:
        raise AssertionError(
            tr("dot_product of two ({d},) vectors returned an array of shape {arr_shape}, expected one number. "
               "Multiplying u * v gives the products; the dot product also sums them (slide 13).",
               d=d, arr_shape=arr.shape))
    assert_matches(got, ref.dot_product(u, v), what=tr("dot_product of two ({d},) vectors", d=d), **TOL,
                   mistakes={tr("It looks like the cosine similarity; dot_product is not normalised."):
                             lambda: u @ v / np.linalg.norm(u) / np.linalg.norm(v)},
                   hint=tr("The dot product is sum_i u[i] * v[i] (slide 13)."))


def test_dot_product_hand_example(student):
    """dot_product([1, 2, 3], [4, -5, 6]) is 12"""
    assert_close(student.dot_product(np.array([1.0, 2.0, 3.0]), np.array([4.0, -5.0, 6.0])), 12.0,
                 what="dot_product([1, 2, 3], [4, -5, 6])", **TOL, hint="1*4 + 2*(-5) + 3*6 = 12.")


def test_dot_product_rejects_mismatched_lengths(student):
    """dot_product raises ValueError for vectors of different lengths or rank"""
    with raises_student(ValueError, what=tr("dot_product of shapes (3,) and (4,)")):
        student.dot_product(np.ones(3), np.ones(4))
    with raises_student(ValueError, what=tr("dot_product of shapes (1,) and (4,) (no broadcasting)")):
        student.dot_product(np.ones(1), np.ones(4))
    with raises_student(ValueError, what=tr("dot_product of a (2, 3) matrix and a (3,) vector")):
        student.dot_product(np.ones((2, 3)), np.ones(3))


# ---------------------------------------------------------------- similarity_scores

@pytest.mark.parametrize("n,d", [(1, 4), (5, 3), (7, 16)])
def test_similarity_scores_values(student, n, d):
    """similarity_scores compares the decoder state with every encoder state by a dot product"""
    g = rng(10 * n + d)
    query, keys = g.normal(size=d), g.normal(size=(n, d))
    got = student.similarity_scores(query, keys)
    assert_matches(got, ref.similarity_scores(query, keys), what=f"similarity_scores(query ({d},), keys ({n}, {d}))",
                   **TOL, mistakes={
                       tr("The scores look like cosine similarities; the lecture's score is the plain dot "
                          "product (slides 12-13)."): lambda: _cos_rows(query, keys),
                       tr("The scores look divided by sqrt(d); the LSTM attention of slide 13 is unscaled."):
                       lambda: keys @ query / np.sqrt(d),
                   }, hint=tr("scores[j] must be dot(query, keys[j]): one score per encoder state (slide 12)."))


def test_similarity_scores_rejects_bad_shapes(student):
    """similarity_scores raises ValueError when d differs or ranks are wrong"""
    with raises_student(ValueError, what="similarity_scores(query (3,), keys (5, 4))"):
        student.similarity_scores(np.ones(3), np.ones((5, 4)))
    with raises_student(ValueError, what="similarity_scores(query (1, 3), keys (5, 3))"):
        student.similarity_scores(np.ones((1, 3)), np.ones((5, 3)))
    with raises_student(ValueError, what="similarity_scores(query (3,), keys (3,))"):
        student.similarity_scores(np.ones(3), np.ones(3))


# ---------------------------------------------------------------- similarity_matrix

def _matrix_mistakes(Q, K):
    """What similarity_matrix gives with each known mistake."""
    return {
        tr("The result looks transposed (K Q^T, shape (..., n, m)): row i must hold query i's scores."):
        lambda: K @ np.swapaxes(Q, -1, -2),
        tr("The scores look like cosine similarities; similarity_matrix is the plain dot product Q K^T."):
        lambda: (Q / np.linalg.norm(Q, axis=-1, keepdims=True))
        @ np.swapaxes(K / np.linalg.norm(K, axis=-1, keepdims=True), -1, -2),
        tr("The scores look divided by sqrt(d); similarity_matrix is the unscaled Q K^T."):
        lambda: Q @ np.swapaxes(K, -1, -2) / np.sqrt(Q.shape[-1]),
    }


MATRIX_HINT = tr("S[..., i, j] must be dot(Q[..., i, :], K[..., j, :]) (slides 34, 38).")


@pytest.mark.parametrize("m,n,d", [(3, 5, 4), (6, 2, 7), (4, 4, 1)])
def test_similarity_matrix_values(student, m, n, d):
    """similarity_matrix gives Q K^T, one row per query and one column per key (m != n)"""
    g = rng(100 * m + 10 * n + d)
    Q, K = g.normal(size=(m, d)), g.normal(size=(n, d))
    got = student.similarity_matrix(Q, K)
    assert_matches(got, ref.similarity_matrix(Q, K), what=f"similarity_matrix(Q ({m}, {d}), K ({n}, {d}))", **TOL,
                   mistakes=_matrix_mistakes(Q, K), hint=MATRIX_HINT)


def _call_batched(fn, name, Q, K, two_d_ok):
    """Call and turn a crash on leading dimensions into feedback that names the likely cause."""
    try:
        return fn(Q, K)
    except StudentError as exc:
        if not two_d_ok:
            raise
        raise AssertionError(
            tr("{name} works on 2-D inputs but raised {exc_type_name}: {exc_message} for Q {q_shape}, K "
               "{k_shape}. With leading (batch/head) dimensions, transpose only the last two axes "
               "(np.swapaxes(K, -1, -2) or K.swapaxes(-1, -2)); K.T reverses every axis and the leading "
               "dimensions no longer broadcast.",
               name=name, exc_type_name=exc.type_name, exc_message=exc.message, q_shape=Q.shape,
               k_shape=K.shape)) from None


@pytest.mark.parametrize("q_shape,k_shape", [
    ((2, 4, 5), (2, 6, 5)),             # batch
    ((2, 3, 4, 5), (2, 3, 6, 5)),       # batch and heads
    ((2, 1, 4, 5), (3, 6, 5)),          # broadcasting leading dimensions
    ((4, 5), (2, 3, 6, 5)),             # 2-D queries against batched keys
])
def test_similarity_matrix_leading_dims_broadcast(student, q_shape, k_shape):
    """similarity_matrix broadcasts leading dimensions (batch, heads) and works on the last two axes"""
    g = rng(len(q_shape) * 7 + len(k_shape))
    Q, K = g.normal(size=q_shape), g.normal(size=k_shape)
    Q2, K2 = g.normal(size=(4, 5)), g.normal(size=(6, 5))
    try:
        two_d_ok = matches(student.similarity_matrix(Q2, K2), ref.similarity_matrix(Q2, K2))
    except StudentError:
        two_d_ok = False
    got = _call_batched(student.similarity_matrix, "similarity_matrix", Q, K, two_d_ok)
    expected = ref.similarity_matrix(Q, K)
    if two_d_ok:
        diagnosis = dict(hint=tr("Leading (batch/head) dimensions must broadcast like np.matmul; transpose only "
                                 "the last two axes of K (np.swapaxes(K, -1, -2)), not K.T."))
    else:
        diagnosis = dict(mistakes=_matrix_mistakes(Q, K), hint=MATRIX_HINT)
    assert_matches(got, expected, what=f"similarity_matrix(Q {q_shape}, K {k_shape})", **TOL, **diagnosis)


def test_similarity_matrix_rejects_bad_shapes(student):
    """similarity_matrix raises ValueError for a different d, a 1-D input, or leading dims that do not broadcast"""
    with raises_student(ValueError, what="similarity_matrix(Q (3, 4), K (5, 6))"):
        student.similarity_matrix(np.ones((3, 4)), np.ones((5, 6)))
    with raises_student(ValueError, what="similarity_matrix(Q (4,), K (5, 4))"):
        student.similarity_matrix(np.ones(4), np.ones((5, 4)))
    with raises_student(ValueError, what="similarity_matrix(Q (2, 3, 4), K (3, 5, 4))"):
        student.similarity_matrix(np.ones((2, 3, 4)), np.ones((3, 5, 4)))


def test_similarity_matrix_is_vectorised(student):
    """similarity_matrix is computed with matrix operations, not a Python loop over rows (slide 38)"""
    g = rng(7)
    Q, K = g.normal(size=(4000, 32)), g.normal(size=(2, 32))
    assert_close(student.similarity_matrix(Q, K), ref.similarity_matrix(Q, K),
                 what="similarity_matrix(Q (4000, 32), K (2, 32))", **TOL, hint=tr("(Checked before timing it.)"))
    t_ref = reference_time(ref.similarity_matrix, Q, K)
    t_student = student.time_call("similarity_matrix", Q, K, repeat=5)
    if t_student > SLOWDOWN_LIMIT * t_ref:  # a busy machine can slow one side down: measure both once more
        t_ref = min(t_ref, reference_time(ref.similarity_matrix, Q, K))
        t_student = min(t_student, student.time_call("similarity_matrix", Q, K, repeat=5))
    ratio = t_student / max(t_ref, 1e-9)
    assert ratio <= SLOWDOWN_LIMIT, (
        tr("similarity_matrix took {t_student_1e3} ms on Q (4000, 32), K (2, 32): {ratio}x the reference "
           "({t_ref_1e3} ms; the limit is {slowdown_limit}x). The usual cause is a Python loop over the rows of "
           "Q; compute every score at once with one matrix product, Q @ K^T (slide 38).",
           t_student_1e3=f"{t_student * 1e3:.1f}", ratio=f"{ratio:.0f}", t_ref_1e3=f"{t_ref * 1e3:.2f}",
           slowdown_limit=f"{SLOWDOWN_LIMIT:.0f}"))


# ---------------------------------------------------------------- cosine_similarity

def _cos_mistakes(u, v):
    """What cosine_similarity gives with each known mistake."""
    nu, nv = np.linalg.norm(u), np.linalg.norm(v)
    return {
        tr("The sign is lost (abs?): opposite vectors have cosine -1."): lambda: abs(u @ v) / (nu * nv),
        tr("It looks divided by the squared lengths: each norm is sqrt(dot(u, u))."):
            lambda: u @ v / (nu ** 2 * nv ** 2),
        tr("It looks like the plain dot product: divide by both vectors' norms (lengths)."): lambda: u @ v,
        tr("Only one vector's norm seems to be used; divide by |u| |v|."): lambda: u @ v / nu,
    }


COS_HINT = tr("cosine_similarity is dot(u, v) / (|u| |v|) with |u| = sqrt(dot(u, u)) (slide 68).")


@pytest.mark.parametrize("seed", range(4))
def test_cosine_similarity_values(student, seed):
    """cosine_similarity is the dot product divided by both norms, for vectors of any length and scale"""
    g = rng(200 + seed)
    d = int(g.integers(2, 40))
    u, v = g.normal(size=d) * 10.0 ** g.uniform(-3, 3), g.normal(size=d) * 10.0 ** g.uniform(-3, 3)
    got = student.cosine_similarity(u, v)
    assert_matches(got, ref.cosine_similarity(u, v), what=tr("cosine_similarity of two ({d},) vectors", d=d), **TOL,
                   mistakes=_cos_mistakes(u, v), hint=COS_HINT)


def test_cosine_similarity_parallel_opposite_orthogonal(student):
    """cosine_similarity is 1 for parallel, -1 for opposite and 0 for orthogonal vectors"""
    u = np.array([3.0, -1.0, 2.0])
    cases = [("u and 2.5u", 2.5 * u, 1.0), ("u and -0.5u", -0.5 * u, -1.0),
             ("[3, -1, 2] and [1, 1, -1]", np.array([1.0, 1.0, -1.0]), 0.0)]
    for label, v, want in cases:
        got = student.cosine_similarity(u, v)
        assert_matches(got, want, what=tr("cosine_similarity of {label}", label=label), **TOL,
                       mistakes=_cos_mistakes(u, v),
                       hint=COS_HINT)


def test_cosine_similarity_zero_vector_is_zero(student):
    """cosine_similarity is 0.0 (not NaN, no error) when either vector is all zeros"""
    for label, u, v in [(tr("zeros and [1, 2, 3]"), np.zeros(3), np.array([1.0, 2.0, 3.0])),
                        (tr("[1, 2, 3] and zeros"), np.array([1.0, 2.0, 3.0]), np.zeros(3)),
                        (tr("zeros and zeros"), np.zeros(3), np.zeros(3))]:
        got = student.cosine_similarity(u, v)
        assert_close(got, 0.0, what=tr("cosine_similarity of {label}", label=label), atol=0, rtol=0,
                     hint=tr("A zero vector has length 0: return 0.0 instead of dividing by zero (which gives "
                             "NaN)."))


def test_cosine_similarity_rejects_mismatched_lengths(student):
    """cosine_similarity raises ValueError for vectors of different lengths"""
    with raises_student(ValueError, what=tr("cosine_similarity of shapes (3,) and (2,)")):
        student.cosine_similarity(np.ones(3), np.ones(2))


# ---------------------------------------------------------------- every size, calls in a row

D = Axis("d", 4, 9, tr("vectors of one component"))
SIZES = {  # function -> (its sizes, its inputs for given sizes)
    "dot_product": ([D], lambda g, s: (g.normal(size=s["d"]), g.normal(size=s["d"]))),
    "cosine_similarity": ([D], lambda g, s: (g.normal(size=s["d"]), g.normal(size=s["d"]))),
    "similarity_scores": ([Axis("n", 3, 8, tr("one encoder state")), D],
                          lambda g, s: (g.normal(size=s["d"]), g.normal(size=(s["n"], s["d"])))),
    "similarity_matrix": ([Axis("B", 2, 3, tr("a batch of one")), Axis("m", 2, 6, tr("one query")),
                           Axis("n", 3, 7, tr("one key")), D],
                          lambda g, s: (g.normal(size=(s["B"], s["m"], s["d"])),
                                        g.normal(size=(s["B"], s["n"], s["d"])))),
}


@pytest.mark.parametrize("name", list(SIZES))
def test_sizes_of_one_and_calls_in_a_row(student, name):
    """every function works when a size is 1 (one key, one query, one component) and on calls in a row with other sizes"""  # noqa: E501 (the report's test name)
    axes, make = SIZES[name]
    g = rng(900 + list(SIZES).index(name))
    check_function_sizes(getattr(student, name), getattr(ref, name), axes, lambda s: make(g, s), what=name, **TOL)
