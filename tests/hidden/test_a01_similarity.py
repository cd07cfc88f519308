"""Hidden suite of stage 1 - similarity (slides 11-13, 38, 68).

Expected values come from the reference solution, imported here in the trusted
process; the student's module runs in the worker behind `student`.

Tolerance: atol = rtol = 1e-9. Inputs are O(1) and d <= 64, so any exact way of
summing the products (BLAS matmul, einsum, a Python loop, np.sum of a
broadcast product) lands within ~1e-14 of the reference; every real mistake
(a missing term, a transposed or normalised score) is off by more than 1e-2.
"""
import math

import numpy as np
import pytest
from hypothesis import strategies as st

from grader.engine import properties, testing
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
)
from grader.i18n import tr

ref = reference("a01_similarity")
TOL = dict(atol=1e-9, rtol=1e-9)
# CPU time (the worker's, read from outside it, against the reference's in this thread): a Python loop
# over Q's rows measures 49-59x the reference, a correct broadcast-multiply-and-sum 15-19x (measured on
# (4000-16000, 32) inputs); the limit sits between them, about 1.6x from either.
SLOWDOWN_LIMIT = 30.0


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
            tr("dot_product of two ({d},) vectors returned an array of shape {shape}, expected one number. "
               "Multiplying u * v gives the products; the dot product also sums them (slide 13).",
               d=d, shape=arr.shape))
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
    # wrong ranks whose sizes fit, so that numpy itself would not complain (the contract: wrong rank -> ValueError)
    with raises_student(ValueError, what=tr("dot_product of two (3, 3) matrices")):
        student.dot_product(np.ones((3, 3)), np.ones((3, 3)))


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
    # wrong ranks whose sizes fit, so that numpy itself would not complain (the contract: wrong rank -> ValueError)
    with raises_student(ValueError, what="similarity_scores(query (3, 3), keys (5, 3))"):
        student.similarity_scores(np.ones((3, 3)), np.ones((5, 3)))
    with raises_student(ValueError, what="similarity_scores(query (3,), keys (2, 3, 3))"):
        student.similarity_scores(np.ones(3), np.ones((2, 3, 3)))
    with raises_student(ValueError, what="similarity_scores(query (), keys (5, 1))"):
        student.similarity_scores(np.float64(1.0), np.ones((5, 1)))


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
            tr("{name} works on 2-D inputs but raised {exception}: {message} for Q {q_shape}, K "
               "{k_shape}. With leading (batch/head) dimensions, transpose only the last two axes "
               "(np.swapaxes(K, -1, -2) or K.swapaxes(-1, -2)); K.T reverses every axis and the leading "
               "dimensions no longer broadcast.",
               name=name, exception=exc.type_name, message=exc.message, q_shape=Q.shape,
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


def speed_inputs(g) -> list:
    """The speed test's five fresh (Q, K) pairs, drawn from ``g`` (also benchmarks/speed_tests.py's). d = 2 keeps
    the data (whose handling is charged to the worker and taken off as measured in another process) small beside
    what a loop costs. Measured on the 2-core machine under load 3-6, as a share of what is allowed: the
    reference at most 0.32, a loop over the rows at least 4.2 (benchmarks/README.md)."""
    return [(g.normal(size=(8000, 2)), g.normal(size=(2, 2))) for _ in range(5)]


def test_similarity_matrix_is_vectorised(student):
    """similarity_matrix is computed with matrix operations, not a Python loop over rows (slide 38)"""
    inputs = speed_inputs(rng(7))

    def check(got, args):
        assert_close(got, ref.similarity_matrix(*args), what="similarity_matrix(Q (8000, 2), K (2, 2))", **TOL,
                     hint=tr("(Checked while timing it.)"))
    slow = testing.cpu_slowdown(student, "similarity_matrix", ref.similarity_matrix, inputs, check)
    assert slow.within(SLOWDOWN_LIMIT), tr(
        "similarity_matrix took {took} on Q (8000, 2), K (2, 2). The usual cause is a Python loop over the rows of "
        "Q; compute every score at once with one matrix product, Q @ K^T (slide 38).", took=slow.said(SLOWDOWN_LIMIT))


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


@pytest.mark.parametrize("seed", range(2))  # generated vectors of every scale: test_dot_and_cosine_properties_...
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


# ---------------------------------------------------------------- properties over generated inputs (issue 35)
# Inputs drawn by Hypothesis from this submission's seed (grader/engine/properties.py): any length from 1,
# magnitudes from 1e-30 to 1e30, zero, parallel and opposite vectors, m != n, leading dimensions that
# broadcast (some missing, some 1). The oracles are the definitions summed exactly (math.fsum), not the
# reference; a sum of d products may round by d * eps * sum |u_i v_i|, which is what the bound allows.

def _vector_pair(draw, max_d=12):
    """(u, v): lengths 1..max_d, each scaled by 10^k (k in -30..30), sometimes zero, parallel or opposite."""
    d = draw(st.one_of(st.integers(1, max_d), st.just(300)), "d")
    g = np.random.default_rng(draw(st.integers(0, 2 ** 16), "values (seed)"))
    kind = draw(st.sampled_from(["random", "zero u", "zero v", "parallel", "opposite"]), "kind")
    u = g.normal(size=d) * 10.0 ** draw(st.integers(-30, 30), "scale of u (10^k)")
    v = g.normal(size=d) * 10.0 ** draw(st.integers(-30, 30), "scale of v (10^k)")
    if kind == "zero u":
        u = np.zeros(d)
    elif kind == "zero v":
        v = np.zeros(d)
    elif kind in ("parallel", "opposite"):
        v = u * (2.5 if kind == "parallel" else -0.5)
    draw.note("u", u)
    draw.note("v", v)
    return u, v


def _exact_dot(u, v):
    return math.fsum(float(a) * float(b) for a, b in zip(u, v)), math.fsum(abs(float(a) * float(b))
                                                                          for a, b in zip(u, v))


def test_dot_and_cosine_properties_on_generated_vectors(student):
    """dot_product and cosine_similarity hold their contract on generated vectors: any length, tiny and huge magnitudes, zero, parallel and opposite vectors"""  # noqa: E501 (the report's test name)
    def prop(draw):
        u, v = _vector_pair(draw)
        exact, size = _exact_dot(u, v)
        got = as_array(student.dot_product(u, v), what=tr("dot_product of two ({d},) vectors", d=u.size))
        if got.ndim != 0:
            raise AssertionError(tr("dot_product returned an array of shape {shape}, expected one number.",
                                    shape=got.shape))
        assert_close(got, exact, what=tr("dot_product of two ({d},) vectors", d=u.size), rtol=0.0,
                     atol=4 * u.size * np.finfo(float).eps * size + 1e-300,
                     hint=tr("The dot product is sum_i u[i] * v[i] (slide 13)."))
        nu, nv = math.sqrt(_exact_dot(u, u)[0]), math.sqrt(_exact_dot(v, v)[0])
        want = 0.0 if nu == 0.0 or nv == 0.0 else exact / (nu * nv)
        got = student.cosine_similarity(u, v)
        arr = as_array(got, what=tr("cosine_similarity of two ({d},) vectors", d=u.size))
        if arr.ndim != 0:
            raise AssertionError(tr("cosine_similarity returned an array of shape {shape}, expected one number.",
                                    shape=arr.shape))
        assert_matches(got, want, what=tr("cosine_similarity of two ({d},) vectors", d=u.size), atol=1e-12,
                       rtol=0.0, mistakes=_cos_mistakes(u, v) if want != 0.0 else {},
                       hint=COS_HINT if want != 0.0 else tr("A zero vector has length 0: return 0.0 instead of "
                                                            "dividing by zero (which gives NaN)."))
    properties.check(prop, case=1040, examples=10, what="dot_product, cosine_similarity")


def _broadcast_leads(draw, ndim_max=2):
    """Leading dimensions of Q and of K that broadcast: a common shape, each side keeping some of its
    leading axes and setting some to 1."""
    full = draw(st.lists(st.integers(1, 3), min_size=0, max_size=ndim_max), "leading dimensions")

    def side(name):
        keep = draw(st.integers(0, len(full)), f"leading axes of {name}")
        lead = full[len(full) - keep:]
        ones = draw(st.lists(st.booleans(), min_size=len(lead), max_size=len(lead)), f"axes of {name} at 1")
        return tuple(1 if one else s for s, one in zip(lead, ones))
    return side("Q"), side("K")


def _exact_scores(Q, K):
    """Q K^T over the last two axes, leading ones broadcast, in long double."""
    return np.sum(Q.astype(np.longdouble)[..., :, None, :] * K.astype(np.longdouble)[..., None, :, :],
                  axis=-1).astype(np.float64)


def test_similarity_properties_on_generated_shapes(student):
    """similarity_scores and similarity_matrix hold their contract on generated shapes: m != n, any size 1, leading dimensions that broadcast"""  # noqa: E501 (the report's test name)
    def prop(draw):
        m, n = draw(st.integers(1, 6), "m"), draw(st.integers(1, 6), "n")
        d = draw(st.one_of(st.integers(1, 6), st.just(300)), "d")  # sizes compared as numbers, even past 256
        q_lead, k_lead = _broadcast_leads(draw)
        g = np.random.default_rng(draw(st.integers(0, 2 ** 16), "values (seed)"))
        Q, K = g.normal(size=(*q_lead, m, d)), g.normal(size=(*k_lead, n, d))
        draw.note("Q.shape", Q.shape)
        draw.note("K.shape", K.shape)
        got = student.similarity_matrix(Q, K)
        assert_matches(got, _exact_scores(Q, K), what=f"similarity_matrix(Q {Q.shape}, K {K.shape})", **TOL,
                       mistakes=_matrix_mistakes(Q, K), hint=MATRIX_HINT)
        query, keys = Q.reshape(-1, d)[0], K.reshape(-1, n, d)[0]
        assert_close(student.similarity_scores(query, keys), _exact_scores(query[None], keys)[0],
                     what=f"similarity_scores(query ({d},), keys ({n}, {d}))", **TOL,
                     hint=tr("scores[j] must be dot(query, keys[j]): one score per encoder state (slide 12)."))
    properties.check(prop, case=1041, examples=8, what="similarity_matrix, similarity_scores")


def test_calls_in_a_row_in_orders_drawn_from_the_seed(student):
    """every function stays right on calls in a row, in orders drawn from your seed: short then long, long then short, another d"""  # noqa: E501 (the report's test name)
    def exact(fn):
        def check(got, args):
            assert_close(got, fn(*args), what=tr("the result"), **TOL)
        return check
    functions = [
        properties.Function("dot_product", {"d": (1, 9)}, lambda s, g: (g.normal(size=s["d"]), g.normal(size=s["d"])),
                            student.dot_product, exact(lambda u, v: _exact_dot(u, v)[0]), features=("d",)),
        properties.Function("similarity_scores", {"n": (1, 7), "d": (1, 9)},
                            lambda s, g: (g.normal(size=s["d"]), g.normal(size=(s["n"], s["d"]))),
                            student.similarity_scores, exact(lambda q, k: _exact_scores(q[None], k)[0]),
                            features=("d",)),
        properties.Function("similarity_matrix", {"B": (1, 3), "m": (1, 6), "n": (1, 6), "d": (1, 9)},
                            lambda s, g: (g.normal(size=(s["B"], s["m"], s["d"])),
                                          g.normal(size=(s["B"], s["n"], s["d"]))),
                            student.similarity_matrix, exact(_exact_scores), features=("d",)),
        properties.Function("cosine_similarity", {"d": (1, 9)},
                            lambda s, g: (g.normal(size=s["d"]), g.normal(size=s["d"])),
                            student.cosine_similarity, exact(ref.cosine_similarity), features=("d",)),
    ]
    properties.calls_in_a_row(functions, case=1042, examples=2, steps=4, what=tr("calls in a row"))
